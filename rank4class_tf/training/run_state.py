"""What a run's folder says about its training: the config it ran with
(`previous_config`), the epoch and checkpoint where its training ended
(`final_epoch`, `final_checkpoint`), whether it converged (`converged`) or
finished (`is_trained`), and where an extension of it starts
(`extension_start`). Reads only; `trainer.py` trains and exports the run.
"""

from typing import Any, Dict, Optional, Tuple

import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import callbacks as callbacks_lib


def previous_config(model_dir: str) -> Optional[Dict[str, Any]]:
  """The flat config of the run already in model_dir (None: no run).

  Raises:
    ValueError: naming config.json when it cannot be read.
  """
  if not fileio.exists(run_dir_lib.RunDir(model_dir).config_file):
    return None
  try:
    return exported_ranker.load_config(model_dir).flat()
  except ValueError as e:  # `load_config`'s line, which names the file.
    raise ValueError(f"{str(e).rstrip('.')}; restore it to resume or keep "
                     "the run, or pass `overwrite` to delete the run and "
                     "start afresh.") from None


def extension_start(config: config_lib.TrainConfig
                   ) -> Optional[Tuple[str, int]]:
  """(checkpoint, its epoch) from which the finished run in config's
  model_dir goes on when `config` gives it more steps than it trained (the
  same settings otherwise, `run_guard.check_identity`): its final
  checkpoint; or, for an extension killed before its first backup
  (config.json already holds `config`'s steps, its exports the shorter
  run's), its newest checkpoint. None: not a finished run, or not more
  steps."""
  model_dir, trainer = config.trainer.model_dir, config.trainer
  run = run_dir_lib.RunDir(model_dir)
  old = previous_config(model_dir)
  if not old or run.has_backup() or final_epoch(config):
    # No run, an unfinished one, or one whose training under `config` has
    # ended (stopped by `patience`, or at its last step).
    return None
  old_steps = int(old.get("train_steps", 0))
  epochs = trainer.train_steps // trainer.eval_every
  if (old_steps == trainer.train_steps and run.has_exports() and
      not run.has_checkpoint(epochs)):
    earlier = [e for e in run.checkpoint_epochs() if e < epochs]
    return (run.checkpoint(earlier[-1]), earlier[-1]) if earlier else None
  if not 0 < old_steps < trainer.train_steps or old_steps % trainer.eval_every:
    return None
  epoch = old_steps // trainer.eval_every
  return (run.checkpoint(epoch), epoch) if run.has_checkpoint(epoch) else None


def final_checkpoint(config: config_lib.TrainConfig) -> Optional[str]:
  """The per-validation checkpoint where the run's training ended
  (`final_epoch`), if it did."""
  end = final_epoch(config)
  return run_dir_lib.RunDir(config.trainer.model_dir).checkpoint(
      end) if end else None


def final_epoch(config: config_lib.TrainConfig) -> Optional[int]:
  """The epoch where the run's training ended, None while it has not: its
  last (`train_steps`), or with `patience`, its newest checkpoint's when
  that is `patience` or more validations after its best (the run stopped
  there, `converged`; never past `train_steps`)."""
  trainer = config.trainer
  run = run_dir_lib.RunDir(trainer.model_dir)
  epochs = trainer.train_steps // trainer.eval_every
  if trainer.patience:
    trained = run.checkpoint_epochs()
    if trained and trained[-1] <= epochs:
      best = _best_epoch(config, trained[-1])
      if best is not None and trained[-1] - best >= trainer.patience:
        return trained[-1]
  return epochs if run.has_checkpoint(epochs) else None


def _best_epoch(config: config_lib.TrainConfig, trained: int
               ) -> Optional[int]:
  """The best validation's epoch among the first `trained` (best.json, or
  rebuilt from the validation logs); None when neither tells."""
  run = run_dir_lib.RunDir(config.trainer.model_dir)
  monitor = "val_" + metrics.keras_name(config.trainer.best_metric)
  try:
    return callbacks_lib.read_best_record(run.best_record, monitor, run.path,
                                          trained)[0]
  except (ValueError, OSError, tf.errors.OpError):
    return None


def converged(config: config_lib.TrainConfig) -> Optional[bool]:
  """Whether the finished run of `config` converged: its best validation is
  followed by at least `patience` validations (it stopped there, or at its
  last step just as it would have). None without `patience` (the rule is
  off); False for a run whose training has not ended.

  >>> converged(config_lib.TrainConfig.create(model_dir="/nowhere"))
  """
  trainer = config.trainer
  if not trainer.patience:
    return None
  end = final_epoch(config)
  if not end:
    return False
  best = _best_epoch(config, end)
  return best is not None and end - best >= trainer.patience


def is_trained(config: config_lib.TrainConfig) -> bool:
  """Whether the run of `config` finished: its exports are written, or with
  `--export=false` its last checkpoint is and its backup is gone.

  An export folder is whole once it exists on a local disk (renamed into
  place); elsewhere (`gs://`) it is copied into place file by file, so
  there the backup, deleted once both exports are written, must be gone
  too."""
  model_dir = config.trainer.model_dir
  run = run_dir_lib.RunDir(model_dir)
  if config.trainer.export:
    # The exports, and the checkpoint of config's last step: a finished
    # run given more steps (`extension_start`) is not trained yet.
    return (run.has_export_folders() and bool(final_checkpoint(config)) and
            (fileio.is_local(model_dir) or not run.has_backup()))
  return bool(final_checkpoint(config)) and not run.has_backup()
