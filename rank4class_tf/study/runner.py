"""The Rank4Class study: the paper's loss x interaction grid, run and resumed.

A study trains one ordinary run (`training.train`, the code behind
`pipelines.train`) per point of the grid

  losses x interactions x seeds x learning rates x MLP widths

(the MLP width only for the interactions that have an MLP), evaluates each
run's best checkpoint on the validation and test splits with the
deterministic `metrics.evaluate_scores`, and keeps per-instance test metrics
for the paired tests of the report. As in the paper (App. B), the learning
rate and the MLP width of each (loss, interaction, seed) are then chosen on
the validation split, and the test metrics of the chosen run are reported.

The study folder's files (study.json, each run's folder, record and test
arrays) are read and added to by `folder`; the grid and its run names are
`grid`'s; one run's evaluation is `evaluation`'s; the report is
`report.write_report`'s.

A run killed mid-training resumes from its last validation (Keras'
BackupAndRestore, as `pipelines.train` does); a run killed during its export
or evaluation is redone from its exports or from scratch. Rerunning the same
command therefore completes the grid without redoing finished work, and with
`deterministic=True` the records equal those of an uninterrupted study.
Rerunning with a larger grid that holds the study's grows the study;
another grid (one lacking some of the study's runs, whose union with it
would name runs that neither asks for) is refused
(`check_grid_holds_study`), as is a changed shared setting (any
`TrainConfig` field but the grid's).

Nothing is lost, nothing silently wrong:

* Workers started together into one folder agree on one grid: `study.json`
  is read, checked and written under an exclusive lock on `study_dir`
  (`locked`), which the report holds too while it writes. A worker's grid
  holds the whole study's grid when it joins, so no run is left to a
  worker that never comes.
* A study file that cannot be read, or a record that names another run, is
  `DamagedFile`: the study command moves it aside (`<file>.damaged`) and
  evaluates its run again (its training is finished, so it is not trained
  again); the report names it and counts its run as missing.
* A run folder whose `config.json` holds other settings than its run is
  refused before anything is written, never taken as finished.

About 550 lines: the study loop and its three extensions (`--extend_grid`,
`--extend_steps`, `--choose_on_seed`) share the loop's state (records,
steps, followers) and are read together.
"""

import contextlib
import dataclasses
import json
import logging
import os
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import identity
from rank4class_tf import fileio
from rank4class_tf import provenance
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import evaluation as study_evaluation
from rank4class_tf.study import extend as study_extend
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import schedule as study_schedule
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_guard
from rank4class_tf.training import schedules
from rank4class_tf.training import trainer as training

_PER_RUN_FIELDS = study_grid.GRID_FIELDS + ("model_dir", "overwrite")


def shared_settings(config: config_lib.TrainConfig) -> Dict[str, object]:
  """The TrainConfig fields every run of a study shares, as JSON values."""
  values = json.loads(json.dumps(config.flat()))
  return {k: v for k, v in values.items() if k not in _PER_RUN_FIELDS}


def loss_settings(base: config_lib.TrainConfig,
                  label: str) -> Dict[str, str]:
  """The flags a grid loss sets: `sodeep_map@lstm` -> loss and sorter."""
  loss, sorter = study_grid.split_loss(label)
  return {"loss": loss, "sorter": sorter or base.loss.sorter}


def run_config(base: config_lib.TrainConfig, run: study_grid.Run,
               study_dir: str) -> config_lib.TrainConfig:
  """The TrainConfig of one run: the shared settings plus the run's own."""
  return base.replace(**loss_settings(base, run.loss),
                      interaction=run.interaction,
                      learning_rate=run.learning_rate,
                      mlp_units=(base.model.mlp_units
                                 if run.mlp_units is None else run.mlp_units),
                      seed=run.seed,
                      model_dir=study_folder.run_dir(study_dir, run),
                      overwrite=False,
                      feature_cache_dir=feature_cache_dir(base, study_dir))


