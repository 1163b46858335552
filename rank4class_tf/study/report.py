"""The study's report: selection, results.csv, tables.md, figures, HParams.

Everything here is computed from the run records and per-instance test arrays
that `study.execute_run` saved, so `write_report` regenerates the whole report
without TensorFlow training or SavedModel loading.

Selection follows the paper (App. B): for each (loss, interaction, seed) the
run with the best validation `select_metric` is chosen (ties: the first in
grid order, i.e. the first learning rate, then the first MLP width given);
the reported numbers are the chosen runs' test metrics, as mean ± standard
deviation over seeds.

Statistics (`stats`), with the seeds pooled per test instance:

* every cell against the classical classifier (softmax + dot): the two-sided
  paired bootstrap p-value of the mean difference of each metric;
* metric informativeness (the paper's §2 claim that NDCG and MRR tell models
  apart that Top-k accuracy ties): over all pairs of cells, how many pairs
  each metric separates at p < 0.05. The p-values are not corrected for the
  number of comparisons;
* 95% percentile bootstrap intervals of each cell's mean (the bar charts).

Nothing is dropped without a word: the grid's runs without a whole record
(none yet, or a damaged study file, which is named) are listed as missing,
on the console and in tables.md, and so are folders under runs/ that the
grid in study.json does not name. The report is written under
`study.locked`, so reports started together (two `--report_only`, two
studies finishing at once) take turns; every file is written whole
(`fileio`) and the HParams logs are replaced, never duplicated. A write that
fails (a full disk, a read-only folder) raises ValueError naming the file;
the files written before it are whole.
"""

import csv
import dataclasses
import itertools
import math
import json
import os
import shutil
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tensorboard.plugins.hparams import api as hp

from rank4class_tf import catalog
from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf.modeling import encoders
from rank4class_tf import provenance
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.study import paper_tables
from rank4class_tf.study import runner as study_lib
from rank4class_tf.study import statistics as study_stats
from rank4class_tf.study import stats

RESULTS_FILE = "results.csv"
TABLES_FILE = "tables.md"
FIGURES_DIR = "figures"
HPARAMS_SUFFIX = ".study_hparams"
ALPHA = 0.05

LOSS_TITLES = {"softmax": "Softmax CE", "pairwise_logistic": "Pairwise logistic",
               "approx_ndcg": "ApproxNDCG",
               "gumbel_approx_ndcg": "Gumbel-ApproxNDCG", "mse": "MSE",
               "sodeep_spearman": "SoDeep Spearman", "sodeep_map": "SoDeep mAP",
               "sodeep_recall": "SoDeep Recall"}
INTERACTION_TITLES = {"dot": "Dot", "lc_mlp": "LC+MLP",
                      "concat_mlp": "Concat+MLP"}


def metric_title(name: str) -> str:
  """`top1_accuracy` -> Top-1, `ndcg@5` -> NDCG@5, `mrr` -> MRR."""
  if name.startswith("top") and name.endswith("_accuracy"):
    return f"Top-{name[3:-len('_accuracy')]}"
  if name.startswith("precision@"):
    return f"P@{name.split('@')[1]}"
  return name.upper()


def loss_title(label: str) -> str:
  """`softmax` -> Softmax CE; `sodeep_spearman@lstm` -> SoDeep Spearman (lstm)."""
  loss, sorter = study_lib.split_loss(label)
  title = LOSS_TITLES.get(loss, loss)
  return title if sorter is None else f"{title} ({sorter})"


def cell_title(cell: Tuple[str, str]) -> str:
  loss, interaction = cell
  return (f"{loss_title(loss)} + "
          f"{INTERACTION_TITLES.get(interaction, interaction)}")


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
                    study_lib.load_test_arrays(study_dir, record["run"]))
      for m in metric_names:
        per_instance[m][seed] = run_arrays[m]
    cells.append(Cell(loss, interaction, runs, per_instance))
  return cells


@dataclasses.dataclass
class Statistics:
  """The study's tests (`study_stats`: hierarchical bootstrap, Holm).

  Attributes:
    p_vs_baseline: {cell: {metric: p}} against softmax + dot, hierarchical.
    intervals: {cell: {metric: (low, high)}}: 95% hierarchical intervals of
      the cells' means.
    separated: {metric: pairs of cells with p < ALPHA} (raw p).
    num_pairs: pairs of cells.
    p_pairs: {(cell a, cell b): {metric: p}} of "a and b have the same
      mean", hierarchical.
    effects: {(cell, metric): study_stats.Effect} against softmax + dot,
      Holm-adjusted over every cell and metric (the family).
    separated_holm: {metric: pairs with Holm-adjusted p < ALPHA}, Holm over
      all pairs and metrics.
    num_seeds: the most seeds of a cell (1: intervals cover test sampling
      only).
  """
  p_vs_baseline: Dict[Tuple[str, str], Dict[str, float]]
  intervals: Dict[Tuple[str, str], Dict[str, Tuple[float, float]]]
  separated: Dict[str, int]  # metric -> pairs with p < ALPHA
  num_pairs: int
  # (cell a, cell b) -> metric -> p of "a and b have the same mean".
  p_pairs: Dict[Tuple[Tuple[str, str], Tuple[str, str]],
                Dict[str, float]] = dataclasses.field(default_factory=dict)
  effects: Dict[Tuple[Tuple[str, str], str], study_stats.Effect] = (
      dataclasses.field(default_factory=dict))
  separated_holm: Dict[str, int] = dataclasses.field(default_factory=dict)
  num_seeds: int = 1


def compute_statistics(cells: Sequence[Cell], metric_names: Sequence[str],
                       num_samples: int = stats.DEFAULT_SAMPLES,
                       seed: int = stats.DEFAULT_SEED) -> Statistics:
  """Hierarchical bootstrap tests of the cells (see `study_stats`): seeds
  and test instances resampled, cells paired by seed and instance.

  All comparisons of one call share the same resamples.
  """
  by_key = {c.key: c for c in cells}
  baseline = by_key.get(study_lib.BASELINE)
  base_pairs = []
  if baseline is not None:
    base_pairs = [((cell.key, metric), cell.per_instance[metric],
                   baseline.per_instance[metric])
                  for metric in metric_names for cell in cells
                  if cell is not baseline]
  effects = study_stats.effects(base_pairs, num_samples, seed)
  p_vs_baseline = {c.key: {} for c in cells}
  for (key, metric), effect in effects.items():
    p_vs_baseline[key][metric] = effect.p
  pair_effects = study_stats.effects(
      [(((a.key, b.key), metric), a.per_instance[metric],
        b.per_instance[metric])
       for metric in metric_names
       for a, b in itertools.combinations(cells, 2)], num_samples, seed)
  separated = {m: 0 for m in metric_names}
  separated_holm = {m: 0 for m in metric_names}
  p_pairs = {}
  for (key, metric), effect in pair_effects.items():
    p_pairs.setdefault(key, {})[metric] = effect.p
    separated[metric] += effect.p < ALPHA
    separated_holm[metric] += effect.p_holm < ALPHA
  bounds = study_stats.intervals(
      [((c.key, m), c.per_instance[m]) for m in metric_names for c in cells],
      num_samples, seed)
  intervals = {c.key: {} for c in cells}
  for (key, metric), bound in bounds.items():
    intervals[key][metric] = bound
  return Statistics(p_vs_baseline, intervals, separated,
                    len(cells) * (len(cells) - 1) // 2, p_pairs, effects,
                    separated_holm,
                    max((len(c.runs) for c in cells), default=1))


def fairness_marks(records: Sequence[Dict], train_steps: int
                  ) -> Dict[str, Dict[str, object]]:
  """{run: `study_stats.fairness` marks} of every run, against the runs of
  its (loss, interaction, seed); a run that follows another's choice
  (`--choose_on_seed`) has the edges of the run it follows (its own
  `best_is_last`)."""
  groups: Dict[Tuple[str, str, int], List[Dict]] = {}
  for r in records:
    groups.setdefault((r["loss"], r["interaction"], r["seed"]), []).append(r)
  marks = {r["run"]: study_stats.fairness(
      r, groups[(r["loss"], r["interaction"], r["seed"])],
      (r.get("extended_steps") or {}).get("to", train_steps))
           for r in records}
  for r in records:
    followed = marks.get(r.get("follows") or "")
    if followed is not None:
      marks[r["run"]].update(lr_edge=followed["lr_edge"],
                             units_edge=followed["units_edge"])
  return marks


