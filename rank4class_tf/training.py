"""Training, export and evaluation of a Rank4Class run.

Training goes through TF-Ranking's Keras pipeline
(`tfr.keras.pipeline.ModelFitPipeline`): model, optimizer, loss and metrics are
built once inside the strategy scope, then `model.fit` runs with TensorBoard
and backup-and-restore. `Rank4ClassPipeline` extends it where it falls short
for classification:

* losses and metrics come from our name lookups (TF-Ranking's `SimplePipeline`
  takes a single loss key and names metrics itself);
* the best checkpoint is chosen by a validation metric named like ours, and a
  checkpoint of every validation is kept under `checkpoints/`;
* exports are written to a temporary folder and renamed into place, so an
  interrupted export never leaves a SavedModel that loads.

A run's model_dir holds:

  config.json                 the resolved `TrainConfig`
  classes.json                the class names, index = class id
  train/, validation/         TensorBoard events (loss and every metric)
  checkpoints/ckpt-NNNN       weights after each validation
  best_checkpoint/ckpt-NNNN   weights of the best validation `best_metric`
  export/latest_model         SavedModel of the final weights
  export/best_model_by_metric SavedModel of the best checkpoint
"""

import json
import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import config as config_lib
from rank4class_tf import datasets
from rank4class_tf import inputs as inputs_lib
from rank4class_tf import losses
from rank4class_tf import metrics
from rank4class_tf import model as model_lib
from rank4class_tf import ops
from rank4class_tf import pretrained
from rank4class_tf import text

CONFIG_FILE = "config.json"
CLASSES_FILE = "classes.json"
BEST_EXPORT = "best_model_by_metric"
LATEST_EXPORT = "latest_model"
SERVING_KEY = "serving_default"

_TFR_STRATEGIES = {
    "default": None,
    "mirrored": tfr.keras.strategy_utils.MIRRORED_STRATEGY,
    "multi_worker_mirrored": tfr.keras.strategy_utils.MWMS_STRATEGY,
    "tpu": tfr.keras.strategy_utils.TPU_STRATEGY,
}


class Rank4ClassDatasetBuilder(tfr.keras.pipeline.AbstractDatasetBuilder):
  """Train/validation tf.data pipelines and the serving signature of a run.

  Args:
    data: the dataset.
    instance_inputs: how raw instances become context features.
    batch_size: global batch size.
    seed: shuffling seed.
    top_k: number of ranked classes the serving signature returns.
  """

  def __init__(self, data: datasets.ClassificationData,
               instance_inputs: inputs_lib.InstanceInputs, batch_size: int,
               seed: int, top_k: int):
    self._data = data
    self._inputs = instance_inputs
    self._batch_size = batch_size
    self._seed = seed
    self._top_k = top_k

  def build_train_dataset(self) -> tf.data.Dataset:
    return datasets.ranking_dataset(self._data, "train", self._batch_size,
                                    training=True, seed=self._seed,
                                    instance_inputs=self._inputs)

  def build_valid_dataset(self) -> tf.data.Dataset:
    return datasets.ranking_dataset(self._data, "validation",
                                    self._batch_size, training=False,
                                    instance_inputs=self._inputs)

  def build_signatures(self, model: tf.keras.Model) -> Dict[str, Any]:
    """The serving signature: raw instances -> scores and ranked classes.

    Input: the raw instance `<instance_key>` [batch_size, ...] (float images,
    or strings for text, tokenized inside the graph). Outputs: `scores`
    [batch_size, num_classes] (class id order), and best first
    `top_k_ids` [batch_size, k] int32, `top_k_names` [batch_size, k] string,
    `top_k_scores` [batch_size, k].
    """
    data = self._data
    instance_inputs = self._inputs
    if isinstance(instance_inputs, inputs_lib.TextInputs):
      # Tracks the tokenizer's vocabulary table (and file, as an asset) so
      # that the SavedModel tokenizes raw strings on its own.
      model.instance_preprocessor = instance_inputs.preprocessor
    class_names = tf.constant(data.class_names)
    top_k = self._top_k

    @tf.function(input_signature=[instance_inputs.serving_spec()])
    def serve(instance):
      features = datasets.class_list_features(instance_inputs(instance),
                                               data.num_classes)
      scores = model(features, training=False)
      top_scores, top_ids, top_names = ops.top_k_classes(
          scores, top_k, class_names)
      return {"scores": scores, "top_k_ids": top_ids,
              "top_k_names": top_names, "top_k_scores": top_scores}

    return {SERVING_KEY: serve}


