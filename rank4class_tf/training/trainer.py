"""Training of a Rank4Class run: TF-Ranking's Keras pipeline, our callbacks.

Training goes through TF-Ranking's Keras pipeline
(`tfr.keras.pipeline.ModelFitPipeline`): model, optimizer, loss and metrics are
built once inside the strategy scope (`distribute`), then `model.fit` runs
with TensorBoard and backup-and-restore. `Rank4ClassPipeline` extends it
where it falls short for classification:

* losses and metrics come from our name lookups (TF-Ranking's `SimplePipeline`
  takes a single loss key and names metrics itself);
* the best checkpoint is chosen by a validation metric named like ours, and a
  checkpoint of every validation is kept under `checkpoints/`;
* exports go through `serving` (raw-input signatures, atomic writes).

What a run writes into its model_dir, and where, is `run_dir`'s.
"""

import contextlib
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import catalog
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.data import features
from rank4class_tf.data import inputs as inputs_lib
from rank4class_tf.data import text
from rank4class_tf import distribute
from rank4class_tf import fileio
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import interactions
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.modeling import pretrained
from rank4class_tf.multilabel import label_attention
from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_guard

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
    serving_inputs: the raw instances the exports serve, when they differ
      from what training reads (a feature cache's values): default
      `instance_inputs`.
    padded_classes: class ids whose label entries are set to -1 (padding,
      ignored by every loss and metric) in training and validation: held-out
      classes, which zero-shot training must not see even as negatives.
  """

  def __init__(self, data: datasets.ClassificationData,
               instance_inputs: features.InstanceInputs, batch_size: int,
               seed: int, top_k: int, skip_batches: int = 0,
               serving_inputs: Optional[features.InstanceInputs] = None,
               padded_classes: Tuple[int, ...] = ()):
    self._padded = None
    if padded_classes:
      self._padded = tf.constant(np.isin(np.arange(data.num_classes),
                                         padded_classes))
    self._data = data
    self._inputs = instance_inputs
    self._serving_inputs = serving_inputs or instance_inputs
    self._batch_size = batch_size
    self._seed = seed
    self._top_k = top_k
    self._skip_batches = skip_batches

  def build_train_dataset(self) -> tf.data.Dataset:
    ds = datasets.ranking_dataset(self._data, "train", self._batch_size,
                                  training=True, seed=self._seed,
                                  instance_inputs=self._inputs)
    ds = self._pad(ds)
    return ds.skip(self._skip_batches) if self._skip_batches else ds

  def _pad(self, ds: tf.data.Dataset) -> tf.data.Dataset:
    """Marks the padded classes' label entries -1 (see `padded_classes`)."""
    if self._padded is None:
      return ds
    padded = self._padded
    return ds.map(lambda x, y: (x, tf.where(padded, -tf.ones_like(y), y)),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  @property
  def num_classes(self) -> int:
    return self._data.num_classes

  @property
  def serving_spec(self) -> tf.TensorSpec:
    """The raw instance the serving signature takes (checked per call)."""
    return self._serving_inputs.serving_spec()

  def build_valid_dataset(self) -> tf.data.Dataset:
    # Keras' validation computes metrics only: the split can be read in
    # the order that pads least (`length_sorted`, with length bucketing).
    return self._pad(datasets.ranking_dataset(
        self._data, "validation", self._batch_size, training=False,
        instance_inputs=self._inputs, length_sorted=True))

  def build_signatures(self, model: tf.keras.Model) -> Dict[str, Any]:
    """The serving signature (`serving.signatures`)."""
    return serving.signatures(model, self._serving_inputs,
                              self._data.class_names, self._top_k)


class BestCheckpoint(tf.keras.callbacks.ModelCheckpoint):
  """Saves the weights whenever a validation metric reaches a new maximum.

  The best value so far is also written (atomically) to `best.json` beside
  the checkpoints, and a resumed run starts from it, so a restart never
  mistakes its first validation for the best one. A resumed run whose
  `best.json` is missing or unreadable rebuilds the value from the run's
  validation logs (TensorBoard events), or stops naming the file.

  Args:
    directory: folder of the `ckpt-NNNN` checkpoints and `best.json`.
    monitor: Keras log key, e.g. `val_top1_accuracy`.
    resume_after: epochs the resumed run completed (0: a fresh run).
    model_dir: the run's folder, whose `validation/` events rebuild a lost
      `best.json`.
  """

  def __init__(self, directory: str, monitor: str, resume_after: int = 0,
               model_dir: str = ""):
    self._record = os.path.join(directory, run_dir_lib.BEST_RECORD)
    best = None
    if resume_after:
      best = read_best(self._record, monitor, model_dir, resume_after)
    super().__init__(os.path.join(directory,
                                  run_dir_lib.CHECKPOINT_PATTERN),
                     monitor=monitor, mode="max", save_weights_only=True,
                     save_best_only=True, initial_value_threshold=best)

  def on_epoch_end(self, epoch, logs=None):
    before = self.best
    super().on_epoch_end(epoch, logs)
    if self.best != before and self.model.distribute_strategy.extended \
        .should_checkpoint:
      fileio.write_json_atomically(self._record, {
          "epoch": epoch + 1, "monitor": self.monitor,
          "value": float(self.best)})


def read_best(path: str, monitor: str, model_dir: str,
              resume_after: int) -> float:
  """The best validation value of the epochs a resumed run completed.

  From `best.json`; when it is missing or unreadable, from the maximum of
  `monitor` over those epochs in the validation logs.

  Raises:
    ValueError: naming `path` when neither gives the value.
  """
  try:
    with tf.io.gfile.GFile(path) as f:
      return float(json.load(f)["value"])
  except (tf.errors.NotFoundError, ValueError, KeyError, TypeError):
    pass
  curve = run_dir_lib.RunDir(model_dir).validation_curves().get(
      monitor[len("val_"):], {})
  values = [v for epoch, v in curve.items() if epoch < resume_after]
  if not values:
    raise ValueError(f"{path} is missing or unreadable and the validation "
                     f"logs hold no {monitor} to rebuild it from; start "
                     "again with --overwrite.")
  logging.warning("%s was missing or unreadable: rebuilt from the "
                  "validation logs (best %s %g).", path, monitor, max(values))
  return max(values)


KERAS_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16",
                  "float16": "mixed_float16"}


@contextlib.contextmanager
def precision_policy(precision: str):
  """Keras' global dtype policy for `--mixed_precision` (float32,
  bfloat16, float16) inside the block, the previous one restored after.
  Models built inside compute in that dtype with float32 weights; the
  model's scores are cast to float32 (`model.Rank4ClassScorer`)."""
  policy = tf.keras.mixed_precision.global_policy()
  tf.keras.mixed_precision.set_global_policy(KERAS_POLICIES[precision])
  try:
    yield
  finally:
    tf.keras.mixed_precision.set_global_policy(policy)


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


class ResumeModelBuilder(tfr.keras.model.AbstractModelBuilder):
  """Builds the model so that its `fit` starts from a per-validation
  checkpoint (weights and optimizer state) at that checkpoint's epoch.

  For a run whose backup is unreadable: TF-Ranking's pipeline calls `fit`
  itself, and Keras' `BackupAndRestore` has nothing to restore.

  Args:
    model_builder: the model builder to wrap.
    checkpoint: `checkpoints/ckpt-NNNN`, written by `model.save_weights`.
    epoch: the epochs that checkpoint ends.
  """

  def __init__(self, model_builder: tfr.keras.model.AbstractModelBuilder,
               checkpoint: str, epoch: int):
    self._model_builder = model_builder
    self._checkpoint = checkpoint
    self._epoch = epoch

  def build(self) -> tf.keras.Model:
    model = self._model_builder.build()
    fit = model.fit
    def fit_from_checkpoint(*args, **kwargs):
      # Restores the weights now, and the optimizer's step count and slots
      # (created at the first step) when they are created: TensorFlow's
      # checkpoints defer the restore of objects that do not exist yet.
      model.load_weights(self._checkpoint).assert_existing_objects_matched()
      return fit(*args, initial_epoch=self._epoch, **kwargs)
    model.fit = fit_from_checkpoint
    return model


class Rank4ClassPipeline(tfr.keras.pipeline.ModelFitPipeline):
  """`ModelFitPipeline` with our losses, metrics, checkpoints and exports.

  With `--mixed_precision=bfloat16` or `float16` the model is built,
  trained and exported under the Keras `mixed_bfloat16` / `mixed_float16`
  policy (`precision_policy`; for float16 Keras wraps the optimizer in a
  `LossScaleOptimizer`); the previous global policy is restored afterwards.
  With `--jit_compile` the model is compiled with XLA.

  A run trained from a feature cache trains a model of the cached values;
  its exports are the same model over raw text (`serving_model_builder`,
  with the frozen encoder), given the trained weights
  (`model.copy_weights`). With `--export=false` nothing is exported
  (`export_run` does it later).
  """

  def __init__(self, model_builder, dataset_builder, hparams,
               config: config_lib.TrainConfig, strategy=None,
               start_epoch: int = 0,
               start_checkpoint: Optional[str] = None,
               serving_model_builder=None):
    if config.trainer.jit_compile:
      model_builder = XLAModelBuilder(model_builder)
    if start_checkpoint:
      model_builder = ResumeModelBuilder(model_builder, start_checkpoint,
                                         start_epoch)
    self._start_epoch = start_epoch
    self._serving_model_builder = serving_model_builder
    self._serving_model = None
    self._export = config.trainer.export
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
    with precision_policy(self._config.trainer.mixed_precision):
      return super().train_and_validate(verbose=verbose)

  def build_loss(self) -> tf.keras.losses.Loss:
    return losses.build(self._config.loss, self._dataset_builder.num_classes,
                        self._config.trainer.seed)

  def build_metrics(self) -> List[tf.keras.metrics.Metric]:
    return metrics.get_all(self._config.trainer.metrics)

  def build_weighted_metrics(self) -> List[tf.keras.metrics.Metric]:
    return []

  def build_callbacks(self) -> List[tf.keras.callbacks.Callback]:
    model_dir = self._hparams.model_dir
    run = run_dir_lib.RunDir(model_dir)
    monitor = "val_" + metrics.keras_name(self._config.trainer.best_metric)
    loss = self._config.loss
    schedule = []
    if loss.contrastive_weight > 0:
      # MulCon's two steps: the loss alone, then loss + gamma * LLCL.
      schedule = [label_attention.ContrastiveSchedule(
          loss.contrastive_start_step // self._config.trainer.eval_every,
          loss.contrastive_weight, loss.contrastive_learning_rate)]
    steps = self._config.trainer.eval_every
    # First: a non-finite loss must stop the epoch before any callback below
    # saves its weights.
    guards = [run_guard.StopOnNonFinite(steps), run_guard.StopOnSignal(steps)]
    return guards + schedule + [
        tf.keras.callbacks.TensorBoard(model_dir),
        tf.keras.callbacks.ModelCheckpoint(
            os.path.join(run.checkpoints, run_dir_lib.CHECKPOINT_PATTERN),
            save_weights_only=True),
        # TF-Ranking's pipeline names this folder and exports from it.
        BestCheckpoint(run.best_checkpoints, monitor,
                       resume_after=self._start_epoch,
                       model_dir=model_dir),
        # Restores model, optimizer and epoch after a crash or preemption;
        # `resume_epoch` reads the same backup to realign the data. Last, so
        # that a backup of epoch e implies that epoch e's checkpoints and
        # best.json are written: a kill between them would otherwise resume
        # without the best value so far and pick a worse best checkpoint.
        # Kept after training (`delete_checkpoint=False`): `train` deletes
        # it once both exports are written, so a crash during the exports
        # is finished by a rerun without training again.
        tf.keras.callbacks.BackupAndRestore(
            backup_dir=run.backup,
            delete_checkpoint=False),
    ]

  def export_only(self, final_checkpoint: str, force: bool = False) -> None:
    """Writes both exports of a run whose training finished, from its final
    and best checkpoints, without training (a run whose exports were
    interrupted and whose backup is gone). With `--export=false`, nothing
    unless `force` (`export_run`)."""
    self._export = self._export or force
    with tfr.keras.strategy_utils.strategy_scope(self._strategy), \
        precision_policy(self._config.trainer.mixed_precision):
      model = self._model_builder.build()
      run = run_dir_lib.RunDir(self._hparams.model_dir)
      self.export_saved_model(
          model, run.export(run_dir_lib.LATEST_EXPORT),
          checkpoint=final_checkpoint)
      best = run.best_checkpoint()
      if not best:
        raise ValueError(f"{run.best_checkpoints} holds no checkpoint; "
                         "start again with --overwrite.")
      self.export_saved_model(
          model, run.export(run_dir_lib.BEST_EXPORT), checkpoint=best)

  def export_saved_model(self, model: tf.keras.Model, export_to: str,
                         checkpoint: Optional[str] = None):
    """Exports through `serving` (a temporary folder renamed into place)."""
    if not self._export:
      return
    if checkpoint:
      model.load_weights(checkpoint).expect_partial()
    if self._serving_model_builder is not None:
      # Built once per run: the frozen encoder's weights never change.
      if self._serving_model is None:
        self._serving_model = self._serving_model_builder.build()
      model_lib.copy_weights(model, self._serving_model)
      model = self._serving_model
    serving.store_class_features(model)
    serving.export_saved_model(
        model, export_to, self._dataset_builder.build_signatures(model))


def vocab_file(config: config_lib.ModelConfig) -> str:
  """The run's WordPiece vocabulary (see `ModelConfig.vocab_file`)."""
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
                ) -> features.InstanceInputs:
  """Raw numeric inputs, or in-graph tokenization for text datasets."""
  if not data.is_text:
    return inputs_lib.default_inputs(data)
  preprocessor = text.TextPreprocessor(
      vocab_file(config.model), seq_length=config.model.max_seq_length)
  return inputs_lib.TextInputs(
      data.instance_key, data.instance_shape, preprocessor,
      length_bucketing=config.trainer.length_bucketing)