def write_results_csv(path: str, records: Sequence[Dict],
                      chosen: Dict[Tuple[str, str, int], Dict],
                      shared: Dict[str, object],
                      metric_names: Sequence[str],
                      fair: Optional[Dict[str, Dict]] = None) -> None:
  """One row per run: hyper-parameters, selection, fairness marks (`lr_edge`,
  `units_edge`: low / high / only when the run's value is the lowest /
  highest / only one tried for its (loss, interaction, seed); `best_is_last`),
  metrics, time, the code that made it."""
  chosen_runs = {r["run"] for r in chosen.values()}
  fair = fair or fairness_marks(records, shared["train_steps"])
  columns = (["run", "loss", "interaction", "learning_rate", "mlp_units",
              "seed", "selected", "lr_edge", "units_edge", "best_is_last",
              "best_step"] +
             [f"validation_{m}" for m in metric_names] +
             [f"test_{m}" for m in metric_names] +
             ["test_softmax_ce", "test_neg_log_mrr", "test_neg_log_ndcg",
              "ce_bound_holds", "num_test", "train_seconds",
              "resumed_at_step", "git_commit", "git_dirty"] + sorted(shared))
  def write(f):
    writer = csv.writer(f)
    writer.writerow(columns)
    for r in records:
      row = {k: r.get(k) for k in columns}
      row["selected"] = r["run"] in chosen_runs
      row.update(fair[r["run"]])
      made = r.get("provenance") or {}
      row["git_commit"] = made.get("git_commit")
      row["git_dirty"] = made.get("git_dirty")
      row["mlp_units"] = "" if r["mlp_units"] is None else r["mlp_units"]
      for m in metric_names:
        row[f"validation_{m}"] = r["validation"][m]
        row[f"test_{m}"] = r["test"][m]
      if r["train_seconds"] is not None:
        row["train_seconds"] = round(r["train_seconds"], 1)
      for k, v in shared.items():
        row[k] = json.dumps(v) if isinstance(v, (list, dict)) else v
      writer.writerow([_csv_value(row[k]) for k in columns])
  _write(path, write, newline="")


def _write(path: str, write, binary: bool = False,
           newline: Optional[str] = None) -> None:
  """`fileio.write_atomically`; a failed write raises ValueError naming
  `path` (the file is as it was, no temporary file is left)."""
  try:
    fileio.write_atomically(path, write, binary=binary, newline=newline)
  except OSError as e:
    raise ValueError(f"cannot write {path}: {e.strerror or e}; the report "
                     "files written before it are whole.") from None


def _csv_value(value):
  if value is None:
    return ""
  if isinstance(value, float):
    return repr(value)
  return value


def _mean_text(cell: Cell, metric: str) -> str:
  """`mean ± std` over seeds; the mean alone for one seed (no spread)."""
  if len(cell.runs) == 1:
    return f"{cell.mean(metric):.4f}"
  return f"{cell.mean(metric):.4f} ± {cell.std(metric):.4f}"


def _cell_text(cell: Cell, metric: str, statistics: Statistics,
               marks: Dict[Tuple[str, str], str]) -> str:
  text = _mean_text(cell, metric)
  if cell.key in marks:
    text = f"**{text}**{marks[cell.key]}"
  if cell.key == study_lib.BASELINE:
    return text + " (base)"
  effect = statistics.effects.get((cell.key, metric))
  if effect is None:
    return text
  return f"{text} (p={_p_text(effect.p)}, Holm {_p_text(effect.p_holm)})"


def _p_text(p: float) -> str:
  return f"{p:.4f}"


def _marks(cells: Sequence[Cell], metric: str) -> Dict[Tuple[str, str], str]:
  """{cell: mark} of the cells shown bold: the top three by mean, and any
  cell tied with the best; the best one(s) are marked ` *`, the others ``."""
  ranked = sorted(cells, key=lambda c: -c.mean(metric))
  best = ranked[0].mean(metric) if ranked else None
  marks = {}
  for cell in ranked[:3]:
    marks[cell.key] = " *" if cell.mean(metric) == best else ""
  for cell in ranked[3:]:  # Ties with the best beyond the third place.
    if cell.mean(metric) == best:
      marks[cell.key] = " *"
  return marks


def _axis(values):
  return list(dict.fromkeys(values))


def main_table(cells: Sequence[Cell], metric_names: Sequence[str],
               statistics: Statistics) -> List[str]:
  """Rows metric x interaction, columns losses (the paper's Tables 7-12)."""
  loss_axis = _axis(c.loss for c in cells)
  interaction_axis = _axis(c.interaction for c in cells)
  by_key = {c.key: c for c in cells}
  lines = ["| metric | interaction | " +
           " | ".join(loss_title(l) for l in loss_axis) + " |",
           "|---|---|" + "---|" * len(loss_axis)]
  for metric in metric_names:
    marks = _marks(cells, metric)
    for interaction in interaction_axis:
      row = [metric_title(metric), INTERACTION_TITLES.get(interaction,
                                                          interaction)]
      for loss in loss_axis:
        cell = by_key.get((loss, interaction))
        row.append("—" if cell is None else
                   _cell_text(cell, metric, statistics, marks))
      lines.append("| " + " | ".join(row) + " |")
  return lines


def summary_table(cells: Sequence[Cell], metric_names: Sequence[str],
                  statistics: Statistics) -> List[str]:
  """Table 2: the classical classifier against the best Rank4Class cell."""
  by_key = {c.key: c for c in cells}
  baseline = by_key.get(study_lib.BASELINE)
  if baseline is None:
    return ["No softmax + dot cell in this study: nothing to compare with."]
  others = [c for c in cells if c is not baseline]
  if not others:
    return ["Only the softmax + dot cell in this study."]
  lines = ["| metric | MCC (softmax + dot) | best Rank4Class cell | its value "
           "| Δ [95% interval] | p | Holm p |", "|---|---|---|---|---|---|---|"]
  for metric in metric_names:
    best = max(others, key=lambda c: c.mean(metric))
    effect = statistics.effects[(best.key, metric)]
    lines.append(
        f"| {metric_title(metric)} | {_mean_text(baseline, metric)} | "
        f"{cell_title(best.key)} | {_mean_text(best, metric)} | "
        f"{_effect_text(effect)} | {_p_text(effect.p)} | "
        f"{_p_text(effect.p_holm)} |")
  return lines


def _effect_text(effect: study_stats.Effect) -> str:
  return f"{effect.delta:+.4f} [{effect.low:+.4f}, {effect.high:+.4f}]"


def pair_p(statistics: Statistics, a: Tuple[str, str], b: Tuple[str, str],
           metric: str) -> float:
  """p of the paired test of cells a and b (either order)."""
  pairs = statistics.p_pairs
  return (pairs[(a, b)] if (a, b) in pairs else pairs[(b, a)])[metric]


def contrast_lines(cells: Sequence[Cell], metric_names: Sequence[str],
                   statistics: Statistics) -> List[str]:
  """The paper's two claims as contrasts, each with its paired test: every
  ranking loss against softmax CE under the same interaction, and every
  interaction against dot under the same loss (Δ of the means over seeds,
  p of the paired bootstrap). Studies of SoDeep sorters
  (`sodeep_spearman@lstm`) add each sorter against `@handcrafted` and each
  SoDeep cell against MSE."""
  by_key = {c.key: c for c in cells}
  rows = []
  for cell in cells:
    loss, interaction = cell.key
    if loss != "softmax" and ("softmax", interaction) in by_key:
      rows.append(("loss", cell, by_key[("softmax", interaction)]))
  for cell in cells:
    loss, interaction = cell.key
    if interaction != "dot" and (loss, "dot") in by_key:
      rows.append(("interaction", cell, by_key[(loss, "dot")]))
  # SoDeep cells (`sodeep_spearman@pairwise`): each learned sorter against
  # the handcrafted one under the same loss, and each against MSE, the other
  # loss that regresses the scores pointwise.
  for cell in cells:
    loss, interaction = cell.key
    base_loss, sorter = study_lib.split_loss(loss)
    handcrafted = (f"{base_loss}{study_lib.SORTER_SEPARATOR}handcrafted",
                   interaction)
    if (sorter not in (None, "handcrafted") and handcrafted in by_key):
      rows.append(("sorter", cell, by_key[handcrafted]))
  for cell in cells:
    loss, interaction = cell.key
    if loss.startswith("sodeep_") and ("mse", interaction) in by_key:
      rows.append(("mse", cell, by_key[("mse", interaction)]))
  if not rows:
    return ["No pair of cells shares a loss or an interaction."]
  lines = ["| contrast | " + " | ".join(
      f"Δ {metric_title(m)} (p; Holm p)" for m in metric_names) + " |",
           "|---|" + "---|" * len(metric_names)]
  raw = [pair_p(statistics, cell.key, reference.key, metric)
         for _, cell, reference in rows for metric in metric_names]
  adjusted = iter(stats.holm(raw))
  for _, cell, reference in rows:
    values = []
    for metric in metric_names:
      delta = cell.mean(metric) - reference.mean(metric)
      p = pair_p(statistics, cell.key, reference.key, metric)
      p_holm = next(adjusted)
      mark = "**" if p_holm < ALPHA else ""
      values.append(f"{mark}{delta:+.4f}{mark} ({_p_text(p)}; "
                    f"{_p_text(p_holm)})")
    lines.append(f"| {cell_title(cell.key)} vs {cell_title(reference.key)} "
                 f"| " + " | ".join(values) + " |")
  lines += ["", f"Holm over the {len(raw)} contrasts of this table "
            f"({len(rows)} × {len(metric_names)} metrics); bold: Holm p < "
            f"{ALPHA}."]
  return lines


