"""One grid at two training budgets, cell by cell (issue 61).

A study trained until its runs stop improving (`--patience`, a long
ceiling) is set beside its short counterpart (the same losses,
interactions and seeds at a fixed step budget), each read from its records
(a study folder or its committed summary). Each study chooses its own runs
(`selection.select`, on its own `best_metric`), so each cell is what that
study reports. For every (loss, interaction) chosen in both and every
metric:

* each budget's mean over the seeds both studies have;
* long - short, paired by seed (seed s's chosen run in each): its mean,
  95% t interval and seed t-test p (`significance.seed_t_test`), Holm
  over the whole table;
* each budget's effect against softmax + dot (cell - baseline, paired by
  seed), its seed t-test p Holm-adjusted within that budget's table, and
  its verdict: `gain` or `loss` where Holm p < 0.05, else `none detected`;
  the verdict *survives* where both budgets give the same one.

These are seed-level tests on the chosen runs' test means (3 seeds: a
difference is detected only when it is large against the seeds' spread);
the study report's hierarchical bootstrap over instances is not repeated
here, as a summary keeps no per-instance arrays. `pipelines.compare_budgets`
writes the tables (`tables`).

`patience_stop` replays the `--patience` rule on a run trained without it
(where that run would have stopped, and which validation it would have
kept), so one run to the ceiling shows what any patience would have
given (`tools/patience_probe.py`).
"""

import dataclasses
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf import fileio
from rank4class_tf.study import compare
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import selection as selection_lib
from rank4class_tf.study import significance

ALPHA = selection_lib.ALPHA
Cells = Dict[Tuple[str, str], Dict[int, Dict]]  # cell -> seed -> record


def chosen_cells(study_dir: str) -> Tuple[Cells, Tuple[str, ...]]:
  """The chosen record of each (loss, interaction, seed) of a study (or a
  summary), by the study's own `best_metric`, and its test metrics.

  Raises:
    ValueError: naming the folder when it holds no study or no finished
      run, or its study.json cannot be read.
  """
  if not fileio.exists(os.path.join(study_dir, study_folder.STUDY_FILE)):
    raise ValueError(f"{study_dir} holds no study or summary "
                     f"({study_folder.STUDY_FILE} not found).")
  shared, _ = study_folder.load_study(study_dir)
  records = study_folder.load_records(study_dir)
  if not records:
    raise ValueError(f"{study_dir}: no finished run.")
  cells: Cells = {}
  for (loss, interaction, seed), record in selection_lib.select(
      records, str(shared["best_metric"])).items():
    cells.setdefault((loss, interaction), {})[seed] = record
  return cells, tuple(shared["metrics"])


@dataclasses.dataclass
class Row:
  """A cell and metric at both budgets."""
  cell: Tuple[str, str]
  metric: str
  seeds: Tuple[int, ...]
  short: float  # Mean over `seeds`.
  long: float
  change: Tuple[float, float, float, float]  # Long - short: mean, std, 95%.
  change_p: float
  change_p_holm: float = math.nan
  # Against softmax + dot at each budget (NaN for the baseline itself).
  short_effect: float = math.nan
  short_p_holm: float = math.nan
  long_effect: float = math.nan
  long_p_holm: float = math.nan

  def verdicts(self) -> Tuple[str, str]:
    return (verdict(self.short_effect, self.short_p_holm),
            verdict(self.long_effect, self.long_p_holm))


def verdict(effect: float, p_holm: float) -> str:
  """`gain` / `loss` where the Holm-adjusted p is below ALPHA, else `none
  detected` (the study could not tell the cell from the baseline)."""
  if math.isnan(p_holm) or p_holm >= ALPHA:
    return "none detected"
  return "gain" if effect > 0 else "loss"


def _p(differences: Sequence[float]) -> float:
  p, _ = significance.seed_t_test(np.asarray(differences)[:, None])
  return float(p)


def _test_values(cells: Cells, metric: str, key: Tuple[str, str],
                 seeds: Sequence[int]) -> np.ndarray:
  """[S] test `metric` of `key`'s chosen runs of `seeds`."""
  return np.array([cells[key][s]["test"][metric] for s in seeds], np.float64)


def compare_budgets(long_cells: Cells, short_cells: Cells,
                    metrics: Sequence[str]
                    ) -> Tuple[List[Row], List[Tuple[str, str]]]:
  """The rows of every cell chosen at both budgets on at least 2 common
  seeds (grid order of the long study's cells), and the cells left out
  (in both studies, fewer common seeds: a study still running).

  Raises:
    ValueError: no cell has 2 seeds in both studies.
  """
  seeds_of = {
      key: tuple(sorted(set(long_cells[key]) & set(short_cells[key])))
      for key in long_cells if key in short_cells}
  keys = [key for key, seeds in seeds_of.items() if len(seeds) >= 2]
  left_out = [key for key in seeds_of if key not in keys]
  if not keys:
    raise ValueError(
        f"no (loss, interaction) cell has 2 seeds chosen in both studies "
        f"({len(seeds_of)} cell(s) in both, with "
        f"{', '.join(sorted({str(len(s)) for s in seeds_of.values()})) or 0}"
        " common seed(s)); a change needs at least 2.")
  base = study_grid.BASELINE
  rows = []
  for key in keys:
    seeds = seeds_of[key]
    for metric in metrics:
      short = _test_values(short_cells, metric, key, seeds)
      long = _test_values(long_cells, metric, key, seeds)
      row = Row(key, metric, seeds, float(short.mean()), float(long.mean()),
                compare.seed_interval(long - short), _p(long - short))
      if key != base and base in keys:
        common = tuple(s for s in seeds if s in seeds_of[base])
        if len(common) >= 2:
          for name, cells in (("short", short_cells), ("long", long_cells)):
            d = (_test_values(cells, metric, key, common) -
                 _test_values(cells, metric, base, common))
            setattr(row, f"{name}_effect", float(d.mean()))
            setattr(row, f"{name}_p_holm", _p(d))  # Adjusted below.
      rows.append(row)
  for row, p in zip(rows, significance.holm([r.change_p for r in rows])):
    row.change_p_holm = float(p)
  for name in ("short", "long"):
    tested = [r for r in rows if not math.isnan(getattr(r, f"{name}_p_holm"))]
    adjusted = significance.holm([getattr(r, f"{name}_p_holm")
                                  for r in tested])
    for row, p in zip(tested, adjusted):
      setattr(row, f"{name}_p_holm", float(p))
  return rows, left_out