class Rank4ClassPipeline(tfr.keras.pipeline.ModelFitPipeline):
  """`ModelFitPipeline` with our losses, metrics, checkpoints and exports."""

  def __init__(self, model_builder, dataset_builder, hparams,
               config: config_lib.TrainConfig):
    super().__init__(model_builder, dataset_builder, hparams)
    self._config = config

  def build_loss(self) -> tf.keras.losses.Loss:
    return losses.get(self._config.loss, **self._config.loss_kwargs())

  def build_metrics(self) -> List[tf.keras.metrics.Metric]:
    return metrics.get_all(self._config.metrics)

  def build_weighted_metrics(self) -> List[tf.keras.metrics.Metric]:
    return []

  def build_callbacks(self) -> List[tf.keras.callbacks.Callback]:
    model_dir = self._hparams.model_dir
    monitor = "val_" + metrics.keras_name(self._config.best_metric)
    return [
        tf.keras.callbacks.TensorBoard(model_dir),
        tf.keras.callbacks.BackupAndRestore(backup_dir=model_dir),
        tf.keras.callbacks.ModelCheckpoint(
            os.path.join(model_dir, "checkpoints", "ckpt-{epoch:04d}"),
            save_weights_only=True),
        # TF-Ranking's pipeline names this folder and exports from it.
        tf.keras.callbacks.ModelCheckpoint(
            os.path.join(model_dir, "best_checkpoint", "ckpt-{epoch:04d}"),
            monitor=monitor, mode="max", save_weights_only=True,
            save_best_only=True),
    ]

  def export_saved_model(self, model: tf.keras.Model, export_to: str,
                         checkpoint: Optional[str] = None):
    """Writes the SavedModel to a temporary sibling folder, then renames it."""
    if checkpoint:
      model.load_weights(checkpoint).expect_partial()
    parent = os.path.dirname(export_to)
    tf.io.gfile.makedirs(parent)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    try:
      # The optimizer is left out: a serving model needs none, and its slot
      # variables make `tf.saved_model.load` fail in a process that trained.
      model.save(tmp, include_optimizer=False,
                 signatures=self._dataset_builder.build_signatures(model))
      if os.path.exists(export_to):
        shutil.rmtree(export_to)
      os.replace(tmp, export_to)
    finally:
      if os.path.exists(tmp):
        shutil.rmtree(tmp)


def get_strategy(name: str, tpu: str = ""):
  """The tf.distribute strategy called `name` (None for `default`).

  Names: default, mirrored, multi_worker_mirrored (TF_CONFIG describes the
  cluster), tpu (`tpu` is the TPU address).
  """
  if name not in _TFR_STRATEGIES:
    raise ValueError(f"Unknown strategy {name!r}; valid names: "
                     f"{', '.join(_TFR_STRATEGIES)}.")
  return tfr.keras.strategy_utils.get_strategy(_TFR_STRATEGIES[name], tpu=tpu)


def vocab_file(config: config_lib.TrainConfig) -> str:
  """The run's WordPiece vocabulary (see `TrainConfig.vocab_file`)."""
  if config.vocab_file:
    return config.vocab_file
  if config.init_checkpoint and config.init_checkpoint != "minilm":
    folder = config.init_checkpoint
    if not os.path.isdir(folder):
      folder = os.path.dirname(folder)
    candidate = os.path.join(folder, "vocab.txt")
    if os.path.exists(candidate):
      return candidate
  return pretrained.minilm_files()[1]