def bound_lines(cells: Sequence[Cell]) -> List[str]:
  """Bruch et al. 2019: softmax CE >= -log MRR >= -log NDCG, per cell."""
  lines = ["| cell | softmax CE | −log MRR | −log NDCG | CE ≥ −log MRR |",
           "|---|---|---|---|---|"]
  for cell in cells:
    runs = [cell.runs[s] for s in sorted(cell.runs)]
    holds = sum(r["ce_bound_holds"] for r in runs)
    lines.append(
        f"| {cell_title(cell.key)} | "
        f"{np.mean([r['test_softmax_ce'] for r in runs]):.4f} | "
        f"{np.mean([r['test_neg_log_mrr'] for r in runs]):.4f} | "
        f"{np.mean([r['test_neg_log_ndcg'] for r in runs]):.4f} | "
        f"holds in {holds}/{len(runs)} runs |")
  return lines


def informativeness_lines(statistics: Statistics,
                          metric_names: Sequence[str],
                          cells: Sequence[Cell] = ()) -> List[str]:
  """Pairs each metric separates (raw and Holm p), and which metrics sit
  at their ceiling (every cell's mean 1.0), where no claim can be read."""
  lines = [f"| metric | pairs separated at p < {ALPHA} | Holm p < {ALPHA} "
           "| share (Holm) |", "|---|---|---|---|"]
  for metric in metric_names:
    count = statistics.separated[metric]
    holm = statistics.separated_holm.get(metric, 0)
    share = holm / statistics.num_pairs if statistics.num_pairs else 0.
    lines.append(f"| {metric_title(metric)} | {count} of "
                 f"{statistics.num_pairs} | {holm} | {share:.0%} |")
  ceiling = [metric_title(m) for m in metric_names
             if cells and all(c.mean(m) >= 1.0 - 1e-12 for c in cells)]
  if ceiling:
    lines += ["", f"{', '.join(ceiling)} is 1.0 in every cell here: at its "
              "ceiling it separates nothing, so this study says nothing "
              "about its informativeness."]
  return lines


def paper_effect_lines(tables: Sequence[paper_tables.PaperTable],
                       cells: Sequence[Cell], metric_names: Sequence[str],
                       statistics: Statistics) -> List[str]:
  """Every cell's effect (Δ against softmax + dot) beside the paper's.

  Absolute values cannot be compared across encoders of different sizes;
  effects can. For each metric the paper reports: our Δ with its 95%
  hierarchical interval, raw and Holm p, the paper's Δ in each table, and
  whether the signs agree with the first table (a paper Δ of 0 agrees with
  nothing); then the count of agreeing cells.
  """
  by_key = {c.key: c for c in cells}
  first = tables[0]
  lines = [f"Paper: {'; '.join(f'{t.title} ({t.source})' for t in tables)}."]
  notes = [t.note for t in tables if t.note]
  if notes:
    lines.append("The paper's own tables: " + " ".join(notes))
  shown = [m for m in metric_names if m in first.values]
  if not shown:
    return lines + ["", "The paper reports none of this study's metrics."]
  if study_lib.BASELINE not in by_key:
    return lines + ["", "No softmax + dot cell in this study: no effects."]
  for metric in shown:
    paper = [t.effects(metric) for t in tables]
    header = " | ".join(f"paper Δ ({t.source.split(', ')[-1]})"
                        for t in tables)
    lines += ["", f"**{metric_title(metric)}**", "",
              f"| cell | ours Δ [95% interval] | p | Holm p | {header} | "
              "signs agree |",
              "|---|---|---|---|" + "---|" * len(tables) + "---|"]
    agree = compared = significant = significant_agree = 0
    for cell in cells:
      if cell.key == study_lib.BASELINE:
        continue
      effect = statistics.effects[(cell.key, metric)]
      paper_key = (cell.interaction, cell.loss)
      theirs = [p.get(paper_key) for p in paper]
      same = ""
      if theirs[0] is not None:
        compared += 1
        same = "yes" if np.sign(theirs[0]) == np.sign(effect.delta) and (
            theirs[0] != 0) else "no"
        agree += same == "yes"
        if effect.p_holm < ALPHA:
          significant += 1
          significant_agree += same == "yes"
      shown_theirs = " | ".join("—" if t is None else f"{t:+.4f}"
                                for t in theirs)
      lines.append(f"| {cell_title(cell.key)} | {_effect_text(effect)} | "
                   f"{_p_text(effect.p)} | {_p_text(effect.p_holm)} | "
                   f"{shown_theirs} | {same or '—'} |")
    lines += ["", f"Signs agree with {first.source.split(', ')[-1]} in "
              f"{agree} of {compared} cells; of the {significant} cells "
              f"whose effect here is significant (Holm p < {ALPHA}), "
              f"{significant_agree} agree."]
  return lines


def fairness_lines(cells: Sequence[Cell], fair: Dict[str, Dict]
                  ) -> List[str]:
  """How many chosen runs sit on an edge of what was tried, or peaked at
  their last validation, per cell and in all."""
  chosen = [(cell, cell.runs[s]) for cell in cells for s in sorted(cell.runs)]
  on_edge = lambda r, key: fair[r["run"]][key] in ("low", "high")
  edge = [r for _, r in chosen
          if on_edge(r, "lr_edge") or on_edge(r, "units_edge")]
  last = [r for _, r in chosen if fair[r["run"]]["best_is_last"]]
  untuned = sorted({name for _, r in chosen for key, name in
                    (("lr_edge", "learning rate"), ("units_edge", "width"))
                    if fair[r["run"]][key] == "only"})
  lines = [f"**{len(edge)} of {len(chosen)} chosen runs are on an edge of "
           f"the learning rates or widths tried; {len(last)} of "
           f"{len(chosen)} peaked at their last validation** (still "
           "improving when they stopped). A choice on an edge may have its "
           "optimum outside the grid (`--extend_grid`); a run that peaked "
           "last may gain from more steps."]
  if untuned:
    lines.append(f"Not tuned (one value tried): {' and '.join(untuned)}; "
                 "counted as \"only\" below, not as an edge.")
  lines += ["",
           "| cell | learning rate on an edge | width on an edge | peaked "
           "last |", "|---|---|---|---|"]
  for cell in cells:
    runs = [cell.runs[s] for s in sorted(cell.runs)]
    count = lambda key: sum(bool(fair[r["run"]][key]) for r in runs)
    sides = lambda key: ", ".join(sorted({fair[r["run"]][key] for r in runs
                                          if fair[r["run"]][key]}))
    lr, units = count("lr_edge"), count("units_edge")
    lr_text = f"{lr} of {len(runs)}" + (f" ({sides('lr_edge')})" if lr
                                         else "")
    units_text = f"{units} of {len(runs)}" + (
        f" ({sides('units_edge')})" if units else "")
    lines.append(f"| {cell_title(cell.key)} | {lr_text} | {units_text} | "
                 f"{count('best_is_last')} of {len(runs)} |")
  return lines


def provenance_lines(records: Sequence[Dict],
                     study: Optional[Dict] = None) -> List[str]:
  """Which code made the runs; a warning when more than one did."""
  made = [r.get("provenance") for r in records]
  distinct = provenance.distinct(made)
  lines = []
  for record in distinct:
    count = sum(provenance.code_key(m) == provenance.code_key(record)
                for m in made)
    lines.append(f"- {count} run(s): {provenance.describe(record)}")
  if provenance.code_differs(made):
    lines.insert(0, "**Warning: these runs were not all made by one known "
                 "version of the code** (several versions, a dirty checkout "
                 "or runs made before provenance was recorded): a "
                 "difference between cells may come from the code.")
    lines.insert(1, "")
  if study and study.get("provenance"):
    lines.append(f"- the study was created by "
                 f"{provenance.describe(study['provenance'])}")
  return lines


def bruch_lines(records: Sequence[Dict]) -> List[str]:
  """Spearman's rho between test softmax CE and MRR / NDCG across runs."""
  found = study_stats.bruch_correlations(
      records, group_of=lambda r: r["loss"])
  lines = ["| runs | number | ρ(CE, MRR) | ρ(CE, NDCG) |",
           "|---|---|---|---|"]
  for key, row in found.items():
    title = "all" if key is None else loss_title(key)
    text = lambda v: "—" if math.isnan(v) else f"{v:+.3f}"
    lines.append(f"| {title} | {row['runs']} | {text(row['mrr'])} | "
                 f"{text(row['ndcg'])} |")
  within = study_stats.bruch_within_runs(records)
  if within["runs"]:
    lines += ["", "Within each softmax-CE run, across its validations "
              "(its validation loss is its CE; the other losses' is not): "
              "Spearman's ρ between validation CE and the metric, over "
              f"{within['runs']} runs:", "",
              "| metric | median ρ | runs with ρ < 0 | runs with ρ > 0 |",
              "|---|---|---|---|"]
    for metric, title in (("mrr", "MRR"), ("ndcg_5", "NDCG@5")):
      rhos = [v for v in within[metric] if not math.isnan(v)]
      if not rhos:
        lines.append(f"| {title} | — | 0 | 0 |")
        continue
      lines.append(f"| {title} | {float(np.median(rhos)):+.3f} | "
                   f"{sum(v < 0 for v in rhos)} | "
                   f"{sum(v > 0 for v in rhos)} |")
  return lines


