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
(`settings.check_grid_holds_study`), as is a changed shared setting (any
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

The study loop and its three extensions (`--extend_grid`, `--extend_steps`,
`--choose_on_seed`) share the loop's state (records, steps, followers) and
are read together here; each run's config and every check made before the
study writes anything (`open_study`, `check_run_folder`, ...) are
`settings.py`'s.
"""

import contextlib
import dataclasses
import logging
import os
import time
from typing import Callable, Dict, Iterator, List, Optional

import numpy as np
import tensorflow as tf

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import identity
from rank4class_tf import fileio
from rank4class_tf import provenance
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import evaluation as study_evaluation
from rank4class_tf.study import extend as study_extend
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import schedule as study_schedule
from rank4class_tf.study import settings as study_settings
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_guard
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training



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
  config = study_settings.run_config(base, run, study_dir)
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
    if not run_state.is_trained(config):
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
                  converged=run_state.converged(config),
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
  run folders already there (`settings.check_run_folder`) are checked
  first: a bad one raises ValueError before anything is written.

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
  study_settings.check_extend_steps(base.trainer, extend_steps,
                                    extend_steps_limit)
  worker = worker or study_claims.Worker()
  # Everything a run reads is checked before the study writes anything.
  study_settings.check_settings(base, grid)
  data = builders.load_data(base)
  # The runs trained before share this data, or the study stops here.
  identity.check_runs(sorted(tf.io.gfile.glob(os.path.join(
      study_dir, study_folder.RUNS_DIR, "*"))), base.data, data)
  if data.multi_label:  # A user's files (`text_files`) can be multi-label.
    raise ValueError(f"`dataset`={base.data.dataset} is multi-label; the "
                     "study reproduces the paper's single-label tables.")
  for loss in grid.losses:
    checks.check_files(
        base.replace(**study_settings.loss_settings(base, loss)), data)
  for run in grid.runs():
    study_settings.check_run_folder(base, run, study_dir)
  whole = study_settings.open_study(study_dir, base, grid)
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
    config = study_settings.run_config(base, mine[0], study_dir)
    cache = feature_cache.load(
        study_settings.feature_cache_dir(base, study_dir),
        builders.cache_spec(builders.resolve_defaults(config)), data,
        progress=progress, length_bucketing=base.trainer.length_bucketing)
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
    study_settings.check_run_folder(self.base, run, self.study_dir)
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
    elapsed = time.time() - start
    whole = _whole_run_seconds(record, elapsed)
    if whole is not None:
      self.durations.append(whole)
    finished = sum(study_schedule.is_done(r, self.records, plan.all_steps)
                   for r in plan.runs)
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
                  f"{elapsed:.0f} s; "
                  f"{_time_left(self.durations, max(free - 1, 0))}")
    return True


def _whole_run_seconds(record: Dict[str, object],
                       elapsed: float) -> Optional[float]:
  """The seconds `record`'s run takes from its first step (`elapsed`:
  this worker's time on it, evaluation included), or None where this worker
  saw only its end (resumed from a backup): such a time would shorten the
  estimate of the runs left."""
  if record["resumed_at_step"] or record["train_seconds"] is None:
    return None
  # Trained before and only evaluated here: its training time is recorded.
  return max(elapsed, float(record["train_seconds"]))


def _time_left(durations: List[float], runs_left: int) -> str:
  """The progress line's estimate: the mean of `durations` (whole runs
  timed by this worker) per planned run left; runs the study adds later
  (`--extend_grid`, `--extend_steps`) are not planned yet."""
  if not durations and runs_left:
    return (f"{runs_left} planned run(s) left, their time unknown until "
            "this worker trains one from its first step")
  return (f"about {_duration(np.mean(durations or [0.0]) * runs_left)} left "
          f"for {runs_left} planned run(s)")


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
