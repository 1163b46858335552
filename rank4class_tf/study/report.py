"""The study's report: results.csv and tables.md, figures and HParams logs.

Everything here is computed from the run records and per-instance test arrays
that `runner.execute_run` saved, so `write_report` regenerates the whole
report without TensorFlow training or SavedModel loading. The parts:

  selection  the chosen run of each (loss, interaction, seed), the cells
             and their statistics (hierarchical bootstrap, seed-level
             t-test, Holm)
  tables     tables.md: main tables, summary, regime, missing
  verdicts   the two tests and what is resolved, the contrasts, power,
             the metric claim as the paper states it
  paper_effects  the paper's effects beside ours (Tables 7 and 8), with a
             single run's noise, signs where ours is not noise
  findings   its other sections: CE bound, informativeness, fairness,
             provenance, robustness, per class
  figures    the bar charts and validation curves (matplotlib)
  hparams    TensorBoard's HParams logs
  common     titles, number formats and the one file writer
  summary    a summary small enough to commit, and a study started from it

This module reads a study folder (`read_inputs`) and writes the report
(`write_report`). Nothing is dropped without a word: the grid's runs without
a whole record (none yet, or a damaged study file, which is named) are
listed as missing, on the console and in tables.md, and so are folders under
runs/ that the grid in study.json does not name. The report is written under
`study.locked`, so reports started together (two `--report_only`, two
studies finishing at once) take turns; every file is written whole
(`fileio`) and the HParams logs are replaced, never duplicated. A write that
fails (a full disk, a read-only folder) raises ValueError naming the file;
the files written before it are whole.
"""

import csv
import dataclasses
import hashlib
import json
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import fileio
from rank4class_tf import catalog
from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import common as common_lib
from rank4class_tf.study import figures as figures_lib
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import hparams as hparams_lib
from rank4class_tf.study import paper_tables
from rank4class_tf.study import selection as selection_lib
from rank4class_tf.study import significance
from rank4class_tf.study import tables as tables_lib

RESULTS_FILE = "results.csv"
# What the last report was made from (`fingerprint`).
STAMP_FILE = "report.json"
TABLES_FILE = "tables.md"
FIGURES_DIR = "figures"


# A run's calibration (`evaluation.calibration_record`) in results.csv.
CALIBRATION_COLUMNS = ("nll", "ece", "brier", "calibrated_nll",
                       "calibrated_ece", "calibrated_brier")


def write_results_csv(path: str, records: Sequence[Dict],
                      chosen: Dict[Tuple[str, str, int], Dict],
                      shared: Dict[str, object],
                      metric_names: Sequence[str],
                      fair: Optional[Dict[str, Dict]] = None) -> None:
  """One row per run: hyper-parameters, selection, fairness marks (`lr_edge`,
  `units_edge`: low / high / only when the run's value is the lowest /
  highest / only one tried for its (loss, interaction, seed); `best_is_last`),
  metrics, time, the code that made it."""
  chosen_runs = {r["run"] for r in chosen.values()}
  fair = fair or selection_lib.fairness_marks(records, shared["train_steps"])
  columns = (["run", "loss", "interaction", "learning_rate", "mlp_units",
              "seed", "selected", "lr_edge", "units_edge", "best_is_last",
              "best_step"] +
             [f"validation_{m}" for m in metric_names] +
             [f"test_{m}" for m in metric_names] +
             ["test_softmax_ce", "test_neg_log_mrr", "test_neg_log_ndcg",
              "ce_bound_holds"] + [f"test_{m}" for m in CALIBRATION_COLUMNS] +
             ["calibration_temperature", "num_test", "train_seconds",
              "resumed_at_step", "git_commit", "git_dirty"] + sorted(shared))
  def write(f):
    writer = csv.writer(f)
    writer.writerow(columns)
    for r in records:
      row = {k: r.get(k) for k in columns}
      row["selected"] = r["run"] in chosen_runs
      row.update(fair[r["run"]])
      made = r.get("provenance") or {}
      row["git_commit"] = made.get("git_commit")
      row["git_dirty"] = made.get("git_dirty")
      row["mlp_units"] = "" if r["mlp_units"] is None else r["mlp_units"]
      for m in metric_names:
        row[f"validation_{m}"] = r["validation"][m]
        row[f"test_{m}"] = r["test"][m]
      calibrated = r.get("calibration") or {}  # Absent: an older record.
      for m in CALIBRATION_COLUMNS:
        row[f"test_{m}"] = calibrated.get(m)
      # Not `temperature`: that is a loss setting among the shared ones.
      row["calibration_temperature"] = calibrated.get("temperature")
      if r["train_seconds"] is not None:
        row["train_seconds"] = round(r["train_seconds"], 1)
      for k, v in shared.items():
        row[k] = json.dumps(v) if isinstance(v, (list, dict)) else v
      writer.writerow([_csv_value(row[k]) for k in columns])
  common_lib.write(path, write, newline="")