ROBUSTNESS_METRICS = ("top1_accuracy", "ndcg@5", "mrr")


def _cell_means(chosen: Dict[Tuple[str, str, int], Dict], metric: str
               ) -> Dict[Tuple[str, str], float]:
  """{(loss, interaction): mean over seeds of the chosen runs' test
  metric}."""
  values: Dict[Tuple[str, str], List[float]] = {}
  for (loss, interaction, _), record in chosen.items():
    values.setdefault((loss, interaction), []).append(record["test"][metric])
  return {key: float(np.mean(v)) for key, v in values.items()}


def robustness_lines(records: Sequence[Dict], metric_names: Sequence[str],
                     select_metric: str, cells: Sequence[Cell]) -> List[str]:
  """The verdict under selection by each of Top-1, NDCG@5 and MRR: Table 2
  (the best Rank4Class cell against softmax + dot) and the signs of the
  contrasts, with the contrasts whose sign changes named. Computed from the
  records (means over seeds), so it needs no other runs' test arrays."""
  selections = [m for m in ROBUSTNESS_METRICS if m in metric_names]
  if len(selections) < 2:
    return ["Fewer than two of Top-1, NDCG@5 and MRR were recorded: no "
            "other selection to compare with."]
  means = {m: {} for m in selections}
  for selection in selections:
    chosen = select(records, selection)
    for metric in metric_names:
      means[selection][metric] = _cell_means(chosen, metric)
  lines = ["| selected by | metric | best Rank4Class cell | Δ against "
           "softmax + dot |", "|---|---|---|---|"]
  for selection in selections:
    for metric in metric_names:
      table = means[selection][metric]
      if study_lib.BASELINE not in table or len(table) < 2:
        continue
      base = table[study_lib.BASELINE]
      key, value = max(((k, v) for k, v in table.items()
                        if k != study_lib.BASELINE), key=lambda kv: kv[1])
      lines.append(f"| {metric_title(selection)} | {metric_title(metric)} | "
                   f"{cell_title(key)} | {value - base:+.4f} |")
  # The contrasts of the contrast table, by sign under each selection.
  keys = {c.key for c in cells}
  pairs = [((l, i), ("softmax", i)) for l, i in sorted(keys)
           if l != "softmax" and ("softmax", i) in keys]
  pairs += [((l, i), (l, "dot")) for l, i in sorted(keys)
            if i != "dot" and (l, "dot") in keys]
  changed = []
  for a, b in pairs:
    for metric in metric_names:
      signs = {sel: np.sign(means[sel][metric].get(a, np.nan) -
                            means[sel][metric].get(b, np.nan))
               for sel in selections}
      if len({v for v in signs.values() if not np.isnan(v)}) > 1:
        changed.append(
            f"{cell_title(a)} vs {cell_title(b)}, {metric_title(metric)} ("
            + ", ".join(f"{metric_title(sel)}: {'+' if v > 0 else '−' if v < 0 else '0'}"
                        for sel, v in signs.items()) + ")")
  lines += ["", f"Of the {len(pairs) * len(metric_names)} contrasts "
            f"(loss against softmax CE, interaction against dot, × "
            f"{len(metric_names)} metrics), {len(changed)} change sign with "
            "the selection metric" + (":" if changed else ".")]
  lines += [f"- {text}" for text in changed]
  return lines


def per_class_lines(cells: Sequence[Cell], labels: Optional[np.ndarray],
                    class_names: Sequence[str], top: int = 3) -> List[str]:
  """Macro-averaged Top-1 and MRR per cell, and the classes on which each
  ranking loss gains or loses most Top-1 against softmax CE (same
  interaction); means over the cell's seeds."""
  if labels is None or not cells or "top1_accuracy" not in (
      cells[0].per_instance):
    return ["No per-instance labels: no per-class view."]
  classes = np.unique(labels)
  def per_class(cell, metric):
    seeds = sorted(cell.runs)
    values = np.mean([cell.per_instance[metric][s] for s in seeds], axis=0)
    return np.array([values[labels == c].mean() for c in classes])
  has_mrr = "mrr" in cells[0].per_instance
  lines = ["| cell | macro Top-1 | " + ("macro MRR |" if has_mrr else "")
           , "|---|---|" + ("---|" if has_mrr else "")]
  for cell in cells:
    row = f"| {cell_title(cell.key)} | {per_class(cell, 'top1_accuracy').mean():.4f} |"
    if has_mrr:
      row += f" {per_class(cell, 'mrr').mean():.4f} |"
    lines.append(row)
  by_key = {c.key: c for c in cells}
  name = lambda c: (class_names[c] if 0 <= c < len(class_names)
                    else f"class {c}")
  rows = []
  for cell in cells:
    reference = by_key.get(("softmax", cell.interaction))
    if cell.loss == "softmax" or reference is None:
      continue
    delta = per_class(cell, "top1_accuracy") - per_class(
        reference, "top1_accuracy")
    order = np.argsort(delta, kind="stable")
    support = [int((labels == c).sum()) for c in classes]
    text = lambda i: f"{name(classes[i])} {delta[i]:+.3f} (n={support[i]})"
    gains = ", ".join(text(i) for i in order[::-1][:top]
                      if delta[i] > 0) or "—"
    losses = ", ".join(text(i) for i in order[:top] if delta[i] < 0) or "—"
    rows.append(f"| {cell_title(cell.key)} | {gains} | {losses} |")
  if rows:
    lines += ["", f"Per-class Top-1 against softmax CE with the same "
              f"interaction: the {top} classes gained and lost most (n: the "
              "class's test instances; small classes move most).", "",
              "| cell | gains most | loses most |", "|---|---|---|"] + rows
  return lines


