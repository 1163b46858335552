"""Runs that differ only by their seed, compared with intervals.

`pipelines.compare_runs` takes trained runs (model_dirs), groups those whose
settings are equal but for `--seed` (and `--model_dir` and the bookkeeping
flags of `IGNORED`), scores each run's best checkpoint on a split
(`training.checkpoint_scores`: from the feature cache for frozen runs, so
seconds), computes any metric (multi-label ones included, at a threshold)
and reports per group the mean, the standard deviation over seeds and the
95% Student-t interval of the mean over seeds. Groups are named by the
settings in which they differ.

Nothing is averaged that is not a result of one data set:

* the data is part of a group's settings: runs of another `dataset` or
  `data_dir` are another group (`data_dir` named in its label), and two runs
  of one group whose saved class lists differ (the files under one
  `data_dir` changed between their trainings) are refused, naming both;
* a run that did not finish training (it diverged, was stopped, or is still
  running: `run_state.is_trained`) is refused before any run is scored, and
  one whose best checkpoint gives non-finite scores (diverged weights) after
  scoring: its metrics (top-1 0, MRR 1 / num_classes on NaN scores) are not
  a result;
* a split the run's data lacks is refused, naming the splits it has.

The study (`study.py`) does this for single-label grids with paired tests;
this is for any set of runs, e.g. the multi-label methods of docs/multilabel.md.

>>> interval = seed_interval([0.40, 0.42, 0.44])
>>> [round(v, 4) for v in interval]
[0.42, 0.02, 0.3703, 0.4697]
"""

import dataclasses
import math
from typing import Dict, List, Sequence, Tuple

import numpy as np

from rank4class_tf.data import classes as classes_lib
from rank4class_tf import lookup
from rank4class_tf.ranking import calibration as calibration_lib
from rank4class_tf.ranking import metrics
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
from rank4class_tf.training import run_guard
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training

# Settings that do not make two runs different models. `data_dir` does: it
# is where a run's data is (a user's files, a TFDS folder).
IGNORED = ("seed", "model_dir", "overwrite", "feature_cache_dir", "export",
           "keep_checkpoints")


def seed_interval(values: Sequence[float], level: float = 0.95
                 ) -> Tuple[float, float, float, float]:
  """(mean, sample std, low, high): the Student-t interval of the mean of
  per-seed values; one value gives (v, 0, nan, nan).
  """
  values = np.asarray(values, np.float64)
  mean = float(values.mean())
  if len(values) < 2:
    return mean, 0.0, math.nan, math.nan
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  std = float(values.std(ddof=1))
  half = float(scipy_stats.t.ppf(0.5 + level / 2, len(values) - 1)) * std / (
      math.sqrt(len(values)))
  return mean, std, mean - half, mean + half


@dataclasses.dataclass
class Group:
  """Runs equal but for their seed.

  Attributes:
    label: the settings that set this group apart from the others.
    model_dirs: its runs, by seed order.
    seeds: their seeds.
    values: {metric: [value per run]}.
  """
  label: str
  model_dirs: List[str]
  seeds: List[int]
  values: Dict[str, List[float]] = dataclasses.field(default_factory=dict)


def group_runs(model_dirs: Sequence[str]) -> List[Group]:
  """Groups runs by their settings but `IGNORED`, in first-seen order
  (settings compared as `run_guard.effective` has them).

  Runs of other data (`dataset`, `data_dir`, as their configs say) are in
  other groups; within a group every run must have saved the same classes.

  Raises:
    ValueError: a folder holds no run, two runs of a group share a seed, or
      two runs of a group saved other class lists (the data changed).
  """
  settings, classes = {}, {}
  for model_dir in model_dirs:
    # A setting that changes nothing in this run (`split_rule` outside a
    # user's text files, ...) does not part it from today's runs.
    flat = run_guard.effective(exported_ranker.load_config(model_dir).flat())
    if flat.get("data_dir"):  # `data/x/` and `data/x` are one folder.
      flat["data_dir"] = flat["data_dir"].rstrip("/") or "/"
    settings[model_dir] = {k: v for k, v in flat.items() if k not in IGNORED}
    classes[model_dir] = exported_ranker.load_class_names(model_dir)
  keys = sorted({k for s in settings.values() for k in s})
  differing = [k for k in keys
               if len({repr(s.get(k)) for s in settings.values()}) > 1]
  groups: Dict[str, Group] = {}
  for model_dir in model_dirs:
    config = exported_ranker.load_config(model_dir)
    label = ", ".join(f"{k}={_value(settings[model_dir].get(k))}"
                      for k in differing) or "all runs"
    group = groups.setdefault(label, Group(label, [], []))
    if config.trainer.seed in group.seeds:
      raise ValueError(f"`runs`: {model_dir} and "
                       f"{group.model_dirs[group.seeds.index(config.trainer.seed)]}"
                       f" are the same run settings and seed "
                       f"{config.trainer.seed}.")
    if group.model_dirs:
      _check_same_classes(group.model_dirs[0], model_dir, classes,
                          settings[model_dir])
    group.model_dirs.append(model_dir)
    group.seeds.append(config.trainer.seed)
  return list(groups.values())


