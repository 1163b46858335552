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
  serving.json                the serving input: name, shape, dtype
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
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import config as config_lib
from rank4class_tf import datasets
from rank4class_tf import images
from rank4class_tf import inputs as inputs_lib
from rank4class_tf import label_attention
from rank4class_tf import losses
from rank4class_tf import metrics
from rank4class_tf import model as model_lib
from rank4class_tf import ops
from rank4class_tf import pretrained
from rank4class_tf import text
from rank4class_tf.sorting import sorters

CONFIG_FILE = "config.json"
CLASSES_FILE = "classes.json"
SERVING_FILE = "serving.json"
BEST_EXPORT = "best_model_by_metric"
LATEST_EXPORT = "latest_model"
SERVING_KEY = "serving_default"

BACKUP_DIR = "backup"

_TFR_STRATEGIES = {
    "default": None,
    "mirrored": tfr.keras.strategy_utils.MIRRORED_STRATEGY,
    "multi_worker_mirrored": tfr.keras.strategy_utils.MWMS_STRATEGY,
    "parameter_server": tfr.keras.strategy_utils.PS_STRATEGY,
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
    skip_batches: training batches already consumed by the run being
      resumed. The training stream is a fixed function of the seed, so
      skipping them continues it exactly where the interrupted run was.
  """

  def __init__(self, data: datasets.ClassificationData,
               instance_inputs: inputs_lib.InstanceInputs, batch_size: int,
               seed: int, top_k: int, skip_batches: int = 0):
    self._data = data
    self._inputs = instance_inputs
    self._batch_size = batch_size
    self._seed = seed
    self._top_k = top_k
    self._skip_batches = skip_batches

  def build_train_dataset(self) -> tf.data.Dataset:
    ds = datasets.ranking_dataset(self._data, "train", self._batch_size,
                                  training=True, seed=self._seed,
                                  instance_inputs=self._inputs)
    return ds.skip(self._skip_batches) if self._skip_batches else ds

  @property
  def num_classes(self) -> int:
    return self._data.num_classes

  @property
  def serving_spec(self) -> tf.TensorSpec:
    """The raw instance the serving signature takes (checked per call)."""
    return self._inputs.serving_spec()

  def build_valid_dataset(self) -> tf.data.Dataset:
    return datasets.ranking_dataset(self._data, "validation",
                                    self._batch_size, training=False,
                                    instance_inputs=self._inputs)

  def build_signatures(self, model: tf.keras.Model) -> Dict[str, Any]:
    """The serving signature: raw instances -> scores and ranked classes.

    Input: the raw instance `<instance_key>` [batch_size, ...] (float images,
    or strings for text, tokenized inside the graph, or raw uint8 images
    [batch_size, height, width, 3] for image datasets, which get the
    evaluation preprocessing inside the graph). Outputs: `scores`
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
    to_features = instance_inputs
    if isinstance(instance_inputs, images.ImageInputs):
      to_features = instance_inputs.serving_features

    spec = instance_inputs.serving_spec()

    # The signature takes any shape and checks it when called: a signature
    # with a static shape trusts its caller, and a wrong rank then aborts the
    # process inside the convolution kernels instead of raising an error.
    @tf.function(input_signature=[tf.TensorSpec(None, spec.dtype, spec.name)])
    def serve(instance):
      instance = tf.ensure_shape(instance, spec.shape)
      features = datasets.class_list_features(to_features(instance),
                                               data.num_classes)
      scores = model(features, training=False)
      top_scores, top_ids, top_names = ops.top_k_classes(
          scores, top_k, class_names)
      return {"scores": scores, "top_k_ids": top_ids,
              "top_k_names": top_names, "top_k_scores": top_scores}

    return {SERVING_KEY: serve}


class BestCheckpoint(tf.keras.callbacks.ModelCheckpoint):
  """Saves the weights whenever a validation metric reaches a new maximum.

  The best value so far is also written to `best.json` beside the
  checkpoints, and a resumed run starts from it, so a restart never
  mistakes its first validation for the best one.

  Args:
    directory: folder of the `ckpt-NNNN` checkpoints and `best.json`.
    monitor: Keras log key, e.g. `val_top1_accuracy`.
    resume: read the best value of the interrupted run.
  """

  def __init__(self, directory: str, monitor: str, resume: bool):
    self._record = os.path.join(directory, "best.json")
    best = None
    if resume and tf.io.gfile.exists(self._record):
      with tf.io.gfile.GFile(self._record) as f:
        best = json.load(f)["value"]
    super().__init__(os.path.join(directory, "ckpt-{epoch:04d}"),
                     monitor=monitor, mode="max", save_weights_only=True,
                     save_best_only=True, initial_value_threshold=best)

  def on_epoch_end(self, epoch, logs=None):
    before = self.best
    super().on_epoch_end(epoch, logs)
    if self.best != before and self.model.distribute_strategy.extended \
        .should_checkpoint:
      with tf.io.gfile.GFile(self._record, "w") as f:
        json.dump({"epoch": epoch + 1, "monitor": self.monitor,
                   "value": float(self.best)}, f)


class XLAModelBuilder(tfr.keras.model.AbstractModelBuilder):
  """Builds the model so that its `compile` turns on XLA (`jit_compile`).

  TF-Ranking's `ModelFitPipeline.train_and_validate` builds and compiles the
  model itself; this fixes the one compile option it does not pass.

  Args:
    model_builder: the model builder to wrap.
  """

  def __init__(self, model_builder: tfr.keras.model.AbstractModelBuilder):
    self._model_builder = model_builder

  def build(self) -> tf.keras.Model:
    model = self._model_builder.build()
    compile_model = model.compile
    def compile_with_xla(**kwargs):
      compile_model(jit_compile=True, **kwargs)
    model.compile = compile_with_xla
    return model


class Rank4ClassPipeline(tfr.keras.pipeline.ModelFitPipeline):
  """`ModelFitPipeline` with our losses, metrics, checkpoints and exports.

  With `config.mixed_precision` the model is built and trained under the
  Keras `mixed_float16` policy (Keras then wraps the optimizer in a
  `LossScaleOptimizer`); the previous global policy is restored afterwards.
  With `config.jit_compile` the model is compiled with XLA.
  """

  def __init__(self, model_builder, dataset_builder, hparams,
               config: config_lib.TrainConfig, strategy=None):
    if config.jit_compile:
      model_builder = XLAModelBuilder(model_builder)
    # Not `super().__init__`: TF-Ranking's builds the optimizer, then the
    # strategy; a MultiWorkerMirroredStrategy must exist before any
    # TensorFlow op runs, so `train` creates it first and hands it in, and
    # the optimizer is built in its scope.
    self._validate_parameters(model_builder, dataset_builder)
    self._model_builder = model_builder
    self._dataset_builder = dataset_builder
    self._hparams = hparams
    self._config = config
    self._strategy = strategy
    with tfr.keras.strategy_utils.strategy_scope(strategy):
      self._optimizer = tf.keras.optimizers.get({
          "class_name": hparams.optimizer,
          "config": {"learning_rate": hparams.learning_rate}})

  def train_and_validate(self, verbose: int = 0):
    policy = tf.keras.mixed_precision.global_policy()
    if self._config.mixed_precision:
      tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
      return super().train_and_validate(verbose=verbose)
    finally:
      tf.keras.mixed_precision.set_global_policy(policy)

  def build_loss(self) -> tf.keras.losses.Loss:
    kwargs = self._config.loss_kwargs()
    if "d" in kwargs:  # SoDeep sorters rank lists of the class count.
      kwargs["d"] = self._dataset_builder.num_classes
    return losses.get(self._config.loss, **kwargs)

  def build_metrics(self) -> List[tf.keras.metrics.Metric]:
    return metrics.get_all(self._config.metrics)

  def build_weighted_metrics(self) -> List[tf.keras.metrics.Metric]:
    return []

  def build_callbacks(self) -> List[tf.keras.callbacks.Callback]:
    model_dir = self._hparams.model_dir
    monitor = "val_" + metrics.keras_name(self._config.best_metric)
    config = self._config
    schedule = []
    if config.contrastive_weight > 0:
      # MulCon's two steps: the loss alone, then loss + gamma * LLCL.
      schedule = [label_attention.ContrastiveSchedule(
          config.contrastive_start_step // config.eval_every,
          config.contrastive_weight, config.contrastive_learning_rate)]
    return schedule + [
        tf.keras.callbacks.TensorBoard(model_dir),
        tf.keras.callbacks.ModelCheckpoint(
            os.path.join(model_dir, "checkpoints", "ckpt-{epoch:04d}"),
            save_weights_only=True),
        # TF-Ranking's pipeline names this folder and exports from it.
        BestCheckpoint(os.path.join(model_dir, "best_checkpoint"), monitor,
                       resume=resume_epoch(model_dir) > 0),
        # Restores model, optimizer and epoch after a crash or preemption;
        # `resume_epoch` reads the same backup to realign the data. Last, so
        # that a backup of epoch e implies that epoch e's checkpoints and
        # best.json are written: a kill between them would otherwise resume
        # without the best value so far and pick a worse best checkpoint.
        tf.keras.callbacks.BackupAndRestore(
            backup_dir=os.path.join(model_dir, BACKUP_DIR)),
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


def cluster_resolver(config: config_lib.TrainConfig):
  """The cluster resolver behind `--strategy`, or None where none is needed.

  * `multi_worker_mirrored`, `parameter_server`: the cluster comes from the
    TF_CONFIG environment variable (`TFConfigClusterResolver`);
  * `tpu`: `TPUClusterResolver(tpu=--tpu)`;
  * `default`, `mirrored`: one process, no resolver.
  """
  if config.strategy in ("multi_worker_mirrored", "parameter_server"):
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if "chief" not in resolver.cluster_spec().as_dict():
      raise ValueError(f"--strategy={config.strategy} needs TF_CONFIG to "
                       "describe the cluster with a 'chief' task (it writes "
                       "the checkpoints and exports).")
    return resolver
  if config.strategy == "tpu":
    return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=config.tpu)
  return None


def resume_epoch(model_dir: str) -> int:
  """Epochs an interrupted run in `model_dir` completed (0 if none).

  Reads the epoch that Keras' `BackupAndRestore` saved with its last backup.
  """
  backup = tf.train.latest_checkpoint(
      os.path.join(model_dir, BACKUP_DIR, "chief"))
  if not backup:
    return 0
  saved = tf.train.load_checkpoint(backup).get_tensor(
      "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE")
  return max(int(saved) + 1, 0)


def configure_devices(cpu_devices: int) -> None:
  """Splits the host CPU into `cpu_devices` logical devices (if > 1).

  Lets `--strategy=mirrored` run data-parallel on one CPU (tests, demos).
  Must run before TensorFlow initialises its devices.
  """
  if cpu_devices > 1:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_devices)


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