def _csv_value(value):
  if value is None:
    return ""
  if isinstance(value, float):
    return repr(value)
  return value


def check_options(metric_names: Sequence[str], select_metric: str,
                  num_samples: int, paper_table: Optional[str],
                  dataset: Optional[str] = None
                 ) -> List[paper_tables.PaperTable]:
  """Checks the report's options; returns the paper's tables to show
  (`paper_for`).

  Raises:
    ValueError: one line naming the flag.
  """
  if select_metric not in metric_names:
    raise ValueError(f"`select_metric`={select_metric!r} must be one of the "
                     f"study's `metrics` ({', '.join(metric_names)}).")
  if num_samples < significance.DEFAULT_SAMPLES:
    raise ValueError(f"`bootstrap_samples`={num_samples} must be >= "
                     f"{significance.DEFAULT_SAMPLES}.")
  return paper_for(dataset, paper_table)


def paper_for(dataset: Optional[str], paper_table: Optional[str]
             ) -> List[paper_tables.PaperTable]:
  """The paper's tables a report shows its effects beside: `--paper_table`
  if given, else the dataset's (`paper_tables.DATASET_TABLES`: GoEmotions
  -> Tables 7 and 8), else none.

  Raises:
    ValueError: naming --paper_table: unknown, unreadable, or of another
      dataset than the study's.
  """
  if paper_table:
    table = paper_tables.load(paper_table)
    if dataset and table.dataset and table.dataset != dataset:
      raise ValueError(f"`paper_table`={paper_table} is the paper's table "
                       f"of {table.dataset}; this study is of {dataset}.")
    return [table]
  return [paper_tables.load(name)
          for name in paper_tables.DATASET_TABLES.get(dataset, ())]
@dataclasses.dataclass
class Inputs:
  """What a report is made of, read from a study folder (`read_inputs`).

  Attributes:
    records: the whole records of the grid's runs, grid order.
    chosen: the chosen record of each (loss, interaction, seed).
    arrays: {chosen run: its per-instance test arrays}.
    missing: the grid's runs without a whole record, or chosen without
      readable test arrays (names, grid order).
    unreadable: {run: its unreadable study file (relative path)}.
    strays: run folders the grid does not name.
  """
  records: List[Dict]
  chosen: Dict[Tuple[str, str, int], Dict]
  arrays: Dict[str, Dict[str, np.ndarray]]
  missing: List[str]
  unreadable: Dict[str, str]
  strays: List[str]