def feature_cache_dir(base: config_lib.TrainConfig, study_dir: str) -> str:
  """Where the study's frozen runs share their feature caches:
  --feature_cache_dir, by default `<study_dir>/feature_cache`."""
  return (base.trainer.feature_cache_dir or
          os.path.join(study_dir, study_folder.FEATURE_CACHE_DIR))


def check_settings(base: config_lib.TrainConfig, grid: study_grid.Grid) -> None:
  """Checks the grid and every run's config; writes nothing.

  Raises:
    ValueError: one line naming the flag.
  """
  grid.validate()
  if base.data.dataset in catalog.MULTI_LABEL_DATASETS:
    raise ValueError(f"`dataset`={base.data.dataset} is multi-label; the study "
                     "reproduces the paper's single-label tables.")
  for name in base.trainer.metrics:
    if metrics.is_multilabel(name):
      raise ValueError(f"`metrics`: {name} is a multi-label metric; the "
                       "study takes ranking metrics (top<k>_accuracy, "
                       "ndcg@<k>, ndcg, mrr, precision@<k>).")
  for run in grid.runs():
    checks.validate(run_config(base, run, "unused"))


def _check_folder(study_dir: str) -> None:
  """Refuses a folder that holds files but no study (a study.json being
  written by another study, `.study.json.tmp-*`, counts as a study, and
  `claims/` is the workers')."""
  if not fileio.isdir(study_dir):
    return
  # The lock of a study on a bucket is a claim: claims/ may come first.
  entries = [e for e in fileio.listdir(study_dir)
             if e != study_claims.CLAIMS_DIR]
  writing = [e for e in entries
             if e.startswith("." + study_folder.STUDY_FILE + fileio.TMP_MARK)]
  if entries and study_folder.STUDY_FILE not in entries and len(writing) < len(
      entries):
    raise ValueError(
        f"`study_dir`={study_dir} is not empty and holds no "
        f"{study_folder.STUDY_FILE}; choose a new or empty folder.")


def open_study(study_dir: str, base: config_lib.TrainConfig,
               grid: study_grid.Grid) -> study_grid.Grid:
  """Creates `study_dir`, or checks that it holds the same study.

  Everything is checked before anything is written: a bad grid, a bad shared
  setting, a folder holding something else, or a shared setting that differs
  from the study already in `study_dir` raises ValueError (one line naming
  the flag) and leaves the folder as it was, as does a grid that does not
  hold all of the study's (`check_grid_holds_study`). study.json is read,
  checked and written under `locked`, so of two workers started together
  with other grids, the second is checked against the first's.

  Returns:
    The study's whole grid: the union of the grids run into it so far.

  Raises:
    ValueError: one line, as above, or naming the path that cannot be
      written (a read-only folder, a full disk).
  """
  check_settings(base, grid)
  shared = shared_settings(base)
  path = os.path.join(study_dir, study_folder.STUDY_FILE)
  _check_folder(study_dir)
  try:
    fileio.makedirs(study_dir)
  except OSError as e:
    raise study_folder.cannot_write(study_dir, e) from None
  with study_folder.locked(study_dir):
    # Again: another study may have written study.json meanwhile.
    _check_folder(study_dir)
    kept = {"provenance": provenance.collect()}
    if fileio.exists(path):
      grid = _merge(study_dir, shared, grid)
      # What earlier commands recorded (extensions, the creator's code).
      kept = {k: v for k, v in study_folder.read_json(path).items()
              if k not in ("shared", "grid")}
    try:
      fileio.write_json_atomically(path, dict(
          kept, shared=shared, grid=dataclasses.asdict(grid)))
      fileio.makedirs(os.path.join(study_dir, study_folder.RUNS_DIR))
    except OSError as e:
      raise study_folder.cannot_write(path, e) from None
  return grid


def _merge(study_dir: str, shared: Dict[str, object],
           grid: study_grid.Grid) -> study_grid.Grid:
  """The union of `grid` and the study's; refuses other shared settings."""
  old_shared, old_grid = study_folder.load_study(study_dir)
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
          f"`{key}`={study_grid.flag_value(shared.get(key))} differs from "
          f"the study in {study_dir} "
          f"({key}={study_grid.flag_value(old_shared.get(key))}); "
          "pass the same value, or another `study_dir`.")
  whole = old_grid.union(grid)
  check_grid_holds_study(study_dir, old_grid, grid, whole)
  return whole