def tables_markdown(shared: Dict[str, object], grid: study_lib.Grid,
                    cells: Sequence[Cell], records: Sequence[Dict],
                    metric_names: Sequence[str], select_metric: str,
                    statistics: Statistics, num_samples: int,
                    paper: Sequence[paper_tables.PaperTable] = (),
                    missing: Sequence[str] = (),
                    unreadable: Optional[Dict[str, str]] = None,
                    strays: Sequence[str] = (),
                    fair: Optional[Dict[str, Dict]] = None,
                    study: Optional[Dict] = None,
                    labels: Optional[np.ndarray] = None,
                    class_names: Sequence[str] = ()) -> str:
  """The whole tables.md.

  `paper`: the paper's tables to show effects beside (none: the dataset has
  none); `missing`: the grid's runs without a result, `unreadable` {run: its
  unreadable file}, `strays`: run folders the grid does not name; listed at
  the end when there are any (`absent_lines`); `fair`: {run: fairness
  marks}; `study`: study.json (its provenance).
  """
  dataset = shared["dataset"]
  num_test = records[0]["num_test"] if records else 0
  seeds = sorted({s for c in cells for s in c.runs})
  one_seed = statistics.num_seeds == 1
  spread = ("one seed: no spread over seeds" if one_seed else
            "mean ± standard deviation over seeds")
  lines = [
      f"# Rank4Class study: {dataset}, encoder {shared['encoder']}", "",
      f"{len(records)} runs; {len(cells)} cells; seeds "
      f"{', '.join(map(str, seeds))}; {shared['train_steps']} steps of batch "
      f"{shared['batch_size']} ({shared['optimizer']}), best checkpoint by "
      f"validation {shared['best_metric']} every {shared['eval_every']} "
      "steps.",
      "Learning rate chosen from "
      f"{{{', '.join(study_lib.rate_text(r) for r in grid.learning_rates)}}}"
      f" and MLP width from {{{', '.join(map(str, grid.mlp_units))}}} "
      + (f"per cell on seed {grid.choose_on_seed}'s validation "
         f"{select_metric}, the other seeds run at that choice "
         "(`--choose_on_seed`)" if grid.choose_on_seed is not None else
         f"per (loss, interaction, seed) on validation {select_metric}")
      + f"; test metrics of the chosen runs on {num_test} test instances, "
      f"{spread}.",
  ]
  if one_seed:
    lines.append("**One seed per cell: the intervals and p-values cover test "
                 "sampling only, not training noise.**")
  if missing:
    lines.append(f"**{len(missing)} of the grid's {len(grid.runs())} runs "
                 "have no result** and are not in these tables (listed under "
                 "[Runs without a result](#runs-without-a-result)).")
  lines += regime_lines(shared)
  if dataset in catalog.VALIDATION_IS_TEST:
    lines.append(f"**{dataset}'s validation and test splits are the same "
                 "data**: checkpoints and hyper-parameters are chosen on the "
                 "test split, as the paper does, so the test numbers are "
                 "optimistic.")
  if fair is not None:
    lines += ["", "## Fairness of the tuning", ""]
    lines += fairness_lines(cells, fair)
  lines += ["", "## Code", ""]
  lines += provenance_lines(records, study)
  family = max(0, len(cells) - 1) * len(metric_names)
  lines += [
      "", "## Test metrics (the paper's Tables 7-12 layout)", "",
      "Bold: the top three cells of a metric; `*`: the best. p: two-sided "
      "hierarchical bootstrap against softmax + dot (seeds resampled, then "
      f"test instances; {num_samples:,} resamples, fixed seed; paired by "
      f"seed and instance); Holm: adjusted over the family of {family} "
      f"comparisons ({max(0, len(cells) - 1)} cells × {len(metric_names)} "
      "metrics against softmax + dot).", ""]
  lines += main_table(cells, metric_names, statistics)
  lines += ["", "## Effects against softmax + dot, beside the paper's", ""]
  if paper:
    lines += paper_effect_lines(paper, cells, metric_names, statistics)
  else:
    lines.append(f"The paper has no table for {dataset}: our effects only "
                 "(the Table 2 section and the contrasts below).")
  lines += ["", "## Classical classifier against the best Rank4Class cell "
            "(Table 2)", ""]
  lines += summary_table(cells, metric_names, statistics)
  lines += ["", "## Ranking losses against softmax CE, interactions "
            "against dot", "",
            "Each ranking loss against softmax CE under the same "
            "interaction, then each interaction against dot under the same "
            "loss (SoDeep cells: each sorter against the handcrafted one, "
            "then against MSE): the difference of the means over seeds and "
            "the hierarchical bootstrap p, raw and Holm-adjusted.", ""]
  lines += contrast_lines(cells, metric_names, statistics)
  lines += ["", "## Metric informativeness", "",
            "Over all pairs of cells, how many pairs each metric tells apart "
            f"(hierarchical bootstrap, p < {ALPHA}; Holm over all "
            f"{statistics.num_pairs} pairs × {len(metric_names)} metrics).",
            ""]
  lines += informativeness_lines(statistics, metric_names, cells)
  lines += ["", "## Robustness: the verdict under another selection metric",
            "", f"This report chooses each run by validation "
            f"{metric_title(select_metric)}; the same study chosen by each "
            "of Top-1, NDCG@5 and MRR (means over seeds):", ""]
  lines += robustness_lines(records, metric_names, select_metric, cells)
  lines += ["", "## Per-class view", ""]
  lines += per_class_lines(cells, labels, class_names)
  lines += ["", "## Softmax cross-entropy and the ranking metrics (Bruch "
            "et al. 2019)", "",
            "The claim: softmax CE tracks the ranking metrics, so a model "
            "with lower test CE has higher MRR and NDCG. Spearman's ρ "
            "across every run of the study (all runs, then per loss); the "
            "claim predicts ρ < 0.", ""]
  lines += bruch_lines(records)
  lines += ["", "The identity CE ≥ −log MRR ≥ −log NDCG holds for every "
            "model by construction (a check of the code, not of the claim): "
            "mean over a cell's chosen runs.", ""]
  lines += bound_lines(cells)
  lines += ["", "## Chosen runs", "",
            "| cell | seed | learning rate | MLP width | validation "
            f"{metric_title(select_metric)} | best step | fairness |",
            "|---|---|---|---|---|---|---|"]
  for cell in cells:
    for seed in sorted(cell.runs):
      r = cell.runs[seed]
      marks = (fair or {}).get(r["run"], {})
      notes = []
      if marks.get("lr_edge") == "only":
        notes.append("rate not tuned")
      elif marks.get("lr_edge"):
        notes.append(f"rate {marks['lr_edge']} edge")
      if marks.get("units_edge") == "only":
        notes.append("width not tuned")
      elif marks.get("units_edge"):
        notes.append(f"width {marks['units_edge']} edge")
      if marks.get("best_is_last"):
        notes.append("peaked last")
      lines.append(f"| {cell_title(cell.key)} | {seed} | "
                   f"{study_lib.rate_text(r['learning_rate'])} | "
                   f"{r['mlp_units'] or '—'} | "
                   f"{r['validation'][select_metric]:.4f} | "
                   f"{r['best_step']} | {', '.join(notes) or '—'} |")
  lines += absent_lines(grid, missing, unreadable or {}, strays)
  return "\n".join(lines) + "\n"


def absent_lines(grid: study_lib.Grid, missing: Sequence[str],
                 unreadable: Dict[str, str],
                 strays: Sequence[str]) -> List[str]:
  """tables.md's account of what the report leaves out (nothing when it
  leaves nothing out)."""
  lines = []
  if missing:
    names = ", ".join(f"`{name}`" + (f" (unreadable: `{unreadable[name]}`)"
                                     if name in unreadable else "")
                      for name in missing)
    lines += ["", "## Runs without a result", "",
              f"{len(missing)} of the {len(grid.runs())} runs of the grid in "
              f"{study_lib.STUDY_FILE} have no whole record (not run yet, "
              f"or their study file is unreadable): {names}."]
  if strays:
    lines += ["", "## Run folders the grid does not name", "",
              f"{study_lib.RUNS_DIR}/ holds {len(strays)} folders that name "
              f"no run of the grid in {study_lib.STUDY_FILE}; they are not in "
              "this report: " + ", ".join(f"`{n}`" for n in strays) + "."]
  return lines