def read_inputs(study_dir: str, grid: study_grid.Grid,
                metric_names: Sequence[str], select_metric: str,
                progress: Callable[[str], None] = print) -> Inputs:
  """Reads the records and the chosen runs' test arrays; writes nothing.

  A record or test-array file that cannot be read is named (one `progress`
  line each) and its run reported as missing: a run chosen without readable
  arrays is dropped and its (loss, interaction, seed) chosen again among the
  rest. Then one line lists the missing runs, one the stray folders.
  """
  runs = study_folder.study_runs(study_dir, grid)  # With --extend_grid's.
  found = study_folder.contents(study_dir, runs, metric_names)
  unreadable = {}
  for error in found.damaged:
    name = os.path.basename(os.path.dirname(error.path))
    unreadable[name] = os.path.relpath(error.path, study_dir)
    progress(f"{error.path} is damaged ({error.reason}): run {name} is "
             "reported as missing; the study command (without "
             "`report_only`) moves the file aside and evaluates the run "
             "again.")
  records, arrays = list(found.records), {}
  while True:
    chosen = selection_lib.select(records, select_metric)
    dropped = set()
    for record in chosen.values():
      name = record["run"]
      if name in arrays:
        continue
      path = os.path.join(study_dir, study_folder.RUNS_DIR, name,
                          study_folder.TEST_FILE)
      try:
        values = study_folder.read_test_arrays(study_dir, name, metric_names,
                                            record["num_test"])
        problem = None if values is not None else "not found"
      except study_folder.DamagedFile as e:
        values, problem = None, f"damaged ({e.reason})"
      if values is None:
        dropped.add(name)
        unreadable[name] = os.path.relpath(path, study_dir)
        progress(f"{path}: {problem}: run {name} is chosen but its test "
                 "arrays cannot be read; it is reported as missing (the "
                 "study command evaluates it again).")
      else:
        arrays[name] = values
    if not dropped:
      break
    records = [r for r in records if r["run"] not in dropped]
  present = {r["run"] for r in records}
  missing = [run.name for run in runs if run.name not in present]
  if missing:
    progress(f"{len(missing)} of the grid's {len(runs)} runs have no result "
             f"and are reported as missing: {', '.join(missing)}.")
    claims = study_claims.Claims(study_dir, study_claims.Worker()).all()
    held = [f"{name} ({claims[name].get('worker')}, heartbeat "
            f"{claims[name].get('beat')})" for name in missing
            if name in claims]
    if held:
      progress(f"{len(held)} of them are being trained (claimed by a worker, "
               f"with its heartbeat count): {', '.join(held)}.")
  if found.strays:
    progress(f"{os.path.join(study_dir, study_folder.RUNS_DIR)} holds "
             f"{len(found.strays)} folders that name no run of the grid in "
             f"{study_folder.STUDY_FILE} (not in the report): "
             f"{', '.join(found.strays)}.")
  return Inputs(records, chosen, arrays, missing, unreadable, found.strays)


def write_report(study_dir: str, select_metric: Optional[str] = None,
                 num_samples: int = significance.DEFAULT_SAMPLES,
                 paper_table: Optional[str] = None,
                 progress: Callable[[str], None] = print,
                 unless_current: bool = False) -> Dict[str, object]:
  """Writes results.csv, tables.md, figures/ and the HParams logs.

  Holds `study.locked(study_dir)` throughout: reports started together take
  turns, and each is whole. Each report leaves `report.json`, the
  fingerprint of what it was made from (every finished record, the
  options); with `unless_current`, a report whose fingerprint is already
  there is not written again: workers that finish a study together write
  its report once.

  Args:
    study_dir: the study's folder.
    select_metric: validation metric choosing each run's hyper-parameters
      (None: the study's `best_metric`).
    num_samples: bootstrap resamples (>= 10,000), raised for the largest
      Holm family (`significance.samples_for_family`; the report states the B
      used).
    paper_table: a `paper_tables` name or a JSON file of the paper's numbers
      to show beside ours.
    progress: takes one line per unreadable study file, one listing the
      missing runs and one the stray run folders (`read_inputs`).

  Returns:
    {"results": path, "tables": path, "figures": folder}, with
    "current": True where `unless_current` found the report current.

  Raises:
    ValueError: a bad argument (one line naming the flag), a study without
      finished runs, an unreadable study.json, or a file that cannot be
      written (naming it).
  """
  with study_folder.locked(study_dir):
    return _write_report(study_dir, select_metric, num_samples, paper_table,
                         progress, unless_current)


