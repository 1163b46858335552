"""A study's folder: study.json, the runs' records and test arrays, its lock.

  study.json               the shared training settings, the grid so far,
                           the runs `--extend_grid` added (`extensions`),
                           the steps `--extend_steps` gave (`extended_steps`),
                           with `--choose_on_seed` the other seeds' runs at
                           its choices (`followers`), and the code that
                           created the study (`provenance`)
  runs/<run>/              one `pipelines.train` model_dir per run, plus
    study.log              the run's log (TensorFlow's INFO lines included)
    study_test.npz         per-instance test metrics and softmax CE
    study_result.json      the run's record, written last: a run whose record
                           and test arrays are whole and name the run is
                           finished and is never trained again
  summary.json             only in a study started from a summary
                           (`--from_summary`): the runs whose test arrays
                           the summary left out (never chosen), finished
                           all the same

Everything that reads or adds to these files is here, under one exclusive
lock on the folder (`locked`) where it writes. A file that cannot be read,
or a record that names another run, is `DamagedFile`: moved aside
(`move_aside`) by the study command and named by the report. No TensorFlow.
"""

import contextlib
import dataclasses
import fcntl
import os
import time
from typing import (Callable, Collection, Dict, Iterator, List, Optional,
                    Sequence, Tuple)

import numpy as np

from rank4class_tf import fileio
from rank4class_tf.study import extend as study_extend
from rank4class_tf.study import grid as study_grid


STUDY_FILE = "study.json"
RUNS_DIR = "runs"
RESULT_FILE = "study_result.json"
TEST_FILE = "study_test.npz"
LOG_FILE = "study.log"
# Written by a summary (`study_report.write_summary`): the runs whose test
# arrays it leaves out (never chosen). A study started from the summary
# (`study_report.start_from_summary`) counts them as finished.
SUMMARY_FILE = "summary.json"
FEATURE_CACHE_DIR = "feature_cache"
# A damaged study file is moved aside to `<file>.damaged` (`.damaged.1`, ...
# when that exists), never deleted.
DAMAGED_SUFFIX = ".damaged"
# What the report reads from a record.
RECORD_KEYS = ("run", "loss", "interaction", "learning_rate", "mlp_units",
               "seed", "validation", "test", "num_test", "test_softmax_ce",
               "test_neg_log_mrr", "test_neg_log_ndcg", "ce_bound_holds",
               "best_step", "train_seconds", "resumed_at_step",
               "validation_curve")


def run_dir(study_dir: str, run: study_grid.Run) -> str:
  return os.path.join(study_dir, RUNS_DIR, run.name)


def read_json(path: str):
  return fileio.read_json(path)


class DamagedFile(ValueError):
  """A study file that cannot be read, or a record of another run.

  Attributes:
    path: the file.
    reason: what is wrong, e.g. `Unterminated string ...` or `its
      learning_rate is 0.01, not 0.001`.
  """

  def __init__(self, path: str, reason: str):
    super().__init__(f"{path} is damaged ({reason}).")
    self.path, self.reason = path, reason


def cannot_write(path: str, error: OSError) -> ValueError:
  """The one-line error of a failed write (full disk, permissions)."""
  return ValueError(f"cannot write {path}: {error.strerror or error}.")


@contextlib.contextmanager
def locked(study_dir: str) -> Iterator[None]:
  """Holds an exclusive lock on the folder `study_dir` (which must exist).

  `open_study` reads, merges and writes study.json under it, so that two
  studies started together into one folder merge their grids; the report
  holds it while it writes, so that two reports never interleave. It is an
  advisory `fcntl.flock` on the folder itself: no file is added, and the
  kernel releases it when the process ends, however it ends. Waits for the
  lock (a report takes seconds).

  On storage other than a local path (`gs://`, `ram://`) it is a claim
  (`study_claims.Claims`) on `claims/study-lock.json`, beaten while held
  and taken over after `timeout` seconds without a beat.
  """
  if not fileio.is_local(study_dir):
    with _claimed_lock(study_dir):
      yield
    return
  fd = os.open(study_dir, os.O_RDONLY | os.O_DIRECTORY)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield
  finally:
    os.close(fd)  # Releases the lock.


LOCK_CLAIM = "study-lock"