def build_inputs(config: config_lib.TrainConfig,
                 data: datasets.ClassificationData
                ) -> inputs_lib.InstanceInputs:
  """Raw numeric inputs, or in-graph tokenization for text datasets."""
  if not data.is_text:
    return datasets.default_inputs(data)
  preprocessor = text.TextPreprocessor(vocab_file(config),
                                       seq_length=config.max_seq_length)
  return inputs_lib.TextInputs(data.instance_key, data.instance_shape,
                               preprocessor)


def build_pipeline(config: config_lib.TrainConfig,
                   data: datasets.ClassificationData) -> Rank4ClassPipeline:
  """Maps the config onto TF-Ranking's model builder, data and hparams."""
  instance_inputs = build_inputs(config, data)
  model_builder = model_lib.build_model_builder(
      data,
      instance_inputs=instance_inputs,
      encoder=config.encoder,
      encoder_kwargs=config.encoder_kwargs(),
      interaction=config.interaction,
      mlp_units=config.mlp_units)
  dataset_builder = Rank4ClassDatasetBuilder(
      data, instance_inputs, config.batch_size, config.seed, config.top_k)
  num_epochs = -(-config.train_steps // config.eval_every)
  hparams = tfr.keras.pipeline.PipelineHparams(
      model_dir=config.model_dir,
      num_epochs=num_epochs,
      steps_per_epoch=config.eval_every,
      validation_steps=None,
      learning_rate=config.learning_rate,
      loss=config.loss,
      optimizer=config.optimizer,
      steps_per_execution=min(10, config.eval_every),
      export_best_model=True,
      best_exporter_metric_higher_better=True,
      best_exporter_metric=metrics.keras_name(config.best_metric),
      strategy=_TFR_STRATEGIES[config.strategy],
      tpu=config.tpu)
  return Rank4ClassPipeline(model_builder, dataset_builder, hparams, config)


def train(config: config_lib.TrainConfig, verbose: int = 0) -> str:
  """Trains, checkpoints and exports one run; returns the best export's path.

  The config and the data are checked before anything is written: a bad
  config or missing data raises ValueError and leaves model_dir untouched.
  """
  config.validate()
  data = datasets.get(config.dataset, config.data_dir)
  if config.init_checkpoint:
    pretrained.check_init_checkpoint(config.init_checkpoint)
  tf.keras.utils.set_random_seed(config.seed)
  pipeline = build_pipeline(config, data)  # Reads vocab and checkpoints.
  tf.io.gfile.makedirs(config.model_dir)
  with tf.io.gfile.GFile(os.path.join(config.model_dir, CONFIG_FILE),
                         "w") as f:
    f.write(config.to_json())
  with tf.io.gfile.GFile(os.path.join(config.model_dir, CLASSES_FILE),
                         "w") as f:
    f.write(json.dumps(list(data.class_names), indent=1))
  pipeline.train_and_validate(verbose=verbose)
  return os.path.join(config.model_dir, "export", BEST_EXPORT)


def load_config(model_dir: str) -> config_lib.TrainConfig:
  """Reads the resolved config a run wrote into `model_dir`."""
  path = os.path.join(model_dir, CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{path} not found: --model_dir is not a trained run.")
  with tf.io.gfile.GFile(path) as f:
    return config_lib.TrainConfig.from_json(f.read())


def evaluate(model_dir: str, split: str = "test",
             export: str = BEST_EXPORT,
             batch_size: int = 256) -> Dict[str, float]:
  """Metrics of a trained run's exported model on a split.

  Args:
    model_dir: the run's directory.
    split: `train`, `validation` or `test`.
    export: `best_model_by_metric` or `latest_model`.
    batch_size: instances scored per call.

  Returns:
    {metric name: value} for the run's metrics, plus `num_examples`.
  """
  config = load_config(model_dir)
  ranker = ExportedRanker(model_dir, export)
  data = datasets.get(config.dataset, config.data_dir)
  if split not in data.splits:
    raise ValueError(f"--split={split!r} is not valid; choose one of: "
                     f"{', '.join(data.splits)}.")
  scores = np.concatenate([
      ranker.scores(instance)
      for instance, _ in data.dataset(split).batch(batch_size)])
  results = metrics.evaluate_scores(data.splits[split][1], scores,
                                    config.metrics)
  results["num_examples"] = int(scores.shape[0])
  return results


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
