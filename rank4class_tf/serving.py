"""The serving contract of a run: signatures, exports, run-folder files and
the client that ranks classes with an export.

This is the part of the package that must change most carefully: exported
SavedModels outlive the code that wrote them. It depends on the feature
contract (`features`) and the config, never on the datasets or the training
loop.

The serving signature `serving_default` takes raw instances under the
dataset's instance key (float images, strings tokenized inside the graph, or
raw uint8 images preprocessed inside the graph) and returns `scores`
[batch_size, num_classes] in class id order, and best first `top_k_ids`,
`top_k_names` and `top_k_scores` [batch_size, k]. The signature
`class_names` (no input) returns the class names the export was trained on:
clients name classes from the export itself, never from `classes.json`.

Exports are written to a temporary sibling folder and renamed into place, so
an interrupted export never leaves a SavedModel that loads (on a bucket or
`ram://`, where folders cannot be renamed, the folder is copied into place
file by file: `fileio.atomic_folder`). This module
writes and reads a run folder's (`run_dir`) config.json (the resolved
`TrainConfig`), classes.json (the class names, index = class id),
serving.json (the serving input: name, shape, dtype) and its two exports,
export/latest_model (the final weights) and export/best_model_by_metric
(the best checkpoint).

One module (about 520 lines): the signatures, the exports and their
readers change together whenever the serving contract does.
"""

import json
import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
# Registers TF Text's ops (CaseFoldUTF8, WordpieceTokenizeWithOffsets, ...):
# a text model's SavedModel tokenizes with them and loads only once they are.
import tensorflow_text  # pylint: disable=unused-import

from rank4class_tf import config as config_lib
from rank4class_tf.data import features
from rank4class_tf.data import user_files
from rank4class_tf import fileio
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.multilabel import label_attention
from rank4class_tf import ops
from rank4class_tf.ranking import calibration as calibration_lib
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib

SERVING_KEY = "serving_default"
# The export's calibrated probabilities output.
PROBABILITIES = "probabilities"
# A signature without input that returns the export's class names (index =
# class id): clients name classes from the export itself, never from a file
# beside it that may have been edited.
CLASS_NAMES_KEY = "class_names"
# The class-list signature of a text class encoder's export, and its input.
CLASS_LIST_KEY = "rank_classes"
CLASS_TEXTS = "class_texts"

# Exports are written without Keras' trace of every layer's call (which
# revives layers without their code): an export is read by its signatures
# alone (TF Serving, `tf.saved_model.load(...).signatures`, ExportedRanker).
# `python -m benchmarks.export` times both settings side by side.
SAVE_TRACES = False


def text_class_parts(model: tf.keras.Model):
  """(instance encoder, scoring head, text class encoder) of a model whose
  class encoder reads class texts through a tower; None otherwise."""
  parts = {}
  for layer in model.submodules:
    if isinstance(layer, class_encoders.TextClassEncoder):
      parts["class_encoder"] = layer
    elif isinstance(layer, (model_lib.ClassRankingHead,
                            label_attention.LabelAttentionHead)):
      parts["head"] = layer
    elif isinstance(layer, tf.keras.layers.Layer) and (
        layer.name == "encoder"):
      parts.setdefault("encoder", layer)
  if len(parts) < 3 or parts["class_encoder"].tower is None:
    return None
  return parts["encoder"], parts["head"], parts["class_encoder"]


def store_class_features(model: tf.keras.Model) -> None:
  """Before an export: a text class encoder runs its tower on the training
  class texts once and serves from the stored outputs
  (`TextClassEncoder.store_features`), so `serving_default` encodes no
  class text per call."""
  for layer in model.submodules:
    if isinstance(layer, class_encoders.TextClassEncoder):
      layer.store_features()


