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
`top_k_names` and `top_k_scores` [batch_size, k].

Exports are written to a temporary sibling folder and renamed into place, so
an interrupted export never leaves a SavedModel that loads. A run's
model_dir holds, besides checkpoints and TensorBoard events:

  config.json                 the resolved `TrainConfig`
  classes.json                the class names, index = class id
  serving.json                the serving input: name, shape, dtype
  export/latest_model         SavedModel of the final weights
  export/best_model_by_metric SavedModel of the best checkpoint
"""

import json
import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
# Registers TF Text's ops (CaseFoldUTF8, WordpieceTokenizeWithOffsets, ...):
# a text model's SavedModel tokenizes with them and loads only once they are.
import tensorflow_text  # pylint: disable=unused-import

from rank4class_tf import config as config_lib
from rank4class_tf import features
from rank4class_tf import metrics
from rank4class_tf import ops

CONFIG_FILE = "config.json"
CLASSES_FILE = "classes.json"
SERVING_FILE = "serving.json"
BEST_EXPORT = "best_model_by_metric"
LATEST_EXPORT = "latest_model"
EXPORTS = (BEST_EXPORT, LATEST_EXPORT)
SERVING_KEY = "serving_default"
TMP_PREFIX = ".tmp-"  # An export being written: export/.tmp-XXXX.


def signatures(model: tf.keras.Model,
               instance_inputs: features.InstanceInputs,
               class_names: Sequence[str],
               top_k: int) -> Dict[str, Any]:
  """The serving signature: raw instances -> scores and ranked classes.

  Args:
    model: the ranking model (features -> [batch_size, num_classes] scores).
    instance_inputs: reads the raw serving input (`serving_spec`,
      `serving_features`) and names what the SavedModel must track
      (`serving_assets`, e.g. the tokenizer).
    class_names: one name per class, index = class id.
    top_k: ranked classes returned.

  Returns:
    {SERVING_KEY: tf.function}, for `model.save(signatures=...)`.
  """
  for name, asset in instance_inputs.serving_assets().items():
    setattr(model, name, asset)
  num_classes = len(class_names)
  class_names = tf.constant(list(class_names))
  spec = instance_inputs.serving_spec()

  # The signature takes any shape and checks it when called: a signature
  # with a static shape trusts its caller, and a wrong rank then aborts the
  # process inside the convolution kernels instead of raising an error.
  @tf.function(input_signature=[tf.TensorSpec(None, spec.dtype, spec.name)])
  def serve(instance):
    instance = tf.ensure_shape(instance, spec.shape)
    context = instance_inputs.serving_features(instance)
    scores = model(features.class_list_features(context, num_classes),
                   training=False)
    top_scores, top_ids, top_names = ops.top_k_classes(
        scores, top_k, class_names)
    return {"scores": scores, "top_k_ids": top_ids,
            "top_k_names": top_names, "top_k_scores": top_scores}

  return {SERVING_KEY: serve}


def has_exports(model_dir: str) -> bool:
  """Whether both of a run's exports are complete SavedModels."""
  return all(tf.io.gfile.exists(os.path.join(
      model_dir, "export", name, "saved_model.pb")) for name in EXPORTS)


def remove_stale_exports(model_dir: str) -> None:
  """Removes the temporary folders an interrupted export left in export/."""
  pattern = os.path.join(model_dir, "export", TMP_PREFIX + "*")
  for path in tf.io.gfile.glob(pattern):
    tf.io.gfile.rmtree(path)


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def export_saved_model(model: tf.keras.Model, export_to: str,
                       signatures_: Dict[str, Any]) -> None:
  """Writes the SavedModel to a temporary sibling folder, then renames it.

  The folder gets the permissions of any folder the user creates (0777 less
  the umask), not mkdtemp's private 0700, so others can serve it.
  """
  parent = os.path.dirname(export_to)
  tf.io.gfile.makedirs(parent)
  tmp = tempfile.mkdtemp(prefix=TMP_PREFIX, dir=parent)
  os.chmod(tmp, 0o777 & ~_umask())
  try:
    # The optimizer is left out: a serving model needs none, and its slot
    # variables make `tf.saved_model.load` fail in a process that trained.
    model.save(tmp, include_optimizer=False, signatures=signatures_)
    if os.path.exists(export_to):
      shutil.rmtree(export_to)
    os.replace(tmp, export_to)
  finally:
    if os.path.exists(tmp):
      shutil.rmtree(tmp)


