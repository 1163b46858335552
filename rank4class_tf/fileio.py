"""Atomic writes: the one writer of every run-folder and report file, and
of every folder written whole (exports, feature caches).

A file is written to a uniquely named temporary sibling (`.<name>.tmp-XXXX`,
from `tempfile.mkstemp`), flushed to disk, then renamed over the target with
`os.replace`. So:

* a crash, a kill or a full disk mid-write leaves the previous file (or no
  file), never a truncated one, and the temporary file is removed on any
  error this process sees;
* two processes writing the same file at once (two reports of one study)
  never share a temporary file: the last rename wins, and each reader sees
  one writer's whole file.

A folder (`atomic_folder`) is filled in a temporary sibling folder and
renamed into place the same way: a reader sees the whole folder or none.

Imports nothing from TensorFlow: `rank4class_tf.config`-level code may use it.
"""

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import threading
import uuid
from typing import Any, Callable, IO, Iterator, Optional

TMP_MARK = ".tmp-"
_RAM_LOCK = threading.Lock()


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def write_atomically(path: str, write: Callable[[IO], None],
                     binary: bool = False, newline: str = None) -> None:
  """Calls `write(file)` on a temporary sibling of `path`, then renames it
  into place (see the module doc).

  Args:
    path: the file to write.
    write: writes the whole content into the open file it is given.
    binary: open the temporary file in binary mode.
    newline: `open`'s newline argument (text mode), e.g. "" for csv.

  Raises:
    OSError: the write or the rename failed (full disk, permissions); the
      temporary file is gone and `path` is as it was.
  """
  if not is_local(path):
    _write_remote(path, write, binary)
    return
  path = _local(path)
  folder = os.path.dirname(path) or "."
  fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + TMP_MARK,
                             dir=folder)
  try:
    # mkstemp's files are 0600; a written file gets the mode any file the
    # user creates gets (0666 less the umask), so others can read reports.
    os.chmod(tmp, 0o666 & ~_umask())
    mode = "wb" if binary else "w"
    kwargs = {} if binary else {"encoding": "utf-8", "newline": newline}
    with os.fdopen(fd, mode, **kwargs) as f:
      fd = None
      write(f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
    tmp = None
  finally:
    if fd is not None:
      os.close(fd)
    if tmp is not None and os.path.exists(tmp):
      os.remove(tmp)


@contextlib.contextmanager
def atomic_folder(path: str, prefix: Optional[str] = None,
                  replace: bool = True) -> Iterator[str]:
  """Yields a new temporary sibling folder of `path` to fill; when the block
  ends without an error, renames it to `path`.

  Args:
    path: the folder to write.
    prefix: the temporary folder's name prefix (default `.<name>.tmp-`).
    replace: an existing `path` is replaced; with False it is kept (another
      writer's whole copy of the same content) and this one dropped.

  The temporary folder gets the mode of any folder the user creates (0777
  less the umask, not mkdtemp's 0700, so others can read it) and is removed
  on any error.
  """
  if not is_local(path):
    with _remote_folder(path, prefix, replace) as tmp:
      yield tmp
    return
  path = _local(path)
  parent = os.path.dirname(path) or "."
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(
      prefix=prefix or "." + os.path.basename(path) + TMP_MARK, dir=parent)
  try:
    os.chmod(tmp, 0o777 & ~_umask())
    yield tmp
    if os.path.exists(path) and replace:
      shutil.rmtree(path)
    try:
      os.replace(tmp, path)
    except OSError:
      if replace or not os.path.isdir(path):
        raise
      # Another writer renamed its copy into place meanwhile: keep it.
  finally:
    if os.path.exists(tmp):
      shutil.rmtree(tmp)


def _write_remote(path: str, write: Callable[[IO], None],
                  binary: bool) -> None:
  """`write_atomically` through `tf.io.gfile`: a uniquely named temporary
  sibling, then a rename (atomic where the file system's rename is; on a
  bucket a copy, after which readers see the whole new object)."""
  gfile = _gfile()
  folder, name = path.rsplit("/", 1)
  tmp = f"{folder}/.{name}{TMP_MARK}{uuid.uuid4().hex[:8]}"
  # Written to memory first: a GFile cannot `tell` on every file system
  # (`ram://`), which zip writers (`np.savez`) need.
  buffer = io.BytesIO() if binary else io.StringIO()
  write(buffer)
  try:
    with gfile.GFile(tmp, "wb" if binary else "w") as f:
      f.write(buffer.getvalue())
    rename(tmp, path)
    tmp = None
  finally:
    if tmp is not None and gfile.exists(tmp):
      gfile.remove(tmp)


@contextlib.contextmanager
def _remote_folder(path: str, prefix: Optional[str],
                   replace: bool) -> Iterator[str]:
  """`atomic_folder` through `tf.io.gfile`. Folder renames are not atomic
  there (a bucket has no folders; TensorFlow's `ram://` renames the entry
  only), so the filled temporary folder is copied file by file into place
  and removed: a reader may see a partly copied folder for that moment,
  which the readers of this package never meet while its writer holds the
  run (a claim or the run lock)."""
  gfile = _gfile()
  parent, name = path.rstrip("/").rsplit("/", 1)
  tmp = f"{parent}/{prefix or '.' + name + TMP_MARK}{uuid.uuid4().hex[:8]}"
  gfile.makedirs(tmp)
  try:
    yield tmp
    if gfile.exists(path):
      if not replace:
        return
      gfile.rmtree(path)
    for folder, _, files in gfile.walk(tmp):
      target = path + folder[len(tmp):]
      gfile.makedirs(target)
      for file in files:
        gfile.copy(f"{folder}/{file}", f"{target}/{file}", overwrite=True)
  finally:
    if gfile.exists(tmp):
      gfile.rmtree(tmp)


def write_text_atomically(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` atomically."""
  write_atomically(path, lambda f: f.write(text))


def write_json_atomically(path: str, value: Any) -> None:
  """Writes `value` as indented, key-sorted JSON to `path` atomically."""
  write_atomically(path, lambda f: json.dump(value, f, indent=1,
                                             sort_keys=True))


def file_sha256(path: str) -> str:
  """SHA-256 of a file's bytes, read in 1 MiB blocks."""
  digest = hashlib.sha256()
  with open_file(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def check_output_folder(folder: str, name: str,
                        is_previous: Callable[[str], bool],
                        previous: str, previous_folder: str) -> None:
  """Raises ValueError, naming the argument `name`=`folder`, unless an output
  may be written there: a missing path, or a folder that `is_previous` (its
  files are empty or a previous output of the same kind, which is
  replaced). A folder holding a user's files is never written into. Changes
  nothing on disk; the one check of `evaluate`'s `report_dir` and
  `inspect_data`'s `output_dir`.

  Args:
    folder: the folder, as given (shown in the error).
    name: the argument's name.
    is_previous: whether an existing folder may be replaced.
    previous: what such a folder holds, for the error ("a previous
      per-class report").
    previous_folder: the same folder named ("a previous report's folder").
  """
  path = os.path.abspath(folder)
  if not os.path.lexists(path):
    return
  if not os.path.isdir(path):
    raise ValueError(f"`{name}`={folder} is a file, not a folder.")
  try:
    replaceable = is_previous(path)
  except OSError as e:
    raise ValueError(f"`{name}`={folder} cannot be read "
                     f"({e.strerror or e}).") from None
  if not replaceable:
    raise ValueError(
        f"`{name}`={folder} exists and holds other files than {previous}: "
        f"give a new or empty folder ({previous_folder} is replaced).")

# Storage: local paths through `os` (atomic rename, exclusive create, fsync),
# any other file system TensorFlow has (`gs://`, `ram://`, `hdfs://`, `s3://`
# with its plugin) through `tf.io.gfile`, imported only then.


def is_local(path: str) -> bool:
  """True for a local path (no `scheme://`, or `file://`)."""
  return "://" not in path or path.startswith("file://")


def _local(path: str) -> str:
  return path[len("file://"):] if path.startswith("file://") else path


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def exists(path: str) -> bool:
  if is_local(path):
    return os.path.exists(_local(path))
  gfile = _gfile()
  if not gfile.exists(path):
    return False
  if path.startswith("ram://"):
    # TensorFlow's in-memory file system says a path exists when any file
    # name starts with it (`a.json` when only `a.json.damaged` is there).
    parent, name = path.rstrip("/").rsplit("/", 1)
    return parent.endswith(":/") or name in {
        n.rstrip("/") for n in gfile.listdir(parent)}
  return True


def isdir(path: str) -> bool:
  if is_local(path):
    return os.path.isdir(_local(path))
  # `exists` first: `ram://`'s name-prefix quirk (see `exists`).
  return exists(path) and _gfile().isdir(path)


def listdir(path: str) -> list:
  """The names in a folder (no trailing `/`, as `os.listdir`)."""
  if is_local(path):
    return os.listdir(_local(path))
  return [name.rstrip("/") for name in _gfile().listdir(path)]


def makedirs(path: str) -> None:
  if is_local(path):
    os.makedirs(_local(path), exist_ok=True)
  else:
    _gfile().makedirs(path)


def remove(path: str) -> None:
  if is_local(path):
    os.remove(_local(path))
  else:
    _gfile().remove(path)


def rmtree(path: str) -> None:
  if is_local(path):
    shutil.rmtree(_local(path))
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.io.gfile.rmtree(path)
  except tf.errors.NotFoundError:
    # `ram://` also looks for the names its prefix matches (`backup` and
    # `backup.unreadable`) after removing the folder.
    if exists(path):
      raise


def rename(source: str, target: str) -> None:
  """Renames `source` to `target`, replacing it. Atomic on a local file
  system; elsewhere what the file system gives (a copy and a delete on a
  bucket). Raises OSError (FileNotFoundError if `source` is gone)."""
  if is_local(source):
    os.replace(_local(source), _local(target))
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.io.gfile.rename(source, target, overwrite=True)
  except tf.errors.NotFoundError as e:
    raise FileNotFoundError(2, str(e).split("\n")[0], source) from None
  except tf.errors.OpError as e:
    raise OSError(str(e).split("\n")[0]) from None


def open_file(path: str, mode: str = "r"):
  """`open` for local paths (UTF-8 text), `tf.io.gfile.GFile` elsewhere;
  there a file opened to read is read whole into memory first, so that
  readers that seek (`np.load`) work on every file system."""
  if is_local(path):
    if "b" in mode:
      return open(_local(path), mode)
    return open(_local(path), mode, encoding="utf-8")
  if mode == "rb":
    with _gfile().GFile(path, "rb") as f:
      return io.BytesIO(f.read())
  return _gfile().GFile(path, mode)


def read_text(path: str) -> str:
  """A file's text; FileNotFoundError when it is absent, on any storage."""
  if is_local(path):
    with open_file(path) as f:
      return f.read()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    with tf.io.gfile.GFile(path) as f:
      return f.read()
  except tf.errors.NotFoundError:
    raise FileNotFoundError(2, "No such file or directory", path) from None


def read_json(path: str):
  return json.loads(read_text(path))


def create_exclusively(path: str, text: str) -> bool:
  """Creates `path` holding `text` unless it exists; True if this call
  created it.

  Local: `O_CREAT | O_EXCL`, atomic (also on NFS v3 and later): of writers
  racing, exactly one gets True; `ram://` (one process's memory) likewise,
  under a lock. Elsewhere (`tf.io.gfile` has no exclusive
  create): the file is written only if absent and then read back; a racing
  writer within the same moment may also get True (the last write wins the
  file), so callers that need a guarantee there use a fixed partition.
  """
  if is_local(path):
    try:
      fd = os.open(_local(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
      return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    return True
  if path.startswith("ram://"):
    # In-memory storage lives in this process: a lock makes it exclusive.
    with _RAM_LOCK:
      if exists(path):
        return False
      with _gfile().GFile(path, "w") as f:
        f.write(text)
      return True
  gfile = _gfile()
  if exists(path):
    return False
  with gfile.GFile(path, "w") as f:
    f.write(text)
  with gfile.GFile(path) as f:
    return f.read() == text


def copy_folder(source: str, target: str) -> None:
  """Copies every file under the folder `source` to the same place under
  `target` (created where missing; files there of the same names are
  replaced), on any file system."""
  if is_local(source) and is_local(target):
    shutil.copytree(_local(source), _local(target), dirs_exist_ok=True)
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for folder, _, files in tf.io.gfile.walk(source):
    inner = target + folder[len(source):]
    tf.io.gfile.makedirs(inner)
    for name in files:
      if tf.io.gfile.exists(f"{inner}/{name}"):
        # Removed first: `ram://`'s copy appends to a file it overwrites.
        tf.io.gfile.remove(f"{inner}/{name}")
      tf.io.gfile.copy(f"{folder}/{name}", f"{inner}/{name}")


def move_folder(source: str, target: str) -> None:
  """Moves the folder `source` to `target` (absent). Local: one rename,
  atomic. Elsewhere every file is copied, then `source` removed: a folder
  rename there is not atomic (a bucket has no folders) or, on TensorFlow's
  `ram://`, renames the folder's entry and leaves its files behind."""
  if is_local(source):
    os.replace(_local(source), _local(target))
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  copy_folder(source, target)
  try:
    tf.io.gfile.rmtree(source)
  except tf.errors.NotFoundError:
    # `ram://` removes the folder, then fails on the names that only start
    # with it (`backup.unreadable/...` beside `backup/`).
    if exists(source):
      raise


def modified_time(path: str) -> Optional[float]:
  """A file's modification time (seconds since the epoch); None where the
  file system keeps none (TensorFlow's `ram://`).

  Raises:
    FileNotFoundError: `path` does not exist.
  """
  if is_local(path):
    return os.path.getmtime(_local(path))
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    nanoseconds = tf.io.gfile.stat(path).mtime_nsec
  except tf.errors.NotFoundError:
    raise FileNotFoundError(2, "No such file or directory", path) from None
  return nanoseconds / 1e9 if nanoseconds else None
