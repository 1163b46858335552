"""A study's summary: what its report is made of, small enough to commit
(`write_summary`), a study folder started from it on another machine
(`start_from_summary`, `--from_summary`), and a check that a committed
report is what today's code makes of its runs (`check_report`,
`--check_report`)."""

import filecmp
import json
import os
import shutil
import tempfile
from typing import List, Optional

import numpy as np

from rank4class_tf import fileio
from rank4class_tf.study import common as common_lib
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import report as report_lib
from rank4class_tf.study import significance


def check_summary_dir(study_dir: str, summary_dir: str) -> None:
  """Raises ValueError (one line) unless `summary_dir` can take a summary:
  not the study folder, and new, empty or holding a summary; both local
  (a summary is for a repository: copy a bucket's study folder first)."""
  _check_local(study_dir, "summary_dir")
  _check_local(summary_dir, "summary_dir")
  if os.path.abspath(summary_dir) == os.path.abspath(study_dir):
    raise ValueError(f"`summary_dir`={summary_dir} is the study folder.")
  if os.path.isdir(summary_dir) and os.listdir(summary_dir) and not (
      os.path.exists(os.path.join(summary_dir, study_folder.STUDY_FILE))):
    raise ValueError(f"`summary_dir`={summary_dir} is not empty and holds no "
                     f"{study_folder.STUDY_FILE}; choose a new or empty folder.")


def _check_local(path: str, flag: str) -> None:
  if not fileio.is_local(path):
    raise ValueError(f"`{flag}` needs local folders, and {path} is not one: "
                     "copy the study folder to a local one first (gsutil -m "
                     "cp -r, or `tf.io.gfile`).")


def _copy(source: str, target: str) -> None:
  """Copies a file whole (`fileio`), naming the target if it fails."""
  with open(source, "rb") as f:
    content = f.read()
  common_lib.write(target, lambda f: f.write(content), binary=True)


def write_summary(study_dir: str, summary_dir: str,
                  select_metric: Optional[str] = None) -> int:
  """Copies what the report is made of into `summary_dir`: small enough to
  commit, and a study folder `write_report` (`--report_only`) reads.

  `summary_dir` gets study.json, every finished run's study_result.json and
  the per-instance test arrays of the runs chosen by `select_metric`
  (compressed), summary.json (the runs whose arrays it leaves out), then
  the report itself. `start_from_summary` continues the study from it. A
  report with another select metric needs the arrays of other runs: the
  whole study folder. Runs whose files
  cannot be read are left out, as the study's own report leaves them out
  (and names them).

  Returns:
    The number of run records copied.

  Raises:
    ValueError: the study has no finished run, `summary_dir` is the study
      folder or holds something other than a summary, or a file cannot be
      written (naming it).
  """
  check_summary_dir(study_dir, summary_dir)
  shared, grid = study_folder.load_study(study_dir)
  inputs = report_lib.read_inputs(study_dir, grid, tuple(shared["metrics"]),
                       select_metric or shared["best_metric"],
                       progress=lambda line: None)
  if not inputs.records:
    raise ValueError(f"`study_dir`={study_dir} has no finished run yet.")
  try:
    os.makedirs(summary_dir, exist_ok=True)
  except OSError as e:
    raise ValueError(
        f"cannot write {summary_dir}: {e.strerror or e}.") from None
  runs_dir = os.path.join(summary_dir, study_folder.RUNS_DIR)
  with study_folder.locked(summary_dir):
    try:
      if os.path.isdir(runs_dir):
        shutil.rmtree(runs_dir)  # A summary is rewritten whole.
      for record in inputs.records:
        source = os.path.join(study_dir, study_folder.RUNS_DIR, record["run"])
        target = os.path.join(runs_dir, record["run"])
        os.makedirs(target)
        _copy(os.path.join(source, study_folder.RESULT_FILE),
              os.path.join(target, study_folder.RESULT_FILE))
        if record["run"] in inputs.arrays:
          arrays = inputs.arrays[record["run"]]
          common_lib.write(os.path.join(target, study_folder.TEST_FILE),
                 lambda f, a=arrays: np.savez_compressed(f, **a),
                 binary=True)
      _copy(os.path.join(study_dir, study_folder.STUDY_FILE),
            os.path.join(summary_dir, study_folder.STUDY_FILE))
      without = sorted(r["run"] for r in inputs.records
                       if r["run"] not in inputs.arrays)
      common_lib.write(os.path.join(summary_dir, study_folder.SUMMARY_FILE),
             lambda f: json.dump({"runs_without_arrays": without}, f,
                                 indent=1))
    except OSError as e:
      raise ValueError(f"cannot write {e.filename or summary_dir}: "
                       f"{e.strerror or e}.") from None
  report_lib.write_report(summary_dir,
                          select_metric,
                          progress=lambda line: None)
  return len(inputs.records)


