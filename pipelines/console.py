"""What the binaries print: progress and results, not TensorFlow's chatter.

TensorFlow, Keras and TF-Ranking log dozens of INFO lines per run (the
SavedModel writer alone: "untraced functions", "Assets written to",
"fingerprint" for every export). The binaries call `quiet` once their flags
are parsed: the console then shows warnings, errors and this package's own
INFO lines (e.g. "resuming after epoch 3"), besides what the binary prints
itself (Keras' progress, results); every INFO line goes to `log.txt` in the
run's folder, or nowhere for read-only binaries. Passing `--verbosity`
(absl's flag, e.g. `--verbosity=0` for INFO) restores absl's console logging
unchanged.
"""

import json
import logging as py_logging
import os
import re
import time
from typing import List, Optional

from absl import flags
from absl import logging

from rank4class_tf import fileio
from rank4class_tf import run_dir as run_dir_lib

LOG_FILE = run_dir_lib.LOG_FILE
# A log on another file system (`gs://`) is rewritten at most this often.
REMOTE_WRITE_SECONDS = 5.0
# INFO lines logged from these folders stay on the console.
_OWN_CODE = (os.sep + "rank4class_tf" + os.sep, os.sep + "pipelines" + os.sep)


def flag_terms(text: str) -> str:
  """The library's words (`batch_size`: an argument, in backticks) as the
  binary's (--batch_size): every backticked name that is one of the
  binary's flags becomes the flag; other names stay as they are."""
  return re.sub(r"`([a-z][a-z0-9_]*)`",
                lambda m: ("--" + m.group(1) if m.group(1) in flags.FLAGS
                           else m.group(0)), text)


def fail(binary: str, error: Exception) -> None:
  """Exits with one line, `<binary>: <error in flag terms>` (exit 1)."""
  raise SystemExit(f"{binary}: {flag_terms(str(error))}")


def say(line: str) -> None:
  """Prints a library progress line in flag terms."""
  print(flag_terms(line))


class _ConsoleFilter(py_logging.Filter):
  """Warnings and errors, and the INFO lines of this package's own code."""

  def filter(self, record: py_logging.LogRecord) -> bool:
    if record.levelno >= py_logging.WARNING:
      return True
    return (record.levelno >= py_logging.INFO and
            any(part in record.pathname for part in _OWN_CODE))


class _Nothing(py_logging.Filter):
  """Drops every record (a handler whose records another one prints)."""

  def filter(self, record: py_logging.LogRecord) -> bool:
    return False


