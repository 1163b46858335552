"""TF-Ranking's Keras pipeline for a Rank4Class run.

Training goes through TF-Ranking's Keras pipeline
(`tfr.keras.pipeline.ModelFitPipeline`): model, optimizer, loss and metrics
are built once inside the strategy scope (`distribute`), then `model.fit`
runs with TensorBoard and backup-and-restore. `Rank4ClassPipeline` extends it
where it falls short for classification:

* losses and metrics come from our name lookups (TF-Ranking's
  `SimplePipeline` takes a single loss key and names metrics itself);
* the best checkpoint is chosen by a validation metric named like ours, and
  a checkpoint of every validation is kept under `checkpoints/`;
* its `train_and_validate` is TF-Ranking's compile and fit with the run's
  precision policy, XLA and a start from a checkpoint;
* exports go through `serving` (raw-input signatures, atomic writes).

`Rank4ClassDatasetBuilder` gives it the run's tf.data pipelines and serving
signatures. What the run writes, and where, is `run_dir`'s.
"""

import contextlib
import dataclasses
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import config as config_lib
from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import features
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.modeling import precision
from rank4class_tf.modeling import stateless_dropout
from rank4class_tf.multilabel import mulcon
from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import saved_model
from rank4class_tf.training import callbacks as callbacks_lib
from rank4class_tf.training import run_guard
from rank4class_tf.training import schedules


def build_optimizer(model: tf.keras.Model) -> None:
  """Creates the compiled optimizer's variables (step count, slots) for the
  model's trainable weights, before `fit`.

  Keras creates them in the first training step, and a `tf.function` that
  creates variables on its first call is traced twice (the trace that
  creates them is run once, then traced again without), so the training
  step was built twice: half a second of a 60-step digits run (8.2 s
  against 8.8 s). Created here, with the same initial values, it is traced
  once. Values a checkpoint restored before (`start_checkpoint`) are
  assigned as the slots are created, as in the first step.
  """
  optimizer = model.optimizer
  if hasattr(optimizer, "_create_all_weights"):
    # Keras 2's OptimizerV2 (`tf.keras.optimizers.legacy`), mixed
    # precision's LossScaleOptimizer around one included: no public call
    # makes the slots.
    optimizer._create_all_weights(model.trainable_variables)  # pylint: disable=protected-access
  elif hasattr(optimizer, "build"):
    optimizer.build(model.trainable_variables)


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

  def __init__(self, data: contract.ClassificationData,
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
    self._scores_fn = None  # (model, its `saved_model.scoring_function`).

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
  def data(self) -> contract.ClassificationData:
    """The data set the run trains on (a feature cache's, a zero-shot
    run's without its held-out classes)."""
    return self._data

  @property
  def instance_inputs(self) -> features.InstanceInputs:
    """How the training data's raw instances become context features."""
    return self._inputs

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

  def build_signatures(self, model: tf.keras.Model,
                       calibration=None) -> Dict[str, Any]:
    """The serving signature (`saved_model.signatures`), with `probabilities`
    when a calibration is given. The exports of one model (a run's final
    and best) share one trace of its scores (`saved_model.scoring_function`)."""
    if self._scores_fn is None or self._scores_fn[0] is not model:
      self._scores_fn = (model, saved_model.scoring_function(
          model, self._serving_inputs, self._data.num_classes))
    return saved_model.signatures(model, self._serving_inputs,
                              self._data.class_names, self._top_k,
                              calibration, scores_fn=self._scores_fn[1])


KERAS_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16",
                  "float16": "mixed_float16"}


def build_model(model_builder, trainer: config_lib.TrainerConfig
               ) -> tf.keras.Model:
  """`model_builder`'s model under the run's precision (inside
  `precision_policy`): with a mixed precision and `float32_layers`, its
  numerically sensitive layers in float32 (`precision.keep_float32`)."""
  model = model_builder.build()
  if trainer.mixed_precision != "float32" and trainer.float32_layers:
    precision.keep_float32(model)
  return model


@contextlib.contextmanager
def precision_policy(precision: str):
  """Keras' global dtype policy for `--mixed_precision` (float32,
  bfloat16, float16) inside the block, the previous one restored after.
  Models built inside compute in that dtype with float32 weights; the
  model's scores are cast to float32 (`model.Rank4ClassScorer`)."""
  if precision not in KERAS_POLICIES:
    raise ValueError(f"`mixed_precision`={precision!r}: resolve it first "
                     "(`builders.resolve_defaults`).")
  policy = tf.keras.mixed_precision.global_policy()
  tf.keras.mixed_precision.set_global_policy(KERAS_POLICIES[precision])
  try:
    yield
  finally:
    tf.keras.mixed_precision.set_global_policy(policy)