def scoring_function(model: tf.keras.Model,
                     instance_inputs: features.InstanceInputs,
                     num_classes: int) -> tf.types.experimental.GenericFunction:
  """Raw serving instances -> the model's float32 scores [batch_size,
  num_classes]: the part of `serving_default` that reads the model, a
  `tf.function` traced once however many exports of `model` call it (the
  final and the best export of a run: `signatures`' `scores_fn`).

  It takes any shape and checks it when called: a signature with a static
  shape trusts its caller, and a wrong rank then aborts the process inside
  the convolution kernels instead of raising an error.
  """
  spec = instance_inputs.serving_spec()

  @tf.function(input_signature=[tf.TensorSpec(None, spec.dtype, spec.name)])
  def scores(instance):
    instance = tf.ensure_shape(instance, spec.shape)
    context = instance_inputs.serving_features(instance)
    return model(features.class_list_features(context, num_classes),
                 training=False)

  return scores


def signatures(model: tf.keras.Model,
               instance_inputs: features.InstanceInputs,
               class_names: Sequence[str],
               top_k: int,
               calibration: Optional[calibration_lib.Calibration] = None,
               scores_fn: Optional[
                   tf.types.experimental.GenericFunction] = None
              ) -> Dict[str, Any]:
  """The serving signatures: raw instances -> scores and ranked classes.

  `serving_default` ranks the training classes. A model with a text class
  encoder (`--class_encoder=text`) also gets `rank_classes`, which takes the
  instances and a `class_texts` list [k] (1 <= k <= `class_encoders.
  MAX_SERVED_CLASSES`, none empty) and ranks those classes: `scores`
  [batch_size, k] in list order, and best first `top_k_indices` (positions
  in the list), `top_k_texts` and `top_k_scores` [batch_size, min(top_k,
  k)].

  Args:
    model: the ranking model (features -> [batch_size, num_classes] scores).
    instance_inputs: reads the raw serving input (`serving_spec`,
      `serving_features`) and names what the SavedModel must track
      (`serving_assets`, e.g. the tokenizer).
    class_names: one name per class, index = class id.
    top_k: ranked classes returned.
    calibration: when given, `serving_default` also returns
      `probabilities` [batch_size, num_classes], the calibrated map of the
      scores (`calibration.Calibration.apply`: single-label softmax(s / T),
      summing to 1; multi-label sigmoid(a s + b) per class).
    scores_fn: `scoring_function(model, instance_inputs, num_classes)`
      made before, for another export of the same model: its trace is
      reused (default: a new one).

  Returns:
    {SERVING_KEY: tf.function, CLASS_NAMES_KEY: tf.function (no input ->
    `class_names` [num_classes])}, for `model.save(signatures=...)`.
  """
  for name, asset in instance_inputs.serving_assets().items():
    setattr(model, name, asset)
  num_classes = len(class_names)
  class_names = tf.constant(list(class_names))
  spec = instance_inputs.serving_spec()
  if scores_fn is None:
    scores_fn = scoring_function(model, instance_inputs, num_classes)

  @tf.function(input_signature=[tf.TensorSpec(None, spec.dtype, spec.name)])
  def serve(instance):
    scores = scores_fn(instance)
    top_scores, top_ids, top_names = ops.top_k_classes(
        scores, top_k, class_names)
    outputs = {"scores": scores, "top_k_ids": top_ids,
               "top_k_names": top_names, "top_k_scores": top_scores}
    if calibration is not None:
      outputs[PROBABILITIES] = calibration.apply(scores)
    return outputs

  # The names travel as a signature, not as an attribute tracked on the
  # model: signatures are part of the SavedModel's MetaGraphDef, written and
  # read back by `tf.saved_model.load` alike on TF 2.15 (Keras 2) and on TF
  # 2.20 with tf-keras, with no Keras at all (and by TF Serving and
  # `saved_model_cli`), while which attributes a `model.save` tracks depends
  # on the Keras version.
  @tf.function(input_signature=[])
  def names():
    return {"class_names": class_names}

  result = {SERVING_KEY: serve, CLASS_NAMES_KEY: names}
  parts = text_class_parts(model)
  if parts is not None:
    result[CLASS_LIST_KEY] = _class_list_signature(
        parts, instance_inputs, top_k)
  return result


