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
import json
import os
import shutil
import tempfile
from typing import Any, Callable, IO, Iterator, Optional

TMP_MARK = ".tmp-"


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
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()