class _RunFolderHandler(py_logging.Handler):
  """Appends records to `path` once the run has started writing; until then
  keeps them in memory, so a run refused before it writes anything changes
  nothing in its folder, not even the log.

  The run has started when its folder exists and, if `started_by` is given,
  when that file (the run's config.json) was written by this process (on a
  file system that keeps no modification times, TensorFlow's `ram://`:
  when it exists).

  A log on another file system (`gs://`, whose objects cannot be appended
  to) is rewritten whole, atomically (`fileio.write_atomically`): what the
  earlier starts wrote, then this process's lines, at most every
  `REMOTE_WRITE_SECONDS` and when the handler closes. A process killed
  there loses its last lines (those of up to `REMOTE_WRITE_SECONDS`), and
  two processes logging into one run at once keep the last writer's lines.
  """

  def __init__(self, path: str, started_by: Optional[str] = None):
    super().__init__(py_logging.INFO)
    self._path = path
    self._started_by = started_by
    self._since = time.time()
    self._file = None
    self._pending: List[str] = []
    self._closed = False
    # Elsewhere (not local), `_pending` keeps every line of the process.
    self._local = fileio.is_local(path)
    self._earlier: Optional[str] = None  # Elsewhere: the log before.
    self._written = 0.0  # Elsewhere: when the log was last rewritten.

  def _started(self) -> bool:
    folder = os.path.dirname(self._path)
    try:
      if not (fileio.exists(folder) and fileio.isdir(folder)):
        return False
      if self._started_by is None:
        return True
      modified = fileio.modified_time(self._started_by)
    except Exception:  # pylint: disable=broad-except
      # OSError; on another file system also TensorFlow's errors (the
      # network): not yet.
      return False
    return modified is None or modified >= self._since - 1

  def emit(self, record: py_logging.LogRecord) -> None:
    try:
      line = self.format(record) + "\n"
      if not self._local:
        self._pending.append(line)
        if self._closed or time.time() - self._written >= (
            REMOTE_WRITE_SECONDS):
          self._rewrite()
        return
      if self._closed:
        # After `logging.shutdown` closed the handler, objects deleted at
        # exit still log (TensorFlow's checkpoint `__del__` warnings): each
        # such line is appended on its own, never to a closed file.
        if self._started():
          with open(self._path, "a", encoding="utf-8") as f:
            f.write(line)
        return
      if self._file is None:
        if not self._started():
          self._pending.append(line)
          return
        self._file = open(self._path, "a", encoding="utf-8")  # pylint: disable=consider-using-with
        self._file.writelines(self._pending)
        self._pending = []
      self._file.write(line)
      self._file.flush()
    except Exception:  # pylint: disable=broad-except
      self.handleError(record)

  def _rewrite(self) -> None:
    """Writes the whole log on another file system (see the class doc)."""
    self._written = time.time()
    if self._earlier is None:
      if not self._started():
        return
      try:
        self._earlier = fileio.read_text(self._path)
      except FileNotFoundError:
        self._earlier = ""
    text = self._earlier + "".join(self._pending)
    fileio.write_atomically(self._path, lambda f: f.write(text))

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
      self._file = None
    if not self._local and not self._closed and self._pending:
      try:
        self._rewrite()
      except Exception:  # pylint: disable=broad-except
        pass  # At exit: the log stays as last written.
    self._closed = True
    super().close()


def _is_worker() -> bool:
  """Whether TF_CONFIG makes this process a non-chief task of a cluster
  (multi-worker training): only the chief writes into the run's folder."""
  try:
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
  except (ValueError, AttributeError):
    return False  # Left to the strategy, which names the bad TF_CONFIG.
  return bool(task) and task.get("type") != "chief"


def quiet(log_dir: Optional[str] = None,
          started_by: Optional[str] = None) -> Optional[str]:
  """Keeps TensorFlow's INFO lines off the console (see the module doc).

  Args:
    log_dir: folder receiving `log.txt` with every INFO line once it exists
      (the run's model_dir); None drops them, as do the non-chief tasks of a
      multi-worker cluster.
    started_by: a file the run writes once its checks passed (its
      config.json): the log is written only after this process wrote it.

  Returns:
    The log file's path, or None (no log_dir, or `--verbosity` given).
  """
  if flags.FLAGS["verbosity"].present:
    return None
  # absl's handler (on the root logger) and TensorFlow's own handler on the
  # `tensorflow` logger both write to the console. TensorFlow's records
  # also reach the root logger, so where absl's handler is there (under
  # `app.run`), TensorFlow's own prints nothing: each warning once, not
  # twice (`WARNING:tensorflow:...` and absl's `W1125 ...` line).
  root = py_logging.getLogger()
  absl_on_root = any(isinstance(handler, logging.ABSLHandler)
                     for handler in root.handlers)
  for handler in root.handlers:
    handler.addFilter(_ConsoleFilter())
  for handler in py_logging.getLogger("tensorflow").handlers:
    handler.addFilter(_Nothing() if absl_on_root else _ConsoleFilter())
  logging.set_verbosity(logging.INFO)
  if not log_dir or _is_worker():
    return None
  path = os.path.join(log_dir, LOG_FILE)
  handler = _RunFolderHandler(path, started_by)
  handler.setFormatter(logging.PythonFormatter())
  py_logging.getLogger().addHandler(handler)
  return path