def build_pipeline(config: config_lib.TrainConfig,
                   data: datasets.ClassificationData,
                   strategy=None,
                   start_checkpoint: Optional[Tuple[str, int]] = None
                  ) -> Rank4ClassPipeline:
  """Maps the config onto TF-Ranking's model builder, data and hparams.

  `strategy` (from `make_strategy`) must be created before any TensorFlow
  op for multi-worker runs; None trains on the default device.
  """
  model, loss, trainer = config.model, config.loss, config.trainer
  # Where training starts: Keras' backup, or a per-validation checkpoint
  # when the backup was unreadable (`recover_backup`).
  # An --overwrite run starts afresh whatever the folder holds.
  checkpoint, start_epoch = start_checkpoint or (
      None, 0 if trainer.overwrite else
      run_dir_lib.RunDir(trainer.model_dir).resume_epoch())
  instance_inputs = build_inputs(config, data)
  model_kwargs = dict(
      encoder=model.encoder,
      encoder_kwargs=encoders.config_kwargs(model),
      interaction=model.interaction,
      mlp_units=model.mlp_units,
      label_dim=model.label_dim,
      label_heads=model.label_heads,
      projection_dim=model.projection_dim,
      contrastive_temperature=(loss.contrastive_temperature
                               if loss.contrastive_weight > 0 else None),
      contrastive_weight=(loss.contrastive_weight
                          if loss.contrastive_start_step == 0 else 0.0),
      contrastive_normalization=loss.contrastive_normalization,
      contrastive_base_temperature=loss.contrastive_base_temperature,
      class_encoder=model.class_encoder,
      class_tower=model.class_tower)
  texts = None
  if model.class_encoder == "text":
    texts = class_encoders.class_texts(data.class_names,
                                       model.class_descriptions)
  model_builder = model_lib.build_model_builder(
      data, instance_inputs=instance_inputs, class_texts=texts,
      **model_kwargs)
  train_data, train_inputs, serving_builder = data, instance_inputs, None
  if uses_feature_cache(config):
    cache = feature_cache.load(feature_cache_dir(config), cache_spec(config),
                               data, length_bucketing=trainer.length_bucketing)
    train_data, train_inputs = cache.data, cache.inputs
    serving_builder = model_builder  # The same model over raw text.
    model_builder = model_lib.build_model_builder(
        cache.data, instance_inputs=cache.inputs,
        encoder_fn=lambda: encoders.CachedFeatures(model.dropout,
                                                   name="encoder"),
        class_texts=texts,
        class_features=(None if texts is None else
                        frozen_class_features(config, instance_inputs,
                                              texts)),
        **model_kwargs)
  held_out = ()
  if config.data.holdout_classes:
    # Zero-shot training: the held-out classes' instances never reach a
    # training batch or the validation that picks the best checkpoint, and
    # the classes themselves are padding in every list there (not
    # negatives: a model trained to push them down learns their absence).
    held_out = class_encoders.holdout_ids(config.data.holdout_classes,
                                          data.class_names)
    train_data = class_encoders.without_classes(train_data, held_out)
  dataset_builder = Rank4ClassDatasetBuilder(
      train_data, train_inputs, trainer.batch_size, trainer.seed,
      trainer.top_k, skip_batches=start_epoch * trainer.eval_every,
      serving_inputs=instance_inputs, padded_classes=held_out)
  num_epochs = trainer.train_steps // trainer.eval_every  # Exact.
  hparams = tfr.keras.pipeline.PipelineHparams(
      model_dir=trainer.model_dir,
      num_epochs=num_epochs,
      steps_per_epoch=trainer.eval_every,
      validation_steps=None,
      learning_rate=trainer.learning_rate,
      # TF-Ranking's name where it has the loss (`tfr.keras.losses.get`
      # takes it), else ours.
      loss=config_lib.TFR_LOSS_NAMES.get(loss.name, loss.name),
      optimizer=trainer.optimizer,
      steps_per_execution=min(10, trainer.eval_every),
      export_best_model=True,
      best_exporter_metric_higher_better=True,
      best_exporter_metric=metrics.keras_name(trainer.best_metric),
      strategy=distribute.TFR_STRATEGIES[trainer.strategy],
      cluster_resolver=distribute.cluster_resolver(trainer.strategy,
                                                   trainer.tpu),
      tpu=trainer.tpu)
  return Rank4ClassPipeline(model_builder, dataset_builder, hparams, config,
                            strategy, start_epoch, checkpoint,
                            serving_model_builder=serving_builder)


