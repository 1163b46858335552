"""What keeps a run's folder trustworthy: identity, exclusivity, stops.

* **Identity.** The resolved config in `config.json` is the identity of a
  run. A run started into a model_dir whose config differs in a setting
  that changes the model, the data or the optimisation stops before touching
  anything, naming the differing flags (`check_identity`), unless
  `--overwrite`, which removes the old run's state first (`clear_state`).
  Settings that only extend or observe a run may differ (`MAY_DIFFER`). The
  run's own settings never need `--overwrite`: they resume an unfinished
  run and leave a finished one as it is (`trainer.already_finished`).
  `patience` is part of a run's identity: it decides where the run stops,
  so its last checkpoint, its latest export and whether it `converged`;
  a run stopped under one patience cannot be told finished under another
  without replaying its validations. Under a decaying `lr_schedule`
  (linear, cosine) `train_steps` is too: the rate of every step depends on
  it, so other steps would continue another run's schedule. A config.json
  written before these settings existed reads as patience 0 and a constant
  rate (their defaults, the behaviour of that time), so old runs resume as
  they did.
  Settings added later whose legacy value differs from today's default
  (`float32_layers`, `split_rule`, `length_bucketing`) are compared only
  where they change the run (`effective`): a float32 digits run trained
  before them resumes under its own flags.
* **Exclusivity.** One training per model_dir at a time (`RunLock`): an
  advisory `fcntl` lock on `model_dir/.lock`, which the kernel releases when
  the process ends however it ends, so a crashed run never leaves a stale
  lock behind. A model_dir on another file system (`gs://`, `hdfs://`,
  `ram://`) cannot be locked: there the study's claims give each run one
  writer, and a standalone training has no guard against a second one
  started into the same model_dir (docs/distributed.md, "Storage").
* **Stops.** A non-finite training loss stops the run at that step
  (`StopOnNonFinite` raises `Diverged`) before any export or checkpoint of
  non-finite weights; SIGTERM, what schedulers send before they kill, stops
  it at the next step (`StopOnSignal` raises `Terminated`). Both leave the
  backup of the last validation, which a restart resumes.

Keras' own `TerminateOnNaN` stops `fit` quietly, after which TF-Ranking's
pipeline exports the diverged model; these callbacks raise instead.
"""

import errno
import fcntl
import fnmatch
import math
import os
import signal
from typing import Any, Dict, List, Optional, Tuple

from absl import logging
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf import fileio
from rank4class_tf import run_dir as run_dir_lib

# Flags that may differ between the runs that write one model_dir: they
# extend a run (`train_steps`: resuming an unfinished run with more or fewer
# steps, or a finished one with more), change only its serving output
# (`top_k`) or how it is started. A finished run is finished only for its
# own `train_steps` and `top_k` (`trainer.already_finished`).
MAY_DIFFER = ("model_dir", "overwrite", "train_steps", "top_k",
              "keep_checkpoints")
# Of those, the flags that only say how a run is started.
STARTED_BY = ("model_dir", "overwrite")

def effective(flat: Dict[str, Any]) -> Dict[str, Any]:
  """`flat` with each setting that changes nothing in this run at one
  value, so that runs and studies begun before it compare equal to today's:
  `length_bucketing` outside text data sets (False), `split_rule` outside a
  user's `text_files` (None: only their streamed cut changed) and
  `float32_layers` under float32 (False: it keeps layers in float32 under a
  mixed precision only).

  >>> effective({"dataset": "digits", "split_rule": "by_format"})
  {'dataset': 'digits', 'split_rule': None}
  """
  flat = dict(flat)
  if "length_bucketing" in flat:
    flat["length_bucketing"] = (bool(flat["length_bucketing"]) and
                                flat.get("dataset") in catalog.TEXT_DATASETS)
  if "split_rule" in flat and flat.get("dataset") != "text_files":
    flat["split_rule"] = None
  if ("float32_layers" in flat and
      flat.get("mixed_precision", "float32") == "float32"):
    flat["float32_layers"] = False
  return flat


