"""Which runs a study reports, and the statistics of the cells they form.

Selection follows the paper (App. B): for each (loss, interaction, seed) the
run with the best validation metric is chosen (ties: the first in grid
order, i.e. the first learning rate, then the first MLP width given); the
reported numbers are the chosen runs' test metrics, as mean ± standard
deviation over seeds. A `Cell` holds a (loss, interaction)'s chosen runs and
their per-instance test arrays; `compute_statistics` tests the cells
against each other (`effects`: hierarchical bootstrap, Holm):

* every cell against the classical classifier (softmax + dot): the two-sided
  paired bootstrap p-value of the mean difference of each metric, and the
  seed-level paired t-test beside it;
* metric informativeness (the paper's §2 claim that NDCG and MRR tell models
  apart that Top-k accuracy ties): over all pairs of cells, how many pairs
  each metric separates at p < 0.05, raw and Holm-adjusted;
* 95% hierarchical intervals of each cell's mean (the bar charts).
"""

import dataclasses
import itertools
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf.study import effects as study_effects
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import significance

ALPHA = study_effects.ALPHA


def select(records: Sequence[Dict], select_metric: str
          ) -> Dict[Tuple[str, str, int], Dict]:
  """The chosen run of each (loss, interaction, seed), by validation metric.

  `records` are in grid order; the first of equal validation values wins.
  """
  chosen = {}
  for record in records:
    key = (record["loss"], record["interaction"], record["seed"])
    value = record["validation"][select_metric]
    if key not in chosen or value > chosen[key]["validation"][select_metric]:
      chosen[key] = record
  return chosen


@dataclasses.dataclass
class Cell:
  """A (loss, interaction) cell: its chosen runs over seeds."""
  loss: str
  interaction: str
  runs: Dict[int, Dict]  # seed -> chosen record
  per_instance: Dict[str, Dict[int, np.ndarray]]  # metric -> seed -> [n]

  @property
  def key(self) -> Tuple[str, str]:
    return self.loss, self.interaction

  def values(self, metric: str) -> np.ndarray:
    """Test metric of each seed's chosen run, [num_seeds]."""
    return np.array([self.runs[s]["test"][metric] for s in sorted(self.runs)])

  def mean(self, metric: str) -> float:
    return float(self.values(metric).mean())

  def std(self, metric: str) -> float:
    """Sample standard deviation over seeds (0 for one seed)."""
    values = self.values(metric)
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0

  def pooled(self, metric: str) -> np.ndarray:
    """Per-instance test values averaged over the cell's seeds, [n]."""
    return np.mean([self.per_instance[metric][s] for s in sorted(self.runs)],
                   axis=0)


def build_cells(study_dir: str, chosen: Dict[Tuple[str, str, int], Dict],
                metric_names: Sequence[str],
                order: Sequence[Tuple[str, str]],
                arrays: Optional[Dict[str, Dict[str, np.ndarray]]] = None
               ) -> List[Cell]:
  """The cells in `order` (grid order) that have at least one chosen run.

  `arrays`: {run name: its test arrays} already read (default: read here).
  """
  cells = []
  for loss, interaction in order:
    runs = {seed: r for (l, i, seed), r in chosen.items()
            if (l, i) == (loss, interaction)}
    if not runs:
      continue
    per_instance = {m: {} for m in metric_names}
    for seed, record in runs.items():
      run_arrays = ((arrays or {}).get(record["run"]) or
                    study_folder.load_test_arrays(study_dir, record["run"]))
      for m in metric_names:
        per_instance[m][seed] = run_arrays[m]
    cells.append(Cell(loss, interaction, runs, per_instance))
  return cells


@dataclasses.dataclass
class Statistics:
  """The study's tests (`study_effects`: hierarchical bootstrap and the
  seed-level t-test, each Holm-adjusted over its family).

  Attributes:
    p_vs_baseline: {cell: {metric: p}} against softmax + dot, hierarchical.
    intervals: {cell: {metric: (low, high)}}: 95% hierarchical intervals of
      the cells' means.
    separated: {metric: pairs of cells with p < ALPHA} (raw p).
    num_pairs: pairs of cells.
    p_pairs: {(cell a, cell b): {metric: p}} of "a and b have the same
      mean", hierarchical.
    effects: {(cell, metric): study_effects.Effect} against softmax + dot,
      Holm-adjusted over every cell and metric (the family).
    separated_holm: {metric: pairs with Holm-adjusted p < ALPHA}, Holm over
      all pairs and metrics.
    num_seeds: the most seeds of a cell (1: intervals cover test sampling
      only).
    pair_effects: {(cell a, cell b): {metric: study_effects.Effect}} of a - b,
      Holm over all pairs and metrics.
    num_samples: the bootstrap resamples B used
      (`significance.samples_for_family` of the largest family: the pairs).
    requested_samples: the B asked for (`--bootstrap_samples`).
  """
  p_vs_baseline: Dict[Tuple[str, str], Dict[str, float]]
  intervals: Dict[Tuple[str, str], Dict[str, Tuple[float, float]]]
  separated: Dict[str, int]  # metric -> pairs with p < ALPHA
  num_pairs: int
  # (cell a, cell b) -> metric -> p of "a and b have the same mean".
  p_pairs: Dict[Tuple[Tuple[str, str], Tuple[str, str]],
                Dict[str, float]] = dataclasses.field(default_factory=dict)
  effects: Dict[Tuple[Tuple[str, str], str], study_effects.Effect] = (
      dataclasses.field(default_factory=dict))
  separated_holm: Dict[str, int] = dataclasses.field(default_factory=dict)
  num_seeds: int = 1
  pair_effects: Dict[Tuple[Tuple[str, str], Tuple[str, str]],
                     Dict[str, study_effects.Effect]] = dataclasses.field(
                         default_factory=dict)
  num_samples: int = significance.DEFAULT_SAMPLES
  requested_samples: int = significance.DEFAULT_SAMPLES

  @property
  def floor(self) -> float:
    """The smallest bootstrap p, 1 / (B + 1)."""
    return 1. / (self.num_samples + 1.)


