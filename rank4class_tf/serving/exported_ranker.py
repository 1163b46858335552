"""The serving contract of a run, read back: its config and class names, and
the client that ranks classes with one of its exports.

`load_config` and `load_class_names` read the config.json and classes.json
`saved_model.write_run_files` wrote; `ExportedRanker` ranks raw instances
(or a class list) with an export `saved_model.export_saved_model` wrote,
reading its serving.json and calibration; `split_scores` and `evaluate`
score a split with it.
"""

import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
# Registers TF Text's ops (CaseFoldUTF8, WordpieceTokenizeWithOffsets, ...):
# a text model's SavedModel tokenizes with them and loads only once they are.
import tensorflow_text  # pylint: disable=unused-import

from rank4class_tf import config as config_lib
from rank4class_tf.data import user_files
from rank4class_tf import fileio
from rank4class_tf.modeling import class_encoders
from rank4class_tf.ranking import calibration as calibration_lib
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import saved_model


def load_config(model_dir: str) -> config_lib.TrainConfig:
  """Reads the resolved config a run wrote into `model_dir`.

  A relative `data_dir` or `class_names_file` (a run trained before runs
  recorded them absolute) is read against the current folder, as it always
  was (`TrainConfig.with_absolute_paths`); such a run has no data record,
  and reading its data says so (`data.identity`)."""
  path = run_dir_lib.RunDir(model_dir).config_file
  if not fileio.exists(path):
    raise ValueError(f"{path} not found: `model_dir` is not a trained run.")
  try:
    with tf.io.gfile.GFile(path) as f:
      return config_lib.TrainConfig.from_json(f.read()).with_absolute_paths()
  except (ValueError, TypeError, KeyError, AttributeError,
          tf.errors.OpError) as e:
    # JSONDecodeError (a truncated file), TypeError (a field this version
    # does not know), ...: one line naming the file.
    reason = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    raise ValueError(f"{path} cannot be read as a run's config ({reason})."
                     ) from None


def load_class_names(model_dir: str) -> List[str]:
  """The class names a run saved, index = class id."""
  path = run_dir_lib.RunDir(model_dir).classes_file
  if not fileio.exists(path):
    raise ValueError(f"{path} not found: `model_dir` is not a trained run.")
  try:
    with tf.io.gfile.GFile(path) as f:
      names = json.load(f)
  except (ValueError, tf.errors.OpError) as e:
    raise ValueError(f"{path} cannot be read ({_first_line(e)}).") from None
  if not isinstance(names, list) or not all(isinstance(n, str)
                                            for n in names):
    raise ValueError(f"{path} is not a list of class names.")
  return names


def _first_line(error: Exception) -> str:
  text = str(error).strip()
  return text.splitlines()[0] if text else type(error).__name__


def _probe(spec: tf.TensorSpec) -> tf.Tensor:
  """One instance the serving signature accepts: an empty text, or zeros of
  the input's shape (32 where a dimension is free)."""
  shape = [1] + [32 if d is None else d for d in spec.shape.as_list()[1:]]
  if spec.dtype == tf.string:
    return tf.fill(shape, "a")
  return tf.zeros(shape, spec.dtype)


def check_class_texts(class_texts: Sequence[str]) -> None:
  """Checks a class list for `ExportedRanker.rank_class_list` (`predict
  --classes`) before any export is loaded.

  A text given twice is refused rather than dropped: it would be ranked
  twice (two rows of one score), and dropping it would print fewer classes
  than asked for without saying why.

  >>> check_class_texts(["joy", "fear", "joy"])
  Traceback (most recent call last):
  ...
  ValueError: `classes`: 'joy' is given twice (classes 1 and 3).

  Raises:
    ValueError: the list is empty, longer than `class_encoders.
      MAX_SERVED_CLASSES`, or has an empty or a repeated text, or one
      holding a control character (`user_files.class_name_problem`).
  """
  limit = class_encoders.MAX_SERVED_CLASSES
  if not class_texts or len(class_texts) > limit:
    raise ValueError(f"`classes`: {len(class_texts)} classes; give 1 to "
                     f"{limit}.")
  seen = {}
  for i, text_ in enumerate(class_texts, start=1):
    if not text_.strip():
      raise ValueError(f"`classes`: class {i} is an empty text.")
    problem = user_files.class_name_problem(text_)
    if problem:  # It would break predict's one line per class.
      raise ValueError(f"`classes`: class {i} {text_!r} {problem}")
    if text_ in seen:
      raise ValueError(f"`classes`: {text_!r} is given twice (classes "
                       f"{seen[text_]} and {i}).")
    seen[text_] = i


