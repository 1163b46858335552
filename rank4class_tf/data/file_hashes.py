"""The SHA-256 of a data file, computed once per version of the file.

A run's data record (`identity`) and the counting pass of a streamed text
file (`streaming`) both need the SHA-256 of files that may be gigabytes
large. `digest(path)` reads a file once and caches its hash, keyed by what
the file system says of it: its path, size, modification time (ns) and
inode. A file written since (even to the same size, or replaced by a
rename) has another key and is read again; a file that is not is not read:
checking a 2 GB file that has not changed costs a `stat`. A file modified
in the last few seconds (`RACY_NS`) is hashed but not cached, as git treats
a "racily clean" file: a second write within the file system's time
resolution could keep its time and size.

The cache is one small JSON file per data folder, `{file name: [size,
mtime_ns, inode, sha256]}`, under `cache_dir()`, written atomically
(`fileio`); two processes writing it at once lose one's new entries, which
are computed again next time. A cache that cannot be read is ignored, one
that cannot be written is logged once: the hash is then computed each time.
Files elsewhere than on a local disk (`gs://`) are hashed each time.

"""

import dataclasses
import hashlib
import json
import logging
import os
import threading
import time
from typing import Dict, Iterable

from rank4class_tf import fileio

# The cache's root folder: this variable (`streaming` caches its counts
# there too), else ~/.cache/rank4class_tf.
CACHE_ENV = "RANK4CLASS_CACHE_DIR"
FOLDER = "file_hashes"
# A file modified less than this before it was hashed (ns) is not cached:
# a file system with coarse times (1 s, 2 s) could show a second write of
# the same size within that time with the same modification time.
RACY_NS = 3 * 10**9
_lock = threading.Lock()
_memory: Dict[str, Dict[str, list]] = {}  # Cache file -> its entries.
_warned = []


@dataclasses.dataclass(frozen=True)
class Digest:
  """A file's size (bytes), modification time (ns) and SHA-256 (hex)."""
  size: int
  mtime_ns: int
  sha256: str


def cache_dir() -> str:
  """$RANK4CLASS_CACHE_DIR/file_hashes, else
  ~/.cache/rank4class_tf/file_hashes."""
  root = os.environ.get(CACHE_ENV) or os.path.join(
      os.path.expanduser("~"), ".cache", "rank4class_tf")
  return os.path.join(root, FOLDER)


def _cache_file(folder: str) -> str:
  key = hashlib.sha256(os.path.abspath(folder).encode("utf-8")).hexdigest()
  return os.path.join(cache_dir(), key[:24] + ".json")


def _entries(cache_file: str) -> Dict[str, list]:
  if cache_file not in _memory:
    try:
      with open(cache_file, encoding="utf-8") as f:
        entries = json.load(f)
      if not isinstance(entries, dict):
        raise ValueError
    except (OSError, ValueError):
      entries = {}  # None yet, or damaged: computed again and rewritten.
    _memory[cache_file] = entries
  return _memory[cache_file]


def digests(paths: Iterable[str]) -> Dict[str, Digest]:
  """{path: its `Digest`} of files, reading only those whose size,
  modification time or inode changed since their hash was cached.

  Raises:
    OSError: a file cannot be read.
  """
  out, changed = {}, {}
  for path in paths:
    if not fileio.is_local(path):
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      stat = tf.io.gfile.stat(path)
      out[path] = Digest(int(stat.length), int(stat.mtime_nsec),
                         fileio.file_sha256(path))
      continue
    stat = os.stat(path)
    cache_file = _cache_file(os.path.dirname(os.path.abspath(path)))
    name = os.path.basename(path)
    with _lock:
      entry = _entries(cache_file).get(name)
    key = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    if isinstance(entry, list) and entry[:3] == key and len(entry) == 4:
      sha = entry[3]
    else:
      sha = fileio.file_sha256(path)
      if time.time_ns() - stat.st_mtime_ns > RACY_NS:
        changed.setdefault(cache_file, {})[name] = key + [sha]
    out[path] = Digest(stat.st_size, stat.st_mtime_ns, sha)
  for cache_file, new in changed.items():
    _store(cache_file, new)
  return out


def digest(path: str) -> Digest:
  """`digests` of one file."""
  return digests([path])[path]


def sha256(path: str) -> str:
  """The SHA-256 of a file's bytes (hex), cached (see the module doc)."""
  return digest(path).sha256


def _store(cache_file: str, new: Dict[str, list]) -> None:
  with _lock:
    entries = _entries(cache_file)
    entries.update(new)
    try:
      os.makedirs(os.path.dirname(cache_file), exist_ok=True)
      fileio.write_json_atomically(cache_file, entries)
    except OSError as e:
      if not _warned:
        _warned.append(cache_file)
        logging.warning("File hashes are not cached in %s (%s): they are "
                        "computed again each time.", cache_dir(),
                        e.strerror or e)


def forget() -> None:
  """Forgets the cache files this process read (tests, benchmarks): the
  next `digests` reads them from disk again."""
  with _lock:
    _memory.clear()