def frozen_class_features(config: config_lib.TrainConfig,
                          instance_inputs: features.InstanceInputs,
                          texts) -> np.ndarray:
  """The frozen text tower's outputs on the class texts, [num_classes,
  hidden_size]: what a text class encoder trained from a feature cache
  projects (the instances' outputs come from the cache; the class texts are
  few, so they are encoded here, once per build)."""
  kwargs = dict(encoders.config_kwargs(config.model), sequence=False)
  tower = encoders.get(config.model.encoder, layer_name="class_tower",
                       **kwargs)
  inputs = class_encoders.tokenize(instance_inputs.preprocessor, texts)
  outputs = [tower.pooled_features(
      {name: value[i:i + 256] for name, value in inputs.items()},
      training=False).numpy() for i in range(0, len(texts), 256)]
  return np.concatenate(outputs).astype(np.float32)


def uses_feature_cache(config: config_lib.TrainConfig) -> bool:
  """Whether a run trains from a feature cache (--freeze_encoder with
  --feature_cache)."""
  return config.model.freeze_encoder and config.trainer.feature_cache


def feature_cache_dir(config: config_lib.TrainConfig) -> str:
  """--feature_cache_dir, by default `<model_dir>/feature_cache`."""
  return (config.trainer.feature_cache_dir or
          run_dir_lib.RunDir(config.trainer.model_dir).feature_cache)


