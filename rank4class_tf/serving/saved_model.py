"""The serving contract of a run, written: signatures, exports and run-folder
files.

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
file by file: `fileio.atomic_folder`). This module This module
writes a run folder's (`run_dir`) config.json (the resolved `TrainConfig`),
classes.json (the class names, index = class id), serving.json (the serving
input: name, shape, dtype) and its two exports, export/latest_model (the
final weights) and export/best_model_by_metric (the best checkpoint);
`exported_ranker.py` reads them back.
"""

import json
import logging
import os
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
# Registers TF Text's ops (CaseFoldUTF8, WordpieceTokenizeWithOffsets, ...):
# a text model's SavedModel tokenizes with them and loads only once they are.
import tensorflow_text  # pylint: disable=unused-import

from rank4class_tf import config as config_lib
from rank4class_tf.data import features
from rank4class_tf import fileio
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.multilabel import label_attention
from rank4class_tf import ops
from rank4class_tf.ranking import calibration as calibration_lib
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
