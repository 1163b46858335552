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

  study.json               the shared training settings and the grid so far
  runs/<run>/              one `pipelines.train` model_dir per run, plus
    study.log              the run's log (TensorFlow's INFO lines included)
    study_test.npz         per-instance test metrics and softmax CE
    study_result.json      the run's record, written last: a run that has it
                           is finished and is never trained again
  results.csv, tables.md, figures/, events.out.tfevents.*.study_hparams
                           the report (`study_report.write_report`)

A run killed mid-training resumes from its last validation (Keras'
BackupAndRestore, as `pipelines.train` does); a run killed during its export
or evaluation is redone from its exports or from scratch. Rerunning the same
command therefore completes the grid without redoing finished work, and with
`deterministic=True` the records equal those of an uninterrupted study.
Rerunning with another grid adds runs; changing a shared setting (any
`TrainConfig` field but the grid's) is refused.
"""

import contextlib
import dataclasses
import json
import logging
import math
import os
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf import catalog
from rank4class_tf import feature_cache
from rank4class_tf import interactions
from rank4class_tf import losses
from rank4class_tf import metrics
from rank4class_tf import serving
from rank4class_tf import training
from rank4class_tf.sorting import losses as sodeep_losses
from rank4class_tf.sorting import sorters

# The paper's grid (Tables 7-12 and App. B).
PAPER_LOSSES = ("softmax", "pairwise_logistic", "approx_ndcg",
                "gumbel_approx_ndcg", "mse")
PAPER_INTERACTIONS = ("dot", "lc_mlp", "concat_mlp")
# 1e-7 .. 0.1 by factors of about 3 (1, 3, 10, 30, ...).
PAPER_LEARNING_RATES = tuple(m * 10.0 ** e for e in range(-7, -1)
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
FEATURE_CACHE_DIR = "feature_cache"


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
    """Folder name, e.g. `approx_ndcg.lc_mlp.lr0.001.u128.seed0`."""
    units = "" if self.mlp_units is None else f".u{self.mlp_units}"
    return (f"{self.loss}.{self.interaction}.lr{self.learning_rate:g}"
            f"{units}.seed{self.seed}")

  @property
  def cell(self) -> Tuple[str, str]:
    """(loss, interaction): the table cell the run belongs to."""
    return self.loss, self.interaction


@dataclasses.dataclass(frozen=True)
class Grid:
  """The study's grid; every list non-empty and without repeats."""
  losses: Tuple[str, ...] = PAPER_LOSSES
  interactions: Tuple[str, ...] = PAPER_INTERACTIONS
  seeds: Tuple[int, ...] = (0, 1, 2)
  learning_rates: Tuple[float, ...] = (1e-3,)
  mlp_units: Tuple[int, ...] = (128,)

  def validate(self) -> None:
    """Raises ValueError naming the flag of an empty list or unknown name."""
    valid = {"interactions": interactions.ALL_NAMES}
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
    for rate in self.learning_rates:
      if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"--learning_rates: {rate!r} must be > 0.")
    for units in self.mlp_units:
      if units <= 0:
        raise ValueError(f"--mlp_units: {units!r} must be > 0.")

  def runs(self) -> List[Run]:
    """The runs, seed by seed: every cell gets its first seed early."""
    runs = []
    for seed in self.seeds:
      for loss in self.losses:
        for interaction in self.interactions:
          widths = (self.mlp_units if interaction in MLP_INTERACTIONS
                    else (None,))
          for rate in self.learning_rates:
            runs.extend(Run(loss, interaction, rate, units, seed)
                        for units in widths)
    return runs

  def union(self, other: "Grid") -> "Grid":
    """The grid of both, each list in first-seen order."""
    def merge(a, b):
      return tuple(dict.fromkeys(tuple(a) + tuple(b)))
    return Grid(*(merge(getattr(self, f.name), getattr(other, f.name))
                  for f in dataclasses.fields(Grid)))


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


def load_study(study_dir: str) -> Tuple[Dict[str, object], Grid]:
  """(shared settings, grid so far) of an existing study."""
  path = os.path.join(study_dir, STUDY_FILE)
  if not os.path.exists(path):
    raise ValueError(f"--study_dir={study_dir} holds no study ({STUDY_FILE} "
                     "not found).")
  study = _read_json(path)
  grid = Grid(**{k: tuple(v) for k, v in study["grid"].items()})
  return study["shared"], grid


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


def open_study(study_dir: str, base: config_lib.TrainConfig,
               grid: Grid) -> Grid:
  """Creates `study_dir`, or checks that it holds the same study.

  Everything is checked before anything is written: a bad grid, a bad shared
  setting, a folder holding something else, or a shared setting that differs
  from the study already in `study_dir` raises ValueError (one line naming
  the flag) and leaves the folder as it was.

  Returns:
    The study's whole grid: the union of the grids run into it so far.
  """
  check_settings(base, grid)
  shared = shared_settings(base)
  path = os.path.join(study_dir, STUDY_FILE)
  if os.path.exists(path):
    old_shared, old_grid = load_study(study_dir)
    # A setting added to TrainConfig after the study began had its default.
    defaults = shared_settings(config_lib.TrainConfig())
    old_shared = dict(
        {k: v for k, v in defaults.items() if k not in old_shared},
        **old_shared)
    for key in sorted(set(shared) | set(old_shared)):
      if shared.get(key) != old_shared.get(key):
        raise ValueError(
            f"--{key}={_flag_value(shared.get(key))} differs from the study "
            f"in {study_dir} ({key}={_flag_value(old_shared.get(key))}); "
            "pass the same value, or another --study_dir.")
    grid = old_grid.union(grid)
  elif os.path.isdir(study_dir) and os.listdir(study_dir):
    raise ValueError(f"--study_dir={study_dir} is not empty and holds no "
                     f"{STUDY_FILE}; choose a new or empty folder.")
  os.makedirs(os.path.join(study_dir, RUNS_DIR), exist_ok=True)
  training.write_json_atomically(path, {"shared": shared, "grid": dataclasses.asdict(grid)})
  return grid


