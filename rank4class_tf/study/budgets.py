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
  95% t interval and two tests, each Holm-adjusted over the whole table:
  the seed t-test (`significance.seed_t_test`) and the hierarchical
  bootstrap (`significance.hierarchical_bootstrap`: seeds, then test
  instances, resampled, paired by seed and instance, as the study report
  tests; B from `significance.samples_for_family`);
* each budget's effect against softmax + dot (cell - baseline, paired by
  seed and instance), both tests Holm-adjusted within that budget's table,
  and its verdict: `gain` / `loss` where both give Holm p < 0.05 (resolved,
  as the study report counts), `gain` / `loss` `by the bootstrap` or `by
  the t-test` where one alone does, else `none detected`; the verdict
  *survives* where both budgets give the same one (`markdown` counts
  those and how the others changed);
* the change of that effect, long - short (difference in differences,
  paired by seed and instance): did the longer training move the cell
  against softmax + dot? Its 95% t interval and both tests, Holm-adjusted
  over the whole table (`gap_lines`).

A cell chosen in both on one common seed only (a long study choosing on
seed 0 before its followers) is set out untested, each seed's run and its
change with test-instance intervals and the short study's seed spread
beside them (`one_seed`).

Beside them, `choices_lines` gives what each budget chose for each cell:
its learning rate (and width), each seed's best and last validation step,
and how many of its runs converged under `--patience`.

The bootstrap reads the chosen runs' per-instance test arrays, which a
study folder and its summary both keep (`--summary_dir`); the two studies
must have scored the same test instances (their labels are compared).
With 3 seeds the t-test detects only differences large against the seeds'
spread; the bootstrap also counts the test instances' noise.
`pipelines.compare_budgets` writes the tables (`tables`).