class Rank4ClassPipeline(tfr.keras.pipeline.ModelFitPipeline):
  """`ModelFitPipeline` with our losses, metrics, checkpoints and exports.

  With `--mixed_precision=bfloat16` or `float16` the model is built,
  trained and exported under the Keras `mixed_bfloat16` / `mixed_float16`
  policy (`precision_policy`; for float16 Keras wraps the optimizer in a
  `LossScaleOptimizer`), its numerically sensitive layers in float32 with
  `--float32_layers` (`build_model`); the previous global policy is
  restored afterwards.
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
    # TF-Ranking's constructor checks the builders and keeps them and the
    # hparams. The strategy is not its to make: a MultiWorkerMirroredStrategy
    # must exist before any TensorFlow op runs, and a second one cannot be
    # made in the process, so `train` makes it first from the same settings
    # (`distribute.get_strategy`, the hparams' `strategy`, `cluster_resolver`
    # and `tpu`) and hands it in; the optimizer is then built in its scope.
    super().__init__(model_builder, dataset_builder,
                     dataclasses.replace(hparams, strategy=None,
                                         cluster_resolver=None))
    self._hparams = hparams
    self._strategy = strategy
    with tfr.keras.strategy_utils.strategy_scope(strategy):
      # `--learning_rate` itself, or the Model Garden's schedule of
      # `--lr_schedule` / `--warmup_steps` (`schedules`).
      self._optimizer = tf.keras.optimizers.get({
          "class_name": hparams.optimizer,
          "config": {"learning_rate": schedules.learning_rate(
              config.trainer)}})
    self._config = config
    self._start_epoch = start_epoch
    self._start_checkpoint = start_checkpoint
    self._serving_model_builder = serving_model_builder
    self._serving_model = None
    self._export = config.trainer.export
    # {weights digest: the export written of those weights}: the best
    # export of a run whose best checkpoint is its final one is a copy.
    self._exported: Dict[str, str] = {}
    # Weights digest -> their calibration (`_calibrated`).
    self._calibrations: Dict[str, Tuple[Any, Dict[str, Any]]] = {}

  @property
  def start_epoch(self) -> int:
    """The epochs done before this training starts (a resumed run's)."""
    return self._start_epoch

  @property
  def model_builder(self) -> tfr.keras.model.AbstractModelBuilder:
    return self._model_builder

  @property
  def dataset_builder(self) -> "Rank4ClassDatasetBuilder":
    return self._dataset_builder

  def train_and_validate(self, verbose: int = 0) -> None:
    """TF-Ranking's compile, fit and exports, with the run's precision
    policy, XLA (`--jit_compile`) and a start from a per-validation
    checkpoint (`start_checkpoint`: weights and optimizer state, for a run
    whose backup was unreadable or that is extended)."""
    hparams = self._hparams
    run = run_dir_lib.RunDir(hparams.model_dir)
    with precision_policy(self._config.trainer.mixed_precision), \
        tfr.keras.strategy_utils.strategy_scope(self._strategy):
      model = build_model(self._model_builder, self._config.trainer)
      xla = {"jit_compile": True} if self._config.trainer.jit_compile else {}
      model.compile(
          optimizer=self._optimizer, loss=self.build_loss(),
          metrics=self.build_metrics(), loss_weights=hparams.loss_weights,
          weighted_metrics=(self.build_weighted_metrics()
                            if hparams.use_weighted_metrics else None),
          steps_per_execution=hparams.steps_per_execution, **xla)
      initial_epoch = 0
      if self._start_checkpoint:
        # The weights now; the optimizer's step count and slots (created at
        # the first step) when they are created: TensorFlow's checkpoints
        # defer the restore of objects that do not exist yet. A checkpoint
        # of a run trained before the dropout step counters has none.
        stateless_dropout.restore(model, self._start_checkpoint)
        initial_epoch = self._start_epoch
      build_optimizer(model)
      model.fit(
          x=self._dataset_builder.build_train_dataset(),
          epochs=hparams.num_epochs, steps_per_epoch=hparams.steps_per_epoch,
          validation_steps=hparams.validation_steps,
          validation_data=self._dataset_builder.build_valid_dataset(),
          callbacks=self.build_callbacks(), verbose=verbose,
          initial_epoch=initial_epoch)
      output = tfr.keras.strategy_utils.get_output_filepath(
          hparams.model_dir, self._strategy)
      output_run = run_dir_lib.RunDir(output)
      self.export_saved_model(
          model, output_run.export(run_dir_lib.LATEST_EXPORT))
      best = run.best_checkpoint()
      if not best:
        raise ValueError(f"{run.best_checkpoints} holds no checkpoint.")
      self.export_saved_model(
          model, output_run.export(run_dir_lib.BEST_EXPORT), checkpoint=best)

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
      schedule = [mulcon.ContrastiveSchedule(
          loss.contrastive_start_step // self._config.trainer.eval_every,
          loss.contrastive_weight, loss.contrastive_learning_rate)]
    steps = self._config.trainer.eval_every
    # First: a non-finite loss must stop the epoch before any callback below
    # saves its weights.
    guards = [run_guard.StopOnNonFinite(steps), run_guard.StopOnSignal(steps)]
    stop = []
    if self._config.trainer.patience:
      # `--patience`: after the best checkpoint and its record, which the
      # stop counts from; before the backup, which then holds the last epoch.
      stop = [callbacks_lib.EarlyStopping(
          run.best_checkpoints, monitor, self._config.trainer.patience,
          steps, resume_after=self._start_epoch, model_dir=model_dir)]
    return guards + schedule + [
        tf.keras.callbacks.TensorBoard(model_dir),
        tf.keras.callbacks.ModelCheckpoint(
            os.path.join(run.checkpoints, run_dir_lib.CHECKPOINT_PATTERN),
            save_weights_only=True),
        # TF-Ranking's pipeline names this folder and exports from it.
        callbacks_lib.BestCheckpoint(run.best_checkpoints, monitor,
                       resume_after=self._start_epoch,
                       model_dir=model_dir),
        callbacks_lib.PruneCheckpoints(
            model_dir, self._config.trainer.keep_checkpoints),
    ] + stop + [
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

  def export_only(self, final_checkpoint: str, force: bool = False,
                  calibrated: bool = False,
                  before_writing: Optional[Callable[[], None]] = None
                 ) -> None:
    """Writes both exports of a run whose training finished, from its final
    and best checkpoints, without training (a run whose exports were
    interrupted and whose backup is gone). With `--export=false`, nothing
    unless `force` (`export_run`).

    Everything is checked before the first export is written: the best
    checkpoint exists and, with `calibrated` (`trainer.recalibrate`), both
    checkpoints' calibrations fit (finite scores); then `before_writing()`
    is called, and the exports are written.

    Raises:
      ValueError: no best checkpoint; with `calibrated`, naming the export
        whose scores are not finite. Nothing is written.
    """
    self._export = self._export or force
    run = run_dir_lib.RunDir(self._hparams.model_dir)
    best = run.best_checkpoint()
    if not best:
      raise ValueError(f"{run.best_checkpoints} holds no checkpoint: the "
                       "run cannot be exported; `overwrite` deletes it and "
                       "trains afresh.")
    plan = ((run.export(run_dir_lib.LATEST_EXPORT), final_checkpoint),
            (run.export(run_dir_lib.BEST_EXPORT), best))
    with tfr.keras.strategy_utils.strategy_scope(self._strategy), \
        precision_policy(self._config.trainer.mixed_precision):
      model = build_model(self._model_builder, self._config.trainer)
      if calibrated and self._export:
        for export_to, checkpoint in plan:
          calibration, record = self._calibrated(model, checkpoint)
          if calibration is None:
            raise ValueError(
                f"{export_to}: no calibration "
                f"({record['reason'].rstrip('.')}); nothing was written.")
      if before_writing is not None:
        before_writing()
      for export_to, checkpoint in plan:
        self.export_saved_model(model, export_to, checkpoint=checkpoint)

  def _calibrated(self, model: tf.keras.Model, checkpoint: Optional[str]):
    """(calibration, record) of `model` with `checkpoint`'s weights, fitted
    on the validation split once per weights (`saved_model.calibrate_on`)."""
    if checkpoint:
      stateless_dropout.restore(model, checkpoint,
                                rebuild=self._model_builder.build)
    digest = model_lib.weights_digest(model)
    if digest not in self._calibrations:
      # Calibrated on the validation split by the model that trained (a
      # frozen run's reads the cached features), before its weights go to
      # the serving model.
      self._calibrations[digest] = saved_model.calibrate_on(
          model, self._dataset_builder.build_valid_dataset())
    return self._calibrations[digest]

  def export_saved_model(self, model: tf.keras.Model, export_to: str,
                         checkpoint: Optional[str] = None):
    """Exports through `serving` (a temporary folder renamed into place)."""
    if not self._export:
      return
    if checkpoint:
      stateless_dropout.restore(model, checkpoint,
                                rebuild=self._model_builder.build)
    digest = model_lib.weights_digest(model)
    if digest in self._exported:
      # The same weights as an export written above: the same SavedModel.
      saved_model.export_saved_model(model, export_to, None,
                                 copy_of=self._exported[digest])
      logging.info("%s: a copy of %s (the same weights).", export_to,
                   self._exported[digest])
      return
    calibration, record = self._calibrated(model, None)
    if self._serving_model_builder is not None:
      # Built once per run: the frozen encoder's weights never change.
      if self._serving_model is None:
        self._serving_model = build_model(self._serving_model_builder,
                                          self._config.trainer)
      model_lib.copy_weights(model, self._serving_model)
      model = self._serving_model
    saved_model.store_class_features(model)
    saved_model.export_saved_model(
        model, export_to,
        self._dataset_builder.build_signatures(model, calibration), record)
    self._exported[digest] = export_to