def cache_spec(config: config_lib.TrainConfig) -> feature_cache.CacheSpec:
  """The frozen encoder of a run, as `feature_cache` keys it."""
  model = config.model
  kwargs = encoders.config_kwargs(model)
  return feature_cache.CacheSpec(
      encoder=model.encoder, encoder_size=model.encoder_size,
      init_checkpoint=model.init_checkpoint, vocab_file=vocab_file(model),
      pooling=kwargs["pooling"], max_seq_length=model.max_seq_length,
      sequence=model.interaction in interactions.SEQUENCE_INTERACTIONS)


def resolve_defaults(config: config_lib.TrainConfig
                    ) -> config_lib.TrainConfig:
  """The config with the defaults that depend on other settings filled in,
  so that config.json records what the run used: a text encoder's pooling
  (`encoders.default_pooling`); `length_bucketing` false for a dataset that
  is not text (it has no lengths)."""
  model = config.model
  if model.encoder in encoders.TEXT_ENCODERS and not model.pooling:
    config = config.replace(pooling=encoders.default_pooling(
        model.encoder, model.init_checkpoint))
  if (config.trainer.length_bucketing and
      config.data.dataset not in catalog.TEXT_DATASETS):
    config = config.replace(length_bucketing=False)
  return config


def train(config: config_lib.TrainConfig, verbose: int = 0) -> str:
  """Trains, checkpoints and exports one run; returns the best export's path.

  The config, the data, the batch size (against the training split and the
  memory, `checks.check_batch_size`) and model_dir (a folder that can be
  written and holds nothing a run did not write, `run_guard.
  check_model_dir`) are checked before anything is written: each refusal
  is a one-line ValueError that leaves model_dir untouched. A finished run
  started again with more `train_steps` goes on from its final checkpoint
  (`extension_start`); otherwise a model_dir that already holds both
  exports is refused unless `overwrite`, which removes the old run's own
  files only. A full disk or lost permission mid-run is a one-line
  ValueError naming the file too, and leaves no half-written checkpoint. A
  run interrupted mid-training (a backup in
  model_dir/backup) resumes from its last completed validation, with the
  data stream realigned, when started again with the same config. The
  backup is deleted only once both exports are written: a run interrupted
  during its exports trains no step when started again and writes the
  missing export (from the final checkpoint if the backup is gone).
  """
  trainer = config.trainer
  distribute.configure_devices(trainer.cpu_devices)  # Before any TF op.
  checks.validate(config)
  config = resolve_defaults(config)
  run_guard.check_model_dir(trainer.model_dir, trainer.overwrite)
  # Also before any op: a multi-worker strategy's collectives.
  strategy = distribute.get_strategy(trainer.strategy, trainer.tpu)
  if trainer.deterministic:
    tf.config.experimental.enable_op_determinism()
  data = load_data(config)
  checks.check_files(config, data)
  model_dir = trainer.model_dir
  run = run_dir_lib.RunDir(model_dir)
  chief = distribute.is_chief(strategy)
  if chief and not trainer.overwrite:
    # `--overwrite` replaces the run there, readable or not.
    run_guard.check_identity(model_dir, previous_config(model_dir),
                             config.flat(), trainer.overwrite)
  extend_from = None
  if run.has_exports() and not trainer.overwrite:
    extend_from = extension_start(config)
    if extend_from is None:
      raise ValueError(f"--model_dir={model_dir} already holds an "
                       "export; pass --overwrite to replace it.")
  tf.keras.utils.set_random_seed(trainer.seed)
  pipeline = build_pipeline(config, data, strategy)  # Reads vocab, ckpts.
  replicas = distribute.num_replicas(strategy)
  if trainer.batch_size % replicas:
    raise ValueError(f"--batch_size={trainer.batch_size} must be a multiple "
                     f"of the {replicas} replicas of --strategy="
                     f"{trainer.strategy}.")
  # Everything is checked: from here on the run writes into model_dir.
  with run_guard.RunLock(model_dir) if chief else contextlib.nullcontext():
    if chief and trainer.overwrite:
      run_guard.clear_state(model_dir)
    elif chief and extend_from:
      # A finished run given more steps: it goes on from its final
      # checkpoint (weights and optimizer state), the data stream
      # realigned, as one uninterrupted run of the new length would.
      logging.info("Extending the finished run from %s (epoch %d) to %d "
                   "steps.", extend_from[0], extend_from[1],
                   trainer.train_steps)
      pipeline = build_pipeline(config, data, strategy, extend_from)
    elif chief:
      start = run_guard.recover_backup(model_dir)
      if start:
        pipeline = build_pipeline(config, data, strategy, start)
    logging.info(
        "Strategy %s: %d replica(s); global batch %d = %d per replica; "
        "learning rate %g (not scaled with the replicas); resuming after "
        "epoch %d.", trainer.strategy, replicas, trainer.batch_size,
        trainer.batch_size // replicas, trainer.learning_rate,
        pipeline._start_epoch)  # pylint: disable=protected-access
    try:
      _train_and_export(config, data, pipeline, strategy, verbose)
    except run_guard.Diverged as e:
      done = run.resume_epoch() * trainer.eval_every
      kept = (f"backup/ and checkpoints/ hold the weights of step {done}, "
              "the last validation" if done else
              "no validation had passed, so no checkpoint was written")
      raise ValueError(
          f"training diverged: non-finite loss ({e.value}) by step "
          f"{e.step}; no export written; {kept}. Start again with a lower "
          "--learning_rate and --overwrite.") from None
    except run_guard.Terminated as e:
      done = run.resume_epoch() * trainer.eval_every
      raise ValueError(
          f"stopped by SIGTERM at step {e.step}; the backup of step {done} "
          "(the last validation) resumes the run: start the same command "
          "again.") from None
    except OSError as e:
      raise ValueError(
          f"cannot write {e.filename or model_dir}: "
          f"{e.strerror or e}; the checkpoints and exports written before "
          "are intact.") from None
    except tf.errors.OpError as e:
      # A full disk or a lost permission inside a TensorFlow op (SaveV2 of
      # a checkpoint, the events writer), or memory exhausted: one line.
      # Anything else is a defect and keeps its traceback.
      first = (e.message or str(e)).strip().splitlines()[0]
      if not (isinstance(e, (tf.errors.ResourceExhaustedError,
                             tf.errors.PermissionDeniedError)) or
              "No space left" in first or "Read-only file system" in first):
        raise
      first = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", first)
      _remove_partial_checkpoints(model_dir)
      raise ValueError(
          f"training stopped in {model_dir}: {type(e).__name__}: {first}; "
          "the checkpoints and exports written before are intact.") from None
  if not chief:
    # TF-Ranking writes a non-chief worker's copies under workertemp_<id>.
    scratch = run.worker_scratch(strategy.cluster_resolver.task_id)
    if tf.io.gfile.exists(scratch):
      tf.io.gfile.rmtree(scratch)
  return run.export(run_dir_lib.BEST_EXPORT)