# The grid's flags, as `pipelines.study` names them.
_GRID_FLAGS = ("losses", "interactions", "cells", "seeds", "learning_rates",
               "mlp_units")


def check_grid_holds_study(study_dir: str, study: study_grid.Grid,
                           grid: study_grid.Grid,
                           whole: study_grid.Grid) -> None:
  """Refuses a worker's `grid` unless it trains every run of the study it
  joins: the study's grid, or a larger one holding all of it (which grows
  the study). A grid that lacks some of the study's runs would leave them to
  nobody, and two grids that differ in two flags would merge into runs that
  neither asks for (softmax, approx_ndcg x seeds 0, 1 with softmax, mse x
  seeds 0, 2: 9 runs, 2 asked for by nobody), the study then incomplete
  forever. Writes nothing.

  Raises:
    ValueError: one line naming the differing flags, their values in the
      study, the study folder and the runs this worker's grid lacks.
  """
  def product(g: study_grid.Grid) -> List[str]:
    # Every seed's runs: with `choose_on_seed` the others follow its
    # choices, planned from the worker's own seeds.
    return [run.name for run in
            dataclasses.replace(g, choose_on_seed=None).runs()]
  mine = set(product(grid))
  left = [name for name in product(whole) if name not in mine]
  if not left:
    return
  def values(g: study_grid.Grid, name: str) -> Tuple:
    if name == "cells":
      return tuple(f"{l}.{i}" for l, i in g.cell_keys())
    return tuple(getattr(g, name))
  differ = [name for name in _GRID_FLAGS
            if set(values(grid, name)) != set(values(study, name))]
  if "cells" in differ and not (grid.cells or study.cells):
    differ.remove("cells")  # Losses x interactions say it.
  shown = ", ".join(left[:3]) + (", ..." if len(left) > 3 else "")
  asked = " and ".join(f"`{name}`={study_grid.flag_value(values(grid, name))}"
                       for name in differ)
  recorded = "; ".join(f"{name}={study_grid.flag_value(values(study, name))}"
                       for name in differ)
  raise ValueError(
      f"{asked} {'differs' if len(differ) == 1 else 'differ'} from the "
      f"study in {study_dir} ({recorded}): with it the study would hold "
      f"{len(left)} run(s) this grid lacks ({shown}), which this worker "
      "would leave unfinished. Pass the study's grid (or one that holds all "
      "of it, to grow the study), or another `study_dir`.")


def check_run_folder(base: config_lib.TrainConfig, run: study_grid.Run,
                     study_dir: str) -> None:
  """Refuses a run folder whose config.json holds other settings than the
  run (a folder copied or renamed by hand): it must never be taken as the
  run's, finished or resumed. Writes nothing.

  Raises:
    ValueError: one line naming the folder and the differing settings.
  """
  folder = study_folder.run_dir(study_dir, run)
  path = run_dir_lib.RunDir(folder).config_file
  if not fileio.exists(path):
    return
  try:
    old = exported_ranker.load_config(folder).flat()
  except (ValueError, TypeError, KeyError) as e:
    raise ValueError(
        f"{path} cannot be read ({study_folder.reason(e)}); move {folder} "
        f"out of {study_folder.RUNS_DIR}/ (the study then trains the run "
        "afresh).") from None
  new = builders.resolve_defaults(run_config(base, run, study_dir)).flat()
  # Where the study keeps its feature cache is no part of a run's identity.
  old.pop("feature_cache_dir", None)
  differ = run_guard.differences(old, new)
  if differ:
    raise ValueError(
        f"{folder} holds a run with other settings than the study's run "
        f"{run.name}: {'; '.join(differ)}. Move the folder out of "
        f"{study_folder.RUNS_DIR}/ (the study then trains the run afresh).")


