"""The callbacks of a run's training that Keras does not have.

`BestCheckpoint` keeps the weights of the best validation and a record of
it (`best.json`) that a resumed run starts from; `EarlyStopping` is Keras'
(`--patience`) resumed from that record; `run_guard` holds the callbacks
that stop a run (a non-finite loss, SIGTERM).
"""

import json
import os
from typing import Tuple

from absl import logging
import tensorflow as tf

from rank4class_tf import fileio
from rank4class_tf import run_dir as run_dir_lib


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


class PruneCheckpoints(tf.keras.callbacks.Callback):
  """After each validation's checkpoints are written, deletes the older
  ones (`RunDir.prune_checkpoints`): `--keep_checkpoints` (0: none is
  deleted). Placed after Keras' `ModelCheckpoint` and `BestCheckpoint`,
  before the backup."""

  def __init__(self, model_dir: str, keep: int):
    super().__init__()
    self._run = run_dir_lib.RunDir(model_dir)
    self._keep = keep

  def on_epoch_end(self, epoch, logs=None):
    del epoch, logs  # Unused.
    if self._keep and self.model.distribute_strategy.extended \
        .should_checkpoint:
      self._run.prune_checkpoints(self._keep)


def read_best(path: str, monitor: str, model_dir: str,
              resume_after: int) -> float:
  """The best validation value of the epochs a resumed run completed
  (`read_best_record`'s value)."""
  return read_best_record(path, monitor, model_dir, resume_after)[1]


def read_best_record(path: str, monitor: str, model_dir: str,
                     resume_after: int) -> Tuple[int, float]:
  """(epoch, value) of the best validation of the epochs a resumed run
  completed (the epoch 1-based, as `best.json` holds it).

  From `best.json`; when it is missing or unreadable, from the first maximum
  of `monitor` over those epochs in the validation logs.

  Raises:
    ValueError: naming `path` when neither gives the value.
  """
  try:
    with tf.io.gfile.GFile(path) as f:
      record = json.load(f)
    return int(record["epoch"]), float(record["value"])
  except (tf.errors.NotFoundError, ValueError, KeyError, TypeError):
    pass
  curve = run_dir_lib.RunDir(model_dir).validation_curves().get(
      monitor[len("val_"):], {})
  values = sorted((epoch, v) for epoch, v in curve.items()
                  if epoch < resume_after)
  if not values:
    raise ValueError(f"{path} is missing or unreadable and the validation "
                     f"logs hold no {monitor} to rebuild it from: the run "
                     "cannot be resumed; `overwrite` deletes it and trains "
                     "afresh.")
  best = max(v for _, v in values)
  epoch = next(e for e, v in values if v == best) + 1
  logging.warning("%s was missing or unreadable: rebuilt from the "
                  "validation logs (best %s %g).", path, monitor, best)
  return epoch, best


class EarlyStopping(tf.keras.callbacks.EarlyStopping):
  """Keras' `EarlyStopping` (`--patience`), resumed where the run stood.

  Training stops once `monitor` has not improved for `patience`
  validations: after the validation `patience` epochs after the best one.
  Better is `BestCheckpoint`'s notion (higher, by any amount: mode max,
  `min_delta` 0), so the best the stop counts from is the one `best.json`
  records. Subclassed because Keras' resets its best value and its count of
  validations without improvement (`wait`) when training begins: a resumed
  or extended run would wait `patience` validations afresh from its
  restart, and stop later than the same run uninterrupted. Here a run that
  resumes after `resume_after` epochs starts from its record
  (`read_best_record`):
  best = the recorded value, wait = `resume_after` - the best's epoch.

  Args:
    directory: folder of `best.json` (the best checkpoint's).
    monitor: Keras log key, e.g. `val_top1_accuracy`.
    patience: validations without improvement that stop training, >= 1.
    steps_per_epoch: steps between validations (for the log line).
    resume_after: epochs the resumed run completed (0: a fresh run).
    model_dir: the run's folder, whose `validation/` events rebuild a lost
      `best.json`.
  """

  def __init__(self, directory: str, monitor: str, patience: int,
               steps_per_epoch: int, resume_after: int = 0,
               model_dir: str = ""):
    super().__init__(monitor=monitor, patience=patience, mode="max",
                     min_delta=0)
    self._steps = steps_per_epoch
    self._resume_after = resume_after
    self._recorded = None
    if resume_after:
      self._recorded = read_best_record(
          os.path.join(directory, run_dir_lib.BEST_RECORD), monitor,
          model_dir, resume_after)

  def on_train_begin(self, logs=None):
    super().on_train_begin(logs)
    if self._recorded is not None:
      epoch, self.best = self._recorded
      self.best_epoch = epoch - 1  # Keras counts epochs from 0.
      self.wait = self._resume_after - epoch

  def on_train_end(self, logs=None):
    if self.stopped_epoch:
      logging.info(
          "Stopped at step %d: %s has not improved for %d validations since "
          "its best, %g at step %d (`patience`=%d).",
          (self.stopped_epoch + 1) * self._steps, self.monitor, self.wait,
          self.best, (self.best_epoch + 1) * self._steps, self.patience)