def make_strategy(config: config_lib.TrainConfig):
  """The tf.distribute strategy of `--strategy` (None for `default`)."""
  return tfr.keras.strategy_utils.get_strategy(
      _TFR_STRATEGIES[config.strategy], cluster_resolver(config),
      tpu=config.tpu)


def build_pipeline(config: config_lib.TrainConfig,
                   data: datasets.ClassificationData,
                   strategy=None) -> Rank4ClassPipeline:
  """Maps the config onto TF-Ranking's model builder, data and hparams.

  `strategy` (from `make_strategy`) must be created before any TensorFlow
  op for multi-worker runs; None trains on the default device.
  """
  instance_inputs = build_inputs(config, data)
  model_builder = model_lib.build_model_builder(
      data,
      instance_inputs=instance_inputs,
      encoder=config.encoder,
      encoder_kwargs=config.encoder_kwargs(),
      interaction=config.interaction,
      mlp_units=config.mlp_units,
      label_dim=config.label_dim,
      label_heads=config.label_heads,
      projection_dim=config.projection_dim,
      contrastive_temperature=(config.contrastive_temperature
                               if config.contrastive_weight > 0 else None),
      contrastive_weight=(config.contrastive_weight
                          if config.contrastive_start_step == 0 else 0.0))
  dataset_builder = Rank4ClassDatasetBuilder(
      data, instance_inputs, config.batch_size, config.seed, config.top_k,
      skip_batches=resume_epoch(config.model_dir) * config.eval_every)
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
      cluster_resolver=cluster_resolver(config),
      tpu=config.tpu)
  return Rank4ClassPipeline(model_builder, dataset_builder, hparams, config,
                            strategy)