@contextlib.contextmanager
def _log_to(path: str) -> Iterator[None]:
  """Sends Python logging (absl, TensorFlow) and warnings to `path` only.

  TensorFlow's logger has a console handler of its own when it was imported
  before absl configured the root logger; it is silenced too.
  """
  root, tf_logger = logging.getLogger(), tf.get_logger()
  saved = (root.handlers[:], root.level, tf_logger.handlers[:],
           tf_logger.propagate)
  handler = (logging.FileHandler(path) if fileio.is_local(path) else
             logging.StreamHandler(fileio.open_file(path, "a")))
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


class RunBusy(ValueError):
  """A run being trained by a process that holds no claim on it (a
  `pipelines.train` started by hand, a worker whose claim was taken over)."""


def execute_run(base: config_lib.TrainConfig,
                run: study_grid.Run,
                study_dir: str,
                data,
                earlier: Optional[Dict[str, object]] = None,
                extension: Optional[study_extend.Extension] = None,
                train_steps: Optional[int] = None,
                follows: Optional[str] = None,
                worker: Optional[str] = None) -> Dict[str, object]:
  """Trains (or resumes) and evaluates one run; returns its record.

  A run whose training finished before is only evaluated; its record keeps
  the training time of `earlier` (its previous record), if given. The
  record names the code and the worker that made it (`provenance`,
  `worker`: also logged in the run's study.log) and, for a run that
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
  fileio.makedirs(folder)
  with _log_to(os.path.join(folder, study_folder.LOG_FILE)):
    if not training.is_trained(config):
      # Unfinished, or killed during its exports: `train` resumes from the
      # backup (kept until both exports are written) or finishes them.
      resumed_at = run_dir_lib.RunDir(folder).resume_epoch() * eval_every
      logging.info("study: worker %s %s %s", worker or "-",
                   f"resumes at step {resumed_at}" if resumed_at else "trains",
                   run.name)
      start = time.time()
      try:
        training.train(config)
      except run_guard.RunInUse as e:
        raise RunBusy(
            f"run {run.name} of `study_dir`={study_dir} is being trained by "
            f"another process (pid {e.pid}) that holds no claim on it; this "
            "worker waits for it to end.") from None
      train_seconds = time.time() - start
    record, arrays = study_evaluation.evaluate_run(config, data)
    record.update(dataclasses.asdict(run),
                  run=run.name,
                  best_step=run_dir_lib.RunDir(folder).best_step(eval_every),
                  # `--patience`: its best followed by that many validations
                  # (None: no patience, the rule is off).
                  converged=training.converged(config),
                  train_seconds=train_seconds,
                  resumed_at_step=resumed_at,
                  validation_curve=study_evaluation.validation_curves(
                      folder, eval_every),
                  provenance=provenance.collect(),
                  extension=(None if extension is None else {
                      "round": extension.round,
                      "reason": extension.reason
                  }),
                  extended_steps=extended,
                  follows=follows,
                  worker=worker)
  # The arrays first: a record is written last, and only over whole arrays.
  path = os.path.join(folder, study_folder.TEST_FILE)
  try:
    fileio.write_atomically(path, lambda f: np.savez(f, **arrays),
                            binary=True)
    path = os.path.join(folder, study_folder.RESULT_FILE)
    fileio.write_json_atomically(path, record)
  except OSError as e:
    raise study_folder.cannot_write(path, e) from None
  tf.keras.backend.clear_session()
  return record


def run_study(study_dir: str,
              base: config_lib.TrainConfig,
              grid: study_grid.Grid,
              progress: Callable[[str], None] = print,
              extend_grid: int = 0,
              extend_steps: float = 0.,
              worker: Optional[study_claims.Worker] = None,
              sleep: Callable[[float], None] = time.sleep,
              extend_steps_limit: int = 0
             ) -> List[study_grid.Run]:
  """Runs the study's unfinished runs as one worker; returns the runs of the
  whole study.

  The grid, every run's config, the data, the files the runs read and the
  run folders already there (`check_run_folder`) are checked first: a bad
  one raises ValueError before anything is written.

  A run is finished when its record and test arrays are whole and name it
  (`finished_record`); damaged ones are moved aside and the run evaluated
  again. The worker then takes, again and again, the first unfinished run
  (grid runs first, then extensions, lengthened runs, followers) that no
  other live worker has claimed (`study_claims`), in its shard where
  `worker` has several, trains and evaluates it, and prints one line
  (through `progress`): the study's finished count, the run, the worker,
  validation and test metrics, time, and the estimated time left (this
  worker's mean time per run times the unclaimed runs left). Runs that
  other workers hold are waited for (`sleep(worker.poll_seconds)`): their
  records may call for more runs, and a dead worker's claim goes stale and
  is taken over. It returns when no run of its shard is unfinished. Any
  number of workers may run the same command on one `study_dir`; each run
  is trained once.

  The decisions that add runs (`schedule.plan`) are made per (loss,
  interaction, seed) from its finished runs, by whichever worker gets
  there, and recorded in study.json:

  * `extend_grid` = N > 0: a choice on the edge of its grid adds the run
    one step beyond (`study_extend`), up to N rounds per group;
  * `extend_steps` = F > 1: a settled group's chosen run that has not
    converged (with `patience`: its record's `converged` is false; without:
    its best validation is its last) goes on to F times its steps (up to a
    validation), and again while it has not, up to `extend_steps_limit`
    steps (0: F x `train_steps`, once); recorded in study.json
    (`extended_steps`) and in the run's record. Not under a decaying
    `lr_schedule` (its rates depend on `train_steps`: raise that instead);
  * `grid.choose_on_seed`: the other seeds run the chosen seed's choice.
  """
  if extend_grid < 0:
    raise ValueError(f"`extend_grid`={extend_grid} must be >= 0.")
  if extend_steps and not extend_steps > 1:
    raise ValueError(f"`extend_steps`={extend_steps:g} must be 0 (no "
                     "extension) or > 1.")
  _check_extend_steps(base.trainer, extend_steps, extend_steps_limit)
  worker = worker or study_claims.Worker()
  # Everything a run reads is checked before the study writes anything.
  check_settings(base, grid)
  data = builders.load_data(base)
  # The runs trained before share this data, or the study stops here.
  identity.check_runs(sorted(tf.io.gfile.glob(os.path.join(
      study_dir, study_folder.RUNS_DIR, "*"))), base.data, data)
  if data.multi_label:  # A user's files (`text_files`) can be multi-label.
    raise ValueError(f"`dataset`={base.data.dataset} is multi-label; the "
                     "study reproduces the paper's single-label tables.")
  for loss in grid.losses:
    checks.check_files(base.replace(**loss_settings(base, loss)), data)
  for run in grid.runs():
    check_run_folder(base, run, study_dir)
  whole = open_study(study_dir, base, grid)
  work = _Work(study_dir, base, grid, data, worker, progress, extend_grid,
               extend_steps, extend_steps_limit)
  plan = work.plan()
  done = len(plan.runs) - len(plan.pending)
  if done:
    progress(f"{done} of {len(plan.runs)} runs already finished in "
             f"{study_dir}: skipped.")
  mine = [run for run in plan.pending if work.in_shard(plan, run)]
  if mine and builders.uses_feature_cache(base):
    # Built once, before the first run, for every frozen run to share.
    start = time.time()
    config = run_config(base, mine[0], study_dir)
    cache = feature_cache.load(feature_cache_dir(base, study_dir),
                               builders.cache_spec(
                                   builders.resolve_defaults(config)), data,
                               progress=progress,
                               length_bucketing=base.trainer.length_bucketing)
    progress(f"feature cache {cache.folder}: ready in "
             f"{time.time() - start:.0f} s.")
  waiting = False
  while True:
    plan = work.plan()
    if plan.decided:
      work.record_decisions(plan)
      continue
    mine = [run for run in plan.pending if work.in_shard(plan, run)]
    if not mine:
      break
    held = {run.name: work.claims.holder(run.name) for run in mine}
    free = [run for run in mine if held[run.name] is None]
    if any(work.train(plan, run, len(free)) for run in free):
      waiting = False
      continue
    # Held by other workers: wait for them to finish (their runs may call
    # for more), or to die (their claims then go stale and are taken over).
    if not waiting:
      progress(f"{len(mine)} run(s) left, held by "
               f"{', '.join(sorted(set(filter(None, held.values()))))}: "
               "waiting for them.")
    waiting = True
    sleep(worker.poll_seconds)
  records = work.records
  for (loss, interaction, seed), found in sorted(study_extend.still_on_edge(
      plan.runs, records, base.trainer.best_metric).items()):
    if extend_grid and any(e.run.cell == (loss, interaction) and
                           e.run.seed == seed and e.round >= extend_grid
                           for e in work.extensions):
      progress(f"{loss}.{interaction} seed {seed}: the choice is still on "
               f"the {', '.join(f'{s} {f}' for f, s in found)} edge after "
               f"`extend_grid`={extend_grid} rounds (the limit).")
  return whole.runs() + [run for run in plan.runs if run not in whole.runs()]


def _check_extend_steps(trainer: config_lib.TrainerConfig,
                        extend_steps: float, limit: int) -> None:
  """Refuses `extend_steps_limit` without `extend_steps`, off the
  validations or not above `train_steps`, and `extend_steps` under a
  decaying `lr_schedule`.

  Raises:
    ValueError: one line naming the flag.
  """
  if limit and not extend_steps:
    raise ValueError(f"`extend_steps_limit`={limit} needs `extend_steps`.")
  if limit and (limit <= trainer.train_steps or limit % trainer.eval_every):
    raise ValueError(
        f"`extend_steps_limit`={limit} must be a multiple of `eval_every`="
        f"{trainer.eval_every} above `train_steps`={trainer.train_steps}.")
  if extend_steps and schedules.decays(trainer):
    raise ValueError(
        f"`extend_steps` trains a run on past `train_steps`, to which "
        f"`lr_schedule`={trainer.lr_schedule} decays (the rate of the steps "
        "trained would change): raise `train_steps` instead, with "
        "`patience` to stop where the runs converge.")


class _Work:
  """One worker's view of a study: its finished records (read once each),
  study.json's decisions, its claims (see `run_study`)."""

  def __init__(self, study_dir, base, grid, data, worker, progress,
               extend_grid, extend_steps, extend_steps_limit=0):
    self.study_dir, self.base, self.grid, self.data = (study_dir, base, grid,
                                                       data)
    self.worker, self.progress = worker, progress
    self.extend_grid, self.extend_steps = extend_grid, extend_steps
    self.extend_steps_limit = extend_steps_limit
    self.claims = study_claims.Claims(study_dir, worker)
    self.records: Dict[str, Dict[str, object]] = {}
    self.earlier: Dict[str, Optional[Dict[str, object]]] = {}
    self.summarized = study_folder.load_summarized(study_dir)
    self.extensions: List[study_extend.Extension] = []
    self.followers: Dict[str, str] = {}
    self.durations: List[float] = []

  def plan(self) -> study_schedule.Plan:
    """Reads study.json's decisions and the records of the runs not
    finished when last looked at, and plans (`schedule.plan`)."""
    self.extensions = study_folder.load_extensions(self.study_dir)
    self.followers = study_folder.load_followers(self.study_dir)
    steps = study_folder.load_extended_steps(self.study_dir)
    trainer = self.base.trainer
    while True:
      plan = study_schedule.plan(self.grid, self.records, self.extensions,
                                 steps, self.followers, trainer.best_metric,
                                 trainer.train_steps, trainer.eval_every,
                                 self.extend_grid, self.extend_steps,
                                 self.extend_steps_limit)
      read = False
      for run in plan.pending:
        record, earlier = study_folder.finished_record(
            self.study_dir, run, trainer.metrics, self.progress,
            self.summarized)
        if record is not None and not study_schedule.is_done(
            run, {run.name: record}, plan.all_steps):
          # Its extension was interrupted: the record is the shorter run's.
          record, earlier = None, None
        self.earlier[run.name] = earlier
        if record is not None:
          self.records[run.name] = record
          read = True
      if not read:
        return plan

  def record_decisions(self, plan: study_schedule.Plan) -> None:
    """Writes a plan's decisions to study.json, one progress line each."""
    if plan.extensions:
      study_folder.add_extensions(self.study_dir, plan.extensions)
      self.progress(
          f"`extend_grid`: {len(plan.extensions)} run(s) beyond a chosen "
          "value on the edge of its grid (round "
          f"{max(e.round for e in plan.extensions)} of at most "
          f"{self.extend_grid}).")
    if plan.followers:
      study_folder.add_followers(self.study_dir, plan.followers)
      self.progress(f"`choose_on_seed`={self.grid.choose_on_seed}: "
                    f"{len(plan.followers)} run(s) of the other seeds at "
                    "each cell's choice.")
    lengthened = {k: v for k, v in plan.steps.items()
                  if k not in plan.followers}
    if plan.steps:
      study_folder.add_extended_steps(self.study_dir, plan.steps)
    if lengthened:
      trainer = self.base.trainer
      once = study_schedule.lengthened(trainer.train_steps,
                                       trainer.eval_every, self.extend_steps)
      to = (f"{self.extend_steps:g} x {trainer.train_steps}"
            if set(lengthened.values()) == {once} else
            ", ".join(map(str, sorted(set(lengthened.values())))))
      why = (f"have not converged (`patience`={trainer.patience})"
             if trainer.patience else "peaked at their last validation")
      self.progress(f"`extend_steps`: {len(lengthened)} chosen run(s) {why}: "
                    f"trained on to {to} steps.")

  def in_shard(self, plan: study_schedule.Plan, run: study_grid.Run) -> bool:
    return study_claims.shard_of(plan.units[run.name],
                                 self.worker.num_shards) == (
                                     self.worker.shard_index)

  def train(self, plan: study_schedule.Plan, run: study_grid.Run,
            free: int) -> bool:
    """Claims, trains and evaluates `run`. True when the study moved on
    (plan again at once): the run was trained here, or another worker had
    finished it by the time of the claim; False when another worker holds
    it."""
    if not self.claims.claim(run.name, self.progress):
      return False
    # A worker releases its claim once the run's record is written, so a
    # run planned here before that record appeared can be claimed after it.
    record, _ = study_folder.finished_record(
        self.study_dir, run, self.base.trainer.metrics, self.progress,
        self.summarized)
    if record is not None and study_schedule.is_done(
        run, {run.name: record}, plan.all_steps):
      self.claims.release(run.name)
      self.records[run.name] = record
      return True
    extension = next((e for e in self.extensions if e.run == run), None)
    follows = self.followers.get(run.name)
    check_run_folder(self.base, run, self.study_dir)
    start = time.time()
    try:
      with self.claims.held(run.name, self.progress):
        record = execute_run(self.base, run, self.study_dir, self.data,
                             self.earlier.get(run.name), extension,
                             plan.all_steps.get(run.name), follows,
                             self.worker.label)
    except RunBusy as e:
      self.progress(str(e))
      return False
    self.records[run.name] = record
    self.durations.append(time.time() - start)
    finished = sum(study_schedule.is_done(r, self.records, plan.all_steps)
                   for r in plan.runs)
    left = np.mean(self.durations) * max(free - 1, 0)
    select = self.base.trainer.best_metric
    test = " ".join(f"{name} {record['test'][name]:.4f}"
                    for name in self.base.trainer.metrics)
    note = ("" if extension is None else
            f" (extension, round {extension.round})")
    if follows:
      note = f" (at the choice of {follows})"
    self.progress(f"[{finished}/{len(plan.runs)}] {run.name}{note} "
                  f"(worker {self.worker.label}): validation {select} "
                  f"{record['validation'][select]:.4f}; test {test}; "
                  f"{self.durations[-1]:.0f} s; about {_duration(left)} "
                  "left")
    return True


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds} s"
  if seconds < 3600:
    return f"{seconds // 60} min {seconds % 60:02d} s"
  return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def unfinished(study_dir: str, base: config_lib.TrainConfig,
               runs: List[study_grid.Run]) -> List[study_grid.Run]:
  """The runs among `runs` without a whole record (reads only)."""
  return study_folder.contents(study_dir, runs, base.trainer.metrics).missing