@contextlib.contextmanager
def _claimed_lock(study_dir: str, poll: float = 0.2) -> Iterator[None]:
  from rank4class_tf.study import claims as study_claims  # pylint: disable=g-import-not-at-top
  claims = study_claims.Claims(study_dir, study_claims.Worker())
  while not claims.claim(LOCK_CLAIM, lambda _: None):
    time.sleep(poll)
  with claims.held(LOCK_CLAIM, lambda _: None):
    yield


def load_study(study_dir: str) -> Tuple[Dict[str, object], study_grid.Grid]:
  """(shared settings, grid so far) of an existing study.

  Raises:
    ValueError: no study.json, or one that cannot be read (naming it).
  """
  path = os.path.join(study_dir, STUDY_FILE)
  if not fileio.exists(path):
    raise ValueError(f"`study_dir`={study_dir} holds no study ({STUDY_FILE} "
                     "not found).")
  try:
    study = read_json(path)
    grid = study_grid.Grid.from_json(study["grid"])
    shared = study["shared"]
    if not isinstance(shared, dict):
      raise TypeError("'shared' is not an object")
  except (ValueError, TypeError, KeyError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({reason(e)}); it holds the "
                     "study's shared settings and grid: restore it, or start "
                     "another `study_dir`.") from None
  return shared, grid


def load_extensions(study_dir: str) -> List[study_extend.Extension]:
  """The runs `--extend_grid` added to the study, in the order added."""
  path = os.path.join(study_dir, STUDY_FILE)
  try:
    raw = read_json(path).get("extensions", [])
    return [study_extend.Extension(
        study_grid.Run(e["loss"], e["interaction"], float(e["learning_rate"]),
            e["mlp_units"], int(e["seed"])), int(e["round"]), e["reason"])
            for e in raw]
  except (ValueError, TypeError, KeyError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({reason(e)}): its "
                     "extensions are damaged.") from None


def load_followers(study_dir: str) -> Dict[str, str]:
  """{run: the run it follows} of the runs `--choose_on_seed` added: a seed's
  run at the values the chosen seed chose for its cell."""
  path = os.path.join(study_dir, STUDY_FILE)
  try:
    raw = read_json(path).get("followers", {})
    return {str(k): str(v) for k, v in dict(raw).items()}
  except (ValueError, TypeError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({reason(e)}): its "
                     "followers are damaged.") from None


def study_runs(study_dir: str,
               grid: Optional[study_grid.Grid] = None) -> List[study_grid.Run]:
  """Every run of the study: the grid's, the extensions', then the
  followers' (`--choose_on_seed`)."""
  if grid is None:
    grid = load_study(study_dir)[1]
  runs = grid.runs()
  names = {run.name for run in runs}
  added = [e.run for e in load_extensions(study_dir)]
  path = os.path.join(study_dir, STUDY_FILE)
  for name in load_followers(study_dir):
    try:
      added.append(study_grid.parse_run_name(name))
    except ValueError as e:
      raise ValueError(f"{path} cannot be read ({e}): its followers are "
                       "damaged.") from None
  for run in added:
    if run.name not in names:
      names.add(run.name)
      runs.append(run)
  return runs


def add_extensions(study_dir: str,
                   new: Sequence[study_extend.Extension]) -> None:
  """Records extensions in study.json (under `locked`, merged with what
  another process may have added)."""
  path = os.path.join(study_dir, STUDY_FILE)
  with locked(study_dir):
    study = read_json(path)
    known = {
        study_grid.Run(e["loss"], e["interaction"], float(e["learning_rate"]),
                       e["mlp_units"], int(e["seed"])).name
        for e in study.get("extensions", [])
    }
    study["extensions"] = study.get("extensions", []) + [
        e.to_json() for e in new if e.run.name not in known]
    try:
      fileio.write_json_atomically(path, study)
    except OSError as e:
      raise cannot_write(path, e) from None


def add_followers(study_dir: str, new: Dict[str, str]) -> None:
  """Records `--choose_on_seed` followers in study.json (under `locked`)."""
  path = os.path.join(study_dir, STUDY_FILE)
  with locked(study_dir):
    study = read_json(path)
    study["followers"] = dict(study.get("followers", {}), **new)
    try:
      fileio.write_json_atomically(path, study)
    except OSError as e:
      raise cannot_write(path, e) from None


def reason(error: Exception) -> str:
  """An exception as a short phrase: `Unterminated string starting at: line
  1 column 5 (char 4)`, `no 'grid'`."""
  if isinstance(error, KeyError):
    return f"no {error}"
  return str(error).split("\n")[0] or type(error).__name__