def fingerprint(records: Sequence[Dict], options) -> str:
  """SHA-256 of the finished records and the report's options."""
  digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
  for record in sorted(records, key=lambda r: r["run"]):
    digest.update(json.dumps(record, sort_keys=True).encode())
  return digest.hexdigest()


def _write_report(study_dir, select_metric, num_samples, paper_table,
                  progress, unless_current=False) -> Dict[str, object]:
  """`write_report`, its lock held."""
  shared, grid = study_folder.load_study(study_dir)
  metric_names = tuple(shared["metrics"])
  select_metric = select_metric or shared["best_metric"]
  paper = check_options(metric_names, select_metric, num_samples, paper_table,
                        shared.get("dataset"))
  inputs = read_inputs(study_dir, grid, metric_names, select_metric, progress)
  records, chosen = inputs.records, inputs.chosen
  if not records:
    raise ValueError(f"`study_dir`={study_dir} has no finished run yet.")
  paths = {"results": os.path.join(study_dir, RESULTS_FILE),
           "tables": os.path.join(study_dir, TABLES_FILE),
           "figures": os.path.join(study_dir, FIGURES_DIR)}
  stamp_path = os.path.join(study_dir, STAMP_FILE)
  stamp = fingerprint(inputs.records,
                      [select_metric, num_samples, paper_table,
                       sorted(inputs.missing), sorted(inputs.unreadable)])
  if unless_current and fileio.exists(stamp_path):
    try:
      if fileio.read_json(stamp_path).get("fingerprint") == stamp and all(
          fileio.exists(path) for path in paths.values()):
        return dict(paths, current=True)
    except (ValueError, AttributeError):
      pass  # A damaged stamp: the report is written again.
  order = common_lib.axis((r["loss"], r["interaction"]) for r in records)
  cells = selection_lib.build_cells(study_dir, chosen, metric_names, order,
                                    inputs.arrays)
  statistics = selection_lib.compute_statistics(cells, metric_names,
                                                num_samples)
  fair = selection_lib.fairness_marks(records, shared["train_steps"])
  study = fileio.read_json(os.path.join(study_dir, study_folder.STUDY_FILE))
  labels = None
  if inputs.arrays:
    labels = next(iter(inputs.arrays.values())).get("labels")
  text = tables_lib.tables_markdown(shared, grid, cells, records, metric_names,
                         select_metric, statistics, num_samples, paper,
                         inputs.missing, inputs.unreadable, inputs.strays,
                         fair, study, labels,
                         class_names_of(study_dir, shared))
  write_results_csv(paths["results"], records, chosen, shared, metric_names,
                    fair)
  common_lib.write(paths["tables"], lambda f: f.write(text))
  figures_lib.write_figures(paths["figures"], cells, records, chosen,
                            metric_names, statistics, select_metric, paper)
  hparams_lib.write_hparams(study_dir, records, grid, metric_names, chosen)
  common_lib.write(stamp_path, lambda f: json.dump(
      {"fingerprint": stamp, "runs": len(records)}, f))
  return paths


def class_names_of(study_dir: str, shared: Dict[str, object]) -> List[str]:
  """The study's class names: a run folder's classes.json, else the
  dataset's (loaded offline), else none (classes shown by id)."""
  for path in sorted(tf.io.gfile.glob(os.path.join(
      study_dir, study_folder.RUNS_DIR, "*", run_dir_lib.CLASSES_FILE)))[:1]:
    try:
      with fileio.open_file(path) as f:
        return list(json.load(f))
    except (OSError, ValueError):
      break
  try:
    # Loaded only for a study without a run's class file.
    from rank4class_tf.data import datasets  # pylint: disable=g-import-not-at-top
    if shared.get("dataset") in catalog.TFDS_DATASETS:
      return []  # Not prepared here, and not worth loading for names.
    config = config_lib.TrainConfig.create(**{
        k: v for k, v in shared.items()
        if k in config_lib.TrainConfig().flat()})
    return list(datasets.from_config(config.data).class_names)
  except Exception:  # pylint: disable=broad-except
    return []