def write_figures(folder: str, cells: Sequence[Cell], records: Sequence[Dict],
                  chosen: Dict, metric_names: Sequence[str],
                  statistics: Statistics, select_metric: str,
                  paper: Sequence[paper_tables.PaperTable] = ()) -> List[str]:
  """The report's figures (PNG, deterministic bytes):

  * `effects.png`, the main figure: every cell's paired difference from
    softmax + dot, one panel per metric, with its 95% hierarchical interval
    (filled: Holm p < 0.05);
  * `paper_effects.png` (with a paper table): our effects against the
    paper's, the diagonal where they would agree;
  * `<metric>.png`: each cell's test mean with its hierarchical interval,
    bars from 0;
  * `validation_curves.png`: every run's validation curve, one panel per
    cell with its own y-range, a colour per (learning rate, width).
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  try:
    os.makedirs(folder, exist_ok=True)
  except OSError as e:
    raise ValueError(f"cannot write {folder}: {e.strerror or e}.") from None
  paths = []
  losses_axis = _axis(c.loss for c in cells)
  interactions_axis = _axis(c.interaction for c in cells)
  colours = plt.get_cmap("tab10")
  by_key = {c.key: c for c in cells}
  if study_lib.BASELINE in by_key and len(cells) > 1:
    paths.append(_effects_figure(folder, plt, cells, metric_names,
                                 statistics))
    if paper:
      path = _paper_figure(folder, plt, cells, metric_names, statistics,
                           paper[0])
      if path:
        paths.append(path)
  for metric in metric_names:
    fig, ax = plt.subplots(figsize=(max(6.4, 1.2 + 0.45 * len(cells)), 4.6))
    width = 0.8 / max(1, len(losses_axis))
    for j, loss in enumerate(losses_axis):
      xs, means, errors = [], [], [[], []]
      for i, interaction in enumerate(interactions_axis):
        cell = by_key.get((loss, interaction))
        if cell is None:
          continue
        mean = cell.mean(metric)
        lo, hi = statistics.intervals[cell.key][metric]
        xs.append(i - 0.4 + width * (j + 0.5))
        means.append(mean)
        errors[0].append(max(0., mean - lo))
        errors[1].append(max(0., hi - mean))
      ax.bar(xs, means, width, yerr=errors, capsize=3, color=colours(j),
             label=loss_title(loss))
    baseline = by_key.get(study_lib.BASELINE)
    if baseline is not None:
      ax.axhline(baseline.mean(metric), color="black", lw=0.8, ls="--",
                 label="softmax + dot")
    ax.set_xticks(range(len(interactions_axis)))
    ax.set_xticklabels([INTERACTION_TITLES.get(i, i)
                        for i in interactions_axis])
    ax.set_ylim(0., 1.05)  # From 0: bar lengths are the values.
    ax.set_ylabel(f"test {metric_title(metric)}")
    ax.set_title(f"Test {metric_title(metric)} of each cell (bars from 0; "
                 "95% hierarchical intervals:\nseeds and test instances "
                 "resampled). The differences: effects.png", fontsize=9)
    ax.legend(fontsize=7, ncol=3, loc="upper center",
              bbox_to_anchor=(0.5, -0.1))
    fig.tight_layout()
    path = os.path.join(folder, f"{metric.replace('@', '_at_')}.png")
    _save(fig, plt, path, dpi=110)
    paths.append(path)
  paths.append(_curves_figure(folder, plt, records, chosen, cells,
                              select_metric))
  return paths


def _save(fig, plt, path: str, dpi: int) -> None:
  """Writes a figure atomically with no date or version in its bytes."""
  try:
    _write(path, lambda f: fig.savefig(f, format="png", dpi=dpi,
                                       metadata={"Software": None}),
           binary=True)
  finally:
    plt.close(fig)


def _effects_figure(folder, plt, cells, metric_names, statistics) -> str:
  """Paired differences from softmax + dot with hierarchical intervals."""
  others = [c for c in cells if c.key != study_lib.BASELINE]
  fig, axes = plt.subplots(1, len(metric_names), squeeze=False,
                           figsize=(2.9 * len(metric_names) + 2.2,
                                    1.0 + 0.32 * len(others)), sharey=True)
  colours = plt.get_cmap("tab10")
  interactions = _axis(c.interaction for c in others)
  for k, metric in enumerate(metric_names):
    ax = axes[0][k]
    for y, cell in enumerate(others):
      effect = statistics.effects[(cell.key, metric)]
      colour = colours(interactions.index(cell.interaction))
      ax.errorbar([effect.delta], [y], xerr=[[effect.delta - effect.low],
                                             [effect.high - effect.delta]],
                  fmt="o", color=colour, capsize=2, ms=4,
                  mfc=colour if effect.p_holm < ALPHA else "white")
    ax.axvline(0., color="black", lw=0.8)
    ax.set_title(f"Δ {metric_title(metric)}", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.grid(axis="x", lw=0.3)
  axes[0][0].set_yticks(range(len(others)))
  axes[0][0].set_yticklabels([cell_title(c.key) for c in others],
                             fontsize=7)
  axes[0][0].invert_yaxis()
  fig.suptitle("Each cell minus softmax + dot: 95% hierarchical intervals "
               "(seeds and test instances resampled);\nfilled: Holm p < "
               f"{ALPHA}", fontsize=9)
  fig.tight_layout(rect=(0, 0, 1, 0.93))
  path = os.path.join(folder, "effects.png")
  _save(fig, plt, path, dpi=110)
  return path


def _paper_figure(folder, plt, cells, metric_names, statistics,
                  table: paper_tables.PaperTable) -> Optional[str]:
  """Our effects (y, with intervals) against the paper's (x)."""
  shown = [m for m in metric_names if table.effects(m)]
  if not shown:
    return None
  fig, axes = plt.subplots(1, len(shown), squeeze=False,
                           figsize=(3.6 * len(shown), 3.8))
  colours = plt.get_cmap("tab10")
  interactions = _axis(c.interaction for c in cells)
  for k, metric in enumerate(shown):
    ax = axes[0][k]
    theirs = table.effects(metric)
    xs = []
    for cell in cells:
      paper = theirs.get((cell.interaction, cell.loss))
      if cell.key == study_lib.BASELINE or paper is None:
        continue
      effect = statistics.effects[(cell.key, metric)]
      ax.errorbar([paper], [effect.delta],
                  yerr=[[effect.delta - effect.low],
                        [effect.high - effect.delta]], fmt="o", ms=4,
                  capsize=2,
                  color=colours(interactions.index(cell.interaction)))
      xs += [paper, effect.low, effect.high]
    if xs:
      lim = max(abs(v) for v in xs) * 1.1 + 1e-4
      ax.plot([-lim, lim], [-lim, lim], color="grey", lw=0.6, ls="--")
      ax.set_xlim(-lim, lim)
    ax.axhline(0., color="black", lw=0.6)
    ax.axvline(0., color="black", lw=0.6)
    ax.set_xlabel(f"paper's Δ {metric_title(metric)}", fontsize=8)
    ax.set_ylabel(f"our Δ {metric_title(metric)}", fontsize=8)
    ax.tick_params(labelsize=7)
  handles = [_legend_line(plt, colours(i), INTERACTION_TITLES.get(n, n))
             for i, n in enumerate(interactions)]
  fig.legend(handles=handles, loc="lower center", ncol=len(handles),
             fontsize=7)
  fig.suptitle(f"Effects against softmax + dot: ours against "
               f"{table.source.split(', ')[-1]} ({table.title}); same sign "
               "in the upper-right and lower-left quadrants", fontsize=9)
  fig.tight_layout(rect=(0, 0.07, 1, 0.93))
  path = os.path.join(folder, "paper_effects.png")
  _save(fig, plt, path, dpi=110)
  return path