def _check_same_classes(first: str, other: str, classes: Dict[str, list],
                        settings: Dict[str, object]) -> None:
  """Refuses two runs of one group whose saved class lists differ."""
  a, b = classes[first], classes[other]
  if a == b:
    return
  if set(a) == set(b):
    how = "the same names in another order"
  else:
    how = "; ".join(f"only {run} has {', '.join(sorted(set(x) - set(y)))}"
                    for run, x, y in ((first, a, b), (other, b, a))
                    if set(x) - set(y))
  raise ValueError(
      f"`runs`: {first} and {other} have the same settings but other "
      f"classes ({len(a)} and {len(b)} classes; {how}): the data of "
      f"`dataset`={settings.get('dataset')} (`data_dir`="
      f"{settings.get('data_dir')}) changed between their trainings; "
      "compare runs trained on the same data.")


def _value(value) -> str:
  if isinstance(value, (list, tuple)):
    return ",".join(map(str, value))
  return str(value)


# Calibration metrics (`calibration.report`): of softmax / sigmoid of the
# scores, and `calibrated_` of the map fitted on the validation split.
CALIBRATION_METRICS = ("nll", "ece", "brier", "calibrated_nll",
                       "calibrated_ece", "calibrated_brier")

# Which instances of the split are scored (zero-shot runs).
INSTANCES = ("all", "holdout", "seen")


def evaluate_groups(groups: Sequence[Group], metric_names: Sequence[str],
                    split: str = "test", threshold: float = 0.5,
                    instances: str = "all",
                    holdout_classes: Sequence[str] = ()) -> None:
  """Fills every group's `values`: each run's best checkpoint on `split`.

  Args:
    groups: the groups (`group_runs`).
    metric_names: metrics to compute.
    split: `validation` or `test`.
    threshold: multi-label count metrics' threshold.
    instances: `all`; `holdout`: only the instances of held-out classes
      (generalized zero-shot: every class is still ranked); `seen`: the
      others.
    holdout_classes: the held-out class names; empty: each run's own
      `--holdout_classes`.

  Raises:
    ValueError: `holdout` / `seen` for a run with no held-out classes; a
      run that did not finish training (before any is scored); `split`
      missing from a run's data; runs whose scores are not finite (after
      scoring the others).
  """
  lookup.check_choice("instances", instances, INSTANCES)
  configs = {d: exported_ranker.load_config(d).replace(model_dir=d)
             for group in groups for d in group.model_dirs}
  unfinished = [d for d, config in configs.items()
                if not run_state.is_trained(config)]
  if unfinished:
    raise ValueError(
        f"`runs`: {len(unfinished)} run(s) did not finish training (diverged, "
        f"stopped, or still running: no final checkpoint, or its backup "
        f"remains): {', '.join(unfinished)}; a best checkpoint of an "
        "unfinished run is no result: leave it out of `runs`, or finish it.")
  diverged = []
  for group in groups:
    for model_dir in group.model_dirs:
      config = configs[model_dir]
      data, _ = builders.load_run_data(model_dir, config=config)
      if split not in data.split_names:
        raise ValueError(
            f"`split`={split}: the data of {model_dir} has no {split} split "
            f"(its splits: {', '.join(data.split_names)}); choose one of "
            "them.")
      calibrated = [m for m in metric_names if m in CALIBRATION_METRICS]
      splits = (split,) + (("validation",) if calibrated and
                           split != "validation" else ())
      scored = training.checkpoint_scores(config, data, splits)
      if not all(np.isfinite(scored[s][1]).all() for s in splits):
        diverged.append(model_dir)
        continue
      labels, scores = scored[split]
      fitted = None
      if any(m.startswith("calibrated_") for m in calibrated):
        val_labels, val_scores = scored["validation"]
        fitted = calibration_lib.fit(val_scores, val_labels)
      if instances != "all":
        names = holdout_classes or config.data.holdout_classes
        if not names:
          raise ValueError(f"`instances`={instances}: {model_dir} holds out "
                           "no class; name them with `holdout_classes`.")
        chosen = classes_lib.holdout_mask(
            labels, classes_lib.holdout_ids(names, data.class_names))
        if instances == "seen":
          chosen = ~chosen
        labels, scores = labels[chosen], scores[chosen]
      ranking = [m for m in metric_names if m not in CALIBRATION_METRICS]
      results = metrics.evaluate_scores(labels, scores, ranking,
                                        threshold=threshold)
      if calibrated:
        results.update(calibration_lib.report(scores, labels, fitted))
      for name in metric_names:
        group.values.setdefault(name, []).append(float(results[name]))
  if diverged:
    raise ValueError(
        f"`runs`: the best checkpoint of {len(diverged)} run(s) gives "
        f"non-finite scores (diverged weights): {', '.join(diverged)}; "
        "their metrics are no result: leave them out of `runs`.")


def markdown(groups: Sequence[Group], metric_names: Sequence[str]
            ) -> List[str]:
  """A table: one row per group, each metric as mean ± std [low, high]."""
  lines = ["| runs | seeds | " + " | ".join(metric_names) + " |",
           "|---|---|" + "---|" * len(metric_names)]
  for group in groups:
    cells = []
    for name in metric_names:
      mean, std, low, high = seed_interval(group.values[name])
      interval = "" if math.isnan(low) else f" [{low:.4f}, {high:.4f}]"
      cells.append(f"{mean:.4f} ± {std:.4f}{interval}")
    lines.append(f"| {group.label} | {','.join(map(str, group.seeds))} | " +
                 " | ".join(cells) + " |")
  return lines