`patience_stop` replays the `--patience` rule on a run trained without it
(where that run would have stopped, and which validation it would have
kept), so one run to the ceiling shows what any patience would have
given (`tools/patience_probe.py`).
"""

import collections
import dataclasses
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf import fileio
from rank4class_tf.study import compare
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import one_seed
from rank4class_tf.study import selection as selection_lib
from rank4class_tf.study import significance

ALPHA = selection_lib.ALPHA
Cells = Dict[Tuple[str, str], Dict[int, Dict]]  # cell -> seed -> record


def chosen_cells(study_dir: str) -> Tuple[Cells, Tuple[str, ...]]:
  """The chosen record of each (loss, interaction, seed) of a study (or a
  summary), by the study's own `best_metric`, with its per-instance test
  arrays (`test_arrays`), and the study's test metrics.

  Raises:
    ValueError: naming the folder when it holds no study or no finished
      run, or its study.json cannot be read; naming the file when a chosen
      run's test arrays are missing or damaged.
  """
  if not fileio.exists(os.path.join(study_dir, study_folder.STUDY_FILE)):
    raise ValueError(f"{study_dir} holds no study or summary "
                     f"({study_folder.STUDY_FILE} not found).")
  shared, _ = study_folder.load_study(study_dir)
  records = study_folder.load_records(study_dir)
  if not records:
    raise ValueError(f"{study_dir}: no finished run.")
  metrics = tuple(shared["metrics"])
  cells: Cells = {}
  for (loss, interaction, seed), record in selection_lib.select(
      records, str(shared["best_metric"])).items():
    arrays = study_folder.read_test_arrays(
        study_dir, str(record["run"]), metrics, int(record["num_test"]))
    if arrays is None:
      path = os.path.join(study_dir, study_folder.RUNS_DIR,
                          str(record["run"]), study_folder.TEST_FILE)
      raise ValueError(f"{path}: not found (the chosen run's per-instance "
                       "test arrays).")
    cells.setdefault((loss, interaction), {})[seed] = dict(
        record, test_arrays=arrays)
  return cells, metrics


@dataclasses.dataclass
class Row:
  """A cell and metric at both budgets."""
  cell: Tuple[str, str]
  metric: str
  seeds: Tuple[int, ...]
  short: float  # Mean over `seeds`.
  long: float
  change: Tuple[float, float, float, float]  # Long - short: mean, std, 95%.
  change_p: float  # Seed t-test.
  change_p_holm: float = math.nan
  change_boot_p: float = math.nan  # Hierarchical bootstrap.
  change_boot_p_holm: float = math.nan
  # Against softmax + dot at each budget (NaN for the baseline itself):
  # the effect, its t-test and bootstrap p (Holm-adjusted once all rows
  # are made).
  short_effect: float = math.nan
  short_p_holm: float = math.nan
  short_boot_p_holm: float = math.nan
  long_effect: float = math.nan
  long_p_holm: float = math.nan
  long_boot_p_holm: float = math.nan
  # The effect's change, long_effect - short_effect (paired by seed and
  # instance): mean, std, 95% t interval; both tests, Holm-adjusted.
  gap_change: Tuple[float, float, float, float] = (math.nan,) * 4
  gap_p_holm: float = math.nan
  gap_boot_p_holm: float = math.nan
  gap_detectable: float = math.nan  # |change| the bootstrap finds, 80%.

  def verdicts(self) -> Tuple[str, str]:
    return tuple(verdict(getattr(self, f"{name}_effect"),
                         getattr(self, f"{name}_p_holm"),
                         getattr(self, f"{name}_boot_p_holm"))
                 for name in ("short", "long"))


def verdict(effect: float, p_holm: float, boot_p_holm: float) -> str:
  """`gain` / `loss` where both tests' Holm-adjusted p are below ALPHA
  (resolved), `gain by the bootstrap` (or `by the t-test`) where one alone
  is, else `none detected` (the study could not tell the cell from the
  baseline)."""
  found = [name for name, p in (("the bootstrap", boot_p_holm),
                                ("the t-test", p_holm))
           if not math.isnan(p) and p < ALPHA]
  if not found:
    return "none detected"
  sign = "gain" if effect > 0 else "loss"
  return sign if len(found) == 2 else f"{sign} by {found[0]}"


def _p(differences: Sequence[float]) -> float:
  p, _ = significance.seed_t_test(np.asarray(differences)[:, None])
  return float(p)


def _test_values(cells: Cells, metric: str, key: Tuple[str, str],
                 seeds: Sequence[int]) -> np.ndarray:
  """[S] test `metric` of `key`'s chosen runs of `seeds`."""
  return np.array([cells[key][s]["test"][metric] for s in seeds], np.float64)


def _instance_values(cells: Cells, metric: str, key: Tuple[str, str],
                     seeds: Sequence[int]) -> np.ndarray:
  """[S, n] per-instance test `metric` of `key`'s chosen runs of `seeds`."""
  return np.stack([np.asarray(cells[key][s]["test_arrays"][metric],
                              np.float64) for s in seeds])


def _bootstrap(tests: List[Tuple[Tuple[int, ...], np.ndarray]]
               ) -> Tuple[List[float], List[float]]:
  """Hierarchical bootstrap p and standard error of each [S, n] difference
  (`significance.hierarchical_bootstrap_se`; B for the family of all of
  them), one resampling per set of seeds."""
  samples = significance.samples_for_family(len(tests))
  p, se = [math.nan] * len(tests), [math.nan] * len(tests)
  for seeds in sorted({seeds for seeds, _ in tests}):
    index = [i for i, (s, _) in enumerate(tests) if s == seeds]
    found, spread = significance.hierarchical_bootstrap_se(
        np.stack([tests[i][1] for i in index]), samples)
    for i, value, error in zip(index, found, spread):
      p[i], se[i] = float(value), float(error)
  return p, se


def _check_same_instances(long_cells: Cells, short_cells: Cells) -> None:
  """Both studies scored the same test instances: every chosen run's
  labels are the first one's."""
  first = None
  for name, cells in (("long", long_cells), ("short", short_cells)):
    for key, runs in cells.items():
      for seed, record in runs.items():
        labels = np.asarray(record["test_arrays"]["labels"])
        if first is None:
          first = (f"{name} {record['run']}", labels)
        elif labels.shape != first[1].shape or not np.array_equal(
            labels, first[1]):
          raise ValueError(
              f"the {name} study's {record['run']} was tested on other "
              f"instances than the {first[0]} ({labels.shape[0]} against "
              f"{first[1].shape[0]} labels, not the same): the budgets "
              "compare one test set.")