def train(config: config_lib.TrainConfig, verbose: int = 0) -> str:
  """Trains, checkpoints and exports one run; returns the best export's path.

  The config and the data are checked before anything is written: a bad
  config or missing data raises ValueError and leaves model_dir untouched.
  A model_dir that already holds an export is refused unless
  `config.overwrite`. A run interrupted mid-training (a backup in
  model_dir/backup) resumes from its last completed validation, with the
  data stream realigned, when started again with the same config.
  """
  configure_devices(config.cpu_devices)  # Before any TensorFlow op runs.
  config.validate()
  strategy = make_strategy(config)  # Also before any op: collectives.
  if config.deterministic:
    tf.config.experimental.enable_op_determinism()
  data = load_data(config)
  check_files(config, data)
  export_dir = os.path.join(config.model_dir, "export")
  if tf.io.gfile.exists(export_dir) and not config.overwrite:
    raise ValueError(f"--model_dir={config.model_dir} already holds an "
                     "export; pass --overwrite to replace it.")
  tf.keras.utils.set_random_seed(config.seed)
  pipeline = build_pipeline(config, data, strategy)  # Reads vocab, ckpts.
  replicas = strategy.num_replicas_in_sync if strategy else 1
  if config.batch_size % replicas:
    raise ValueError(f"--batch_size={config.batch_size} must be a multiple "
                     f"of the {replicas} replicas of --strategy="
                     f"{config.strategy}.")
  logging.info(
      "Strategy %s: %d replica(s); global batch %d = %d per replica; "
      "learning rate %g (not scaled with the replicas); resuming after "
      "epoch %d.", config.strategy, replicas, config.batch_size,
      config.batch_size // replicas, config.learning_rate,
      resume_epoch(config.model_dir))
  if strategy is None or strategy.extended.should_checkpoint:
    tf.io.gfile.makedirs(config.model_dir)
    with tf.io.gfile.GFile(os.path.join(config.model_dir, CONFIG_FILE),
                           "w") as f:
      f.write(config.to_json())
    with tf.io.gfile.GFile(os.path.join(config.model_dir, CLASSES_FILE),
                           "w") as f:
      f.write(json.dumps(list(data.class_names), indent=1))
    spec = pipeline._dataset_builder.serving_spec  # pylint: disable=protected-access
    with tf.io.gfile.GFile(os.path.join(config.model_dir, SERVING_FILE),
                           "w") as f:
      json.dump({"name": spec.name, "shape": spec.shape.as_list(),
                 "dtype": spec.dtype.name}, f)
  pipeline.train_and_validate(verbose=verbose)
  if strategy is not None and not strategy.extended.should_checkpoint:
    # TF-Ranking writes a non-chief worker's copies under workertemp_<id>.
    scratch = os.path.join(config.model_dir,
                           f"workertemp_{strategy.cluster_resolver.task_id}")
    if tf.io.gfile.exists(scratch):
      tf.io.gfile.rmtree(scratch)
  return os.path.join(config.model_dir, "export", BEST_EXPORT)


