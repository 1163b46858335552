"""A cell of two budgets that share only one seed: what its runs show,
without a test (issue 61).

`budgets.compare_budgets` tests a cell's change only where both studies
have chosen it on at least 2 common seeds: one run per budget has no seed
spread, so neither the seed t-test nor the hierarchical bootstrap can
count training noise. A long study that chooses on seed 0 first (its
followers on seeds 1 and 2 come later, or never) still says something
about the objection it answers, so for the cells with exactly one common
seed `lines` gives, per metric:

* that seed's chosen run at each budget and long - short, with a 95%
  percentile bootstrap interval over the test instances
  (`significance.bootstrap_interval`, paired by instance): test sampling
  only;
* the cell's effect against softmax + dot on that seed at each budget and
  its change (long - short, the difference in differences, paired by
  instance), with the same test-instance interval;
* the yardstick the intervals lack: the short study's spread over its
  seeds (the standard deviation of the cell's chosen runs, and of its
  effect against softmax + dot), where it has 2 or more. Two runs of one
  setting differ by about sqrt(2) of it from reseeding alone.

No p-value and no verdict: these are single runs.
"""

from typing import Dict, List, Sequence, Tuple, Union

import numpy as np

from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import significance

Cells = Dict[Tuple[str, str], Dict[int, Dict]]  # cell -> seed -> record
INTRO = (
    "Cells chosen on one common seed (no test, no verdict: single runs) "
    "are set out under each metric: each value is that seed's chosen run; "
    "the 95% intervals resample the test instances only (percentile "
    "bootstrap, paired by instance), so they leave out training noise. Its "
    "yardstick is the short study's spread over its seeds (standard "
    "deviation of the cell's chosen runs, and of its effect against softmax "
    "+ dot; the number of seeds in brackets): two runs of one setting "
    "differ by about 1.4 times it from reseeding alone.")


def _value(cells: Cells, key, seed: int, metric: str) -> float:
  return float(cells[key][seed]["test"][metric])


def _instances(cells: Cells, key, seed: int, metric: str) -> np.ndarray:
  return np.asarray(cells[key][seed]["test_arrays"][metric], np.float64)


def _spread(values: Sequence[float]) -> str:
  """The standard deviation (ddof 1) and count of `values`; a dash for
  fewer than 2."""
  if len(values) < 2:
    return "—"
  return f"{float(np.std(values, ddof=1)):.4f} ({len(values)})"


def _interval(differences: np.ndarray, bounds: np.ndarray) -> str:
  low, high = bounds
  return f"{float(differences.mean()):+.4f} [{low:+.4f}, {high:+.4f}]"


def row(long_cells: Cells, short_cells: Cells, key: Tuple[str, str],
        seed: int, metric: str) -> List[Union[str, np.ndarray]]:
  """The table cells of `key` on `seed` and `metric` (`lines`' columns),
  each interval still its per-instance differences: `lines` bootstraps
  them all at once (one resampling of the test instances, the same draws
  a call each would make)."""
  base = study_grid.BASELINE
  short = _value(short_cells, key, seed, metric)
  long_ = _value(long_cells, key, seed, metric)
  change = (_instances(long_cells, key, seed, metric) -
            _instances(short_cells, key, seed, metric))
  spread = _spread([_value(short_cells, key, s, metric)
                    for s in sorted(short_cells[key])])
  cells = [".".join(key), metric, str(seed), f"{short:.4f}", f"{long_:.4f}",
           change, spread]
  has_base = all(seed in c.get(base, {}) for c in (long_cells, short_cells))
  if key == base:
    return cells + ["(baseline)"] * 4
  if not has_base:
    return cells + ["—"] * 4
  effects, change_of_effect = [], 0.
  for sign, c in ((-1., short_cells), (1., long_cells)):
    effects.append(_value(c, key, seed, metric) -
                   _value(c, base, seed, metric))
    change_of_effect = change_of_effect + sign * (
        _instances(c, key, seed, metric) - _instances(c, base, seed, metric))
  effect_spread = _spread([
      _value(short_cells, key, s, metric) - _value(short_cells, base, s,
                                                   metric)
      for s in sorted(set(short_cells[key]) & set(short_cells[base]))])
  return cells + [f"{effects[0]:+.4f}", f"{effects[1]:+.4f}",
                  change_of_effect, effect_spread]


def lines(long_cells: Cells, short_cells: Cells,
          keys_and_seeds: Sequence[Tuple[Tuple[str, str], int]],
          metric: str) -> List[str]:
  """The one-seed table of `metric` for each (cell, its one common seed);
  `INTRO` says what its numbers are and are not."""
  if not keys_and_seeds:
    return []
  out = ["| cell | metric | seed | short | long | long - short [95%, test "
         "instances] | short: sd over seeds | effect, short | effect, long "
         "| effect's change [95%, test instances] | short: effect's sd over "
         "seeds |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
  rows = [row(long_cells, short_cells, key, seed, metric)
          for key, seed in keys_and_seeds]
  arrays = [c for r in rows for c in r if isinstance(c, np.ndarray)]
  bounds = iter(significance.bootstrap_interval(np.stack(arrays)))
  for cells in rows:
    out.append("| " + " | ".join(
        c if isinstance(c, str) else _interval(c, next(bounds))
        for c in cells) + " |")
  return out