def start_from_summary(summary_dir: str, study_dir: str) -> int:
  """Starts `study_dir` from a summary (`write_summary`) of an unfinished
  study, so that the study command goes on where it stopped on another
  machine: study.json, every run's record and test arrays are copied, and
  `summary.json` lists the runs whose arrays the summary left out (never
  chosen: a run not chosen among its cell's runs is never chosen later,
  as a study only adds runs), which the study counts as finished.

  Runs trained on from a summary (`--extend_steps`) start from scratch: a
  summary holds no checkpoint. Writes `study_dir` whole or not at all.

  Returns:
    The number of runs copied; 0 when `study_dir` already holds a study
    (it is continued as it is, the summary not read).

  Raises:
    ValueError: `summary_dir` is not a summary, `study_dir` holds something
      other than a study, or a file cannot be read or written (naming it).
  """
  _check_local(study_dir, "from_summary")
  _check_local(summary_dir, "from_summary")
  if os.path.exists(os.path.join(study_dir, study_folder.STUDY_FILE)):
    return 0
  if os.path.isdir(study_dir) and os.listdir(study_dir):
    raise ValueError(f"`study_dir`={study_dir} is not empty and holds no "
                     f"{study_folder.STUDY_FILE}: give `from_summary` a new or "
                     "empty folder.")
  if not os.path.isfile(os.path.join(summary_dir, study_folder.STUDY_FILE)):
    raise ValueError(f"`from_summary`={summary_dir} holds no "
                     f"{study_folder.STUDY_FILE}: not a study summary.")
  study_folder.load_study(summary_dir)  # Raises on a damaged study.json.
  source_runs = os.path.join(summary_dir, study_folder.RUNS_DIR)
  names = sorted(os.listdir(source_runs)) if os.path.isdir(source_runs) else []
  copied, without = 0, []
  try:
    with fileio.atomic_folder(study_dir, replace=False) as tmp:
      shutil.copyfile(os.path.join(summary_dir, study_folder.STUDY_FILE),
                      os.path.join(tmp, study_folder.STUDY_FILE))
      for name in names:
        source = os.path.join(source_runs, name)
        record = os.path.join(source, study_folder.RESULT_FILE)
        if not os.path.isfile(record):
          continue  # Not a run's summary: the report names strays.
        target = os.path.join(tmp, study_folder.RUNS_DIR, name)
        os.makedirs(target)
        shutil.copyfile(record, os.path.join(target, study_folder.RESULT_FILE))
        arrays = os.path.join(source, study_folder.TEST_FILE)
        if os.path.isfile(arrays):
          shutil.copyfile(arrays, os.path.join(target, study_folder.TEST_FILE))
        else:
          without.append(name)
        copied += 1
      with open(os.path.join(tmp, study_folder.SUMMARY_FILE), "w") as f:
        json.dump({"runs_without_arrays": without}, f, indent=1)
  except OSError as e:
    raise ValueError(f"cannot copy `from_summary`={summary_dir} to "
                     f"{e.filename or study_dir}: {e.strerror or e}.") from None
  return copied


def _report_files(study_dir: str) -> List[str]:
  """The report's files in `study_dir`, relative, sorted: results.csv,
  tables.md, report.json and figures/* (not the HParams event logs, which
  are named by time and host)."""
  names = [name for name in (report_lib.RESULTS_FILE, report_lib.TABLES_FILE,
                             report_lib.STAMP_FILE)
           if os.path.isfile(os.path.join(study_dir, name))]
  figures = os.path.join(study_dir, report_lib.FIGURES_DIR)
  if os.path.isdir(figures):
    names += [os.path.join(report_lib.FIGURES_DIR, name)
              for name in sorted(os.listdir(figures))]
  return names


def check_report(study_dir: str, select_metric: Optional[str] = None,
                 num_samples: int = significance.DEFAULT_SAMPLES,
                 paper_table: Optional[str] = None) -> List[str]:
  """Which files of a study's report differ from the report this code
  makes of its runs.

  The study's records and test arrays (a summary's, or a whole study
  folder's: never its checkpoints) are copied into a scratch folder
  (`start_from_summary`), `write_report` writes the report there, and the
  two are compared byte for byte: results.csv, tables.md, report.json (the
  fingerprint of the records and the options) and every figure. A file on
  one side only differs. Nothing in `study_dir` is written.

  Args:
    study_dir: a study folder or its summary, holding its report.
    select_metric, num_samples, paper_table: the report's options, as
      `write_report` takes them (defaults: the study's).

  Returns:
    The differing files, relative to `study_dir`, sorted; [] when the
    report is the one this code writes.

  Raises:
    ValueError: `study_dir` is not local (copy a bucket's study first),
      holds no study or no report, or its report cannot be made (naming
      the file).
  """
  _check_local(study_dir, "study_dir")
  if not os.path.isfile(os.path.join(study_dir, report_lib.TABLES_FILE)):
    raise ValueError(f"`study_dir`={study_dir} holds no report "
                     f"({report_lib.TABLES_FILE}): write it with "
                     "--report_only first.")
  scratch = tempfile.mkdtemp(prefix="rank4class_check_report-")
  try:
    copy = os.path.join(scratch, "study")
    start_from_summary(study_dir, copy)
    report_lib.write_report(copy, select_metric, num_samples, paper_table,
                            progress=lambda line: None)
    ours, theirs = _report_files(study_dir), _report_files(copy)
    differ = sorted(set(ours) ^ set(theirs))
    differ += [name for name in sorted(set(ours) & set(theirs))
               if not filecmp.cmp(os.path.join(study_dir, name),
                                  os.path.join(copy, name), shallow=False)]
    return sorted(differ)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