def check_files(config: config_lib.TrainConfig,
                data: datasets.ClassificationData) -> None:
  """Checks the files a run reads besides its data (raises ValueError).

  The init checkpoint, and the shipped sorter of a `sodeep_*` loss for the
  class count: `train` checks them before writing anything.
  """
  if config.init_checkpoint:
    pretrained.check_init_checkpoint(config.init_checkpoint)
  if config.loss.startswith("sodeep_"):
    sorters.check_available(config.sorter, data.num_classes)


def load_config(model_dir: str) -> config_lib.TrainConfig:
  """Reads the resolved config a run wrote into `model_dir`."""
  path = os.path.join(model_dir, CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{path} not found: --model_dir is not a trained run.")
  with tf.io.gfile.GFile(path) as f:
    return config_lib.TrainConfig.from_json(f.read())


def load_data(config: config_lib.TrainConfig) -> datasets.ClassificationData:
  """The run's dataset, with its data_dir, download and image_size flags."""
  return datasets.get(config.dataset, config.data_dir,
                      download=config.download, image_size=config.image_size)


def evaluate(model_dir: str, split: str = "test",
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
  metric_names = tuple(metric_names or config.metrics)
  for name in metric_names:
    try:
      metrics.check_name(name)
    except ValueError as e:
      raise ValueError(f"--metrics: {e}") from None
  if not 0.0 < threshold < 1.0:
    raise ValueError(f"--threshold={threshold!r} must be in (0, 1).")
  ranker = ExportedRanker(model_dir, export)
  data = load_data(config)
  if split not in data.split_names:
    raise ValueError(f"--split={split!r} is not valid; choose one of: "
                     f"{', '.join(data.split_names)}.")
  labels, scores = split_scores(ranker, data, split, batch_size)
  results = metrics.evaluate_scores(labels, scores, metric_names,
                                    threshold=threshold)
  results["num_examples"] = int(scores.shape[0])
  return results


def split_scores(ranker: "ExportedRanker", data: datasets.ClassificationData,
                 split: str, batch_size: int = 256
                ) -> Tuple[np.ndarray, np.ndarray]:
  """Labels and scores of every instance of a split, in the split's order.

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