class ExportedRanker:
  """Ranks the classes of raw instances with a run's exported SavedModel.

  Args:
    model_dir: the run's directory.
    export: `best_model_by_metric` or `latest_model`.

  Attributes:
    class_names: the run's classes, index = class id.
    instance_key: name of the serving input.
    instance_shape: shape of one raw instance: () for one string, (2,) for
      MIND's (title, abstract), (8, 8, 1) for digits, (None, None, 3) for
      images of any size, (num_features,) for a user's table.
    instance_dtype: its dtype (tf.string for text).
  """

  def __init__(self, model_dir: str, export: str = run_dir_lib.BEST_EXPORT):
    if not fileio.isdir(model_dir):
      raise ValueError(f"{model_dir} not found: `model_dir` is not a "
                       "trained run.")
    export_dir = run_dir_lib.RunDir(model_dir).export(export)
    if not fileio.exists(export_dir):
      raise ValueError(f"{export_dir} not found: the run has no export.")
    try:
      self._signatures = tf.saved_model.load(export_dir).signatures
      self._serve = self._signatures[saved_model.SERVING_KEY]
    except Exception as e:  # pylint: disable=broad-except
      # OSError (no saved_model.pb), DecodeError (a truncated one), ...
      raise ValueError(
          f"{export_dir} cannot be loaded ({_first_line(e)}): the export is "
          f"damaged; remove it and write it again with pipelines.export "
          f"`model_dir`={model_dir}.") from None
    serving_file = run_dir_lib.RunDir(model_dir).serving_file
    (key, spec), = self._serve.structured_input_signature[1].items()
    if fileio.exists(serving_file):
      try:
        with tf.io.gfile.GFile(serving_file) as f:
          serving = json.load(f)
        self.instance_key = serving["name"]
        self.instance_shape = tuple(serving["shape"][1:])
      except (ValueError, KeyError, TypeError, tf.errors.OpError) as e:
        raise ValueError(f"{serving_file} cannot be read "
                         f"({_first_line(e)}).") from None
      spec = tf.TensorSpec([None, *self.instance_shape], spec.dtype)
    else:  # A run exported with a static serving shape.
      self.instance_key, self.instance_shape = key, tuple(spec.shape[1:])
    self.instance_dtype = spec.dtype
    self.class_names = self._class_names(model_dir, spec)
    self.calibration = self._calibration(
        run_dir_lib.RunDir(model_dir).calibration_file(export))

  @staticmethod
  def _calibration(path: str) -> Optional[calibration_lib.Calibration]:
    """The export's calibration (`run_dir.CALIBRATION_FILE`); None for an
    export without one (written before calibration existed, or a diverged
    run's)."""
    if not fileio.exists(path):
      return None
    try:
      with tf.io.gfile.GFile(path) as f:
        value = json.load(f)["calibration"]
      return (None if value is None else
              calibration_lib.Calibration.from_json(value))
    except (ValueError, KeyError, TypeError, tf.errors.OpError) as e:
      raise ValueError(f"{path} cannot be read ({_first_line(e)}).") from None

  def _class_names(self, model_dir: str, spec: tf.TensorSpec) -> List[str]:
    """The export's class names: from its `class_names` signature.

    An export written before it had one names its classes in the string
    constant its `serving_default` gathers `top_k_names` from (one of the
    function's captured inputs, [num_classes]), found as the one that gives
    the export's own `top_k_ids` -> `top_k_names` on a probe instance;
    `classes.json` must agree with it. Where no such constant is found,
    `classes.json` is checked against the export's number of scores and the
    names it gives its top classes on the probe.

    Raises:
      ValueError: naming classes.json when it disagrees with the export.
    """
    if saved_model.CLASS_NAMES_KEY in self._signatures:
      names = self._signatures[saved_model.CLASS_NAMES_KEY]()[
          "class_names"].numpy()
      return [name.decode("utf-8") for name in names]
    path = run_dir_lib.RunDir(model_dir).classes_file
    outputs = self._serve(**{self.instance_key: _probe(spec)})
    num_classes = int(outputs["scores"].shape[-1])
    ids = outputs["top_k_ids"].numpy()[0]
    given = [n.decode("utf-8") for n in outputs["top_k_names"].numpy()[0]]
    found = set()
    for value in self._serve.captured_inputs:
      if value.dtype == tf.string and value.shape == [num_classes]:
        candidate = tuple(n.decode("utf-8") for n in value.numpy())
        if [candidate[i] for i in ids] == given:
          found.add(candidate)
    exported = list(found.pop()) if len(found) == 1 else None
    if exported is not None and not fileio.exists(path):
      return exported
    names = load_class_names(model_dir)
    if len(names) != num_classes:
      raise ValueError(f"{path} names {len(names)} classes; the export "
                       f"ranks {num_classes}.")
    for i in (range(num_classes) if exported is not None else ids):
      truth = exported[i] if exported is not None else given[
          list(ids).index(i)]
      if names[i] != truth:
        raise ValueError(f"{path} does not match the export's class names "
                         f"(class {i} is {truth!r} in the export, "
                         f"{names[i]!r} in the file).")
    return names

  @property
  def ranks_class_lists(self) -> bool:
    """Whether the export has the `rank_classes` signature (a run with
    `--class_encoder=text`)."""
    return saved_model.CLASS_LIST_KEY in self._signatures

  def rank_class_list(self, instances, class_texts: Sequence[str],
                      top_k: int = 5) -> List[List[Tuple[str, float]]]:
    """Per instance, [(class text, score)] of the top_k of `class_texts`,
    best first (the `rank_classes` signature).

    Raises:
      ValueError: the export has no such signature, or the class list is
        refused by `check_class_texts`.
    """
    if not self.ranks_class_lists:
      raise ValueError("this export ranks its training classes only: "
                       "class lists need a run trained with "
                       "`class_encoder`=text.")
    class_texts = list(class_texts)
    check_class_texts(class_texts)
    outputs = self._signatures[saved_model.CLASS_LIST_KEY](**{
        self.instance_key: tf.constant(instances),
        saved_model.CLASS_TEXTS: tf.constant(class_texts)})
    scores = outputs["scores"].numpy()
    order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
    return [[(class_texts[i], float(row[i])) for i in idx]
            for row, idx in zip(scores, order)]

  @property
  def has_probabilities(self) -> bool:
    """Whether the export returns calibrated `probabilities` (exports
    written before calibration existed do not)."""
    return saved_model.PROBABILITIES in self._serve.structured_outputs

  def scores(self, instances) -> np.ndarray:
    """[batch_size, num_classes] scores of raw instances."""
    return self._serve(**{self.instance_key: tf.constant(instances)}
                      )["scores"].numpy()

  def outputs(self, instances) -> Dict[str, np.ndarray]:
    """Every output of `serving_default` for raw instances."""
    return {k: v.numpy() for k, v in self._serve(
        **{self.instance_key: tf.constant(instances)}).items()}

  def rank(self, instances, top_k: int = 5, probabilities: bool = False
          ) -> List[List[Tuple]]:
    """Per instance, [(class name, score)] of the top_k classes, best first;
    [(class name, score, probability)] with `probabilities` (an export
    without them: ValueError)."""
    outputs = self.outputs(instances)
    scores = outputs["scores"]
    order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
    if not probabilities:
      return [[(self.class_names[i], float(row[i])) for i in idx]
              for row, idx in zip(scores, order)]
    if saved_model.PROBABILITIES not in outputs:
      raise ValueError("this export has no calibrated probabilities; "
                       "write them with pipelines.calibrate.")
    probs = outputs[saved_model.PROBABILITIES]
    return [[(self.class_names[i], float(row[i]), float(p[i])) for i in idx]
            for row, p, idx in zip(scores, probs, order)]