def _cells(number: int) -> str:
  return f"{number} cell{'' if number == 1 else 's'}"


def tables(long_study: str, short_study: str, long_cells: Cells,
           short_cells: Cells, metrics: Sequence[str]) -> str:
  """What `pipelines.compare_budgets` prints and writes: the two studies
  named, the cells only one of them has, the cells left out (too few
  common seeds), then one `markdown` table per metric.

  Raises:
    ValueError: as `compare_budgets`.
  """
  rows, left_out = compare_budgets(long_cells, short_cells, metrics)
  lines = [f"Long: {long_study}; short: {short_study}.", ""]
  for name, cells, other in (("long", long_cells, short_cells),
                             ("short", short_cells, long_cells)):
    alone = [key for key in cells if key not in other]
    if alone:
      lines += [f"Only in the {name} study ({_cells(len(alone))}, no "
                f"counterpart to compare): "
                f"{', '.join('.'.join(key) for key in alone)}.", ""]
  if left_out:
    lines += [f"Not compared ({_cells(len(left_out))} with fewer than 2 "
              f"seeds chosen in both: a study still running): "
              f"{', '.join('.'.join(key) for key in left_out)}.", ""]
  for name in metrics:
    lines += [f"## {name}", ""] + markdown(rows, "short", "long", name) + [""]
  return "\n".join(lines)


def patience_stop(values: Sequence[float], patience: int) -> Tuple[int, int]:
  """(kept, last): 0-based indices of the validation a run under
  `--patience` keeps (its best) and of the one it stops after, given the
  validation values of the same run trained on to its ceiling.

  `training.callbacks.EarlyStopping`'s rule: higher by any amount is better
  (the first maximum is kept); the run stops `patience` validations after
  its best, else at its last validation. A run's values up to its stop do
  not depend on the patience, so this is the patience run's own result.

  >>> patience_stop([0.2, 0.5, 0.5, 0.45, 0.9], 2)
  (1, 3)
  >>> patience_stop([0.2, 0.5, 0.5, 0.45, 0.9], 3)
  (4, 4)

  Raises:
    ValueError: no values, a non-finite one, or `patience` < 1.
  """
  if patience < 1:
    raise ValueError(f"patience={patience!r}: must be at least 1.")
  if not values or not all(math.isfinite(v) for v in values):
    raise ValueError(f"validation values {list(values)!r}: need at least "
                     "one, all finite.")
  best = 0
  for index, value in enumerate(values):
    if value > values[best]:
      best = index
    if index - best >= patience:
      return best, index
  return best, len(values) - 1


def markdown(rows: Sequence[Row], short_name: str, long_name: str,
             metric: Optional[str] = None) -> List[str]:
  """The table of `rows` (of one `metric`, or all), then one line counting
  the verdicts that survive."""
  rows = [r for r in rows if metric is None or r.metric == metric]
  lines = [f"| cell | metric | seeds | {short_name} | {long_name} | "
           "long - short [95% t] | p Holm | verdict, short | verdict, long | "
           "survives |", "|---|---|---|---|---|---|---|---|---|---|"]
  survived = judged = 0
  for row in rows:
    mean, _, low, high = row.change
    interval = "" if math.isnan(low) else f" [{low:+.4f}, {high:+.4f}]"
    if math.isnan(row.short_p_holm):
      short_v = long_v = same = "(baseline)"
    else:
      verdicts = row.verdicts()
      same = "yes" if verdicts[0] == verdicts[1] else "no"
      judged += 1
      survived += verdicts[0] == verdicts[1]
      short_v, long_v = (
          f"{v} ({effect:+.4f}, p Holm {p:.4f})" for v, effect, p in zip(
              verdicts, (row.short_effect, row.long_effect),
              (row.short_p_holm, row.long_p_holm)))
    lines.append(
        f"| {'.'.join(row.cell)} | {row.metric} | "
        f"{','.join(map(str, row.seeds))} | {row.short:.4f} | "
        f"{row.long:.4f} | {mean:+.4f}{interval} | "
        f"{row.change_p_holm:.4f} | {short_v} | {long_v} | {same} |")
  lines += ["", f"Verdicts against softmax + dot that survive the longer "
            f"training: {survived} of {judged}."]
  return lines