def write_run_files(model_dir: str, config: config_lib.TrainConfig,
                    class_names: Sequence[str],
                    serving_spec: tf.TensorSpec) -> None:
  """Writes config.json, classes.json and serving.json into `model_dir`."""
  tf.io.gfile.makedirs(model_dir)
  with tf.io.gfile.GFile(os.path.join(model_dir, CONFIG_FILE), "w") as f:
    f.write(config.to_json())
  with tf.io.gfile.GFile(os.path.join(model_dir, CLASSES_FILE), "w") as f:
    f.write(json.dumps(list(class_names), indent=1))
  with tf.io.gfile.GFile(os.path.join(model_dir, SERVING_FILE), "w") as f:
    json.dump({"name": serving_spec.name,
               "shape": serving_spec.shape.as_list(),
               "dtype": serving_spec.dtype.name}, f)


def load_config(model_dir: str) -> config_lib.TrainConfig:
  """Reads the resolved config a run wrote into `model_dir`."""
  path = os.path.join(model_dir, CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{path} not found: --model_dir is not a trained run.")
  with tf.io.gfile.GFile(path) as f:
    return config_lib.TrainConfig.from_json(f.read())


def load_class_names(model_dir: str) -> List[str]:
  """The class names a run saved, index = class id."""
  path = os.path.join(model_dir, CLASSES_FILE)
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{path} not found: --model_dir is not a trained run.")
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


class ExportedRanker:
  """Ranks the classes of raw instances with a run's exported SavedModel.

  Args:
    model_dir: the run's directory.
    export: `best_model_by_metric` or `latest_model`.

  Attributes:
    class_names: the run's classes, index = class id.
    instance_key: name of the serving input.
    instance_shape: shape of one raw instance: () for one string, (2,) for
      MIND's (title, abstract), (8, 8, 1) for digits.
  """

  def __init__(self, model_dir: str, export: str = BEST_EXPORT):
    self.class_names = load_class_names(model_dir)
    export_dir = os.path.join(model_dir, "export", export)
    if not tf.io.gfile.exists(export_dir):
      raise ValueError(f"{export_dir} not found: the run has no export.")
    self._serve = tf.saved_model.load(export_dir).signatures[SERVING_KEY]
    serving_file = os.path.join(model_dir, SERVING_FILE)
    if tf.io.gfile.exists(serving_file):
      with tf.io.gfile.GFile(serving_file) as f:
        serving = json.load(f)
      self.instance_key = serving["name"]
      self.instance_shape = tuple(serving["shape"][1:])
    else:  # A run exported with a static serving shape.
      (self.instance_key, spec), = (
          self._serve.structured_input_signature[1].items())
      self.instance_shape = tuple(spec.shape[1:])

  def scores(self, instances) -> np.ndarray:
    """[batch_size, num_classes] scores of raw instances."""
    return self._serve(**{self.instance_key: tf.constant(instances)}
                      )["scores"].numpy()

  def rank(self, instances, top_k: int = 5
          ) -> List[List[Tuple[str, float]]]:
    """Per instance, [(class name, score)] of the top_k classes, best first."""
    scores = self.scores(instances)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
    return [[(self.class_names[i], float(row[i])) for i in idx]
            for row, idx in zip(scores, order)]


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
  """
  if None in ranker.instance_shape:
    batch_size = 1
  scores, labels = [], []
  for instance, label in data.dataset(split).batch(batch_size):
    scores.append(ranker.scores(instance))
    labels.append(label.numpy())
  return np.concatenate(labels), np.concatenate(scores)


def evaluate(model_dir: str, data, split: str = "test",
             export: str = BEST_EXPORT,
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
    {metric name: value} for exactly those metrics, plus `num_examples`.
  """
  config = load_config(model_dir)
  metric_names = tuple(metric_names or config.trainer.metrics)
  for name in metric_names:
    try:
      metrics.check_name(name)
    except ValueError as e:
      raise ValueError(f"--metrics: {e}") from None
  if not 0.0 < threshold < 1.0:
    raise ValueError(f"--threshold={threshold!r} must be in (0, 1).")
  ranker = ExportedRanker(model_dir, export)
  if split not in data.split_names:
    raise ValueError(f"--split={split!r} is not valid; choose one of: "
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
  return results
