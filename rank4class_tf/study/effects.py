"""The study's effects: against the baseline with training noise, fairness of
the tuning, Bruch's claim (was `statistics.py`; the tests and intervals
themselves are `significance.py`).

A reproduction's verdict rests on three things this module computes from
the chosen runs (pure numpy; `study_report` presents them):

* **Effects against the baseline, with training noise.** A cell's effect is
  its difference from softmax + dot, the paper's classical classifier:
  d[s, i] = m_cell(s, i) - m_base(s, i) over the seeds s the two cells share
  and the test instances i. Its interval and p-value come from the
  hierarchical bootstrap (`significance.hierarchical_*`: seeds resampled, then
  instances), so a cell whose seeds disagree gets the wide interval it
  deserves; with one seed they cover test sampling only. Beside it, the
  seed-level paired t-test (`significance.seed_t_test`: one mean difference per
  seed, S - 1 degrees of freedom). The p-values of one family (every cell
  against the baseline on every metric; or every contrast of a table) are
  Holm-adjusted (`significance.holm`), each test apart; `Effect.resolved` needs
  both. The resampled means of each cell are drawn once (`Draws`) and
  differenced, so a study of 15 cells draws 60 series, not 420 pairs.
* **Fairness of the tuning.** A chosen run whose learning rate or width is
  the lowest or highest tried for its (loss, interaction, seed) may have
  its optimum outside the grid (`edge`); one whose best validation is its
  last one was still improving when it stopped (`best_is_last`).
* **Bruch et al. (2019) as a claim.** Softmax CE >= -log MRR holds for
  every model by construction (an identity, checked as one); the claim
  worth testing is that CE *tracks* the ranking metrics: across runs, a
  lower test CE goes with a higher MRR and NDCG (`bruch_correlations`,
  Spearman's rho), and within a softmax-CE run, a validation with a lower
  CE has a higher MRR and NDCG (`bruch_within_runs`).
"""

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf.study import significance

CellKey = Tuple[str, str]  # (loss, interaction)


@dataclasses.dataclass(frozen=True)
class Effect:
  """A cell's difference from a reference cell on one metric.

  Attributes:
    delta: mean over the shared seeds and the test instances.
    low, high: its 95% hierarchical bootstrap interval.
    p: two-sided hierarchical bootstrap p of delta = 0.
    p_holm: p Holm-adjusted over the effect's family.
    seeds: the seeds the two cells share.
    p_seed: two-sided paired t-test p over the seeds
      (`significance.seed_t_test`; NaN for one seed).
    p_seed_holm: p_seed Holm-adjusted over the same family (NaN: untested).
    se: the bootstrap standard error of delta (sd of the resampled means).
    se_seed: the t-test's standard error, sd of the per-seed differences
      / sqrt(seeds).
  """
  delta: float
  low: float
  high: float
  p: float
  p_holm: float
  seeds: Tuple[int, ...]
  p_seed: float = math.nan
  p_seed_holm: float = math.nan
  se: float = math.nan
  se_seed: float = math.nan

  @property
  def resolved(self) -> bool:
    """Both tests reject delta = 0 at Holm p < 0.05 (the conservative
    verdict; a seed-level test that cannot run resolves nothing)."""
    return self.resolved_by_bootstrap and self.resolved_by_seeds

  @property
  def resolved_by_bootstrap(self) -> bool:
    return self.p_holm < ALPHA

  @property
  def resolved_by_seeds(self) -> bool:
    return bool(self.p_seed_holm < ALPHA)  # NaN compares False.

  @property
  def excludes_zero(self) -> bool:
    """Its 95% interval lies on one side of 0."""
    return self.low > 0 or self.high < 0


ALPHA = 0.05


def seed_differences(a: Dict[int, np.ndarray], b: Dict[int, np.ndarray]
                    ) -> Tuple[np.ndarray, Tuple[int, ...]]:
  """([S, n] per-seed, per-instance differences a - b, the shared seeds).

  Raises:
    ValueError: the cells share no seed.
  """
  seeds = tuple(sorted(set(a) & set(b)))
  if not seeds:
    raise ValueError("the two cells share no seed to pair.")
  return (significance.seed_matrix(a, seeds) -
          significance.seed_matrix(b, seeds)), seeds