def _number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _record_problem(record, run: study_grid.Run,
                    metric_names: Sequence[str]) -> Optional[str]:
  """What is wrong with a run's record (None: nothing)."""
  if not isinstance(record, dict):
    return "not a JSON object"
  absent = [k for k in RECORD_KEYS if k not in record]
  if absent:
    return f"no {', '.join(absent)}"
  for key in ("validation", "test"):
    values = record[key]
    if not isinstance(values, dict) or not all(
        _number(values.get(m)) for m in metric_names):
      return f"its {key!r} lacks one of {', '.join(metric_names)}"
  if not isinstance(record["num_test"], int) or record["num_test"] <= 0:
    return f"num_test is {record['num_test']!r}"
  for key, want in (("run", run.name), ("loss", run.loss),
                    ("interaction", run.interaction),
                    ("learning_rate", run.learning_rate),
                    ("mlp_units", run.mlp_units), ("seed", run.seed)):
    if record[key] != want or type(record[key]) is bool:
      return f"its {key} is {record[key]!r}, not {want!r}: another run's record"
  return None


def read_record(study_dir: str, run: study_grid.Run,
                metric_names: Sequence[str]) -> Optional[Dict[str, object]]:
  """The run's record; None when it has none.

  Raises:
    DamagedFile: the record cannot be parsed, lacks what the report reads
      (`RECORD_KEYS`, a metric of `metric_names`) or names another run.
  """
  path = os.path.join(run_dir(study_dir, run), RESULT_FILE)
  if not fileio.exists(path):
    return None
  try:
    record = read_json(path)
  except ValueError as e:  # JSONDecodeError, UnicodeDecodeError.
    raise DamagedFile(path, reason(e)) from None
  problem = _record_problem(record, run, metric_names)
  if problem:
    raise DamagedFile(path, problem)
  return record


