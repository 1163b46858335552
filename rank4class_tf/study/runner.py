"""The Rank4Class study: the paper's loss x interaction grid, run and resumed.

A study trains one ordinary run (`training.train`, the code behind
`pipelines.train`) per point of the grid

  losses x interactions x seeds x learning rates x MLP widths

(the MLP width only for the interactions that have an MLP), evaluates each
run's best checkpoint on the validation and test splits with the
deterministic `metrics.evaluate_scores`, and keeps per-instance test metrics
for the paired tests of `study_report`. As in the paper (App. B), the learning
rate and the MLP width of each (loss, interaction, seed) are then chosen on
the validation split, and the test metrics of the chosen run are reported.

`study_dir` holds:

  study.json               the shared training settings, the grid so far,
                           the runs `--extend_grid` added (`extensions`)
                           and the code that created the study
                           (`provenance`); with `--choose_on_seed`, the
                           other seeds' runs at its choices (`followers`)
  runs/<run>/              one `pipelines.train` model_dir per run, plus
    study.log              the run's log (TensorFlow's INFO lines included)
    study_test.npz         per-instance test metrics and softmax CE
    study_result.json      the run's record, written last: a run whose record
                           and test arrays are whole and name the run is
                           finished and is never trained again
  results.csv, tables.md, figures/, events.out.tfevents.*.study_hparams
                           the report (`study_report.write_report`)
  summary.json             only in a study started from a summary
                           (`--from_summary`): the runs whose test arrays
                           the summary left out (never chosen), finished
                           all the same

A run's folder is named after its grid values
(`approx_ndcg.lc_mlp.lr0.001.u128.seed0`); the learning rate is written with
`%g` where that is exact and in full otherwise (`lr0.0012345678`), so two
grid values never share a folder.

A run killed mid-training resumes from its last validation (Keras'
BackupAndRestore, as `pipelines.train` does); a run killed during its export
or evaluation is redone from its exports or from scratch. Rerunning the same
command therefore completes the grid without redoing finished work, and with
`deterministic=True` the records equal those of an uninterrupted study.
Rerunning with another grid adds runs; changing a shared setting (any
`TrainConfig` field but the grid's) is refused.

Nothing is lost, nothing silently wrong:

* Studies started together into one folder merge their grids: `study.json`
  is read, merged and written under an exclusive lock on `study_dir`
  (`locked`), which the report holds too while it writes.
* A study file that cannot be read, or a record that names another run, is
  `DamagedFile`: the study command moves it aside (`<file>.damaged`) and
  evaluates its run again (its training is finished, so it is not trained
  again); the report names it and counts its run as missing.
* A run folder whose `config.json` holds other settings than its run is
  refused before anything is written, never taken as finished.
"""

import contextlib
import dataclasses
import fcntl
import json
import logging
import math
import os
import time
from typing import (Callable, Collection, Dict, Iterator, List, Optional,
                    Sequence, Tuple)

import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf.modeling import interactions
from rank4class_tf import provenance
from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving
from rank4class_tf.sorting import losses as sodeep_losses
from rank4class_tf.sorting import sorters
from rank4class_tf.study import extend as study_extend
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_guard
from rank4class_tf.training import trainer as training

# The paper's grid (Tables 7-12 and App. B).
PAPER_LOSSES = ("softmax", "pairwise_logistic", "approx_ndcg",
                "gumbel_approx_ndcg", "mse")
PAPER_INTERACTIONS = ("dot", "lc_mlp", "concat_mlp")
# 1e-7 .. 0.1 by factors of about 3 (1, 3, 10, 30, ...), each the float of
# its decimal literal (3e-05, where 3 * 10.0 ** -5 is 3.0000000000000004e-05).
PAPER_LEARNING_RATES = tuple(float(f"{m}e{e}") for e in range(-7, -1)
                             for m in (1, 3)) + (0.1,)
PAPER_MLP_UNITS = (64, 128, 256, 512)
# The classical classifier every cell is compared with.
BASELINE = ("softmax", "dot")
# The interactions whose width is `mlp_units`.
MLP_INTERACTIONS = ("lc_mlp", "concat_mlp")
# `--losses=sodeep_spearman@pairwise`: a SoDeep loss with its own sorter, so
# that one study compares sorters cell by cell (the shared --sorter is the
# default of the unqualified sodeep_* losses).
SORTER_SEPARATOR = "@"
# The fields each run sets; every other TrainConfig field is shared.
GRID_FIELDS = ("loss", "interaction", "learning_rate", "mlp_units", "seed")
_PER_RUN_FIELDS = GRID_FIELDS + ("model_dir", "overwrite")
# The seeds `tf.keras.utils.set_random_seed` takes.
MAX_SEED = 2**32 - 1


def split_loss(label: str) -> Tuple[str, Optional[str]]:
  """(loss, sorter) of a grid loss: `sodeep_map@lstm` -> (sodeep_map, lstm),
  `softmax` -> (softmax, None)."""
  loss, separator, sorter = label.partition(SORTER_SEPARATOR)
  return loss, (sorter if separator else None)


def _check_loss_label(label: str) -> None:
  """Raises ValueError naming --losses for an unknown loss or sorter."""
  loss, sorter = split_loss(label)
  if loss not in losses.LOSS_NAMES:
    raise ValueError(f"--losses: {label!r} is not valid; choose from: "
                     f"{', '.join(losses.LOSS_NAMES)} (sodeep_* losses may "
                     f"name their sorter: sodeep_spearman@pairwise).")
  if sorter is None:
    return
  if loss not in sodeep_losses.LOSSES:
    raise ValueError(f"--losses: {label!r} names a sorter, but only the "
                     f"SoDeep losses take one ({', '.join(sodeep_losses.LOSSES)}).")
  if sorter not in sorters.SORTER_NAMES:
    raise ValueError(f"--losses: {label!r}: unknown sorter {sorter!r}; "
                     f"choose from: {', '.join(sorters.SORTER_NAMES)}.")


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


