"""A study's settings: each run's config, and every check made before a study
writes anything.

`run_config` makes one run's `TrainConfig` from the study's shared settings
and its point of the grid (`loss_settings`, `feature_cache_dir`);
`check_settings` checks the grid and every run's config;
`check_extend_steps` the extension flags; `open_study` creates study.json or
merges the grid into the study already there, refusing other shared
settings (`shared_settings`) and a grid that lacks some of the study's runs
(`check_grid_holds_study`); `check_run_folder` refuses a run folder that
holds another run. The study loop that uses them is `runner.py`.
"""

import dataclasses
import json
import os
from typing import Dict, List, Tuple

from rank4class_tf import catalog
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf import provenance
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.training import builders
from rank4class_tf.training import run_guard
from rank4class_tf.training import schedules

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
  # Settings that change nothing in the study compare equal (`effective`).
  new_values = run_guard.effective(shared)
  old_values = run_guard.effective(old_shared)
  for key in sorted(set(shared) | set(old_shared)):
    if new_values.get(key) != old_values.get(key):
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


def check_extend_steps(trainer: config_lib.TrainerConfig,
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
