"""The run folder: every path of a run's model_dir, and what they say.

A run of `pipelines.train` (`training.trainer.train`) writes one folder,
its model_dir; this module is the only place that names what is in it:

  config.json                  the resolved TrainConfig: the run's identity
  classes.json                 the class names, in class-id order
  data.json                    what the run trained on: the data's files'
                               fingerprints, classes, split sizes
                               (`data.identity`)
  serving.json                 what the exports take (instance key, shape)
  train/, validation/          TensorBoard events (loss and every metric)
  checkpoints/ckpt-NNNN        weights after validation NNNN (1-based epoch)
  best_checkpoint/ckpt-NNNN    weights of the best validation `best_metric`
  best_checkpoint/best.json    that validation: epoch, monitor, value
  backup/                      Keras' BackupAndRestore of an unfinished run
  export/best_model_by_metric  SavedModel of the best checkpoint
  export/latest_model          SavedModel of the last step
  export/.tmp-*                an export being written (renamed when whole)
  .lock                        held while a process trains the run
  log.txt                      every start's log (`pipelines.train`)
  feature_cache/               a frozen encoder's outputs (default place)

`RunDir(model_dir)` gives each path and reads the small facts the rest of
the package asks of a run: its best validation, the epoch a backup resumes,
whether its last checkpoint and exports exist, its validation curves.
Training, serving, the guards (`training.run_guard`) and the study use it;
no other module spells these names.
"""

import os
from typing import Dict, List, Optional

import tensorflow as tf

from rank4class_tf import fileio

CONFIG_FILE = "config.json"
CLASSES_FILE = "classes.json"
DATA_FILE = "data.json"
SERVING_FILE = "serving.json"
TRAIN_EVENTS = "train"
VALIDATION_EVENTS = "validation"
CHECKPOINTS = "checkpoints"
BEST_CHECKPOINT = "best_checkpoint"
BEST_RECORD = "best.json"
BACKUP = "backup"
EXPORT = "export"
BEST_EXPORT = "best_model_by_metric"
LATEST_EXPORT = "latest_model"
EXPORTS = (BEST_EXPORT, LATEST_EXPORT)
EXPORT_TMP_PREFIX = ".tmp-"  # An export being written: export/.tmp-XXXX.
# In each export folder: its calibration and the validation metrics before
# and after it (`saved_model.calibrate_on`).
CALIBRATION_FILE = "calibration.json"
# The best export's reliability diagram (`pipelines.calibrate`).
RELIABILITY_DIAGRAM = "reliability.png"
LOCK_FILE = ".lock"
LOG_FILE = "log.txt"
FEATURE_CACHE = "feature_cache"
# A run's state, removed by `--overwrite` (log.txt, the log of every start,
# is kept).
STATE = (BACKUP, CHECKPOINTS, BEST_CHECKPOINT, EXPORT, TRAIN_EVENTS,
         VALIDATION_EVENTS, CONFIG_FILE, CLASSES_FILE, SERVING_FILE,
         DATA_FILE)
# What a run of this package writes into its model_dir, besides `STATE`:
# top-level names (glob patterns), and for each folder `--overwrite` removes,
# the names it may hold (Keras' backup folders below `backup/` are Keras');
# `run_guard.foreign_entries` refuses to delete anything else.
OWN_FILES = (LOCK_FILE, LOG_FILE, FEATURE_CACHE, BACKUP + ".unreadable",
             "workertemp_*", ".*.tmp-*", "*.tmp",
             # The study's files in a run folder (`study.runner`).
             "study.log", "study_result.json", "study_test.npz", "*.damaged",
             "*.damaged.*", "events.out.tfevents.*")
OWN_CONTENTS = {
    TRAIN_EVENTS: ("events.out.tfevents.*", "plugins"),
    VALIDATION_EVENTS: ("events.out.tfevents.*", "plugins"),
    CHECKPOINTS: ("checkpoint", "ckpt-*", ".*.tmp-*", "*.tmp"),
    BEST_CHECKPOINT: ("checkpoint", "ckpt-*", BEST_RECORD, ".*.tmp-*",
                      "*.tmp"),
    EXPORT: (BEST_EXPORT, LATEST_EXPORT, EXPORT_TMP_PREFIX + "*"),
    BACKUP: ("chief", "worker*"),
}
# Keras' BackupAndRestore writes the chief's backup here.
_CHIEF_BACKUP = "chief"
# The epoch Keras' BackupAndRestore saves with its backup.
_SAVED_EPOCH = "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"