def rate_text(rate: float) -> str:
  """A learning rate as run names and tables write it: `%g` where that is
  exact, else in full (repr), so that the text gives the rate back.

  >>> rate_text(0.001), rate_text(3e-05), rate_text(0.0012345678)
  ('0.001', '3e-05', '0.0012345678')
  """
  short = f"{rate:g}"
  return short if float(short) == rate else repr(float(rate))


@dataclasses.dataclass(frozen=True)
class Run:
  """One point of the grid: a training run.

  `mlp_units` is None for interactions without an MLP (`dot`), which have no
  width to tune.
  """
  loss: str
  interaction: str
  learning_rate: float
  mlp_units: Optional[int]
  seed: int

  @property
  def name(self) -> str:
    """Folder name, e.g. `approx_ndcg.lc_mlp.lr0.001.u128.seed0`: one per
    run, the learning rate exact (`rate_text`)."""
    units = "" if self.mlp_units is None else f".u{self.mlp_units}"
    return (f"{self.loss}.{self.interaction}.lr{rate_text(self.learning_rate)}"
            f"{units}.seed{self.seed}")

  @property
  def cell(self) -> Tuple[str, str]:
    """(loss, interaction): the table cell the run belongs to."""
    return self.loss, self.interaction


@dataclasses.dataclass(frozen=True)
class Grid:
  """The study's grid; every list non-empty and without repeats.

  `cells` (`--cells`, `loss.interaction` each) restricts the study to those
  cells of losses x interactions (empty: every cell), for a design that is
  not a product, e.g. five losses on `dot` plus two losses on all three
  interactions. `choose_on_seed` (`--choose_on_seed`) tunes the learning
  rate and width on that seed only: the grid's other seeds run each cell's
  choice there (`followers`), where by default (None) every seed chooses its
  own, as the paper does (App. B).
  """
  losses: Tuple[str, ...] = PAPER_LOSSES
  interactions: Tuple[str, ...] = PAPER_INTERACTIONS
  seeds: Tuple[int, ...] = (0, 1, 2)
  learning_rates: Tuple[float, ...] = (1e-3,)
  mlp_units: Tuple[int, ...] = (128,)
  cells: Tuple[str, ...] = ()
  choose_on_seed: Optional[int] = None

  @classmethod
  def from_json(cls, values: Dict[str, object]) -> "Grid":
    """The grid study.json holds (`dataclasses.asdict`; older studies lack
    `cells` and `choose_on_seed`)."""
    values = dict(values)
    seed = values.pop("choose_on_seed", None)
    if seed is not None and (isinstance(seed, bool) or
                             not isinstance(seed, int)):
      raise TypeError(f"choose_on_seed {seed!r} is not a seed")
    return cls(choose_on_seed=seed,
               **{k: tuple(v) for k, v in values.items()})

  def validate(self) -> None:
    """Raises ValueError naming the flag of an empty list or unknown name."""
    valid = {"interactions": interactions.ALL_NAMES}
    for cell in self.cells:
      loss, _, interaction = cell.rpartition(".")
      if interaction not in interactions.ALL_NAMES or not loss:
        raise ValueError(
            f"--cells: {cell!r} is not loss.interaction with an interaction "
            f"of: {', '.join(interactions.ALL_NAMES)}.")
    for name in ("losses", "interactions", "seeds", "learning_rates",
                 "mlp_units"):
      values = getattr(self, name)
      if not values:
        raise ValueError(f"--{name} is empty; give at least one value.")
      if len(set(values)) != len(values):
        raise ValueError(f"--{name} repeats a value: "
                         f"{','.join(map(str, values))}.")
      for value in values:
        if name == "losses":
          _check_loss_label(value)
        if name in valid and value not in valid[name]:
          raise ValueError(f"--{name}: {value!r} is not valid; choose from: "
                           f"{', '.join(valid[name])}.")
    for seed in self.seeds:
      if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seeds: {seed} must be between 0 and 2**32 - 1.")
    for rate in self.learning_rates:
      if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"--learning_rates: {rate!r} must be > 0.")
    for units in self.mlp_units:
      if units <= 0:
        raise ValueError(f"--mlp_units: {units!r} must be > 0.")
    if len(set(self.cells)) != len(self.cells):
      raise ValueError(f"--cells repeats a cell: {','.join(self.cells)}.")
    for cell in self.cells:
      loss, _, interaction = cell.rpartition(".")
      if loss not in self.losses or interaction not in self.interactions:
        raise ValueError(
            f"--cells: {cell!r} is not a cell of --losses x --interactions "
            f"(write loss.interaction, e.g. softmax.dot).")
    if self.choose_on_seed is not None and (
        self.choose_on_seed not in self.seeds):
      raise ValueError(f"--choose_on_seed={self.choose_on_seed} is not one "
                       f"of --seeds ({','.join(map(str, self.seeds))}).")

  def cell_keys(self) -> List[Tuple[str, str]]:
    """The (loss, interaction) cells, in grid order."""
    if self.cells:
      return [tuple(cell.rpartition(".")[::2]) for cell in self.cells]
    return [(loss, interaction) for loss in self.losses
            for interaction in self.interactions]

  def tuned_seeds(self) -> Tuple[int, ...]:
    """The seeds whose runs try every value (all, or `choose_on_seed`)."""
    if self.choose_on_seed is None:
      return self.seeds
    return (self.choose_on_seed,)

  def runs(self) -> List[Run]:
    """The runs, seed by seed: every cell gets its first seed early. With
    `choose_on_seed`, that seed's only (the others follow its choices)."""
    runs = []
    for seed in self.tuned_seeds():
      for loss, interaction in self.cell_keys():
        widths = (self.mlp_units if interaction in MLP_INTERACTIONS
                  else (None,))
        for rate in self.learning_rates:
          runs.extend(Run(loss, interaction, rate, units, seed)
                      for units in widths)
    return runs

  def union(self, other: "Grid") -> "Grid":
    """The grid of both, each list in first-seen order.

    Raises:
      ValueError: the two choose on different seeds (naming the flag).
    """
    if self.choose_on_seed != other.choose_on_seed:
      raise ValueError(
          f"--choose_on_seed={_flag_value(other.choose_on_seed)} differs "
          f"from the study's ({_flag_value(self.choose_on_seed)}); pass the "
          "same value, or another --study_dir.")
    def merge(a, b):
      return tuple(dict.fromkeys(tuple(a) + tuple(b)))
    cells = ()
    if self.cells or other.cells:
      cells = merge(*(tuple(f"{l}.{i}" for l, i in g.cell_keys())
                      for g in (self, other)))
    return Grid(*(merge(getattr(self, name), getattr(other, name))
                  for name in ("losses", "interactions", "seeds",
                               "learning_rates", "mlp_units")),
                cells=cells, choose_on_seed=self.choose_on_seed)


