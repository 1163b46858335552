"""The paper's effects beside ours: where each of its single-run effects
falls against our interval, with the noise a single run carries, whether
the signs agree where ours is not noise, how many of its effects this study
could detect, and which of its cells were not run (Table 2's caveat). Each
`*_lines` function returns markdown lines of tables.md.

The paper reports one run per cell, without error bars, for BERT-Base
(GoEmotions Table 7) and ELECTRA-Base (Table 8); every placement and count
here is made for each of the dataset's tables. A sign is compared only
where our 95% interval excludes 0 (`sign_agreement`): a Δ of +0.00003
whose interval holds 0 agrees with nothing. The paper's gains and its
losses are counted apart (`placement_summary`).
"""

import math
from typing import List, Sequence, Tuple

import numpy as np

from rank4class_tf.study import common as common_lib
from rank4class_tf.study import effects as study_effects
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_tables
from rank4class_tf.study import selection as selection_lib
from rank4class_tf.study import significance

ALPHA = selection_lib.ALPHA
POWER = 0.8


def single_run_band(cell: selection_lib.Cell, base: selection_lib.Cell,
                    metric: str) -> float:
  """±1.96 standard deviations of a single-run Δ (one run of the cell minus
  one of the baseline), from our seeds: 1.96 √(sd_cell² + sd_base²). NaN
  with one seed."""
  if len(cell.runs) < 2 or len(base.runs) < 2:
    return math.nan
  return 1.96 * math.hypot(cell.std(metric), base.std(metric))


def place(paper: float, effect: study_effects.Effect, band: float) -> str:
  """Where the paper's Δ falls against our interval: above / inside /
  below, with ", band overlaps" where the paper's Δ ± its single-run band
  reaches our interval although the Δ itself lies outside."""
  where = ("above" if paper > effect.high else
           "below" if paper < effect.low else "inside")
  if where != "inside" and not math.isnan(band) and (
      paper - band <= effect.high and paper + band >= effect.low):
    where += ", band overlaps"
  return where


def sign_agreement(paper: float, effect: study_effects.Effect) -> str:
  """yes / no where our interval excludes 0 and the paper's Δ is not 0;
  else unknown: a sign inside the noise agrees with nothing."""
  if not effect.excludes_zero or paper == 0:
    return "unknown"
  return "yes" if np.sign(paper) == np.sign(effect.delta) else "no"


def table_name(table: paper_tables.PaperTable) -> str:
  """`Table 7` from the table's source."""
  return table.source.split(", ")[-1]


def placement_summary(table: paper_tables.PaperTable,
                      rows: Sequence[Tuple[float, study_effects.Effect, float,
                                           float]]) -> str:
  """One table's counts for one metric: its gains and losses against our
  intervals (with and without its single-run band), the sign agreement and
  how many of its effects our power reaches. `rows`: (paper Δ, our
  effect, band, detectable Δ)."""
  name = table_name(table)
  parts = []
  for title, side in (("gains", [r for r in rows if r[0] > 0]),
                      ("losses", [r for r in rows if r[0] < 0])):
    if not side:
      parts.append(f"no {title}")
      continue
    where = [place(*r[:2], r[2]) for r in side]
    count = lambda w: sum(x.split(",")[0] == w for x in where)
    clear = sum(x in ("above", "below") for x in where)
    parts.append(
        f"its {len(side)} {title} lie above our interval in {count('above')}, "
        f"inside in {count('inside')}, below in {count('below')} "
        f"({clear} outside even with their single-run band)")
  zero = sum(r[0] == 0 for r in rows)
  signs = [sign_agreement(r[0], r[1]) for r in rows]
  known = [s for s in signs if s != "unknown"]
  reach = sum(abs(r[0]) >= r[3] for r in rows if not math.isnan(r[3]))
  return (f"{name}: " + "; ".join(parts) +
          (f"; {zero} exactly 0" if zero else "") +
          f". Signs: {sum(s == 'yes' for s in known)} of the {len(known)} "
          f"cells whose interval excludes 0 agree with {name} "
          f"({len(rows) - len(known)} unknown). {reach} of its {len(rows)} "
          "|Δ| reach the Δ this study detects with 80% power in that cell.")