def read_test_arrays(study_dir: str, run_name: str,
                     metric_names: Sequence[str],
                     num_test: int) -> Optional[Dict[str, np.ndarray]]:
  """The per-instance test arrays `execute_run` saved; None when absent.

  Raises:
    DamagedFile: the file is no readable .npz, or lacks an array of
      `metric_names`, `softmax_ce` or `labels` of `num_test` values.
  """
  path = os.path.join(study_dir, RUNS_DIR, run_name, TEST_FILE)
  if not fileio.exists(path):
    return None
  with fileio.open_file(path, "rb") as f:
    try:
      with np.load(f, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    except Exception as e:  # pylint: disable=broad-except
      # BadZipFile, EOFError, ValueError, zlib.error: whatever a damaged
      # archive raises.
      raise DamagedFile(path, f"{type(e).__name__}: {reason(e)}") from None
  for name in tuple(metric_names) + ("softmax_ce", "labels"):
    if name not in arrays:
      raise DamagedFile(path, f"no {name!r} array")
    if arrays[name].shape != (num_test,):
      raise DamagedFile(path, f"{name!r} has shape {arrays[name].shape}, "
                        f"not ({num_test},)")
  return arrays


def move_aside(path: str) -> str:
  """Renames a damaged file to `<path>.damaged` (`.damaged.1`, ... when
  taken) and returns the new path: kept for inspection, never read."""
  target, i = path + DAMAGED_SUFFIX, 0
  while fileio.exists(target):
    i += 1
    target = f"{path}{DAMAGED_SUFFIX}.{i}"
  try:
    fileio.rename(path, target)
  except OSError as e:
    raise cannot_write(target, e) from None
  return target


def load_summarized(study_dir: str) -> frozenset:
  """The runs whose test arrays a summary left out (`SUMMARY_FILE`): none
  unless the study was started from a summary."""
  path = os.path.join(study_dir, SUMMARY_FILE)
  if not fileio.exists(path):
    return frozenset()
  try:
    names = read_json(path)["runs_without_arrays"]
    if not isinstance(names, list):
      raise TypeError("runs_without_arrays is not a list")
    return frozenset(str(name) for name in names)
  except (ValueError, TypeError, KeyError) as e:
    raise ValueError(f"{path} cannot be read ({reason(e)}); it is the "
                     "summary's list of runs without test arrays: copy it "
                     "again from the summary.") from None


def finished_record(
    study_dir: str,
    run: study_grid.Run,
    metric_names: Sequence[str],
    progress: Callable[[str], None] = print,
    summarized: Collection[str] = ()
) -> Tuple[Optional[Dict[str, object]], Optional[Dict[str, object]]]:
  """(record, earlier) of a run: `record` when the run is finished (its
  record and test arrays whole and naming it, or its record whole and the
  run in `summarized`: a summary left its arrays out), else None.

  Damaged files are moved aside (`move_aside`, one `progress` line each).
  `earlier` is the run's whole record when only its arrays are missing or
  damaged: its evaluation is redone and keeps the record's training time.
  """
  damaged = []
  try:
    record = read_record(study_dir, run, metric_names)
  except DamagedFile as e:
    record = None
    damaged.append(e)
  arrays = None
  if record is not None:
    try:
      arrays = read_test_arrays(study_dir, run.name, metric_names,
                                record["num_test"])
    except DamagedFile as e:
      damaged.append(e)
    if arrays is None and not damaged and run.name in summarized:
      return record, None
  for error in damaged:
    moved = move_aside(error.path)
    progress(f"{error.path} is damaged ({error.reason}): moved to "
             f"{os.path.basename(moved)}; the run is evaluated again.")
  if record is not None and arrays is not None:
    return record, None
  return None, record


def load_extended_steps(study_dir: str) -> Dict[str, int]:
  """{run name: steps} of the runs `--extend_steps` trained on."""
  path = os.path.join(study_dir, STUDY_FILE)
  try:
    return {k: int(v) for k, v in
            dict(read_json(path).get("extended_steps", {})).items()}
  except (ValueError, TypeError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({reason(e)}): its "
                     "extended_steps are damaged.") from None


def add_extended_steps(study_dir: str, new: Dict[str, int]) -> None:
  """Records `--extend_steps` decisions in study.json (under `locked`)."""
  path = os.path.join(study_dir, STUDY_FILE)
  with locked(study_dir):
    study = read_json(path)
    study["extended_steps"] = dict(study.get("extended_steps", {}), **new)
    try:
      fileio.write_json_atomically(path, study)
    except OSError as e:
      raise cannot_write(path, e) from None


@dataclasses.dataclass
class Contents:
  """What a study folder holds for its grid (`contents`).

  Attributes:
    records: the whole records of the grid's runs, in grid order.
    missing: the grid's runs without a whole record (damaged ones included).
    damaged: the damaged records (`DamagedFile`: path and reason).
    strays: folders under runs/ that name no run of the grid (e.g. a loss
      removed from study.json), sorted.
  """
  records: List[Dict[str, object]]
  missing: List[study_grid.Run]
  damaged: List[DamagedFile]
  strays: List[str]


def contents(study_dir: str, runs: Sequence[study_grid.Run],
             metric_names: Sequence[str]) -> Contents:
  """The records of `runs`, and what is missing, damaged or extra; reads
  only (damaged files stay where they are)."""
  records, missing, damaged = [], [], []
  for run in runs:
    try:
      record = read_record(study_dir, run, metric_names)
    except DamagedFile as e:
      record = None
      damaged.append(e)
    if record is None:
      missing.append(run)
    else:
      records.append(record)
  folder = os.path.join(study_dir, RUNS_DIR)
  names = {run.name for run in runs}
  strays = sorted(n for n in (fileio.listdir(folder) if fileio.isdir(folder)
                              else ()) if n not in names and
                  fileio.isdir(os.path.join(folder, n)))
  return Contents(records, missing, damaged, strays)


def load_records(study_dir: str,
                 runs: Optional[Sequence[study_grid.Run]] = None
                ) -> List[Dict[str, object]]:
  """The whole records of the finished runs (of `runs`, default: the whole
  grid); `contents` also says which are missing or damaged."""
  shared, grid = load_study(study_dir)
  return contents(study_dir, study_runs(study_dir, grid) if runs is None
                  else runs,
                  shared["metrics"]).records


def load_test_arrays(study_dir: str, run_name: str) -> Dict[str, np.ndarray]:
  """The per-instance test arrays `execute_run` saved for a run (read as
  they are; `read_test_arrays` checks them)."""
  path = os.path.join(study_dir, RUNS_DIR, run_name, TEST_FILE)
  with fileio.open_file(path, "rb") as f, np.load(f) as arrays:
    return {name: arrays[name] for name in arrays.files}