class Draws:
  """The hierarchical bootstrap's resampled means of each series, drawn once.

  The resampled mean is linear in the values, so the resampled mean of a
  difference a - b is the difference of a's and b's resampled means under
  the same draws: a study's comparisons (every pair of cells, every cell
  against the baseline) need the draws of each cell's series once, not of
  each pair's differences. The draws depend only on (B, seed, seeds, n),
  so every series of one seed set sees the same resamples
  (`significance.hierarchical_means`); a series is keyed by its identity.
  """

  def __init__(self, num_samples: int = significance.DEFAULT_SAMPLES,
               seed: int = significance.DEFAULT_SEED):
    self.num_samples = num_samples
    self.seed = seed
    self._columns: Dict[Tuple[int, ...], Dict[int, np.ndarray]] = {}

  def means(self, series: Sequence[Dict[int, np.ndarray]],
            seeds: Tuple[int, ...]) -> List[np.ndarray]:
    """[B] resampled means of each series restricted to `seeds`."""
    columns = self._columns.setdefault(seeds, {})
    missing = [s for s in dict.fromkeys(map(id, series))
               if s not in columns]
    if missing:
      by_id = {id(s): s for s in series}
      matrix = np.stack([significance.seed_matrix(by_id[key], seeds)
                         for key in missing])
      drawn = significance.hierarchical_means(matrix, self.num_samples,
                                              self.seed)
      for index, key in enumerate(missing):
        columns[key] = drawn[:, index].copy()
    return [columns[id(s)] for s in series]


def effects(pairs: Sequence[Tuple[object, Dict[int, np.ndarray],
                                  Dict[int, np.ndarray]]],
            num_samples: int = significance.DEFAULT_SAMPLES,
            seed: int = significance.DEFAULT_SEED,
            draws: Optional[Draws] = None) -> Dict[object, Effect]:
  """Effects of a family of comparisons, both tests Holm-adjusted together.

  Args:
    pairs: [(label, {seed: [n] values of the cell}, {seed: [n] values of the
      reference})]; every comparison sees the same resamples where they have
      the same seeds.
    num_samples: bootstrap resamples.
    seed: the resampling seed.
    draws: the resampled means to reuse (default: drawn here).

  Returns:
    {label: Effect}.
  """
  draws = draws or Draws(num_samples, seed)
  by_seeds: Dict[Tuple[int, ...], List] = {}
  for _, a, b in pairs:  # Every series of a seed set drawn in one call.
    by_seeds.setdefault(tuple(sorted(set(a) & set(b))), []).extend((a, b))
  for seeds, series in by_seeds.items():
    if seeds:
      draws.means(series, seeds)
  out, raw = {}, []
  for label, a, b in pairs:
    diff, seeds = seed_differences(a, b)
    mean_a, mean_b = draws.means([a, b], seeds)
    resampled = mean_a - mean_b
    observed = float(diff.mean())
    p = significance.two_sided_p(resampled[:, None], np.array([observed]))[0]
    low, high = np.quantile(resampled, [0.025, 0.975])
    p_seed, se_seed = significance.seed_t_test(diff)
    raw.append(label)
    out[label] = dict(delta=observed, low=float(low), high=float(high),
                      p=float(p), seeds=seeds, p_seed=float(p_seed),
                      se=float(resampled.std(ddof=1)),
                      se_seed=float(se_seed))
  adjusted = significance.holm([out[label]["p"] for label in raw])
  tested = [label for label in raw if not math.isnan(out[label]["p_seed"])]
  adjusted_seed = dict(zip(tested, significance.holm(
      [out[label]["p_seed"] for label in tested])))
  return {label: Effect(p_holm=float(p_holm),
                        p_seed_holm=float(adjusted_seed.get(label, math.nan)),
                        **out[label])
          for label, p_holm in zip(raw, adjusted)}


def intervals(series: Sequence[Tuple[object, Dict[int, np.ndarray]]],
              num_samples: int = significance.DEFAULT_SAMPLES,
              seed: int = significance.DEFAULT_SEED,
              draws: Optional[Draws] = None
             ) -> Dict[object, Tuple[float, float]]:
  """95% hierarchical intervals of means: {label: (low, high)} of
  [(label, {seed: [n] values})]."""
  draws = draws or Draws(num_samples, seed)
  by_seeds: Dict[Tuple[int, ...], List] = {}
  for _, values in series:
    by_seeds.setdefault(tuple(sorted(values)), []).append(values)
  for seeds, group in by_seeds.items():
    draws.means(group, seeds)
  out = {}
  for label, values in series:
    means, = draws.means([values], tuple(sorted(values)))
    low, high = np.quantile(means, [0.025, 0.975])
    out[label] = (float(low), float(high))
  return out