def _remove_partial_checkpoints(model_dir: str) -> None:
  """Removes the `<checkpoint>_temp` folders a failed TensorFlow save
  leaves (a full disk mid-`SaveV2`): half-written, never loadable."""
  run = run_dir_lib.RunDir(model_dir)
  for folder in (run.checkpoints, run.best_checkpoints, run.chief_backup):
    for path in tf.io.gfile.glob(os.path.join(folder, "*_temp*")):
      if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)


def _train_and_export(config: config_lib.TrainConfig, data,
                      pipeline: Rank4ClassPipeline, strategy,
                      verbose: int) -> None:
  """Writes the run files, trains (or resumes) and exports; the chief
  deletes the backup once both exports are written."""
  trainer = config.trainer
  model_dir = trainer.model_dir
  chief = distribute.is_chief(strategy)
  if chief:
    serving.remove_stale_exports(model_dir)
    serving.write_run_files(
        model_dir, config, data.class_names,
        pipeline._dataset_builder.serving_spec)  # pylint: disable=protected-access
  final = None if trainer.overwrite else final_checkpoint(config)
  num_epochs = trainer.train_steps // trainer.eval_every
  run = run_dir_lib.RunDir(model_dir)
  if final and run.resume_epoch() in (0, num_epochs):
    # Training finished but its exports did not (killed during them): the
    # final checkpoint is exported, whether the backup is gone or holds the
    # last epoch (a `fit` of no epoch would restore the backup without the
    # optimizer slots a step creates, and TensorFlow warns about each).
    logging.info("Training finished before; exporting from %s.", final)
    pipeline.export_only(final)
  else:
    pipeline.train_and_validate(verbose=verbose)
  if chief and run.has_backup():
    tf.io.gfile.rmtree(run.backup)  # Both exports are written.