def compute_statistics(cells: Sequence[Cell], metric_names: Sequence[str],
                       num_samples: int = significance.DEFAULT_SAMPLES,
                       seed: int = significance.DEFAULT_SEED) -> Statistics:
  """Hierarchical bootstrap tests of the cells (see `study_effects`): seeds
  and test instances resampled, cells paired by seed and instance; beside
  each, the seed-level paired t-test.

  `num_samples` is raised for the largest family, every pair of cells on
  every metric (`significance.samples_for_family`), and all comparisons of one
  call share the same resamples.
  """
  num_pairs = len(cells) * (len(cells) - 1) // 2
  samples = significance.samples_for_family(num_pairs * len(metric_names),
                                     num_samples, ALPHA)
  draws = study_effects.Draws(samples, seed)
  by_key = {c.key: c for c in cells}
  baseline = by_key.get(study_grid.BASELINE)
  base_pairs = []
  if baseline is not None:
    base_pairs = [((cell.key, metric), cell.per_instance[metric],
                   baseline.per_instance[metric])
                  for metric in metric_names for cell in cells
                  if cell is not baseline]
  effects = study_effects.effects(base_pairs, samples, seed, draws)
  p_vs_baseline = {c.key: {} for c in cells}
  for (key, metric), effect in effects.items():
    p_vs_baseline[key][metric] = effect.p
  found = study_effects.effects(
      [(((a.key, b.key), metric), a.per_instance[metric],
        b.per_instance[metric])
       for metric in metric_names
       for a, b in itertools.combinations(cells, 2)], samples, seed, draws)
  separated = {m: 0 for m in metric_names}
  separated_holm = {m: 0 for m in metric_names}
  p_pairs, pair_effects = {}, {}
  for (key, metric), effect in found.items():
    p_pairs.setdefault(key, {})[metric] = effect.p
    pair_effects.setdefault(key, {})[metric] = effect
    separated[metric] += effect.p < ALPHA
    separated_holm[metric] += effect.p_holm < ALPHA
  bounds = study_effects.intervals(
      [((c.key, m), c.per_instance[m]) for m in metric_names for c in cells],
      samples, seed, draws)
  intervals = {c.key: {} for c in cells}
  for (key, metric), bound in bounds.items():
    intervals[key][metric] = bound
  return Statistics(p_vs_baseline, intervals, separated, num_pairs, p_pairs,
                    effects, separated_holm,
                    max((len(c.runs) for c in cells), default=1),
                    pair_effects, samples, num_samples)


def fairness_marks(records: Sequence[Dict], train_steps: int
                  ) -> Dict[str, Dict[str, object]]:
  """{run: `study_effects.fairness` marks} of every run, against the runs of
  its (loss, interaction, seed); a run that follows another's choice
  (`--choose_on_seed`) has the edges of the run it follows (its own
  `best_is_last`). `lengthened`: `--extend_steps` trained the run on (a
  study does so once: a lengthened run that peaked last again has reached
  the limit). `extension_round`: the `--extend_grid` round that added the
  run (or the run it follows), 0 for a grid run (a complete study's choice
  on an edge from round N > 0 has reached `--extend_grid`'s limit).
  `converged`: the record's (`--patience`: its best is followed by that
  many validations; None for a run without patience or an older record)."""
  groups: Dict[Tuple[str, str, int], List[Dict]] = {}
  for r in records:
    groups.setdefault((r["loss"], r["interaction"], r["seed"]), []).append(r)
  marks = {r["run"]: dict(
      study_effects.fairness(
          r, groups[(r["loss"], r["interaction"], r["seed"])],
          (r.get("extended_steps") or {}).get("to", train_steps)),
      lengthened=bool(r.get("extended_steps")),
      extension_round=(r.get("extension") or {}).get("round", 0),
      converged=r.get("converged"))
           for r in records}
  for r in records:
    followed = marks.get(r.get("follows") or "")
    if followed is not None:
      marks[r["run"]].update(lr_edge=followed["lr_edge"],
                             units_edge=followed["units_edge"],
                             extension_round=followed["extension_round"])
  return marks