CHECKPOINT_PATTERN = "ckpt-{epoch:04d}"  # For Keras' ModelCheckpoint.


def checkpoint_name(epoch: int) -> str:
  """`ckpt-0003`: the checkpoint of a (1-based) epoch, as Keras names it
  from `CHECKPOINT_PATTERN`."""
  return CHECKPOINT_PATTERN.format(epoch=epoch)


def checkpoint_reader(prefix: str):
  """`tf.train.load_checkpoint` of a checkpoint prefix (`.../ckpt-0003`),
  on any file system: its reader (`get_tensor`,
  `get_variable_to_shape_map`).

  Elsewhere than on a local disk the reader is opened on the prefix
  itself: `load_checkpoint` first asks whether the prefix is a folder (to
  find the newest checkpoint in it), and TensorFlow's in-memory `ram://`
  says yes to any path that its files' names start with (`ckpt-0003.index`).

  Raises:
    ValueError, tf.errors.OpError: the checkpoint cannot be opened.
  """
  if fileio.is_local(prefix):
    return tf.train.load_checkpoint(prefix)
  return tf.compat.v1.train.NewCheckpointReader(prefix)


class RunDir:
  """The paths and facts of one run folder (see the module doc).

  >>> run = RunDir("/tmp/run")
  >>> run.checkpoint(3), run.export(BEST_EXPORT)
  ('/tmp/run/checkpoints/ckpt-0003', '/tmp/run/export/best_model_by_metric')
  """

  def __init__(self, path: str):
    self.path = path

  def __repr__(self) -> str:
    return f"RunDir({self.path!r})"

  def join(self, *names: str) -> str:
    return os.path.join(self.path, *names)

  # Files.
  @property
  def config_file(self) -> str:
    return self.join(CONFIG_FILE)

  @property
  def classes_file(self) -> str:
    return self.join(CLASSES_FILE)

  @property
  def data_file(self) -> str:
    return self.join(DATA_FILE)

  @property
  def serving_file(self) -> str:
    return self.join(SERVING_FILE)

  @property
  def lock_file(self) -> str:
    return self.join(LOCK_FILE)

  @property
  def log_file(self) -> str:
    return self.join(LOG_FILE)

  @property
  def best_record(self) -> str:
    return self.join(BEST_CHECKPOINT, BEST_RECORD)

  # Folders.
  @property
  def validation_events(self) -> str:
    return self.join(VALIDATION_EVENTS)

  @property
  def checkpoints(self) -> str:
    return self.join(CHECKPOINTS)

  @property
  def best_checkpoints(self) -> str:
    return self.join(BEST_CHECKPOINT)

  @property
  def backup(self) -> str:
    return self.join(BACKUP)

  @property
  def chief_backup(self) -> str:
    return self.join(BACKUP, _CHIEF_BACKUP)

  @property
  def unreadable_backup(self) -> str:
    """Where `run_guard.recover_backup` moves a backup it cannot read."""
    return self.join(BACKUP + ".unreadable")

  @property
  def exports(self) -> str:
    return self.join(EXPORT)

  @property
  def feature_cache(self) -> str:
    return self.join(FEATURE_CACHE)

  def worker_scratch(self, task_id: int) -> str:
    """Where TF-Ranking writes a non-chief worker's copies
    (`strategy_utils.get_output_filepath`)."""
    return self.join(f"workertemp_{task_id}")

  def export(self, name: str) -> str:
    """`export/<name>`: BEST_EXPORT or LATEST_EXPORT."""
    return self.join(EXPORT, name)

  def calibration_file(self, export: str) -> str:
    """`export/<export>/calibration.json`."""
    return self.join(EXPORT, export, CALIBRATION_FILE)

  @property
  def reliability_diagram(self) -> str:
    return self.join(RELIABILITY_DIAGRAM)

  def checkpoint(self, epoch: int) -> str:
    """The per-validation checkpoint of a (1-based) epoch."""
    return self.join(CHECKPOINTS, checkpoint_name(epoch))

  # Facts.
  def checkpoint_epochs(self) -> List[int]:
    """The epochs of the per-validation checkpoints written, ascending."""
    pattern = os.path.join(self.checkpoints, "ckpt-*.index")
    epochs = []
    for index in tf.io.gfile.glob(pattern):
      number = os.path.basename(index)[len("ckpt-"):-len(".index")]
      if number.isdigit():
        epochs.append(int(number))
    return sorted(epochs)

  def prune_checkpoints(self, keep: int) -> List[str]:
    """Deletes all but the `keep` newest per-validation checkpoints and all
    but the best one of `best_checkpoint/` (`--keep_checkpoints`).

    A checkpoint's files (`ckpt-0003.index`, `.data-*`) go together, its
    index last, so a deletion cut short leaves either a whole checkpoint
    or data files no reader lists. The state file `checkpoint` is kept.

    Args:
      keep: per-validation checkpoints to keep, >= 1.

    Returns:
      The prefixes deleted.
    """
    if keep < 1:
      raise ValueError(f"`keep_checkpoints`={keep} must be >= 1 to prune.")
    epochs = self.checkpoint_epochs()
    doomed = [self.checkpoint(e) for e in epochs[:-keep]]
    best = self.best_checkpoint()
    if best:
      prefixes = [index[:-len(".index")] for index in sorted(
          tf.io.gfile.glob(os.path.join(self.best_checkpoints,
                                        "ckpt-*.index")))]
      doomed += [prefix for prefix in prefixes if prefix != best]
    for prefix in doomed:
      for path in sorted(tf.io.gfile.glob(prefix + ".data-*")):
        fileio.remove(path)
      fileio.remove(prefix + ".index")
    return doomed

  def has_checkpoint(self, epoch: int) -> bool:
    return fileio.exists(self.checkpoint(epoch) + ".index")

  def has_backup(self) -> bool:
    return fileio.exists(self.backup)

  def has_exports(self) -> bool:
    """Whether both SavedModels are written."""
    return all(fileio.exists(os.path.join(self.export(name),
                                          "saved_model.pb"))
               for name in EXPORTS)

  def has_export_folders(self) -> bool:
    """Whether both export folders exist (written whole: renamed into
    place)."""
    return all(fileio.exists(self.export(name)) for name in EXPORTS)

  def best_checkpoint(self) -> Optional[str]:
    """The best validation's checkpoint (None: no validation yet)."""
    return tf.train.latest_checkpoint(self.best_checkpoints)

  def best(self) -> Optional[Dict[str, object]]:
    """`best.json`: {"epoch", "monitor", "value"}, None if absent.

    Raises:
      ValueError, KeyError, TypeError: it cannot be read (the caller names
        the file and decides).
    """
    if not fileio.exists(self.best_record):
      return None
    return fileio.read_json(self.best_record)

  def best_step(self, eval_every: int) -> Optional[int]:
    """The training step of the best validation (None: none recorded)."""
    best = self.best()
    return None if best is None else int(best["epoch"]) * eval_every

  def resume_epoch(self) -> int:
    """Epochs an interrupted run completed (0 if none): the epoch Keras'
    `BackupAndRestore` saved with its last backup (0 when that backup
    cannot be read: `run_guard.recover_backup` handles it)."""
    backup = tf.train.latest_checkpoint(self.chief_backup)
    if not backup:
      return 0
    try:
      saved = checkpoint_reader(backup).get_tensor(_SAVED_EPOCH)
    except (tf.errors.OpError, ValueError, IndexError):
      return 0
    return max(int(saved) + 1, 0)

  def validation_curves(self) -> Dict[str, Dict[int, float]]:
    """{metric Keras name: {epoch (0-based): value}} of the validations.

    Read from Keras' TensorBoard events (`validation/`, `epoch_<name>` once
    per epoch); a resumed run may write an epoch twice, the later value
    wins.
    """
    curves: Dict[str, Dict[int, float]] = {}
    pattern = os.path.join(self.validation_events, "events.*")
    for path in sorted(tf.io.gfile.glob(pattern)):
      for raw in tf.data.TFRecordDataset(path):
        event = tf.compat.v1.Event.FromString(raw.numpy())
        for value in event.summary.value:
          if value.tag.startswith("epoch_"):
            number = float(tf.make_ndarray(value.tensor))
            curves.setdefault(value.tag[len("epoch_"):], {})[event.step] = (
                number)
    return curves