def previous_config(model_dir: str) -> Optional[Dict[str, Any]]:
  """The flat config of the run already in model_dir (None: no run).

  Raises:
    ValueError: naming config.json when it cannot be read.
  """
  if not tf.io.gfile.exists(run_dir_lib.RunDir(model_dir).config_file):
    return None
  try:
    return serving.load_config(model_dir).flat()
  except ValueError as e:  # `load_config`'s line, which names the file.
    raise ValueError(f"{str(e).rstrip('.')}; pass --overwrite to start the "
                     "run afresh.") from None


def extension_start(config: config_lib.TrainConfig
                   ) -> Optional[Tuple[str, int]]:
  """(final checkpoint, its epoch) of the finished run in config's
  model_dir when `config` gives it more steps than it trained (the same
  settings otherwise, `run_guard.check_identity`): training goes on from
  there. None: not a finished run, or not more steps."""
  model_dir, trainer = config.trainer.model_dir, config.trainer
  run = run_dir_lib.RunDir(model_dir)
  old = previous_config(model_dir)
  if not old or run.has_backup():
    return None
  old_steps = int(old.get("train_steps", 0))
  if not 0 < old_steps < trainer.train_steps or old_steps % trainer.eval_every:
    return None
  epoch = old_steps // trainer.eval_every
  return (run.checkpoint(epoch), epoch) if run.has_checkpoint(epoch) else None


