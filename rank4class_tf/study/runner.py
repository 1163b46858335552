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

About 550 lines: the study loop and its three extensions (`--extend_grid`,
`--extend_steps`, `--choose_on_seed`) share the loop's state (records,
steps, followers) and are read together.
"""

import contextlib
import dataclasses
import json
import logging
import math
import os
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf import provenance
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving
from rank4class_tf.study import evaluation as study_evaluation
from rank4class_tf.study import extend as study_extend
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_guard
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
  written by another study, `.study.json.tmp-*`, counts as a study)."""
  if not os.path.isdir(study_dir):
    return
  entries = os.listdir(study_dir)
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
  path = os.path.join(study_dir, study_folder.STUDY_FILE)
  _check_folder(study_dir)
  try:
    os.makedirs(study_dir, exist_ok=True)
  except OSError as e:
    raise study_folder.cannot_write(study_dir, e) from None
  with study_folder.locked(study_dir):
    # Again: another study may have written study.json meanwhile.
    _check_folder(study_dir)
    kept = {"provenance": provenance.collect()}
    if os.path.exists(path):
      grid = _merge(study_dir, shared, grid)
      # What earlier commands recorded (extensions, the creator's code).
      kept = {k: v for k, v in study_folder.read_json(path).items()
              if k not in ("shared", "grid")}
    try:
      fileio.write_json_atomically(path, dict(
          kept, shared=shared, grid=dataclasses.asdict(grid)))
      os.makedirs(os.path.join(study_dir, study_folder.RUNS_DIR), exist_ok=True)
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
  return old_grid.union(grid)


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
  if not os.path.exists(path):
    return
  try:
    old = serving.load_config(folder).flat()
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


def execute_run(base: config_lib.TrainConfig,
                run: study_grid.Run,
                study_dir: str,
                data,
                earlier: Optional[Dict[str, object]] = None,
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
  with _log_to(os.path.join(folder, study_folder.LOG_FILE)):
    if not training.is_trained(config):
      # Unfinished, or killed during its exports: `train` resumes from the
      # backup (kept until both exports are written) or finishes them.
      resumed_at = run_dir_lib.RunDir(folder).resume_epoch() * eval_every
      start = time.time()
      try:
        training.train(config)
      except run_guard.RunInUse as e:
        raise ValueError(
            f"run {run.name} of `study_dir`={study_dir} is being trained by "
            f"another process (pid {e.pid}); wait for it to end, or give "
            "this command a grid without it (other `seeds`, `losses`, ...)."
        ) from None
      train_seconds = time.time() - start
    record, arrays = study_evaluation.evaluate_run(config, data)
    record.update(dataclasses.asdict(run),
                  run=run.name,
                  best_step=run_dir_lib.RunDir(folder).best_step(eval_every),
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
                  follows=follows)
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
              extend_steps: float = 0.) -> List[study_grid.Run]:
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
    raise ValueError(f"`extend_grid`={extend_grid} must be >= 0.")
  if extend_steps and not extend_steps > 1:
    raise ValueError(f"`extend_steps`={extend_steps:g} must be 0 (no "
                     "extension) or > 1.")
  # Everything a run reads is checked before the study writes anything.
  check_settings(base, grid)
  data = builders.load_data(base)
  if data.multi_label:  # A user's files (`text_files`) can be multi-label.
    raise ValueError(f"`dataset`={base.data.dataset} is multi-label; the "
                     "study reproduces the paper's single-label tables.")
  for loss in grid.losses:
    checks.check_files(base.replace(**loss_settings(base, loss)), data)
  for run in grid.runs():
    check_run_folder(base, run, study_dir)
  whole = open_study(study_dir, base, grid)
  extensions = {e.run.name: e for e in study_folder.load_extensions(study_dir)}
  followers = study_folder.load_followers(study_dir)
  cells = {r.cell for r in grid.runs()}
  runs = grid.runs() + [e.run for e in extensions.values()
                        if e.run.cell in cells and e.run.seed in grid.seeds]
  runs += [run for run in map(study_grid.parse_run_name, followers)
           if run.cell in cells and run.seed in grid.seeds and
           run not in runs]
  names = base.trainer.metrics
  steps = study_folder.load_extended_steps(study_dir)
  summarized = study_folder.load_summarized(study_dir)
  records = {}
  todo, earlier = [], {}
  for run in runs:
    record, earlier[run] = study_folder.finished_record(study_dir, run, names,
                                                        progress, summarized)
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
    study_folder.add_extensions(study_dir, new)
    progress(f"`extend_grid`: {len(new)} run(s) beyond a chosen value on "
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
               f"`extend_grid`={extend_grid} rounds (the limit).")
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
            progress) -> List[study_grid.Run]:
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
      progress(f"`choose_on_seed`: {loss}.{interaction} has unfinished runs "
               f"on seed {grid.choose_on_seed}; its other seeds wait.")
      continue
    for seed in grid.seeds:
      if seed == grid.choose_on_seed:
        continue
      run = dataclasses.replace(chosen, seed=seed)
      if followers.get(run.name, chosen.name) != chosen.name:
        raise ValueError(
            f"run {run.name} of `study_dir`={study_dir} follows "
            f"{followers[run.name]}, but seed {grid.choose_on_seed} now "
            f"chooses {chosen.name}: the study changed under it; start "
            "another `study_dir`.")
      new[run.name] = chosen.name
      if chosen.name in steps:
        new_steps[run.name] = steps[chosen.name]
  added = {k: v for k, v in new.items() if k not in followers}
  if added:
    study_folder.add_followers(study_dir, added)
    followers.update(added)
  lengthened = {k: v for k, v in new_steps.items() if k not in steps}
  if lengthened:
    study_folder.add_extended_steps(study_dir, lengthened)
    steps.update(lengthened)
  todo = [study_grid.parse_run_name(name) for name in new
          if name not in records]
  if todo:
    progress(f"`choose_on_seed`={grid.choose_on_seed}: {len(todo)} run(s) "
             "of the other seeds at each cell's choice.")
  for run in todo:
    check_run_folder(base, run, study_dir)
  return todo


def _extend_steps(base, study_dir, data, runs, records, steps, extensions,
                  factor, progress, followers=None) -> None:
  """`--extend_steps`: chosen runs still improving go on, once."""
  eval_every = base.trainer.eval_every
  select = base.trainer.best_metric
  groups: Dict[Tuple[str, str, int], List[study_grid.Run]] = {}
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
  study_folder.add_extended_steps(study_dir,
                                  {run.name: steps[run.name] for run in todo})
  progress(f"`extend_steps`: {len(todo)} chosen run(s) peaked at their "
           f"last validation: trained on to {factor:g} x "
           f"{base.trainer.train_steps} steps.")
  _train_runs(base, study_dir, data, todo, {run: None for run in todo},
              extensions, records, 0, len(todo), progress, steps, followers)


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