def split_scores(ranker: ExportedRanker, data, split: str,
                 batch_size: int = 256) -> Tuple[np.ndarray, np.ndarray]:
  """Labels and scores of every instance of a split, in the split's order.

  Args:
    ranker: the export.
    data: the run's dataset (`contract.ClassificationData`).
    split: split name.
    batch_size: instances scored per call.

  Returns:
    (labels [n] class ids or [n, num_classes] multi-hot, scores
    [n, num_classes]). Raw images of different sizes are scored one per call.
    Texts held in memory are scored in the order of their length in
    characters (a SavedModel pads each call to its longest text when
    trained with length bucketing) and returned in the split's order.
  """
  if None in ranker.instance_shape:
    batch_size = 1
  if data.is_text and split in data.splits:
    instances, labels = data.splits[split]
    order = np.argsort([sum(len(t) for t in np.atleast_1d(x))
                        for x in instances], kind="stable")
    scores = np.zeros([len(instances), data.num_classes], np.float32)
    for begin in range(0, len(order), batch_size):
      rows = order[begin:begin + batch_size]
      scores[rows] = ranker.scores(instances[rows].tolist())
    labels = (labels.astype(np.float32) if labels.ndim == 2
              else labels.astype(np.int64))
    return labels, scores
  scores, labels = [], []
  for instance, label in data.dataset(split).batch(batch_size):
    scores.append(ranker.scores(instance))
    labels.append(label.numpy())
  return np.concatenate(labels), np.concatenate(scores)