def _curves_figure(folder, plt, records, chosen, cells,
                   select_metric) -> str:
  """One panel per cell (its own y-range, at least 280 px high): every
  run's validation curve, a colour per (learning rate, width), the chosen
  ones bold."""
  tag = metrics.keras_name(select_metric)
  chosen_runs = {r["run"] for r in chosen.values()}
  settings = sorted({(r["learning_rate"], r["mlp_units"] or 0)
                     for r in records})
  colours = plt.get_cmap("tab20" if len(settings) > 10 else "tab10")
  keys = [c.key for c in cells] or _axis((r["loss"], r["interaction"])
                                         for r in records)
  cols = min(5, len(keys))
  rows = -(-len(keys) // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows + 1.0),
                           squeeze=False)
  for index, key in enumerate(keys):
    ax = axes[index // cols][index % cols]
    for r in records:
      if (r["loss"], r["interaction"]) != key:
        continue
      curve = np.array(r["validation_curve"].get(tag, []), np.float64)
      if not len(curve):
        continue
      colour = colours(settings.index((r["learning_rate"],
                                       r["mlp_units"] or 0)) % colours.N)
      bold = r["run"] in chosen_runs
      ax.plot(curve[:, 0], curve[:, 1], color=colour,
              lw=1.8 if bold else 0.7, alpha=1.0 if bold else 0.6)
    ax.set_title(cell_title(key), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_xlabel("training step", fontsize=7)
    ax.set_ylabel(f"validation {metric_title(select_metric)}", fontsize=7)
  for index in range(len(keys), rows * cols):  # No empty panels.
    axes[index // cols][index % cols].axis("off")
  handles = [_legend_line(plt, colours(i % colours.N),
                          f"lr {study_lib.rate_text(rate)}" +
                          (f", width {units}" if units else ""))
             for i, (rate, units) in enumerate(settings)]
  fig.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)),
             fontsize=7)
  fig.suptitle("Validation curves of every run (bold: the chosen run of "
               "each seed; each panel its own y-range)", fontsize=9)
  legend_rows = -(-len(handles) // 6)
  fig.tight_layout(rect=(0, 0.03 + 0.1 * legend_rows / rows, 1, 0.96))
  path = os.path.join(folder, "validation_curves.png")
  _save(fig, plt, path, dpi=100)
  return path


def _legend_line(plt, colour, label):
  """A legend entry: a line of `colour`."""
  return plt.Line2D([], [], color=colour, label=label)


def write_hparams(study_dir: str, records: Sequence[Dict],
                  grid: study_lib.Grid, metric_names: Sequence[str],
                  chosen: Dict) -> None:
  """Logs every run to TensorBoard's HParams plugin.

  The experiment (hyper-parameters and their domains, the metrics) goes to
  the study folder, one session per run to its run folder: hyper-parameters
  (with `selected`: whether the run is the chosen one of its seed), and as
  scalars the validation metrics of its best checkpoint, its test metrics,
  softmax CE and training time. Earlier study HParams files (in every run
  folder) are removed once the new ones are written, so the view follows
  the latest report and never shows a run twice.
  """
  domains = [
      hp.HParam("loss", hp.Discrete(list(grid.losses))),
      hp.HParam("interaction", hp.Discrete(list(grid.interactions))),
      hp.HParam("learning_rate", hp.Discrete(
          [float(r) for r in grid.learning_rates])),
      hp.HParam("mlp_units", hp.Discrete([0] + list(grid.mlp_units))),
      hp.HParam("seed", hp.Discrete(list(grid.seeds))),
      hp.HParam("selected", hp.Discrete([False, True])),
  ]
  tags = ([f"validation/{m}" for m in metric_names] +
          [f"test/{m}" for m in metric_names] +
          ["test/softmax_ce", "train_seconds"])
  runs_dir = os.path.join(study_dir, study_lib.RUNS_DIR)
  # Every run folder, so that runs no longer reported lose theirs too.
  folders = [study_dir] + [os.path.join(runs_dir, n) for n in sorted(
      os.listdir(runs_dir) if os.path.isdir(runs_dir) else ())]
  earlier = [path for folder in folders for path in tf.io.gfile.glob(
      os.path.join(folder, "*" + HPARAMS_SUFFIX))]
  try:
    _write_sessions(study_dir, records, metric_names, chosen, domains, tags)
    for path in earlier:  # Replaced once the new logs are written.
      tf.io.gfile.remove(path)
  except (tf.errors.OpError, OSError) as e:
    message = getattr(e, "message", None) or getattr(e, "strerror", e)
    raise ValueError(f"cannot write the HParams logs in {study_dir}: "
                     f"{message}.") from None


def _write_sessions(study_dir, records, metric_names, chosen, domains,
                    tags) -> None:
  """The HParams experiment in `study_dir`, one session per run folder."""
  with tf.summary.create_file_writer(
      study_dir, filename_suffix=HPARAMS_SUFFIX).as_default():
    hp.hparams_config(hparams=domains,
                      metrics=[hp.Metric(t) for t in tags])
  chosen_runs = {r["run"] for r in chosen.values()}
  for r in records:
    folder = os.path.join(study_dir, study_lib.RUNS_DIR, r["run"])
    values = {"loss": r["loss"], "interaction": r["interaction"],
              "learning_rate": float(r["learning_rate"]),
              "mlp_units": r["mlp_units"] or 0, "seed": r["seed"],
              "selected": r["run"] in chosen_runs}
    scalars = {f"validation/{m}": r["validation"][m] for m in metric_names}
    scalars.update({f"test/{m}": r["test"][m] for m in metric_names})
    scalars["test/softmax_ce"] = r["test_softmax_ce"]
    scalars["train_seconds"] = r["train_seconds"] or 0.
    with tf.summary.create_file_writer(
        folder, filename_suffix=HPARAMS_SUFFIX).as_default():
      hp.hparams(values, trial_id=r["run"])
      for tag, value in scalars.items():
        tf.summary.scalar(tag, value, step=0)


def check_options(metric_names: Sequence[str], select_metric: str,
                  num_samples: int, paper_table: Optional[str],
                  dataset: Optional[str] = None
                 ) -> List[paper_tables.PaperTable]:
  """Checks the report's options; returns the paper's tables to show
  (`paper_for`).

  Raises:
    ValueError: one line naming the flag.
  """
  if select_metric not in metric_names:
    raise ValueError(f"--select_metric={select_metric!r} must be one of the "
                     f"study's --metrics ({', '.join(metric_names)}).")
  if num_samples < stats.DEFAULT_SAMPLES:
    raise ValueError(f"--bootstrap_samples={num_samples} must be >= "
                     f"{stats.DEFAULT_SAMPLES}.")
  return paper_for(dataset, paper_table)


def paper_for(dataset: Optional[str], paper_table: Optional[str]
             ) -> List[paper_tables.PaperTable]:
  """The paper's tables a report shows its effects beside: `--paper_table`
  if given, else the dataset's (`paper_tables.DATASET_TABLES`: GoEmotions
  -> Tables 7 and 8), else none.

  Raises:
    ValueError: naming --paper_table: unknown, unreadable, or of another
      dataset than the study's.
  """
  if paper_table:
    table = paper_tables.load(paper_table)
    if dataset and table.dataset and table.dataset != dataset:
      raise ValueError(f"--paper_table={paper_table} is the paper's table "
                       f"of {table.dataset}; this study is of {dataset}.")
    return [table]
  return [paper_tables.load(name)
          for name in paper_tables.DATASET_TABLES.get(dataset, ())]


def regime_lines(shared: Dict[str, object]) -> List[str]:
  """What the encoder did: the paper fine-tunes it; a frozen study trains
  the class encoder and the interaction only."""
  lines = []
  if shared.get("init_checkpoint"):
    pooling = shared.get("pooling") or (
        encoders.default_pooling(shared.get("encoder", ""),
                                 shared["init_checkpoint"]) +
        " (the checkpoint's default)")
    lines.append(f"Encoder weights from `{shared['init_checkpoint']}`, "
                 f"`{shared.get('encoder_size', '')}` size, pooling "
                 f"{pooling}, {shared.get('max_seq_length')} tokens.")
  if shared.get("freeze_encoder"):
    lines.append(
        "**Frozen encoder**: only the class encoder and the interaction "
        "were trained" + (", from the encoder's outputs computed once "
                          "(`feature_cache`)" if shared.get("feature_cache")
                          else "") +
        ". This is not the paper's regime (which fine-tunes the encoder): "
        "it compares losses and interactions on fixed instance features.")
  return lines


@dataclasses.dataclass
class Inputs:
  """What a report is made of, read from a study folder (`read_inputs`).

  Attributes:
    records: the whole records of the grid's runs, grid order.
    chosen: the chosen record of each (loss, interaction, seed).
    arrays: {chosen run: its per-instance test arrays}.
    missing: the grid's runs without a whole record, or chosen without
      readable test arrays (names, grid order).
    unreadable: {run: its unreadable study file (relative path)}.
    strays: run folders the grid does not name.
  """
  records: List[Dict]
  chosen: Dict[Tuple[str, str, int], Dict]
  arrays: Dict[str, Dict[str, np.ndarray]]
  missing: List[str]
  unreadable: Dict[str, str]
  strays: List[str]


def read_inputs(study_dir: str, grid: study_lib.Grid,
                metric_names: Sequence[str], select_metric: str,
                progress: Callable[[str], None] = print) -> Inputs:
  """Reads the records and the chosen runs' test arrays; writes nothing.

  A record or test-array file that cannot be read is named (one `progress`
  line each) and its run reported as missing: a run chosen without readable
  arrays is dropped and its (loss, interaction, seed) chosen again among the
  rest. Then one line lists the missing runs, one the stray folders.
  """
  runs = study_lib.study_runs(study_dir, grid)  # With --extend_grid's.
  found = study_lib.contents(study_dir, runs, metric_names)
  unreadable = {}
  for error in found.damaged:
    name = os.path.basename(os.path.dirname(error.path))
    unreadable[name] = os.path.relpath(error.path, study_dir)
    progress(f"{error.path} is damaged ({error.reason}): run {name} is "
             "reported as missing; the study command (without "
             "--report_only) moves the file aside and evaluates the run "
             "again.")
  records, arrays = list(found.records), {}
  while True:
    chosen = select(records, select_metric)
    dropped = set()
    for record in chosen.values():
      name = record["run"]
      if name in arrays:
        continue
      path = os.path.join(study_dir, study_lib.RUNS_DIR, name,
                          study_lib.TEST_FILE)
      try:
        values = study_lib.read_test_arrays(study_dir, name, metric_names,
                                            record["num_test"])
        problem = None if values is not None else "not found"
      except study_lib.DamagedFile as e:
        values, problem = None, f"damaged ({e.reason})"
      if values is None:
        dropped.add(name)
        unreadable[name] = os.path.relpath(path, study_dir)
        progress(f"{path}: {problem}: run {name} is chosen but its test "
                 "arrays cannot be read; it is reported as missing (the "
                 "study command evaluates it again).")
      else:
        arrays[name] = values
    if not dropped:
      break
    records = [r for r in records if r["run"] not in dropped]
  present = {r["run"] for r in records}
  missing = [run.name for run in runs if run.name not in present]
  if missing:
    progress(f"{len(missing)} of the grid's {len(runs)} runs have no result "
             f"and are reported as missing: {', '.join(missing)}.")
  if found.strays:
    progress(f"{os.path.join(study_dir, study_lib.RUNS_DIR)} holds "
             f"{len(found.strays)} folders that name no run of the grid in "
             f"{study_lib.STUDY_FILE} (not in the report): "
             f"{', '.join(found.strays)}.")
  return Inputs(records, chosen, arrays, missing, unreadable, found.strays)


def write_report(study_dir: str, select_metric: Optional[str] = None,
                 num_samples: int = stats.DEFAULT_SAMPLES,
                 paper_table: Optional[str] = None,
                 progress: Callable[[str], None] = print) -> Dict[str, str]:
  """Writes results.csv, tables.md, figures/ and the HParams logs.

  Holds `study.locked(study_dir)` throughout: reports started together take
  turns, and each is whole.

  Args:
    study_dir: the study's folder.
    select_metric: validation metric choosing each run's hyper-parameters
      (None: the study's `best_metric`).
    num_samples: bootstrap resamples (>= 10,000).
    paper_table: a `paper_tables` name or a JSON file of the paper's numbers
      to show beside ours.
    progress: takes one line per unreadable study file, one listing the
      missing runs and one the stray run folders (`read_inputs`).

  Returns:
    {"results": path, "tables": path, "figures": folder}.

  Raises:
    ValueError: a bad argument (one line naming the flag), a study without
      finished runs, an unreadable study.json, or a file that cannot be
      written (naming it).
  """
  with study_lib.locked(study_dir):
    return _write_report(study_dir, select_metric, num_samples, paper_table,
                         progress)


def _write_report(study_dir, select_metric, num_samples, paper_table,
                  progress) -> Dict[str, str]:
  """`write_report`, its lock held."""
  shared, grid = study_lib.load_study(study_dir)
  metric_names = tuple(shared["metrics"])
  select_metric = select_metric or shared["best_metric"]
  paper = check_options(metric_names, select_metric, num_samples, paper_table,
                        shared.get("dataset"))
  inputs = read_inputs(study_dir, grid, metric_names, select_metric, progress)
  records, chosen = inputs.records, inputs.chosen
  if not records:
    raise ValueError(f"--study_dir={study_dir} has no finished run yet.")
  order = _axis((r["loss"], r["interaction"]) for r in records)
  cells = build_cells(study_dir, chosen, metric_names, order, inputs.arrays)
  statistics = compute_statistics(cells, metric_names, num_samples)
  paths = {"results": os.path.join(study_dir, RESULTS_FILE),
           "tables": os.path.join(study_dir, TABLES_FILE),
           "figures": os.path.join(study_dir, FIGURES_DIR)}
  fair = fairness_marks(records, shared["train_steps"])
  with open(os.path.join(study_dir, study_lib.STUDY_FILE)) as f:
    study = json.load(f)
  labels = None
  if inputs.arrays:
    labels = next(iter(inputs.arrays.values())).get("labels")
  text = tables_markdown(shared, grid, cells, records, metric_names,
                         select_metric, statistics, num_samples, paper,
                         inputs.missing, inputs.unreadable, inputs.strays,
                         fair, study, labels,
                         class_names_of(study_dir, shared))
  write_results_csv(paths["results"], records, chosen, shared, metric_names,
                    fair)
  _write(paths["tables"], lambda f: f.write(text))
  write_figures(paths["figures"], cells, records, chosen, metric_names,
                statistics, select_metric, paper)
  write_hparams(study_dir, records, grid, metric_names, chosen)
  return paths


def class_names_of(study_dir: str, shared: Dict[str, object]) -> List[str]:
  """The study's class names: a run folder's classes.json, else the
  dataset's (loaded offline), else none (classes shown by id)."""
  for path in sorted(tf.io.gfile.glob(os.path.join(
      study_dir, study_lib.RUNS_DIR, "*", run_dir_lib.CLASSES_FILE)))[:1]:
    try:
      with open(path) as f:
        return list(json.load(f))
    except (OSError, ValueError):
      break
  try:
    from rank4class_tf import catalog as catalog_lib  # pylint: disable=g-import-not-at-top,reimported
    from rank4class_tf.data import datasets  # pylint: disable=g-import-not-at-top
    if shared.get("dataset") in catalog_lib.TFDS_DATASETS:
      return []  # Not prepared here, and not worth loading for names.
    config = config_lib.TrainConfig.create(**{
        k: v for k, v in shared.items()
        if k in config_lib.TrainConfig().flat()})
    return list(datasets.from_config(config.data).class_names)
  except Exception:  # pylint: disable=broad-except
    return []


def check_summary_dir(study_dir: str, summary_dir: str) -> None:
  """Raises ValueError (one line) unless `summary_dir` can take a summary:
  not the study folder, and new, empty or holding a summary."""
  if os.path.abspath(summary_dir) == os.path.abspath(study_dir):
    raise ValueError(f"--summary_dir={summary_dir} is the study folder.")
  if os.path.isdir(summary_dir) and os.listdir(summary_dir) and not (
      os.path.exists(os.path.join(summary_dir, study_lib.STUDY_FILE))):
    raise ValueError(f"--summary_dir={summary_dir} is not empty and holds no "
                     f"{study_lib.STUDY_FILE}; choose a new or empty folder.")


def _copy(source: str, target: str) -> None:
  """Copies a file whole (`fileio`), naming the target if it fails."""
  with open(source, "rb") as f:
    content = f.read()
  _write(target, lambda f: f.write(content), binary=True)


def write_summary(study_dir: str, summary_dir: str,
                  select_metric: Optional[str] = None) -> int:
  """Copies what the report is made of into `summary_dir`: small enough to
  commit, and a study folder `write_report` (`--report_only`) reads.

  `summary_dir` gets study.json, every finished run's study_result.json and
  the per-instance test arrays of the runs chosen by `select_metric`
  (compressed), summary.json (the runs whose arrays it leaves out), then
  the report itself. `start_from_summary` continues the study from it. A report with another select metric
  needs the arrays of other runs: the whole study folder. Runs whose files
  cannot be read are left out, as the study's own report leaves them out
  (and names them).

  Returns:
    The number of run records copied.

  Raises:
    ValueError: the study has no finished run, `summary_dir` is the study
      folder or holds something other than a summary, or a file cannot be
      written (naming it).
  """
  check_summary_dir(study_dir, summary_dir)
  shared, grid = study_lib.load_study(study_dir)
  inputs = read_inputs(study_dir, grid, tuple(shared["metrics"]),
                       select_metric or shared["best_metric"],
                       progress=lambda line: None)
  if not inputs.records:
    raise ValueError(f"--study_dir={study_dir} has no finished run yet.")
  try:
    os.makedirs(summary_dir, exist_ok=True)
  except OSError as e:
    raise ValueError(f"cannot write {summary_dir}: {e.strerror or e}.") from None
  runs_dir = os.path.join(summary_dir, study_lib.RUNS_DIR)
  with study_lib.locked(summary_dir):
    try:
      if os.path.isdir(runs_dir):
        shutil.rmtree(runs_dir)  # A summary is rewritten whole.
      for record in inputs.records:
        source = os.path.join(study_dir, study_lib.RUNS_DIR, record["run"])
        target = os.path.join(runs_dir, record["run"])
        os.makedirs(target)
        _copy(os.path.join(source, study_lib.RESULT_FILE),
              os.path.join(target, study_lib.RESULT_FILE))
        if record["run"] in inputs.arrays:
          arrays = inputs.arrays[record["run"]]
          _write(os.path.join(target, study_lib.TEST_FILE),
                 lambda f, a=arrays: np.savez_compressed(f, **a),
                 binary=True)
      _copy(os.path.join(study_dir, study_lib.STUDY_FILE),
            os.path.join(summary_dir, study_lib.STUDY_FILE))
      without = sorted(r["run"] for r in inputs.records
                       if r["run"] not in inputs.arrays)
      _write(os.path.join(summary_dir, study_lib.SUMMARY_FILE),
             lambda f: json.dump({"runs_without_arrays": without}, f,
                                 indent=1))
    except OSError as e:
      raise ValueError(f"cannot write {e.filename or summary_dir}: "
                       f"{e.strerror or e}.") from None
  write_report(summary_dir, select_metric, progress=lambda line: None)
  return len(inputs.records)


def start_from_summary(summary_dir: str, study_dir: str) -> int:
  """Starts `study_dir` from a summary (`write_summary`) of an unfinished
  study, so that the study command goes on where it stopped on another
  machine: study.json, every run's record and test arrays are copied, and
  `summary.json` lists the runs whose arrays the summary left out (never
  chosen: a run not chosen among its cell's runs is never chosen later,
  as a study only adds runs), which the study counts as finished.

  Runs trained on from a summary (`--extend_steps`) start from scratch: a
  summary holds no checkpoint. Writes `study_dir` whole or not at all.

  Returns:
    The number of runs copied; 0 when `study_dir` already holds a study
    (it is continued as it is, the summary not read).

  Raises:
    ValueError: `summary_dir` is not a summary, `study_dir` holds something
      other than a study, or a file cannot be read or written (naming it).
  """
  if os.path.exists(os.path.join(study_dir, study_lib.STUDY_FILE)):
    return 0
  if os.path.isdir(study_dir) and os.listdir(study_dir):
    raise ValueError(f"--study_dir={study_dir} is not empty and holds no "
                     f"{study_lib.STUDY_FILE}: give --from_summary a new or "
                     "empty folder.")
  if not os.path.isfile(os.path.join(summary_dir, study_lib.STUDY_FILE)):
    raise ValueError(f"--from_summary={summary_dir} holds no "
                     f"{study_lib.STUDY_FILE}: not a study summary.")
  study_lib.load_study(summary_dir)  # Raises on a damaged study.json.
  source_runs = os.path.join(summary_dir, study_lib.RUNS_DIR)
  names = sorted(os.listdir(source_runs)) if os.path.isdir(source_runs) else []
  copied, without = 0, []
  try:
    with fileio.atomic_folder(study_dir, replace=False) as tmp:
      shutil.copyfile(os.path.join(summary_dir, study_lib.STUDY_FILE),
                      os.path.join(tmp, study_lib.STUDY_FILE))
      for name in names:
        source = os.path.join(source_runs, name)
        record = os.path.join(source, study_lib.RESULT_FILE)
        if not os.path.isfile(record):
          continue  # Not a run's summary: the report names strays.
        target = os.path.join(tmp, study_lib.RUNS_DIR, name)
        os.makedirs(target)
        shutil.copyfile(record, os.path.join(target, study_lib.RESULT_FILE))
        arrays = os.path.join(source, study_lib.TEST_FILE)
        if os.path.isfile(arrays):
          shutil.copyfile(arrays, os.path.join(target, study_lib.TEST_FILE))
        else:
          without.append(name)
        copied += 1
      with open(os.path.join(tmp, study_lib.SUMMARY_FILE), "w") as f:
        json.dump({"runs_without_arrays": without}, f, indent=1)
  except OSError as e:
    raise ValueError(f"cannot copy --from_summary={summary_dir} to "
                     f"{e.filename or study_dir}: {e.strerror or e}.") from None
  return copied