def common_seeds(long_cells: Cells, short_cells: Cells
                 ) -> Dict[Tuple[str, str], Tuple[int, ...]]:
  """The seeds each cell in both studies has chosen in both (long study's
  cell order)."""
  return {key: tuple(sorted(set(long_cells[key]) & set(short_cells[key])))
          for key in long_cells if key in short_cells}


def compare_budgets(long_cells: Cells, short_cells: Cells,
                    metrics: Sequence[str]
                    ) -> Tuple[List[Row], List[Tuple[str, str]]]:
  """The rows of every cell chosen at both budgets on at least 2 common
  seeds (grid order of the long study's cells), and the cells left out
  (in both studies, fewer common seeds: a study still running).

  Raises:
    ValueError: no cell has 2 seeds in both studies.
  """
  seeds_of = common_seeds(long_cells, short_cells)
  keys = [key for key, seeds in seeds_of.items() if len(seeds) >= 2]
  left_out = [key for key in seeds_of if key not in keys]
  if not keys:
    raise ValueError(
        f"no (loss, interaction) cell has 2 seeds chosen in both studies "
        f"({len(seeds_of)} cell(s) in both, with "
        f"{', '.join(sorted({str(len(s)) for s in seeds_of.values()})) or 0}"
        " common seed(s)); a change needs at least 2.")
  _check_same_instances({k: long_cells[k] for k in keys},
                        {k: short_cells[k] for k in keys})
  base = study_grid.BASELINE
  rows = []
  changes = []  # (seeds, [S, n] long - short) of each row.
  effects = {"short": [], "long": []}  # (row, seeds, [S, n] cell - base).
  gaps = []  # (row, seeds, [S, n] long effect - short effect).
  for key in keys:
    seeds = seeds_of[key]
    for metric in metrics:
      short = _test_values(short_cells, metric, key, seeds)
      long = _test_values(long_cells, metric, key, seeds)
      row = Row(key, metric, seeds, float(short.mean()), float(long.mean()),
                compare.seed_interval(long - short), _p(long - short))
      changes.append((seeds, _instance_values(long_cells, metric, key, seeds)
                      - _instance_values(short_cells, metric, key, seeds)))
      if key != base and base in keys:
        common = tuple(s for s in seeds if s in seeds_of[base])
        if len(common) >= 2:
          seed_level, instance = {}, {}
          for name, cells in (("short", short_cells), ("long", long_cells)):
            d = seed_level[name] = (
                _test_values(cells, metric, key, common) -
                _test_values(cells, metric, base, common))
            setattr(row, f"{name}_effect", float(d.mean()))
            setattr(row, f"{name}_p_holm", _p(d))  # Adjusted below.
            instance[name] = (_instance_values(cells, metric, key, common) -
                              _instance_values(cells, metric, base, common))
            effects[name].append((row, common, instance[name]))
          gap = seed_level["long"] - seed_level["short"]
          row.gap_change = compare.seed_interval(gap)
          row.gap_p_holm = _p(gap)  # Adjusted below.
          gaps.append((row, common, instance["long"] - instance["short"]))
      rows.append(row)
  for row, p in zip(rows, _bootstrap(changes)[0]):
    row.change_boot_p = p
  for row, p, boot in zip(
      rows, significance.holm([r.change_p for r in rows]),
      significance.holm([r.change_boot_p for r in rows])):
    row.change_p_holm, row.change_boot_p_holm = float(p), float(boot)
  for name, family in (("short", effects["short"]),
                       ("long", effects["long"]), ("gap", gaps)):
    tested = [row for row, _, _ in family]
    adjusted = significance.holm([getattr(r, f"{name}_p_holm")
                                  for r in tested])
    boot, se = _bootstrap([(seeds, d) for _, seeds, d in family])
    for row, p, b, spread in zip(tested, adjusted, significance.holm(boot),
                                 se):
      setattr(row, f"{name}_p_holm", float(p))
      setattr(row, f"{name}_boot_p_holm", float(b))
      if name == "gap":  # What the family would detect (80% power).
        row.gap_detectable = significance.detectable_effect(
            spread, len(family), ALPHA)
  return rows, left_out