def paper_effect_lines(tables: Sequence[paper_tables.PaperTable],
                       cells: Sequence[selection_lib.Cell],
                       metric_names: Sequence[str],
                       statistics: selection_lib.Statistics,
                       dataset: str = "") -> List[str]:
  """Every cell's effect (Δ against softmax + dot) beside each of the
  paper's tables.

  Absolute values cannot be compared across encoders of different sizes;
  effects can. For each metric the paper reports: our Δ with its 95%
  hierarchical interval and both tests, the Δ this study detects with 80%
  power in that cell, the single-run band of a Δ, and per table the paper's
  Δ, where it falls against our interval and whether the signs agree; then
  each table's counts (`placement_summary`). Without a paper table (the
  dataset has none): our effects on every metric, with both tests.
  """
  by_key = {c.key: c for c in cells}
  if tables:
    lines = [f"Paper: "
             f"{'; '.join(f'{t.title} ({t.source})' for t in tables)}."]
    notes = [t.note for t in tables if t.note]
    if notes:
      lines.append("The paper's own tables: " + " ".join(notes))
    shown = [m for m in metric_names if any(m in t.values for t in tables)]
    if not shown:
      return lines + ["", "The paper reports none of this study's metrics."]
  else:
    lines = [f"The paper has no table for {dataset}: our effects only."]
    shown = list(metric_names)
  base = by_key.get(study_grid.BASELINE)
  if base is None:
    return lines + ["", "No softmax + dot cell in this study: no effects."]
  family = len(statistics.effects)
  lines += [
      "", "Ours: Δ [95% hierarchical interval], the bootstrap p and both "
      f"tests' Holm p over the {family} comparisons against softmax + dot. "
      "*Detectable*: the smallest |Δ| this study finds in that cell with 80% "
      "power under that Holm family (normal approximation, the bootstrap's "
      "standard error of the Δ; [What this study can detect]"
      "(#what-this-study-can-detect)). *Single run*: ± 1.96 × the standard "
      "deviation of a Δ between single runs, √(sd_cell² + sd_base²) from our "
      "seeds" + (
          ": the noise each of the paper's single-run Δ carries, at our "
          "scale (the paper reports one run per cell, no error bars). Per "
          "table: the paper's Δ; where it falls against our interval "
          "(\"band overlaps\": the paper's Δ ± its single-run band reaches "
          "our interval); the sign agreement, counted only where our "
          "interval excludes 0 (\"unknown\" where it holds 0)."
          if tables else ".")]
  for metric in shown:
    paper = [t.effects(metric) for t in tables]
    header = " | ".join(f"paper Δ ({table_name(t)}) | against ours | sign"
                        for t in tables)
    lines += ["", f"**{common_lib.metric_title(metric)}**", "",
              "| cell | ours Δ [95% interval] | p | Holm p | t-test Holm p | "
              "detectable | single run ± |" + (f" {header} |" if tables
                                                else ""),
              "|---|---|---|---|---|---|---|" + "---|---|---|" * len(tables)]
    rows = [[] for _ in tables]
    for cell in cells:
      if cell.key == study_grid.BASELINE:
        continue
      effect = statistics.effects[(cell.key, metric)]
      band = single_run_band(cell, base, metric)
      detect = significance.detectable_effect(effect.se, family, ALPHA, POWER)
      columns = []
      for k, p in enumerate(paper):
        theirs = p.get((cell.interaction, cell.loss))
        if theirs is None:
          columns.append("— | — | —")
          continue
        rows[k].append((theirs, effect, band, detect))
        columns.append(f"{theirs:+.4f} | {place(theirs, effect, band)} | "
                       f"{sign_agreement(theirs, effect)}")
      lines.append(
          f"| {common_lib.cell_title(cell.key)} | "
          f"{common_lib.effect_text(effect)} | "
          f"{common_lib.p_text(effect.p)} | "
          f"{common_lib.p_text(effect.p_holm)} | "
          f"{common_lib.holm_text(effect.p_seed_holm)} | {detect:.4f} | "
          f"{'—' if math.isnan(band) else f'{band:.4f}'} |" +
          "".join(f" {column} |" for column in columns))
    summaries = [placement_summary(table, found)
                 for table, found in zip(tables, rows) if found]
    if summaries:
      lines += [""] + summaries
  return lines


def missing_paper_cells(tables: Sequence[paper_tables.PaperTable],
                        cells: Sequence[selection_lib.Cell],
                        metric_names: Sequence[str]) -> List[str]:
  """Table 2's caveat: how many other cells the best is taken from here
  against the paper, the paper's cells not run here, and which of the
  paper's best cells are among them."""
  keys = {c.key for c in cells}
  others = len(keys - {study_grid.BASELINE})
  if not tables:
    return []
  paper_cells = set()
  for table in tables:
    for metric in metric_names:
      paper_cells |= {(loss, interaction) for (interaction, loss)
                      in table.effects(metric)}
  absent = sorted(paper_cells - keys,
                  key=lambda k: (list(common_lib.LOSS_TITLES).index(k[0])
                                 if k[0] in common_lib.LOSS_TITLES else 99,
                                 list(common_lib.INTERACTION_TITLES).index(
                                     k[1]) if k[1] in
                                 common_lib.INTERACTION_TITLES else 99))
  if not absent:
    return ["", f"The best of the {others} other cells run here, as in the "
            "paper's Table 2."]
  lines = ["", f"The best of the {others} other cells run here; the paper's "
           f"Table 2 takes the best of its {len(paper_cells)}. Not run here: "
           + ", ".join(common_lib.cell_title(k) for k in absent) + "."]
  best = []
  for table in tables:
    for metric in metric_names:
      effects = table.effects(metric)
      if not effects:
        continue
      (interaction, loss), value = max(effects.items(), key=lambda kv: kv[1])
      if (loss, interaction) in absent:
        best.append(f"{common_lib.cell_title((loss, interaction))} on "
                    f"{common_lib.metric_title(metric)} in "
                    f"{table_name(table)} ({value:+.4f})")
  if best:
    lines.append("Among them the paper's best cell: " + "; ".join(best) + ".")
  return lines