def _edge_text(sides: Sequence[str]) -> str:
  if "low" in sides and "high" in sides:
    return "only"  # The only value tried.
  return sides[0] if sides else ""


def fairness(record: Dict, tried: Sequence[Dict],
             train_steps: Optional[int] = None) -> Dict[str, object]:
  """The fairness marks of a chosen run.

  Args:
    record: the chosen run's record.
    tried: the records of every run of its (loss, interaction, seed).
    train_steps: the run's steps (default: the last validation step of its
      curve).

  Returns:
    {"lr_edge": "low" | "high" | "only" | "", "units_edge": likewise ("" for
    interactions without a width), "best_is_last": bool}.
  """
  marks = {}
  for field, key in (("learning_rate", "lr_edge"), ("mlp_units",
                                                    "units_edge")):
    value = record[field]
    values = sorted({r[field] for r in tried if r[field] is not None})
    sides = []
    if value is not None and values:
      if value == values[0]:
        sides.append("low")
      if value == values[-1]:
        sides.append("high")
    marks[key] = _edge_text(sides)
  last = train_steps
  if last is None:
    steps = [step for curve in record.get("validation_curve", {}).values()
             for step, _ in curve]
    last = max(steps) if steps else None
  marks["best_is_last"] = bool(last is not None and
                               record.get("best_step") == last)
  return marks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
  """Spearman's rank correlation (average ranks for ties); NaN for fewer
  than 3 pairs or a constant series."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if len(x) < 3:
    return math.nan

  def ranks(v):
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v), dtype=np.float64)
    for value in np.unique(v):  # Ties share their average rank.
      tied = v == value
      r[tied] = r[tied].mean()
    return r
  rx, ry = ranks(x), ranks(y)
  if rx.std() == 0 or ry.std() == 0:
    return math.nan
  return float(np.corrcoef(rx, ry)[0, 1])


def bruch_correlations(records: Sequence[Dict], group_of=lambda r: None
                      ) -> Dict[Optional[str], Dict[str, object]]:
  """Spearman's rho between test softmax CE and test MRR / NDCG across
  runs: {group (None: all runs): {"runs": k, "mrr": rho, "ndcg": rho}}.

  MRR and NDCG come from the record's -log MRR and -log NDCG (every study
  record has them). Bruch et al.'s claim predicts a negative rho.
  """
  groups: Dict[Optional[str], List[Dict]] = {None: list(records)}
  for record in records:
    key = group_of(record)
    if key is not None:
      groups.setdefault(key, []).append(record)
  out = {}
  for key, rows in groups.items():
    ce = [r["test_softmax_ce"] for r in rows]
    out[key] = {
        "runs": len(rows),
        "mrr": spearman(ce, [math.exp(-r["test_neg_log_mrr"])
                             for r in rows]),
        "ndcg": spearman(ce, [math.exp(-r["test_neg_log_ndcg"])
                              for r in rows]),
    }
  return out


def bruch_within_runs(records: Sequence[Dict],
                      metrics: Sequence[str] = ("mrr", "ndcg_5")
                     ) -> Dict[str, object]:
  """Spearman's rho across each softmax-CE run's validations between its
  validation loss (its softmax CE) and each ranking metric.

  Only a softmax-CE run's validation loss is its CE (another loss's is that
  loss), so only the records whose loss is `softmax` count; a curve needs
  3 validations. `metrics` are the Keras names of the records'
  `validation_curve`.

  Returns:
    {"runs": k, metric: the rhos of the k runs (NaN where a series is
    constant)}.
  """
  out: Dict[str, object] = {"runs": 0}
  for metric in metrics:
    out[metric] = []
  for record in records:
    curves = record.get("validation_curve") or {}
    if record["loss"] != "softmax" or "loss" not in curves:
      continue
    loss = {int(step): value for step, value in curves["loss"]}
    if len(loss) < 3:
      continue
    out["runs"] += 1
    for metric in metrics:
      points = {int(step): value for step, value in curves.get(metric, [])}
      steps = sorted(set(loss) & set(points))
      out[metric].append(spearman([loss[s] for s in steps],
                                  [points[s] for s in steps]))
  return out