def _cells(number: int) -> str:
  return f"{number} cell{'' if number == 1 else 's'}"


def _choice(record: Dict) -> str:
  rate = f"{record['learning_rate']:g}"
  units = record.get("mlp_units")
  return rate if units is None else f"{rate}, {units} wide"


def _budget_text(runs: Optional[Dict[int, Dict]]) -> Tuple[str, str, str]:
  """(choice, best / last step by seed, converged) of a cell's chosen runs
  at one budget; dashes where the study has no such cell."""
  if not runs:
    return "—", "—", "—"
  seeds = sorted(runs)
  choices = [_choice(runs[s]) for s in seeds]
  choice = (choices[0] if len(set(choices)) == 1 else
            "; ".join(f"{s}: {c}" for s, c in zip(seeds, choices)))
  steps = []
  for seed in seeds:
    curves = runs[seed].get("validation_curve") or {}
    last = max((int(step) for curve in curves.values() for step, _ in curve),
               default=None)
    steps.append(f"{seed}: {int(runs[seed]['best_step']):,} / "
                 f"{'—' if last is None else f'{last:,}'}")
  ruled = [runs[s]["converged"] for s in seeds
           if runs[s].get("converged") is not None]
  converged = f"{sum(map(bool, ruled))} of {len(ruled)}" if ruled else "—"
  return choice, "; ".join(steps), converged


def choices_lines(long_cells: Cells, short_cells: Cells) -> List[str]:
  """What each budget chose for each cell (the long study's cells, then the
  short study's own): learning rate and width, each seed's best and last
  validation step, and how many of its runs converged under `--patience`:
  whether a loss got the rate and the length it needed."""
  keys = list(long_cells) + [k for k in short_cells if k not in long_cells]
  lines = ["## What each budget chose", "",
           "Each cell's chosen runs: learning rate (and MLP width); each "
           "seed's best validation step / its last validation (where the run "
           "stopped); converged: under `--patience`, the best followed by at "
           "least that many validations (— for a study without it).", "",
           "| cell | short: choice | short: best / last step, by seed | "
           "short: converged | long: choice | long: best / last step, by "
           "seed | long: converged |",
           "|---|---|---|---|---|---|---|"]
  for key in keys:
    texts = (_budget_text(short_cells.get(key)) +
             _budget_text(long_cells.get(key)))
    lines.append(f"| {'.'.join(key)} | {' | '.join(texts)} |")
  return lines + [""]


def tables(long_study: str, short_study: str, long_cells: Cells,
           short_cells: Cells, metrics: Sequence[str]) -> str:
  """What `pipelines.compare_budgets` prints and writes: the two studies
  named, the cells only one of them has, the cells left out (too few
  common seeds), what each budget chose (`choices_lines`), then per metric
  its `markdown` table and the effects' change (`gap_lines`), and the
  cells chosen on one common seed, untested (`one_seed.lines`).

  Raises:
    ValueError: as `compare_budgets`, where no cell has even one common
      seed.
  """
  seeds_of = common_seeds(long_cells, short_cells)
  one = [(key, seeds[0]) for key, seeds in seeds_of.items()
         if len(seeds) == 1]
  if one and all(len(seeds) < 2 for seeds in seeds_of.values()):
    rows = []  # Nothing to test: only the one-seed tables.
    left_out = list(seeds_of)
  else:
    rows, left_out = compare_budgets(long_cells, short_cells, metrics)
  _check_same_instances({key: long_cells[key] for key, _ in one},
                        {key: short_cells[key] for key, _ in one})
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
              f"seeds chosen in both: their followers not trained): "
              f"{', '.join('.'.join(key) for key in left_out)}.", ""]
  if one:
    lines += [one_seed.INTRO, ""]
  lines += choices_lines(long_cells, short_cells)
  for name in metrics:
    lines += [f"## {name}", ""]
    if rows:
      lines += markdown(rows, "short", "long", name) + [""]
    gap = gap_lines(rows, name)
    if gap:
      lines += [f"### {name}: the effects' change", ""] + gap + [""]
    if one:
      lines += ([f"### {name}: one seed only", ""] +
                one_seed.lines(long_cells, short_cells, one, name) + [""])
  return "\n".join(lines)