def shared_settings(config: config_lib.TrainConfig) -> Dict[str, object]:
  """The TrainConfig fields every run of a study shares, as JSON values."""
  values = json.loads(json.dumps(config.flat()))
  return {k: v for k, v in values.items() if k not in _PER_RUN_FIELDS}


def loss_settings(base: config_lib.TrainConfig,
                  label: str) -> Dict[str, str]:
  """The flags a grid loss sets: `sodeep_map@lstm` -> loss and sorter."""
  loss, sorter = split_loss(label)
  return {"loss": loss, "sorter": sorter or base.loss.sorter}


def run_config(base: config_lib.TrainConfig, run: Run,
               study_dir: str) -> config_lib.TrainConfig:
  """The TrainConfig of one run: the shared settings plus the run's own."""
  return base.replace(
      **loss_settings(base, run.loss), interaction=run.interaction,
      learning_rate=run.learning_rate,
      mlp_units=(base.model.mlp_units if run.mlp_units is None
                 else run.mlp_units),
      seed=run.seed, model_dir=run_dir(study_dir, run), overwrite=False,
      feature_cache_dir=feature_cache_dir(base, study_dir))


def feature_cache_dir(base: config_lib.TrainConfig, study_dir: str) -> str:
  """Where the study's frozen runs share their feature caches:
  --feature_cache_dir, by default `<study_dir>/feature_cache`."""
  return (base.trainer.feature_cache_dir or
          os.path.join(study_dir, FEATURE_CACHE_DIR))


def run_dir(study_dir: str, run: Run) -> str:
  return os.path.join(study_dir, RUNS_DIR, run.name)


def _read_json(path: str):
  with open(path) as f:
    return json.load(f)


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