def differences(old: Dict[str, Any], new: Dict[str, Any],
                may_differ: Tuple[str, ...] = MAY_DIFFER) -> List[str]:
  """`--flag=new (was old)` for each setting outside `may_differ` that
  differs between two flat configs, in flag order; settings that change
  nothing in these runs compare equal (`effective`).

  >>> differences({"loss": "softmax", "train_steps": 20},
  ...             {"loss": "approx_ndcg", "train_steps": 40})
  ["`loss`='approx_ndcg' (was 'softmax')"]
  >>> differences({"train_steps": 20}, {"train_steps": 40}, may_differ=())
  ['`train_steps`=40 (was 20)']
  """
  out = []
  old, new = effective(old), effective(new)
  for flag, value in new.items():
    if flag in may_differ or flag not in old:
      continue
    was = old[flag]
    if isinstance(value, tuple):
      was = tuple(was) if isinstance(was, list) else was
    if was != value:
      out.append(f"`{flag}`={_show(value)} (was {_show(was)})")
  return out


def _show(value: Any) -> str:
  if isinstance(value, tuple):
    return ",".join(str(v) for v in value)
  return repr(value) if isinstance(value, str) else str(value)


def check_identity(model_dir: str, old: Optional[Dict[str, Any]],
                   new: Dict[str, Any], overwrite: bool) -> None:
  """Refuses to continue a run under other settings (see module doc).

  Args:
    model_dir: the run's folder.
    old: the flat config of the run already there (None: none).
    new: the flat config of the run starting.
    overwrite: the run starts afresh, so any difference is fine.

  Raises:
    ValueError: one line naming every differing flag and both values.
  """
  if old is None or overwrite:
    return
  may_differ, why = MAY_DIFFER, ""
  schedule = new.get("lr_schedule", "constant")
  if schedule != "constant":
    may_differ = tuple(f for f in MAY_DIFFER if f != "train_steps")
    why = (f" (`lr_schedule`={schedule} decays to `train_steps`: other "
           "steps would change the rate of the steps trained)")
  diff = differences(old, new, may_differ)
  if diff:
    why = why if any(d.startswith("`train_steps`=") for d in diff) else ""
    raise ValueError(
        f"`model_dir`={model_dir} holds a run with other settings: "
        f"{'; '.join(diff)}{why}. Its own flags resume it (or, finished, "
        "leave it as it is); `overwrite` deletes it and starts afresh under "
        "these.")


def _matches(name: str, patterns) -> bool:
  return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def foreign_entries(model_dir: str) -> List[str]:
  """The files and folders in `model_dir` that no run of this package
  writes (paths relative to it, sorted): what `--overwrite` must never
  delete. Looks one level into the folders `clear_state` removes; one of
  their names held by a file (a `train` that is no folder) is foreign.

  >>> import tempfile
  >>> folder = tempfile.mkdtemp()
  >>> os.makedirs(os.path.join(folder, "train"))
  >>> for name in ("log.txt", "train/events.out.tfevents.1.host",
  ...              "train/data.csv", "notes.txt"):
  ...   open(os.path.join(folder, name), "w").close()
  >>> foreign_entries(folder)
  ['notes.txt', 'train/data.csv']
  """
  if not (fileio.exists(model_dir) and fileio.isdir(model_dir)):
    return []
  foreign = []
  for name in sorted(fileio.listdir(model_dir)):
    path = os.path.join(model_dir, name)
    if name in run_dir_lib.OWN_CONTENTS:
      if fileio.isdir(path):
        foreign += [os.path.join(name, inner)
                    for inner in sorted(fileio.listdir(path))
                    if not _matches(inner, run_dir_lib.OWN_CONTENTS[name])]
      else:
        foreign.append(name)
    elif name not in run_dir_lib.STATE and not _matches(
        name, run_dir_lib.OWN_FILES):
      foreign.append(name)
  return foreign


def _check_local(model_dir: str, flag: str) -> None:
  """`check_model_dir`'s checks of a local folder: not a file, on a
  writable file system, with permission to write."""
  if os.path.exists(model_dir) and not os.path.isdir(model_dir):
    raise ValueError(f"{flag} is a file, not a folder.")
  existing = os.path.abspath(model_dir)
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise ValueError(f"{flag} lies under {existing}, which is a file.")
  if os.statvfs(existing).f_flag & os.ST_RDONLY:
    raise ValueError(f"{flag} cannot be written: {existing} is on a "
                     "read-only file system.")
  if not os.access(existing, os.W_OK | os.X_OK):
    raise ValueError(f"{flag} cannot be written: permission denied on "
                     f"{existing}.")