def _class_list_signature(parts, instance_inputs, top_k: int):
  """`rank_classes`: instances and class texts -> scores of those classes."""
  encoder, head, class_encoder = parts
  spec = instance_inputs.serving_spec()
  preprocessor = instance_inputs.preprocessor
  limit = class_encoders.MAX_SERVED_CLASSES

  @tf.function(input_signature=[
      tf.TensorSpec(None, spec.dtype, spec.name),
      tf.TensorSpec([None], tf.string, CLASS_TEXTS)])
  def rank_classes(instance, class_texts):
    instance = tf.ensure_shape(instance, spec.shape)
    count = tf.size(class_texts)
    with tf.control_dependencies([
        tf.debugging.assert_positive(
            count, message=f"{CLASS_TEXTS}: the class list is empty"),
        tf.debugging.assert_less_equal(
            count, limit,
            message=f"{CLASS_TEXTS}: more than {limit} classes"),
        tf.debugging.assert_positive(
            tf.strings.length(tf.strings.strip(class_texts)),
            message=f"{CLASS_TEXTS}: an empty class text")]):
      class_texts = tf.identity(class_texts)
    context = instance_inputs.serving_features(instance)
    encoded = encoder(instance_inputs.encoder_input(context), training=False)
    table = class_encoder.encode(preprocessor(class_texts), training=False)
    if isinstance(encoded, dict):  # label_attention: token features.
      scores, _ = head.scores_from_table(encoded["features"],
                                         encoded["mask"], table,
                                         training=False)
    else:
      scores = head.scores_from_table(encoded, table)
    scores = tf.cast(scores, tf.float32)
    top_scores, top_ids = tf.math.top_k(scores, k=tf.minimum(top_k, count))
    return {"scores": scores, "top_k_indices": top_ids,
            "top_k_texts": tf.gather(class_texts, top_ids),
            "top_k_scores": top_scores}

  return rank_classes


def remove_stale_exports(model_dir: str) -> None:
  """Removes the temporary folders an interrupted export left in export/."""
  pattern = os.path.join(run_dir_lib.RunDir(model_dir).exports,
                         run_dir_lib.EXPORT_TMP_PREFIX + "*")
  for path in tf.io.gfile.glob(pattern):
    tf.io.gfile.rmtree(path)


def export_saved_model(model: tf.keras.Model, export_to: str,
                       signatures_: Optional[Dict[str, Any]],
                       calibration: Optional[Dict[str, Any]] = None,
                       copy_of: Optional[str] = None) -> None:
  """Writes the SavedModel to a temporary sibling folder, then renames it
  (`fileio.atomic_folder`: copies it file by file where the file system
  has no folder rename, as a bucket).

  `copy_of`: an export this process wrote of the same weights (the best
  checkpoint is the final one): its files are copied instead, calibration
  included, and `model`, `signatures_` and `calibration` are not read:
  saving again would trace the signatures again for the same SavedModel.

  The folder gets the permissions of any folder the user creates (0777 less
  the umask), not mkdtemp's private 0700, so others can serve it.
  `calibration` (what `calibrate_on` returns) is written in it as
  `run_dir.CALIBRATION_FILE`, so an export and its calibration are renamed into
  place together.
  """
  with fileio.atomic_folder(export_to,
                            prefix=run_dir_lib.EXPORT_TMP_PREFIX) as tmp:
    if copy_of is not None:
      fileio.copy_folder(copy_of, tmp)
      return
    # The optimizer is left out: a serving model needs none, and its slot
    # variables make `tf.saved_model.load` fail in a process that trained.
    model.save(tmp, include_optimizer=False, signatures=signatures_,
               save_traces=SAVE_TRACES)
    if calibration is not None:
      fileio.write_json_atomically(
          os.path.join(tmp, run_dir_lib.CALIBRATION_FILE), calibration)