def _cannot_write(path: str, error: OSError) -> ValueError:
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
  """
  fd = os.open(study_dir, os.O_RDONLY | os.O_DIRECTORY)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield
  finally:
    os.close(fd)  # Releases the lock.


def load_study(study_dir: str) -> Tuple[Dict[str, object], Grid]:
  """(shared settings, grid so far) of an existing study.

  Raises:
    ValueError: no study.json, or one that cannot be read (naming it).
  """
  path = os.path.join(study_dir, STUDY_FILE)
  if not os.path.exists(path):
    raise ValueError(f"--study_dir={study_dir} holds no study ({STUDY_FILE} "
                     "not found).")
  try:
    study = _read_json(path)
    grid = Grid.from_json(study["grid"])
    shared = study["shared"]
    if not isinstance(shared, dict):
      raise TypeError("'shared' is not an object")
  except (ValueError, TypeError, KeyError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({_reason(e)}); it holds the "
                     "study's shared settings and grid: restore it, or start "
                     "another --study_dir.") from None
  return shared, grid


def load_extensions(study_dir: str) -> List[study_extend.Extension]:
  """The runs `--extend_grid` added to the study, in the order added."""
  path = os.path.join(study_dir, STUDY_FILE)
  try:
    raw = _read_json(path).get("extensions", [])
    return [study_extend.Extension(
        Run(e["loss"], e["interaction"], float(e["learning_rate"]),
            e["mlp_units"], int(e["seed"])), int(e["round"]), e["reason"])
            for e in raw]
  except (ValueError, TypeError, KeyError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({_reason(e)}): its "
                     "extensions are damaged.") from None


def load_followers(study_dir: str) -> Dict[str, str]:
  """{run: the run it follows} of the runs `--choose_on_seed` added: a seed's
  run at the values the chosen seed chose for its cell."""
  path = os.path.join(study_dir, STUDY_FILE)
  try:
    raw = _read_json(path).get("followers", {})
    return {str(k): str(v) for k, v in dict(raw).items()}
  except (ValueError, TypeError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({_reason(e)}): its "
                     "followers are damaged.") from None


def parse_run_name(name: str) -> Run:
  """The Run a folder name names (`Run.name` read back).

  >>> parse_run_name("approx_ndcg.lc_mlp.lr0.001.u128.seed2")
  Run(loss='approx_ndcg', interaction='lc_mlp', learning_rate=0.001, mlp_units=128, seed=2)
  """
  head, _, seed = name.rpartition(".seed")
  units = None
  if ".u" in head.rpartition(".lr")[2]:
    head, _, units_text = head.rpartition(".u")
    units = int(units_text)
  cell, _, rate = head.rpartition(".lr")
  loss, _, interaction = cell.rpartition(".")
  run = Run(loss, interaction, float(rate), units, int(seed))
  if run.name != name:
    raise ValueError(f"{name!r} is not a run name")
  return run


def study_runs(study_dir: str, grid: Optional[Grid] = None) -> List[Run]:
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
      added.append(parse_run_name(name))
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
    study = _read_json(path)
    known = {Run(e["loss"], e["interaction"], float(e["learning_rate"]),
                 e["mlp_units"], int(e["seed"])).name
             for e in study.get("extensions", [])}
    study["extensions"] = study.get("extensions", []) + [
        e.to_json() for e in new if e.run.name not in known]
    try:
      fileio.write_json_atomically(path, study)
    except OSError as e:
      raise _cannot_write(path, e) from None


def add_followers(study_dir: str, new: Dict[str, str]) -> None:
  """Records `--choose_on_seed` followers in study.json (under `locked`)."""
  path = os.path.join(study_dir, STUDY_FILE)
  with locked(study_dir):
    study = _read_json(path)
    study["followers"] = dict(study.get("followers", {}), **new)
    try:
      fileio.write_json_atomically(path, study)
    except OSError as e:
      raise _cannot_write(path, e) from None


def _reason(error: Exception) -> str:
  """An exception as a short phrase: `Unterminated string starting at: line
  1 column 5 (char 4)`, `no 'grid'`."""
  if isinstance(error, KeyError):
    return f"no {error}"
  return str(error).split("\n")[0] or type(error).__name__


def check_settings(base: config_lib.TrainConfig, grid: Grid) -> None:
  """Checks the grid and every run's config; writes nothing.

  Raises:
    ValueError: one line naming the flag.
  """
  grid.validate()
  if base.data.dataset in catalog.MULTI_LABEL_DATASETS:
    raise ValueError(f"--dataset={base.data.dataset} is multi-label; the study "
                     "reproduces the paper's single-label tables.")
  for name in base.trainer.metrics:
    if metrics.is_multilabel(name):
      raise ValueError(f"--metrics: {name} is a multi-label metric; the "
                       "study takes ranking metrics (top<k>_accuracy, "
                       "ndcg@<k>, ndcg, mrr, precision@<k>).")
  for run in grid.runs():
    checks.validate(run_config(base, run, "unused"))


def _check_folder(study_dir: str) -> None:
  """Refuses a folder that holds files but no study (a study.json being
  written by another study, `.study.json.tmp-*`, counts as a study)."""
  if not os.path.isdir(study_dir):
    return
  entries = os.listdir(study_dir)
  writing = [e for e in entries
             if e.startswith("." + STUDY_FILE + fileio.TMP_MARK)]
  if entries and STUDY_FILE not in entries and len(writing) < len(entries):
    raise ValueError(f"--study_dir={study_dir} is not empty and holds no "
                     f"{STUDY_FILE}; choose a new or empty folder.")


def open_study(study_dir: str, base: config_lib.TrainConfig,
               grid: Grid) -> Grid:
  """Creates `study_dir`, or checks that it holds the same study.

  Everything is checked before anything is written: a bad grid, a bad shared
  setting, a folder holding something else, or a shared setting that differs
  from the study already in `study_dir` raises ValueError (one line naming
  the flag) and leaves the folder as it was. study.json is read, merged and
  written under `locked`, so studies started together merge their grids.

  Returns:
    The study's whole grid: the union of the grids run into it so far.

  Raises:
    ValueError: one line, as above, or naming the path that cannot be
      written (a read-only folder, a full disk).
  """
  check_settings(base, grid)
  shared = shared_settings(base)
  path = os.path.join(study_dir, STUDY_FILE)
  _check_folder(study_dir)
  try:
    os.makedirs(study_dir, exist_ok=True)
  except OSError as e:
    raise _cannot_write(study_dir, e) from None
  with locked(study_dir):
    # Again: another study may have written study.json meanwhile.
    _check_folder(study_dir)
    kept = {"provenance": provenance.collect()}
    if os.path.exists(path):
      grid = _merge(study_dir, shared, grid)
      # What earlier commands recorded (extensions, the creator's code).
      kept = {k: v for k, v in _read_json(path).items()
              if k not in ("shared", "grid")}
    try:
      fileio.write_json_atomically(path, dict(
          kept, shared=shared, grid=dataclasses.asdict(grid)))
      os.makedirs(os.path.join(study_dir, RUNS_DIR), exist_ok=True)
    except OSError as e:
      raise _cannot_write(path, e) from None
  return grid


def _merge(study_dir: str, shared: Dict[str, object], grid: Grid) -> Grid:
  """The union of `grid` and the study's; refuses other shared settings."""
  old_shared, old_grid = load_study(study_dir)
  # A setting added to TrainConfig after the study began had its default.
  # (Or, for a setting whose absence meant another behaviour, that value.)
  defaults = dict(shared_settings(config_lib.TrainConfig()),
                  **config_lib.LEGACY_VALUES)
  old_shared = config_lib.upgrade(dict(
      {k: v for k, v in defaults.items() if k not in old_shared},
      **old_shared))
  for key in sorted(set(shared) | set(old_shared)):
    new, old = shared.get(key), old_shared.get(key)
    if key == "length_bucketing":  # It changes text studies only.
      text_study = shared.get("dataset") in catalog.TEXT_DATASETS
      new, old = bool(new) and text_study, bool(old) and text_study
    if new != old:
      raise ValueError(
          f"--{key}={_flag_value(shared.get(key))} differs from the study "
          f"in {study_dir} ({key}={_flag_value(old_shared.get(key))}); "
          "pass the same value, or another --study_dir.")
  return old_grid.union(grid)


