"""Which code made a result: package version, git commit, library versions.

Two runs with the same flags and `--deterministic` can still differ when
different code made them (a fixed bug, a changed default). Every run and
every study records `collect()`:

  {"package": "0.1.0",                 rank4class_tf.__version__
   "git_commit": "15b474a...",         HEAD of the checkout the code ran from,
   "git_dirty": false,                 uncommitted changes to tracked files,
   "tensorflow": "2.15.1", "tensorflow_ranking": "0.5.5",
   "python": "3.11.7"}

`git_commit` is "not a git checkout" (and `git_dirty` None) for an installed
package or a copy without `.git`. `describe` turns a record into one line for
reports, and `code_differs` says whether two records came from different
code (the study report warns when its runs did).

Versions are read from the installed distributions' metadata
(`importlib.metadata`), so this module imports no TensorFlow.
"""

import functools
import importlib.metadata
import os
import platform
import subprocess
from typing import Any, Dict, Iterable, List, Optional

NOT_A_CHECKOUT = "not a git checkout"
# The fields that identify the code; `python` is recorded, not compared.
CODE_FIELDS = ("package", "git_commit", "git_dirty", "tensorflow",
               "tensorflow_ranking")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version(distribution: str) -> Optional[str]:
  try:
    return importlib.metadata.version(distribution)
  except importlib.metadata.PackageNotFoundError:
    return None


def _git(*args: str) -> Optional[str]:
  try:
    proc = subprocess.run(["git", "-C", _ROOT, *args], capture_output=True,
                          text=True, timeout=20, check=False)
  except (OSError, subprocess.SubprocessError):
    return None
  return proc.stdout.strip() if proc.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def collect() -> Dict[str, Any]:
  """The provenance of the code running now (see the module doc); computed
  once per process."""
  from rank4class_tf import __version__  # pylint: disable=g-import-not-at-top
  commit = None
  dirty = None
  if os.path.exists(os.path.join(_ROOT, ".git")):
    commit = _git("rev-parse", "HEAD")
    if commit is not None:
      status = _git("status", "--porcelain", "--untracked-files=no")
      dirty = None if status is None else bool(status)
  return {
      "package": __version__,
      "git_commit": commit or NOT_A_CHECKOUT,
      "git_dirty": dirty,
      "tensorflow": _version("tensorflow") or _version("tensorflow-cpu"),
      "tensorflow_ranking": _version("tensorflow-ranking"),
      "python": platform.python_version(),
  }


def describe(record: Optional[Dict[str, Any]]) -> str:
  """One line: `rank4class_tf 0.1.0, commit 15b474a (dirty), TensorFlow
  2.15.1, TF-Ranking 0.5.5`; "unrecorded" for a result made before
  provenance was recorded."""
  if not record:
    return "unrecorded (made before provenance was recorded)"
  commit = record.get("git_commit") or NOT_A_CHECKOUT
  if commit != NOT_A_CHECKOUT:
    commit = "commit " + commit[:12] + (" (dirty)" if record.get("git_dirty")
                                        else "")
  return (f"rank4class_tf {record.get('package')}, {commit}, TensorFlow "
          f"{record.get('tensorflow')}, TF-Ranking "
          f"{record.get('tensorflow_ranking')}")


def code_key(record: Optional[Dict[str, Any]]) -> tuple:
  """What identifies the code of a record (None fields when unrecorded)."""
  record = record or {}
  return tuple(record.get(field) for field in CODE_FIELDS)


def distinct(records: Iterable[Optional[Dict[str, Any]]]
            ) -> List[Optional[Dict[str, Any]]]:
  """The records of distinct code, in first-seen order."""
  seen, out = set(), []
  for record in records:
    key = code_key(record)
    if key not in seen:
      seen.add(key)
      out.append(record)
  return out


def code_differs(records: Iterable[Optional[Dict[str, Any]]]) -> bool:
  """Whether the records came from more than one version of the code (a
  dirty checkout counts as its own version: its changes are unknown)."""
  records = list(records)
  if any(r and r.get("git_dirty") for r in records):
    return len(records) > 1
  return len(distinct(records)) > 1