def calibrate_on(model: tf.keras.Model, dataset: tf.data.Dataset
                ) -> Tuple[Optional[calibration_lib.Calibration],
                           Dict[str, Any]]:
  """Fits the calibration of `model`'s scores on a split.

  Args:
    model: the ranking model.
    dataset: the split's batched (features, labels) ranking examples:
      one-hot (single-label) or multi-hot labels [batch_size, num_classes],
      -1 for masked classes (held-out classes read as 0).

  Returns:
    (the calibration, or None when the scores are not finite, and the
    record written beside the export: its parameters, the number of
    instances and the split's NLL, ECE and Brier score before and after).
  """
  # Keras' compiled predict, traced once for a run's two exports: 1.1-2.2x
  # faster a batch than calling the model eagerly
  # (results/text_speed/issue60.md).
  scores = model.predict(dataset, verbose=0)
  if isinstance(scores, dict):
    scores = scores["scores"]
  scores = np.asarray(scores, np.float64)
  labels = np.concatenate([batch_labels.numpy()
                           for _, batch_labels in dataset])
  labels = np.maximum(labels, 0.0)
  if (labels.sum(axis=1) == 1).all():
    labels = labels.argmax(axis=1)  # Single-label.
  record = {"split": "validation", "num_examples": int(len(scores))}
  try:
    calibration = calibration_lib.fit(scores, labels)
  except ValueError as e:
    logging.warning("No calibration: %s", e)
    return None, dict(record, calibration=None, reason=str(e))
  record.update(calibration=calibration.to_json(),
                metrics=calibration_lib.report(scores, labels, calibration))
  return calibration, record


def write_run_files(model_dir: str, config: config_lib.TrainConfig,
                    class_names: Sequence[str],
                    serving_spec: tf.TensorSpec) -> None:
  """Writes config.json, classes.json and serving.json into `model_dir`,
  each atomically (`fileio`): a run started again rewrites them whole."""
  run = run_dir_lib.RunDir(model_dir)
  fileio.makedirs(model_dir)
  fileio.write_text_atomically(run.config_file, config.to_json())
  fileio.write_text_atomically(run.classes_file,
                               json.dumps(list(class_names), indent=1))
  fileio.write_text_atomically(run.serving_file, json.dumps({
      "name": serving_spec.name, "shape": serving_spec.shape.as_list(),
      "dtype": serving_spec.dtype.name}))


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
      self._serve = self._signatures[SERVING_KEY]
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
    if CLASS_NAMES_KEY in self._signatures:
      names = self._signatures[CLASS_NAMES_KEY]()["class_names"].numpy()
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
    return CLASS_LIST_KEY in self._signatures

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
    outputs = self._signatures[CLASS_LIST_KEY](**{
        self.instance_key: tf.constant(instances),
        CLASS_TEXTS: tf.constant(class_texts)})
    scores = outputs["scores"].numpy()
    order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
    return [[(class_texts[i], float(row[i])) for i in idx]
            for row, idx in zip(scores, order)]

  @property
  def has_probabilities(self) -> bool:
    """Whether the export returns calibrated `probabilities` (exports
    written before calibration existed do not)."""
    return PROBABILITIES in self._serve.structured_outputs

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
    if PROBABILITIES not in outputs:
      raise ValueError("this export has no calibrated probabilities; "
                       "write them with pipelines.calibrate.")
    probs = outputs[PROBABILITIES]
    return [[(self.class_names[i], float(row[i]), float(p[i])) for i in idx]
            for row, p, idx in zip(scores, probs, order)]


def split_scores(ranker: ExportedRanker, data, split: str,
                 batch_size: int = 256) -> Tuple[np.ndarray, np.ndarray]:
  """Labels and scores of every instance of a split, in the split's order.

  Args:
    ranker: the export.
    data: the run's dataset (`datasets.ClassificationData`).
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