def _flag_value(value) -> str:
  if value is None:
    return "(not set)"
  if isinstance(value, (list, tuple)):
    return ",".join(map(str, value))
  return str(value)


def _number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _record_problem(record, run: Run,
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


def read_record(study_dir: str, run: Run,
                metric_names: Sequence[str]) -> Optional[Dict[str, object]]:
  """The run's record; None when it has none.

  Raises:
    DamagedFile: the record cannot be parsed, lacks what the report reads
      (`RECORD_KEYS`, a metric of `metric_names`) or names another run.
  """
  path = os.path.join(run_dir(study_dir, run), RESULT_FILE)
  if not os.path.exists(path):
    return None
  try:
    record = _read_json(path)
  except ValueError as e:  # JSONDecodeError, UnicodeDecodeError.
    raise DamagedFile(path, _reason(e)) from None
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
  if not os.path.exists(path):
    return None
  with open(path, "rb") as f:
    try:
      with np.load(f, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    except Exception as e:  # pylint: disable=broad-except
      # BadZipFile, EOFError, ValueError, zlib.error: whatever a damaged
      # archive raises.
      raise DamagedFile(path, f"{type(e).__name__}: {_reason(e)}") from None
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
  while os.path.exists(target):
    i += 1
    target = f"{path}{DAMAGED_SUFFIX}.{i}"
  try:
    os.rename(path, target)
  except OSError as e:
    raise _cannot_write(target, e) from None
  return target


def load_summarized(study_dir: str) -> frozenset:
  """The runs whose test arrays a summary left out (`SUMMARY_FILE`): none
  unless the study was started from a summary."""
  path = os.path.join(study_dir, SUMMARY_FILE)
  if not os.path.exists(path):
    return frozenset()
  try:
    names = _read_json(path)["runs_without_arrays"]
    if not isinstance(names, list):
      raise TypeError("runs_without_arrays is not a list")
    return frozenset(str(name) for name in names)
  except (ValueError, TypeError, KeyError) as e:
    raise ValueError(f"{path} cannot be read ({_reason(e)}); it is the "
                     "summary's list of runs without test arrays: copy it "
                     "again from the summary.") from None


def finished_record(study_dir: str, run: Run, metric_names: Sequence[str],
                    progress: Callable[[str], None] = print,
                    summarized: Collection[str] = ()
                   ) -> Tuple[Optional[Dict[str, object]],
                              Optional[Dict[str, object]]]:
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


def check_run_folder(base: config_lib.TrainConfig, run: Run,
                     study_dir: str) -> None:
  """Refuses a run folder whose config.json holds other settings than the
  run (a folder copied or renamed by hand): it must never be taken as the
  run's, finished or resumed. Writes nothing.

  Raises:
    ValueError: one line naming the folder and the differing settings.
  """
  folder = run_dir(study_dir, run)
  path = run_dir_lib.RunDir(folder).config_file
  if not os.path.exists(path):
    return
  try:
    old = serving.load_config(folder).flat()
  except (ValueError, TypeError, KeyError) as e:
    raise ValueError(f"{path} cannot be read ({_reason(e)}); move {folder} "
                     f"out of {RUNS_DIR}/ (the study then trains the run "
                     "afresh).") from None
  new = builders.resolve_defaults(run_config(base, run, study_dir)).flat()
  # Where the study keeps its feature cache is no part of a run's identity.
  old.pop("feature_cache_dir", None)
  differ = run_guard.differences(old, new)
  if differ:
    raise ValueError(
        f"{folder} holds a run with other settings than the study's run "
        f"{run.name}: {'; '.join(differ)}. Move the folder out of "
        f"{RUNS_DIR}/ (the study then trains the run afresh).")


@contextlib.contextmanager
def _log_to(path: str) -> Iterator[None]:
  """Sends Python logging (absl, TensorFlow) and warnings to `path` only.

  TensorFlow's logger has a console handler of its own when it was imported
  before absl configured the root logger; it is silenced too.
  """
  root, tf_logger = logging.getLogger(), tf.get_logger()
  saved = (root.handlers[:], root.level, tf_logger.handlers[:],
           tf_logger.propagate)
  handler = logging.FileHandler(path)
  handler.setFormatter(logging.Formatter(
      "%(asctime)s %(levelname)s %(name)s: %(message)s"))
  root.handlers = [handler]
  root.setLevel(logging.INFO)
  tf_logger.handlers = []
  tf_logger.propagate = True
  logging.captureWarnings(True)
  try:
    yield
  finally:
    logging.captureWarnings(False)
    root.handlers, level, tf_logger.handlers, tf_logger.propagate = saved
    root.setLevel(level)
    handler.close()


def _validation_curves(model_dir: str, eval_every: int
                      ) -> Dict[str, List[List[float]]]:
  """{metric Keras name: [[training step, value], ...]} of the validations,
  epoch e ending at training step (e + 1) * eval_every."""
  return {tag: [[(epoch + 1) * eval_every, v]
                for epoch, v in sorted(points.items())]
          for tag, points in
          run_dir_lib.RunDir(model_dir).validation_curves().items()}


def softmax_cross_entropy(labels: np.ndarray, scores: np.ndarray
                         ) -> np.ndarray:
  """Per-instance -log softmax(scores)[label], [n] float64."""
  scores = np.asarray(scores, np.float64)
  top = scores.max(axis=1, keepdims=True)
  log_norm = np.log(np.exp(scores - top).sum(axis=1)) + top[:, 0]
  return log_norm - scores[np.arange(len(labels)), labels]


def evaluate_run(config: config_lib.TrainConfig, data
                ) -> Tuple[Dict[str, object], Dict[str, np.ndarray]]:
  """Scores a finished run's best export on validation and test (its best
  checkpoint, for a run with no export or trained from a feature cache).

  Returns:
    (its record's metrics, per-instance test arrays: one [n] per metric,
    `softmax_ce`, and the labels).
  """
  names = tuple(config.trainer.metrics)
  if builders.uses_feature_cache(config) or not config.trainer.export:
    # The best checkpoint, from the cached features when the run has them
    # (seconds, where the export would run the encoder on both splits).
    scored = training.checkpoint_scores(config, data)
    (val_labels, val_scores), (labels, scores) = (scored["validation"],
                                                  scored["test"])
  else:
    ranker = serving.ExportedRanker(config.trainer.model_dir,
                                    run_dir_lib.BEST_EXPORT)
    val_labels, val_scores = serving.split_scores(ranker, data, "validation")
    labels, scores = serving.split_scores(ranker, data, "test")
  validation = metrics.evaluate_scores(val_labels, val_scores, names)
  per = metrics.per_instance(labels, scores,
                             tuple(dict.fromkeys(names + ("mrr", "ndcg"))))
  # One-hot labels: every list has weight 1, so these means are exactly what
  # `evaluate_scores` returns, without ranking the test split twice.
  test = {name: float(per[name].mean()) for name in names}
  ce = softmax_cross_entropy(labels, scores)
  mrr, ndcg = float(per["mrr"].mean()), float(per["ndcg"].mean())
  record = {
      "validation": validation,
      "test": test,
      "num_test": int(len(labels)),
      # Bruch et al. 2019: CE >= mean log rank >= -log MRR >= -log NDCG.
      "test_softmax_ce": float(ce.mean()),
      "test_neg_log_mrr": -math.log(mrr) if mrr > 0 else math.inf,
      "test_neg_log_ndcg": -math.log(ndcg) if ndcg > 0 else math.inf,
  }
  record["ce_bound_holds"] = bool(record["test_softmax_ce"] >=
                                  record["test_neg_log_mrr"])
  arrays = {name: per[name] for name in names}
  arrays.update(softmax_ce=ce, labels=np.asarray(labels, np.int64))
  return record, arrays


def _best_step(config: config_lib.TrainConfig) -> Optional[int]:
  return run_dir_lib.RunDir(config.trainer.model_dir).best_step(
      config.trainer.eval_every)


def execute_run(base: config_lib.TrainConfig, run: Run, study_dir: str,
                data, earlier: Optional[Dict[str, object]] = None,
                extension: Optional[study_extend.Extension] = None,
                train_steps: Optional[int] = None,
                follows: Optional[str] = None) -> Dict[str, object]:
  """Trains (or resumes) and evaluates one run; returns its record.

  A run whose training finished before is only evaluated; its record keeps
  the training time of `earlier` (its previous record), if given. The
  record names the code that made it (`provenance`) and, for a run that
  `--extend_grid` added, its round and reason (`extension`); for one that
  `--choose_on_seed` added, the run whose choice it follows (`follows`).
  """
  config = run_config(base, run, study_dir)
  extended = None
  if train_steps and train_steps != config.trainer.train_steps:
    # `--extend_steps`: the finished run goes on to `train_steps`.
    extended = {"from": config.trainer.train_steps, "to": train_steps}
    config = config.replace(train_steps=train_steps)
  folder = config.trainer.model_dir
  eval_every = config.trainer.eval_every
  resumed_at = 0
  train_seconds = None
  if earlier is not None:
    resumed_at = earlier["resumed_at_step"]
    train_seconds = earlier["train_seconds"]
  os.makedirs(folder, exist_ok=True)
  with _log_to(os.path.join(folder, LOG_FILE)):
    if not training.is_trained(config):
      # Unfinished, or killed during its exports: `train` resumes from the
      # backup (kept until both exports are written) or finishes them.
      resumed_at = run_dir_lib.RunDir(folder).resume_epoch() * eval_every
      start = time.time()
      try:
        training.train(config)
      except run_guard.RunInUse as e:
        raise ValueError(
            f"run {run.name} of --study_dir={study_dir} is being trained by "
            f"another process (pid {e.pid}); wait for it to end, or give "
            "this command a grid without it (other --seeds, --losses, ...)."
        ) from None
      train_seconds = time.time() - start
    record, arrays = evaluate_run(config, data)
    record.update(dataclasses.asdict(run), run=run.name,
                  best_step=_best_step(config), train_seconds=train_seconds,
                  resumed_at_step=resumed_at,
                  validation_curve=_validation_curves(folder, eval_every),
                  provenance=provenance.collect(),
                  extension=(None if extension is None else
                             {"round": extension.round,
                              "reason": extension.reason}),
                  extended_steps=extended, follows=follows)
  # The arrays first: a record is written last, and only over whole arrays.
  path = os.path.join(folder, TEST_FILE)
  try:
    fileio.write_atomically(path, lambda f: np.savez(f, **arrays),
                            binary=True)
    path = os.path.join(folder, RESULT_FILE)
    fileio.write_json_atomically(path, record)
  except OSError as e:
    raise _cannot_write(path, e) from None
  tf.keras.backend.clear_session()
  return record


def run_study(study_dir: str, base: config_lib.TrainConfig, grid: Grid,
              progress: Callable[[str], None] = print,
              extend_grid: int = 0, extend_steps: float = 0.) -> List[Run]:
  """Runs every unfinished run of `grid`; returns the runs of the whole study.

  The grid, every run's config, the data, the files the runs read and the
  run folders already there (`check_run_folder`) are checked first: a bad
  one raises ValueError before anything is written.

  A run is finished when its record and test arrays are whole and name it
  (`finished_record`); damaged ones are moved aside and the run evaluated
  again. Prints one line per finished run (through `progress`): its place
  in the grid, name, validation and test metrics, time, and the estimated
  time left (the mean time of the runs trained so far in this call, times
  the runs left).

  With `extend_grid` > 0, the grid is then extended where a choice is on
  its edge (`study_extend`), round by round, up to `extend_grid` rounds per
  (loss, interaction, seed); the extensions made before (study.json) are
  trained first.

  With `extend_steps` = F > 1, each chosen run whose best validation is its
  last one (still improving) then goes on to F times its steps (rounded up
  to a multiple of eval_every), once (`training.extension_start`); the
  steps are recorded in study.json (`extended_steps`) and in the run's
  record, and the choice is made again.
  """
  if extend_grid < 0:
    raise ValueError(f"--extend_grid={extend_grid} must be >= 0.")
  if extend_steps and not extend_steps > 1:
    raise ValueError(f"--extend_steps={extend_steps:g} must be 0 (no "
                     "extension) or > 1.")
  # Everything a run reads is checked before the study writes anything.
  check_settings(base, grid)
  data = builders.load_data(base)
  for loss in grid.losses:
    checks.check_files(base.replace(**loss_settings(base, loss)), data)
  for run in grid.runs():
    check_run_folder(base, run, study_dir)
  whole = open_study(study_dir, base, grid)
  extensions = {e.run.name: e for e in load_extensions(study_dir)}
  followers = load_followers(study_dir)
  cells = {r.cell for r in grid.runs()}
  runs = grid.runs() + [e.run for e in extensions.values()
                        if e.run.cell in cells and e.run.seed in grid.seeds]
  runs += [run for run in map(parse_run_name, followers)
           if run.cell in cells and run.seed in grid.seeds and
           run not in runs]
  names = base.trainer.metrics
  steps = load_extended_steps(study_dir)
  summarized = load_summarized(study_dir)
  records = {}
  todo, earlier = [], {}
  for run in runs:
    record, earlier[run] = finished_record(study_dir, run, names, progress,
                                           summarized)
    if record is not None and run.name in steps and (
        record.get("extended_steps") or {}).get("to") != steps[run.name]:
      # Its extension was interrupted: the record is the shorter run's.
      earlier[run], record = None, None
    if record is None:
      todo.append(run)
    else:
      records[run.name] = record
  if todo and builders.uses_feature_cache(base):
    # Built once, before the first run, for every frozen run to share.
    start = time.time()
    config = run_config(base, todo[0], study_dir)
    cache = feature_cache.load(feature_cache_dir(base, study_dir),
                               builders.cache_spec(
                                   builders.resolve_defaults(config)), data,
                               progress=progress,
                               length_bucketing=base.trainer.length_bucketing)
    progress(f"feature cache {cache.folder}: ready in "
             f"{time.time() - start:.0f} s.")
  done = len(runs) - len(todo)
  if done:
    progress(f"{done} of {len(runs)} runs already finished in "
             f"{study_dir}: skipped.")
  _train_runs(base, study_dir, data, todo, earlier, extensions, records,
              done, len(runs), progress, steps, followers)
  select = base.trainer.best_metric
  for round_ in range(1, extend_grid + 1):
    new = study_extend.plan(runs, list(extensions.values()), records,
                            select, extend_grid, dataclasses.replace)
    if not new:
      break
    add_extensions(study_dir, new)
    progress(f"--extend_grid: {len(new)} run(s) beyond a chosen value on "
             f"the edge of its grid (round {round_} of at most "
             f"{extend_grid}).")
    for extension in new:
      extensions[extension.run.name] = extension
      check_run_folder(base, extension.run, study_dir)
    runs += [e.run for e in new]
    _train_runs(base, study_dir, data, [e.run for e in new],
                {e.run: None for e in new}, extensions, records,
                len(runs) - len(new), len(runs), progress, steps, followers)
  for (loss, interaction, seed), found in sorted(study_extend.still_on_edge(
      runs, records, select).items()):
    if extend_grid and any(e.run.cell == (loss, interaction) and
                           e.run.seed == seed and e.round >= extend_grid
                           for e in extensions.values()):
      progress(f"{loss}.{interaction} seed {seed}: the choice is still on "
               f"the {', '.join(f'{s} {f}' for f, s in found)} edge after "
               f"--extend_grid={extend_grid} rounds (the limit).")
  if extend_steps:
    _extend_steps(base, study_dir, data, runs, records, steps, extensions,
                  extend_steps, progress, followers)
  if grid.choose_on_seed is not None:
    new = _follow(base, study_dir, grid, runs, records, steps, followers,
                  progress)
    runs += [run for run in new if run not in runs]
    _train_runs(base, study_dir, data, new, {run: None for run in new},
                extensions, records, 0, len(new), progress, steps, followers)
    if extend_steps:
      _extend_steps(base, study_dir, data, runs, records, steps, extensions,
                    extend_steps, progress, followers)
  return whole.runs() + [run for run in runs if run not in whole.runs()]


def _follow(base, study_dir, grid, runs, records, steps, followers,
            progress) -> List[Run]:
  """`--choose_on_seed`: the runs of the other seeds at each cell's choice
  on the chosen seed (with its steps, where `--extend_steps` lengthened
  it), recorded in study.json; returns those not finished yet."""
  select = base.trainer.best_metric
  new, new_steps = {}, {}
  for loss, interaction in grid.cell_keys():
    tried = [run for run in runs if run.cell == (loss, interaction) and
             run.seed == grid.choose_on_seed]
    chosen = study_extend.choose(tried, records, select)
    if chosen is None:
      progress(f"--choose_on_seed: {loss}.{interaction} has unfinished runs "
               f"on seed {grid.choose_on_seed}; its other seeds wait.")
      continue
    for seed in grid.seeds:
      if seed == grid.choose_on_seed:
        continue
      run = dataclasses.replace(chosen, seed=seed)
      if followers.get(run.name, chosen.name) != chosen.name:
        raise ValueError(
            f"run {run.name} of --study_dir={study_dir} follows "
            f"{followers[run.name]}, but seed {grid.choose_on_seed} now "
            f"chooses {chosen.name}: the study changed under it; start "
            "another --study_dir.")
      new[run.name] = chosen.name
      if chosen.name in steps:
        new_steps[run.name] = steps[chosen.name]
  added = {k: v for k, v in new.items() if k not in followers}
  if added:
    add_followers(study_dir, added)
    followers.update(added)
  lengthened = {k: v for k, v in new_steps.items() if k not in steps}
  if lengthened:
    add_extended_steps(study_dir, lengthened)
    steps.update(lengthened)
  todo = [parse_run_name(name) for name in new
          if name not in records]
  if todo:
    progress(f"--choose_on_seed={grid.choose_on_seed}: {len(todo)} run(s) "
             "of the other seeds at each cell's choice.")
  for run in todo:
    check_run_folder(base, run, study_dir)
  return todo


def _extend_steps(base, study_dir, data, runs, records, steps, extensions,
                  factor, progress, followers=None) -> None:
  """`--extend_steps`: chosen runs still improving go on, once."""
  eval_every = base.trainer.eval_every
  select = base.trainer.best_metric
  groups: Dict[Tuple[str, str, int], List[Run]] = {}
  for run in runs:
    groups.setdefault(study_extend.group_key(run), []).append(run)
  todo = []
  for tried in groups.values():
    chosen = study_extend.choose(tried, records, select)
    if chosen is None or chosen.name in steps:
      continue
    record = records[chosen.name]
    trained = base.trainer.train_steps
    if record.get("best_step") == trained:
      steps[chosen.name] = int(math.ceil(factor * trained / eval_every)
                               * eval_every)
      todo.append(chosen)
  if not todo:
    return
  add_extended_steps(study_dir, {run.name: steps[run.name] for run in todo})
  progress(f"--extend_steps: {len(todo)} chosen run(s) peaked at their "
           f"last validation: trained on to {factor:g} x "
           f"{base.trainer.train_steps} steps.")
  _train_runs(base, study_dir, data, todo, {run: None for run in todo},
              extensions, records, 0, len(todo), progress, steps, followers)


def load_extended_steps(study_dir: str) -> Dict[str, int]:
  """{run name: steps} of the runs `--extend_steps` trained on."""
  path = os.path.join(study_dir, STUDY_FILE)
  try:
    return {k: int(v) for k, v in
            dict(_read_json(path).get("extended_steps", {})).items()}
  except (ValueError, TypeError, AttributeError) as e:
    raise ValueError(f"{path} cannot be read ({_reason(e)}): its "
                     "extended_steps are damaged.") from None


def add_extended_steps(study_dir: str, new: Dict[str, int]) -> None:
  """Records `--extend_steps` decisions in study.json (under `locked`)."""
  path = os.path.join(study_dir, STUDY_FILE)
  with locked(study_dir):
    study = _read_json(path)
    study["extended_steps"] = dict(study.get("extended_steps", {}), **new)
    try:
      fileio.write_json_atomically(path, study)
    except OSError as e:
      raise _cannot_write(path, e) from None


def _train_runs(base, study_dir, data, todo, earlier, extensions, records,
                done, total, progress, steps=None, followers=None) -> None:
  """Trains and evaluates `todo`, one progress line each (see run_study)."""
  select = base.trainer.best_metric
  durations = []
  for i, run in enumerate(todo):
    start = time.time()
    extension = extensions.get(run.name)
    record = execute_run(base, run, study_dir, data, earlier.get(run),
                         extension, (steps or {}).get(run.name),
                         (followers or {}).get(run.name))
    records[run.name] = record
    durations.append(time.time() - start)
    left = np.mean(durations) * (len(todo) - i - 1)
    test = " ".join(f"{name} {record['test'][name]:.4f}"
                    for name in base.trainer.metrics)
    note = "" if extension is None else f" (extension, round {extension.round})"
    if (followers or {}).get(run.name):
      note = f" (at the choice of {followers[run.name]})"
    progress(f"[{done + i + 1}/{total}] {run.name}{note}: validation "
             f"{select} {record['validation'][select]:.4f}; test {test}; "
             f"{durations[-1]:.0f} s; about {_duration(left)} left")


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds} s"
  if seconds < 3600:
    return f"{seconds // 60} min {seconds % 60:02d} s"
  return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


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
  missing: List[Run]
  damaged: List[DamagedFile]
  strays: List[str]


def contents(study_dir: str, runs: Sequence[Run],
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
  strays = sorted(n for n in (os.listdir(folder) if os.path.isdir(folder)
                              else ()) if n not in names and
                  os.path.isdir(os.path.join(folder, n)))
  return Contents(records, missing, damaged, strays)


def load_records(study_dir: str,
                 runs: Optional[Sequence[Run]] = None
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
  with np.load(path) as arrays:
    return {name: arrays[name] for name in arrays.files}