def final_checkpoint(config: config_lib.TrainConfig) -> Optional[str]:
  """The per-validation checkpoint of a run's last epoch, if it exists."""
  trainer = config.trainer
  run = run_dir_lib.RunDir(trainer.model_dir)
  epoch = trainer.train_steps // trainer.eval_every
  return run.checkpoint(epoch) if run.has_checkpoint(epoch) else None


def load_data(config: config_lib.TrainConfig) -> datasets.ClassificationData:
  """The run's dataset (`datasets.from_config`)."""
  return datasets.from_config(config.data)


def is_trained(config: config_lib.TrainConfig) -> bool:
  """Whether the run of `config` finished: its exports are written, or with
  `--export=false` its last checkpoint is and its backup is gone."""
  run = run_dir_lib.RunDir(config.trainer.model_dir)
  if config.trainer.export:
    # The exports, and the checkpoint of config's last step: a finished
    # run given more steps (`extension_start`) is not trained yet.
    return run.has_export_folders() and bool(final_checkpoint(config))
  return bool(final_checkpoint(config)) and not run.has_backup()


def checkpoint_scores(config: config_lib.TrainConfig,
                      data: datasets.ClassificationData,
                      splits: Tuple[str, ...] = ("validation", "test"),
                      checkpoint: Optional[str] = None
                     ) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
  """Labels and scores of a run's checkpoint on splits, without an export.

  The model is the one training built (from the feature cache for a run
  that trained from one, so a frozen run is scored in seconds); scores
  equal the export's up to float rounding (a test checks it).

  Args:
    config: the run's config (as in its config.json).
    data: its dataset.
    splits: the splits to score.
    checkpoint: weights to load; default the best checkpoint.

  Returns:
    {split: (labels [n] or [n, num_classes], scores [n, num_classes])}.

  Raises:
    ValueError: the run has no best checkpoint.
  """
  run = run_dir_lib.RunDir(config.trainer.model_dir)
  checkpoint = checkpoint or run.best_checkpoint()
  if not checkpoint:
    raise ValueError(f"{run.best_checkpoints} holds no checkpoint.")
  pipeline = build_pipeline(resolve_defaults(config), data)
  # pylint: disable=protected-access
  builder = pipeline._dataset_builder
  model = pipeline._model_builder.build()
  model.load_weights(checkpoint).expect_partial()
  results = {}
  for split in splits:
    ds = datasets.ranking_dataset(builder._data, split,
                                  config.trainer.batch_size, training=False,
                                  instance_inputs=builder._inputs)
    scores = model.predict(ds.map(lambda features, _: features), verbose=0)
    if isinstance(scores, dict):
      scores = scores["scores"]
    # The labels of the split as scored: held-out classes' instances are
    # not in a zero-shot run's validation split.
    results[split] = (np.asarray(builder._data.splits[split][1]),
                      np.asarray(scores, np.float32))
  return results


def export_run(model_dir: str) -> Tuple[str, str]:
  """Writes the SavedModels of a finished run that has none
  (`--export=false`), from its final and best checkpoints.

  Returns:
    The paths of the latest and best exports.

  Raises:
    ValueError: naming model_dir when the run is unfinished or already
      exported.
  """
  config = serving.load_config(model_dir)
  config = config.replace(model_dir=model_dir)
  run = run_dir_lib.RunDir(model_dir)
  final = final_checkpoint(config)
  if not final or run.has_backup():
    raise ValueError(f"--model_dir={model_dir} holds no finished run (its "
                     "last checkpoint is missing or its backup remains); "
                     "finish its training first.")
  if run.has_exports():
    raise ValueError(f"--model_dir={model_dir} already holds an export.")
  checks.validate(config)
  data = load_data(config)
  pipeline = build_pipeline(config, data)
  with run_guard.RunLock(model_dir):
    pipeline.export_only(final, force=True)
  return run.export(run_dir_lib.LATEST_EXPORT), run.export(
      run_dir_lib.BEST_EXPORT)