def _check_remote(model_dir: str, flag: str) -> None:
  """`check_model_dir`'s checks of a folder on another file system
  (`gs://`, `ram://`): TensorFlow has that file system and reaches the
  folder, which is not a file. Whether it can be written shows at the
  first write (a bucket's permissions are not known before)."""
  try:
    if fileio.exists(model_dir) and not fileio.isdir(model_dir):
      raise ValueError(f"{flag} is a file, not a folder.")
  except tf.errors.OpError as e:
    # No such file system (`s3://` without its plugin), no network, no
    # credentials: TensorFlow's first line.
    first = (e.message or str(e)).strip().splitlines()[0]
    raise ValueError(f"{flag} cannot be reached: {first}") from None


def check_model_dir(model_dir: str, overwrite: bool) -> None:
  """Checks that a run can write `model_dir` and would lose nothing there.
  Writes nothing.

  A folder holding files no run wrote (`foreign_entries`) is refused when
  it has no `config.json` (it is not a run's folder: a run would mix its
  files with the user's, and a later `--overwrite` would have to delete
  around them), and, with `overwrite`, also when it has one: `--overwrite`
  removes a run's own files (`clear_state`) and never anything else.

  A local folder is also checked for writing (permissions, a read-only
  file system); one elsewhere (`gs://`) for being reachable (its file
  system known to TensorFlow, the network, credentials), its permissions
  showing at the first write.

  Raises:
    ValueError: one line naming --model_dir: it is a file or lies under
      one, cannot be written or reached, or holds files no run wrote (the
      first five named).
  """
  flag = f"`model_dir`={model_dir}"
  if not fileio.is_local(model_dir):
    _check_remote(model_dir, flag)
  else:
    _check_local(model_dir, flag)
  foreign = foreign_entries(model_dir)
  if not foreign:
    return
  shown = ", ".join(foreign[:5]) + (
      f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
  if not fileio.exists(run_dir_lib.RunDir(model_dir).config_file):
    raise ValueError(
        f"{flag} holds files no run of rank4class_tf wrote ({shown}) and no "
        "run's config.json: it is not a run's folder; choose an empty or new "
        "`model_dir`.")
  if overwrite:
    raise ValueError(
        f"{flag} holds files no run of rank4class_tf wrote ({shown}); "
        "`overwrite` removes a run's own files only: move them, or choose "
        "another `model_dir`.")


def clear_state(model_dir: str) -> None:
  """Removes every file of the run in `model_dir` (`STATE`), so that an
  `--overwrite` run never mixes with the old one. `check_model_dir` has
  made sure that these hold nothing a run did not write."""
  for name in run_dir_lib.STATE:
    path = os.path.join(model_dir, name)
    if not fileio.exists(path):
      continue
    if fileio.isdir(path):
      fileio.rmtree(path)
    else:
      fileio.remove(path)


class RunInUse(ValueError):
  """Another live process holds a model_dir's lock.

  Attributes:
    model_dir: the folder.
    pid: the holder's process id as it wrote it ("?" if unreadable).
  """

  def __init__(self, model_dir: str, pid: str, lock_path: str):
    super().__init__(
        f"`model_dir`={model_dir} is in use by another training (pid {pid}, "
        f"{lock_path}); wait for it to end or pass another `model_dir`.")
    self.model_dir, self.pid, self.lock_path = model_dir, pid, lock_path


class RunLock:
  """Holds `model_dir/.lock` while a training writes into model_dir.

  Raises `RunInUse` (a ValueError: one line, naming the holder's pid) when
  another live process holds it. The kernel drops the lock with its process,
  so the file a killed run leaves behind does not block the next start.

  A model_dir that is not local (`gs://`, `hdfs://`, `ram://`) is not
  locked: `fcntl` locks only local (and NFS) files, a bucket has no lock
  and no exclusive create, and a lock file there would outlive a killed
  run. No `.lock` is written and one INFO line says so. The study's claims
  (one worker per run) keep its runs to one writer each; two standalone
  trainings started into the same model_dir there would both write it (the
  last checkpoint, best.json and export written win).
  """

  def __init__(self, model_dir: str):
    self._model_dir = model_dir
    self._path = run_dir_lib.RunDir(model_dir).lock_file
    self._fd = None

  def __enter__(self) -> "RunLock":
    if not fileio.is_local(self._path):
      logging.info("`model_dir`=%s is not on a local file system: not "
                   "locked (no guard against a second training started "
                   "into it meanwhile).", self._model_dir)
      return self
    os.makedirs(os.path.dirname(self._path), exist_ok=True)
    fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
      os.close(fd)
      if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
        raise RunInUse(os.path.dirname(self._path), holder,
                       self._path) from None
      raise
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    self._fd = fd
    return self

  def __exit__(self, *exc) -> None:
    if self._fd is not None:
      os.remove(self._path)
      os.close(self._fd)  # Releases the lock.
      self._fd = None


class Diverged(Exception):
  """The training loss became non-finite."""

  def __init__(self, step: int, value: float):
    super().__init__(f"loss {value} at step {step}")
    self.step, self.value = step, value


class Terminated(Exception):
  """The process received SIGTERM."""

  def __init__(self, step: int):
    super().__init__(f"SIGTERM at step {step}")
    self.step = step


class _StepCallback(tf.keras.callbacks.Callback):
  """Knows the optimizer step at the end of each training batch."""

  def __init__(self, steps_per_epoch: int):
    super().__init__()
    self._steps_per_epoch = steps_per_epoch
    self._epoch = 0

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch

  def step(self, batch: int) -> int:
    return self._epoch * self._steps_per_epoch + batch + 1


class StopOnNonFinite(_StepCallback):
  """Raises `Diverged` when the training loss is NaN or Inf.

  Checked where Keras reports it: after every `steps_per_execution` steps,
  and on the epoch's logs before any checkpoint callback (this callback
  comes first) writes the epoch's weights.
  """

  def on_train_batch_end(self, batch, logs=None):
    loss = (logs or {}).get("loss")
    if loss is not None and not math.isfinite(float(loss)):
      raise Diverged(self.step(batch), float(loss))

  def on_epoch_end(self, epoch, logs=None):
    for key in ("loss", "val_loss"):
      value = (logs or {}).get(key)
      if value is not None and not math.isfinite(float(value)):
        raise Diverged((epoch + 1) * self._steps_per_epoch, float(value))


class StopOnSignal(_StepCallback):
  """Raises `Terminated` at the first step after SIGTERM.

  Installs its handler for the duration of `fit` (main thread only); the
  previous handler is restored afterwards.
  """

  def __init__(self, steps_per_epoch: int):
    super().__init__(steps_per_epoch)
    self._received = False
    self._previous = None

  def _handle(self, signum, frame):
    del signum, frame
    self._received = True

  def on_train_begin(self, logs=None):
    try:
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    except ValueError:  # Not the main thread: leave signals alone.
      self._previous = None

  def on_train_batch_end(self, batch, logs=None):
    if self._received:
      self._restore()
      raise Terminated(self.step(batch))

  def on_train_end(self, logs=None):
    self._restore()

  def _restore(self):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
      self._previous = None


def unreadable(prefix: str) -> Optional[str]:
  """Why checkpoint `prefix` cannot be read in full (None: it can): every
  tensor is read, so a truncated or damaged data file is found here rather
  than half-way through a restore."""
  try:
    reader = run_dir_lib.checkpoint_reader(prefix)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except Exception as e:  # pylint: disable=broad-except
    return str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
  return None


def recover_backup(model_dir: str) -> Optional[Tuple[str, int]]:
  """Handles a backup that cannot be read.

  The backup is moved aside to `backup.unreadable/` (one line in the log
  names the file and the error), and the run resumes from the newest intact
  per-validation checkpoint, `checkpoints/ckpt-NNNN` (weights and optimizer
  state), losing only the steps after it; with none, it starts afresh.

  Returns:
    (checkpoint, its epoch) to resume from, or None: the backup is
    readable, absent, or no checkpoint is intact.
  """
  run = run_dir_lib.RunDir(model_dir)
  folder = run.backup
  backup = tf.train.latest_checkpoint(run.chief_backup)
  if not backup:
    return None
  error = unreadable(backup)
  if error is None:
    return None
  aside = run.unreadable_backup
  if fileio.exists(aside):
    fileio.rmtree(aside)
  fileio.move_folder(folder, aside)
  for epoch in reversed(run.checkpoint_epochs()):
    prefix = run.checkpoint(epoch)
    if unreadable(prefix) is None:
      logging.warning("%s cannot be read (%s): moved to %s; resuming from "
                      "%s (epoch %d).", backup, error, aside, prefix, epoch)
      return prefix, epoch
  logging.warning("%s cannot be read (%s): moved to %s; no intact "
                  "checkpoint in checkpoints/: starting afresh.", backup,
                  error, aside)
  return None