def _flag_value(value) -> str:
  if isinstance(value, (list, tuple)):
    return ",".join(map(str, value))
  return str(value)


def is_finished(study_dir: str, run: Run) -> bool:
  return os.path.exists(os.path.join(run_dir(study_dir, run), RESULT_FILE))


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
          for tag, points in training.validation_curves(model_dir).items()}


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
  if training.uses_feature_cache(config) or not config.trainer.export:
    # The best checkpoint, from the cached features when the run has them
    # (seconds, where the export would run the encoder on both splits).
    scored = training.checkpoint_scores(config, data)
    (val_labels, val_scores), (labels, scores) = (scored["validation"],
                                                  scored["test"])
  else:
    ranker = serving.ExportedRanker(config.trainer.model_dir,
                                    serving.BEST_EXPORT)
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
  path = os.path.join(config.trainer.model_dir, "best_checkpoint",
                      "best.json")
  if not os.path.exists(path):
    return None
  return int(_read_json(path)["epoch"]) * config.trainer.eval_every


def execute_run(base: config_lib.TrainConfig, run: Run, study_dir: str,
                data) -> Dict[str, object]:
  """Trains (or resumes) and evaluates one run; returns its record."""
  config = run_config(base, run, study_dir)
  folder = config.trainer.model_dir
  eval_every = config.trainer.eval_every
  resumed_at = 0
  train_seconds = None
  os.makedirs(folder, exist_ok=True)
  with _log_to(os.path.join(folder, LOG_FILE)):
    if not training.is_trained(config):
      # Unfinished, or killed during its exports: `train` resumes from the
      # backup (kept until both exports are written) or finishes them.
      resumed_at = training.resume_epoch(folder) * eval_every
      start = time.time()
      training.train(config)
      train_seconds = time.time() - start
    record, arrays = evaluate_run(config, data)
    record.update(dataclasses.asdict(run), run=run.name,
                  best_step=_best_step(config), train_seconds=train_seconds,
                  resumed_at_step=resumed_at,
                  validation_curve=_validation_curves(folder, eval_every))
  np.savez(os.path.join(folder, TEST_FILE), **arrays)
  training.write_json_atomically(os.path.join(folder, RESULT_FILE), record)
  tf.keras.backend.clear_session()
  return record


def run_study(study_dir: str, base: config_lib.TrainConfig, grid: Grid,
              progress: Callable[[str], None] = print) -> List[Run]:
  """Runs every unfinished run of `grid`; returns the runs of the whole study.

  The grid, every run's config, the data and the files the runs read are
  checked first: a bad one raises ValueError before anything is written.

  Prints one line per finished run (through `progress`): its place in the
  grid, name, validation and test metrics, time, and the estimated time
  left (the mean time of the runs trained so far in this call, times the
  runs left).
  """
  # Everything a run reads is checked before the study writes anything.
  check_settings(base, grid)
  data = training.load_data(base)
  for loss in grid.losses:
    checks.check_files(base.replace(**loss_settings(base, loss)), data)
  whole = open_study(study_dir, base, grid)
  todo = [run for run in grid.runs() if not is_finished(study_dir, run)]
  if todo and training.uses_feature_cache(base):
    # Built once, before the first run, for every frozen run to share.
    start = time.time()
    config = run_config(base, todo[0], study_dir)
    cache = feature_cache.load(feature_cache_dir(base, study_dir),
                               training.cache_spec(
                                   training.resolve_defaults(config)), data,
                               progress=progress)
    progress(f"feature cache {cache.folder}: ready in "
             f"{time.time() - start:.0f} s.")
  done = len(grid.runs()) - len(todo)
  if done:
    progress(f"{done} of {len(grid.runs())} runs already finished in "
             f"{study_dir}: skipped.")
  select = base.trainer.best_metric
  durations = []
  for i, run in enumerate(todo):
    start = time.time()
    record = execute_run(base, run, study_dir, data)
    durations.append(time.time() - start)
    left = np.mean(durations) * (len(todo) - i - 1)
    test = " ".join(f"{name} {record['test'][name]:.4f}"
                    for name in base.trainer.metrics)
    progress(f"[{done + i + 1}/{len(grid.runs())}] {run.name}: validation "
             f"{select} {record['validation'][select]:.4f}; test {test}; "
             f"{durations[-1]:.0f} s; about {_duration(left)} left")
  return whole.runs()


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds} s"
  if seconds < 3600:
    return f"{seconds // 60} min {seconds % 60:02d} s"
  return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def load_records(study_dir: str,
                 runs: Optional[Sequence[Run]] = None
                ) -> List[Dict[str, object]]:
  """The records of the finished runs (of `runs`, default: the whole grid)."""
  if runs is None:
    runs = load_study(study_dir)[1].runs()
  records = []
  for run in runs:
    path = os.path.join(run_dir(study_dir, run), RESULT_FILE)
    if os.path.exists(path):
      records.append(_read_json(path))
  return records


def load_test_arrays(study_dir: str, run_name: str) -> Dict[str, np.ndarray]:
  """The per-instance test arrays `execute_run` saved for a run."""
  path = os.path.join(study_dir, RUNS_DIR, run_name, TEST_FILE)
  with np.load(path) as arrays:
    return {name: arrays[name] for name in arrays.files}
