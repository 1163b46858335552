"""Which code made a result: package version, git commit, library versions.

Two runs with the same flags and `--deterministic` can still differ when
different code made them (a fixed bug, a changed default). Every run and
every study records `collect()`:

  {"package": "0.1.0",                 rank4class_tf.__version__
   "git_commit": "15b474a...",         HEAD of the checkout the code ran from,
   "git_dirty": false,                 uncommitted changes to tracked files,
   "tensorflow": "2.15.1", "tensorflow_ranking": "0.5.5",
   "python": "3.11.7",
   "machine": {"cpu": "AMD EPYC (family 25, model 1)", "cpu_count": 2,
               "cpu_features": ["avx2"]}}

`machine` is recorded, not compared, like `python`: a run's speed is its
machine's, and oneDNN picks its kernels by the CPU's instruction sets
(`CPU_FEATURES`, the ones it dispatches on), so `--deterministic` runs on two
kinds of CPU may differ in their last bits. `describe_machine` says it in one
line; records made before it was recorded have none.

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
CPUINFO = "/proc/cpuinfo"
# The instruction sets oneDNN's CPU kernels dispatch on, as /proc/cpuinfo
# names them, in that order (the others do not change TensorFlow's kernels).
CPU_FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")


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


def cpuinfo_fields(cpuinfo: str = CPUINFO) -> Optional[Dict[str, str]]:
  """The first processor's fields in Linux's `cpuinfo` (`flags`: its
  instruction sets, space-separated); None where it cannot be read."""
  first = {}
  try:
    with open(cpuinfo, encoding="utf-8", errors="replace") as f:
      for line in f:
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
  except OSError:
    return None
  return first


def machine(cpuinfo: str = CPUINFO) -> Dict[str, Any]:
  """The CPU running now: its model name, core count and `CPU_FEATURES`
  (Linux's `cpuinfo`; elsewhere `platform`'s processor and no features)."""
  first = cpuinfo_fields(cpuinfo) or {}
  model = first.get("model name")
  if model and first.get("cpu family") and first.get("model"):
    # A VM may name only the make ("AMD EPYC"); these tell its generations.
    model += f" (family {first['cpu family']}, model {first['model']})"
  flags = set(first.get("flags", "").split())
  return {"cpu": model or platform.processor() or platform.machine() or None,
          "cpu_count": os.cpu_count(),
          "cpu_features": [f for f in CPU_FEATURES if f in flags]}


def describe_machine(record: Optional[Dict[str, Any]]) -> str:
  """One line: `AMD EPYC (family 25, model 1), 2 cores, avx2`;
  "unrecorded" for a record made before the machine was recorded."""
  found = (record or {}).get("machine")
  if not found:
    return "unrecorded"
  features = ", ".join(found.get("cpu_features") or []) or "no AVX2"
  return (f"{found.get('cpu') or 'unknown CPU'}, {found.get('cpu_count')} "
          f"cores, {features}")


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
      "machine": machine(),
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