def gap_lines(rows: Sequence[Row], metric: str) -> List[str]:
  """Each cell's effect against softmax + dot at both budgets and its
  change (long - short), the objection's own test: a loss the short budget
  under-trained gains on the baseline when trained longer."""
  rows = [r for r in rows if r.metric == metric and
          not math.isnan(r.gap_p_holm)]
  if not rows:
    return []
  lines = ["Each cell's effect against softmax + dot at both budgets, and "
           "its change (long - short, paired by seed and test instance; "
           "95% t interval over the seeds; both tests Holm-adjusted over "
           "every cell and metric of these tables): `gain` where the longer "
           "training moved the cell up against softmax + dot. Detectable: "
           "the |change| the bootstrap finds with 80% power at the Holm "
           "level of the family's smallest p (normal approximation, its "
           "standard error).", "",
           "| cell | metric | seeds | effect, short | effect, long | change "
           "[95% t] | t-test Holm p | bootstrap Holm p | detectable | the "
           "longer budget, for the cell |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  found = collections.Counter()
  for row in rows:
    mean, _, low, high = row.gap_change
    moved = verdict(mean, row.gap_p_holm, row.gap_boot_p_holm)
    found[moved] += 1
    lines.append(
        f"| {'.'.join(row.cell)} | {row.metric} | "
        f"{','.join(map(str, row.seeds))} | {row.short_effect:+.4f} | "
        f"{row.long_effect:+.4f} | {mean:+.4f} [{low:+.4f}, {high:+.4f}] | "
        f"{row.gap_p_holm:.4f} | {row.gap_boot_p_holm:.4f} | "
        f"{row.gap_detectable:.4f} | {moved} |")
  return lines + ["", f"Effects the longer training changed, of {len(rows)}: "
                  + "; ".join(f"{name} {count}" for name, count in
                              sorted(found.items())) + "."]


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
  the verdicts that survive and how the others changed (short -> long,
  most frequent first)."""
  rows = [r for r in rows if metric is None or r.metric == metric]
  lines = [f"| cell | metric | seeds | {short_name} | {long_name} | "
           "long - short [95% t] | t-test Holm p | bootstrap Holm p | "
           "verdict, short | verdict, long | survives |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  survived = judged = 0
  changed = collections.Counter()
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
      if verdicts[0] != verdicts[1]:
        changed[verdicts] += 1
      short_v, long_v = (
          f"{v} ({getattr(row, f'{name}_effect'):+.4f}; Holm p t-test "
          f"{getattr(row, f'{name}_p_holm'):.4f}, bootstrap "
          f"{getattr(row, f'{name}_boot_p_holm'):.4f})"
          for v, name in zip(verdicts, ("short", "long")))
    lines.append(
        f"| {'.'.join(row.cell)} | {row.metric} | "
        f"{','.join(map(str, row.seeds))} | {row.short:.4f} | "
        f"{row.long:.4f} | {mean:+.4f}{interval} | "
        f"{row.change_p_holm:.4f} | {row.change_boot_p_holm:.4f} | "
        f"{short_v} | {long_v} | {same} |")
  lines += ["", f"Verdicts against softmax + dot that survive the longer "
            f"training: {survived} of {judged}."]
  if changed:
    lines[-1] += " The others, short -> long: " + "; ".join(
        f"{short} -> {long_} ({count})" for (short, long_), count in
        sorted(changed.items(), key=lambda item: (-item[1], item[0]))) + "."
  return lines