def evaluate(model_dir: str, data, split: str = "test",
             export: str = run_dir_lib.BEST_EXPORT,
             batch_size: int = 256,
             metric_names: Optional[Sequence[str]] = None,
             threshold: float = 0.5) -> Dict[str, float]:
  """Metrics of a trained run's exported model on a split.

  The exported model reads the raw instances (raw uint8 images for image
  datasets, preprocessed inside the SavedModel). Raw images of different
  sizes (ImageNet) are scored one per call.

  Args:
    model_dir: the run's directory.
    data: the run's dataset (`datasets.from_config(load_config(model_dir))`).
    split: `train`, `validation` or `test`.
    export: `best_model_by_metric` or `latest_model`.
    batch_size: instances scored per call.
    metric_names: metrics to compute (`metrics.get` names, multi-label ones
      included); None: the run's `--metrics`.
    threshold: multi-label count metrics predict a class when
      sigmoid(score) >= threshold.

  Returns:
    {metric name: value} for exactly those metrics, plus `num_examples`,
    and the probabilities' NLL, ECE and Brier score (`calibration`): `nll`,
    `ece`, `brier` of softmax (multi-label: sigmoid) of the raw scores and,
    when the export is calibrated, `calibrated_nll`, `calibrated_ece`,
    `calibrated_brier` of its probabilities.
  """
  config = load_config(model_dir)
  metric_names = tuple(metric_names or config.trainer.metrics)
  for name in metric_names:
    try:
      metrics.check_name(name)
    except ValueError as e:
      raise ValueError(f"`metrics`: {e}") from None
  if not 0.0 < threshold < 1.0:
    raise ValueError(f"`threshold`={threshold!r} must be in (0, 1).")
  ranker = ExportedRanker(model_dir, export)
  if split not in data.split_names:
    raise ValueError(f"`split`={split!r} is not valid; choose one of: "
                     f"{', '.join(data.split_names)}.")
  labels, scores = split_scores(ranker, data, split, batch_size)
  bad = int((~np.isfinite(scores).all(axis=1)).sum())
  if bad:
    raise ValueError(f"{os.path.join(model_dir, 'export', export)} gives "
                     f"non-finite scores (NaN or Inf) to {bad} of "
                     f"{len(scores)} {split} instances: the model diverged; "
                     "no metrics.")
  results = metrics.evaluate_scores(labels, scores, metric_names,
                                    threshold=threshold)
  results["num_examples"] = int(scores.shape[0])
  results.update(calibration_lib.report(scores, labels, ranker.calibration))
  return results
