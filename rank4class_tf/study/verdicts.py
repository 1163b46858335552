"""The report's verdict machinery: which differences count as resolved,
what the study could have detected, and the metric claim as the paper
states it. Each `*_lines` function returns markdown lines of tables.md.

A verdict rests on two tests of every difference (`effects.effects`):
the hierarchical bootstrap (seeds, then test instances, resampled) and the
seed-level paired t-test (one number per seed). They answer different
questions (the bootstrap also counts the test set's sampling; the t-test
conditions on the test set but has only S - 1 degrees of freedom), and with
3 seeds they often disagree. A difference is **resolved** when both reject
at Holm p < 0.05 over its family: the verdict words follow the more
conservative of the two, and the report lists where they differ.

* `tests_lines`: how each family is tested, B and the bootstrap's Holm
  floor, and how many differences each test resolves.
* `contrast_effects` / `contrast_lines`: the paper's two claims as
  contrasts (each ranking loss against softmax CE under the same
  interaction, each interaction against dot under the same loss), both
  tests Holm-adjusted over the contrast family, counted by direction.
* `power_lines`: the smallest effect each family detects with 80% power
  (`significance.detectable_effect`, `significance.detectable_effect_t`), beside the
  paper's effects (placed against ours in `paper_effects`).
* `metric_claim_lines`: among pairs of cells an accuracy metric leaves
  unresolved, how many a ranking metric separates, against the reverse
  (`significance.sign_test`).
"""

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf.study import common as common_lib
from rank4class_tf.study import effects as study_effects
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_effects as paper_effects_lib
from rank4class_tf.study import paper_tables
from rank4class_tf.study import selection as selection_lib
from rank4class_tf.study import significance

ALPHA = selection_lib.ALPHA
POWER = paper_effects_lib.POWER
CONTRAST_KINDS = {
    "loss": "ranking loss against softmax CE (same interaction)",
    "interaction": "interaction against dot (same loss)",
    "sorter": "sorter against the handcrafted one (same loss)",
    "mse": "SoDeep cell against MSE (same interaction)",
}


def tests_differ(effect: study_effects.Effect) -> bool:
  """One test resolves the difference at Holm p < ALPHA, the other not."""
  return effect.resolved_by_bootstrap != effect.resolved_by_seeds


def distinct_seed_sets(num_seeds: int) -> int:
  """The distinct multisets a bootstrap draws from S seeds: C(2S - 1, S)."""
  return math.comb(2 * num_seeds - 1, num_seeds)


@dataclasses.dataclass(frozen=True)
class Contrast:
  """One row of the contrast table: `cell` against `reference`."""
  kind: str
  cell: Tuple[str, str]
  reference: Tuple[str, str]
  effects: Dict[str, study_effects.Effect]  # metric -> cell - reference


def contrast_rows(cells: Sequence[selection_lib.Cell]
                 ) -> List[Tuple[str, Tuple[str, str], Tuple[str, str]]]:
  """[(kind, cell, reference)]: every ranking loss against softmax CE under
  the same interaction, every interaction against dot under the same loss;
  studies of SoDeep sorters (`sodeep_spearman@lstm`) add each sorter
  against `@handcrafted` and each SoDeep cell against MSE."""
  keys = [c.key for c in cells]
  present = set(keys)
  rows = []
  for loss, interaction in keys:
    if loss != "softmax" and ("softmax", interaction) in present:
      rows.append(("loss", (loss, interaction), ("softmax", interaction)))
  for loss, interaction in keys:
    if interaction != "dot" and (loss, "dot") in present:
      rows.append(("interaction", (loss, interaction), (loss, "dot")))
  for loss, interaction in keys:
    base_loss, sorter = study_grid.split_loss(loss)
    handcrafted = (f"{base_loss}{study_grid.SORTER_SEPARATOR}handcrafted",
                   interaction)
    if sorter not in (None, "handcrafted") and handcrafted in present:
      rows.append(("sorter", (loss, interaction), handcrafted))
  for loss, interaction in keys:
    if loss.startswith("sodeep_") and ("mse", interaction) in present:
      rows.append(("mse", (loss, interaction), ("mse", interaction)))
  return rows


def _oriented(statistics: selection_lib.Statistics, a, b, metric
             ) -> study_effects.Effect:
  """The pair effect of a - b (stored for one order of the pair)."""
  if (a, b) in statistics.pair_effects:
    return statistics.pair_effects[(a, b)][metric]
  e = statistics.pair_effects[(b, a)][metric]
  return dataclasses.replace(e, delta=0. - e.delta, low=0. - e.high,
                             high=0. - e.low)  # 0. -: no -0.0.


def contrast_effects(cells: Sequence[selection_lib.Cell],
                     metric_names: Sequence[str],
                     statistics: selection_lib.Statistics) -> List[Contrast]:
  """The contrasts with both tests Holm-adjusted over the contrast family
  (every row × metric), from the pair tests' raw p."""
  rows = contrast_rows(cells)
  found = [(kind, cell, reference,
            {m: _oriented(statistics, cell, reference, m)
             for m in metric_names}) for kind, cell, reference in rows]
  flat = [(i, m) for i in range(len(found)) for m in metric_names]
  raw = [found[i][3][m].p for i, m in flat]
  holm = dict(zip(flat, significance.holm(raw)))
  tested = [(i, m) for i, m in flat if not math.isnan(found[i][3][m].p_seed)]
  holm_seed = dict(zip(tested, significance.holm(
      [found[i][3][m].p_seed for i, m in tested])))
  out = []
  for i, (kind, cell, reference, effects) in enumerate(found):
    out.append(Contrast(kind, cell, reference, {
        m: dataclasses.replace(effects[m], p_holm=float(holm[(i, m)]),
                               p_seed_holm=float(holm_seed.get((i, m),
                                                               math.nan)))
        for m in metric_names}))
  return out


def contrast_lines(contrasts: Sequence[Contrast],
                   metric_names: Sequence[str]) -> List[str]:
  """The contrast table, its counts by kind and direction, and the
  contrasts the two tests decide differently."""
  if not contrasts:
    return ["No pair of cells shares a loss or an interaction."]
  lines = [
      "| contrast | " +
      " | ".join(f"Δ {common_lib.metric_title(m)} (p; Holm p; t-test Holm p)"
                 for m in metric_names) +
      " |", "|---|" + "---|" * len(metric_names)
  ]
  for contrast in contrasts:
    values = []
    for metric in metric_names:
      e = contrast.effects[metric]
      mark = "**" if e.resolved else ""
      values.append(f"{mark}{e.delta:+.4f}{mark} ({common_lib.p_text(e.p)}; "
                    f"{common_lib.p_text(e.p_holm)}; "
                    f"{common_lib.holm_text(e.p_seed_holm)})")
    lines.append(f"| {common_lib.cell_title(contrast.cell)} vs "
                 f"{common_lib.cell_title(contrast.reference)} | " +
                 " | ".join(values) + " |")
  size = len(contrasts) * len(metric_names)
  lines += ["", f"Holm over the {size} contrasts of this table "
            f"({len(contrasts)} × {len(metric_names)} metrics), each test "
            f"apart; bold: resolved (Holm p < {ALPHA} in both the bootstrap "
            "and the seed-level t-test).", "",
            "| contrasts | number | better at Holm p < 0.05: bootstrap / "
            "t-test / both | worse: bootstrap / t-test / both |",
            "|---|---|---|---|"]
  for kind, title in CONTRAST_KINDS.items():
    found = [c.effects[m] for c in contrasts if c.kind == kind
             for m in metric_names]
    if not found:
      continue
    def counts(sign):
      side = [e for e in found if np.sign(e.delta) == sign]
      return (f"{sum(e.resolved_by_bootstrap for e in side)} / "
              f"{sum(e.resolved_by_seeds for e in side)} / "
              f"{sum(e.resolved for e in side)}")
    lines.append(f"| {title} | {len(found)} | {counts(1)} | {counts(-1)} |")
  differ = [(c, m) for c in contrasts for m in metric_names
            if tests_differ(c.effects[m])]
  lines += ["", f"The two tests decide {len(differ)} of the {size} "
            "contrasts differently (Holm p < 0.05 in one only)" +
            (":" if differ else ".")]
  for c, m in differ:
    e = c.effects[m]
    lines.append(f"- {common_lib.cell_title(c.cell)} vs "
                 f"{common_lib.cell_title(c.reference)}, "
                 f"{common_lib.metric_title(m)} {e.delta:+.4f}: bootstrap "
                 f"Holm {common_lib.p_text(e.p_holm)}, t-test Holm "
                 f"{common_lib.holm_text(e.p_seed_holm)}")
  return lines


def _resolved_counts(effects: Sequence[study_effects.Effect]) -> str:
  return (f"{sum(e.resolved_by_bootstrap for e in effects)} | "
          f"{sum(e.resolved_by_seeds for e in effects)} | "
          f"{sum(e.resolved for e in effects)}")


def tests_lines(statistics: selection_lib.Statistics,
                contrasts: Sequence[Contrast],
                metric_names: Sequence[str]) -> List[str]:
  """How every difference is tested, B and the Holm floor, and how many
  each test resolves in each family."""
  samples = statistics.num_samples
  num_seeds = statistics.num_seeds
  pairs = [e for by_metric in statistics.pair_effects.values()
           for e in by_metric.values()]
  families = [("each cell against softmax + dot",
               list(statistics.effects.values())),
              ("contrasts (below)",
               [c.effects[m] for c in contrasts for m in metric_names]),
              ("every pair of cells", pairs)]
  families = [(title, found) for title, found in families if found]
  largest = max((len(found) for _, found in families), default=0)
  raised = ("" if samples == statistics.requested_samples else
            f", the requested {statistics.requested_samples:,} raised so "
            "that the smallest reachable p, 1 / (B + 1), times the largest "
            f"family ({largest} tests) is at most α / 10")
  lines = [
      "Every difference has two tests, each Holm-adjusted over its family "
      f"(α = {ALPHA}):", "",
      "- **hierarchical bootstrap**: seeds resampled, then test instances, "
      f"paired by seed and instance; B = {samples:,} resamples, fixed seed"
      f"{raised}. Its smallest p is 1 / (B + 1) = {statistics.floor:.2g}, so "
      "a family of m tests cannot reach a Holm p below m / (B + 1) (its "
      "floor, below)." +
      (f" With {num_seeds} seeds the seed draws take only "
       f"{distinct_seed_sets(num_seeds)} distinct sets." if num_seeds > 1
       else ""),
      "- **seed-level paired t-test**: each shared seed's mean difference "
      "over the test instances, t with S − 1 degrees of freedom, exact p (no "
      "floor); it conditions on the test set." +
      (" With 3 seeds the exact sign-flip permutation test cannot go below "
       "2 / 2³ = 0.25, hence the t-test." if num_seeds == 3 else "") +
      (" **One seed: it cannot run, so nothing here is resolved.**"
       if num_seeds < 2 else ""),
      "", f"A difference is **resolved** when both give Holm p < {ALPHA}: "
      "the verdict words (bold, \"resolved\") follow the more conservative "
      "test, and each section names the differences they decide "
      "differently.", "",
      "| family | tests | bootstrap Holm floor, m / (B + 1) | resolved by "
      "the bootstrap | by the t-test | by both |", "|---|---|---|---|---|---|"]
  for title, found in families:
    lines.append(f"| {title} | {len(found)} | "
                 f"{len(found) * statistics.floor:.4f} | "
                 f"{_resolved_counts(found)} |")
  return lines


def power_lines(cells: Sequence[selection_lib.Cell],
                metric_names: Sequence[str],
                statistics: selection_lib.Statistics,
                contrasts: Sequence[Contrast],
                tables: Sequence[paper_tables.PaperTable] = ()) -> List[str]:
  """The smallest |Δ| each family detects with 80% power, per metric: the
  bootstrap (normal approximation at the Holm level α / m of the family's
  smallest p, the contrast's bootstrap standard error) and the seed-level
  t-test (exact, noncentral t with S − 1 degrees of freedom), medians over
  the family's contrasts; beside them the paper's |Δ|."""
  families = [("against softmax + dot",
               {m: [e for (_, metric), e in statistics.effects.items()
                    if metric == m] for m in metric_names}),
              ("contrasts", {m: [c.effects[m] for c in contrasts]
                             for m in metric_names})]
  families = [(t, f) for t, f in families if any(f.values())]
  if not families:
    return ["No comparisons: nothing to detect."]
  df = statistics.num_seeds - 1
  names = [paper_effects_lib.table_name(t) for t in tables]
  lines = [
      "The smallest |Δ| a family's test finds with 80% power at the Holm "
      "level of its smallest p, α / m: for the bootstrap (z(1 − α / 2m) + "
      "z(0.8)) × its standard error of the Δ (normal approximation), for "
      f"the seed-level t-test the exact noncentral t (df = {df}) on its "
      "standard error; medians over the family's "
      "differences [smallest, largest]. An effect below them is one this "
      "study would likely miss." +
      (" Beside them the paper's |Δ| on the same cells (median, largest)."
       if tables else ""), "",
      "| metric | family | m | α / m | bootstrap SE | detectable, bootstrap "
      "| t-test SE | detectable, t-test |" +
      "".join(f" paper's \\|Δ\\| ({n}) |" for n in names),
      "|---|---|---|---|---|---|---|---|" + "---|" * len(names)]
  for metric in metric_names:
    for title, found in families:
      effects = found[metric]
      if not effects:
        continue
      m = sum(len(v) for v in found.values())
      boot = [significance.detectable_effect(e.se, m, ALPHA, POWER)
              for e in effects]
      seed = ([significance.detectable_effect_t(e.se_seed, df, m, ALPHA, POWER)
               for e in effects] if df >= 1 else [])
      seed = [v for v in seed if not math.isnan(v)]
      text = lambda v: (f"{np.median(v):.4f} [{min(v):.4f}, {max(v):.4f}]"
                        if v else "—")
      row = (f"| {common_lib.metric_title(metric)} | {title} | {m} | "
             f"{ALPHA / m:.2g} | "
             f"{np.median([e.se for e in effects]):.4f} | {text(boot)} | "
             + (f"{np.median([e.se_seed for e in effects]):.4f}"
                if seed else "—") + f" | {text(seed)} |")
      for table in tables:
        theirs = [abs(v) for (i, l), v in table.effects(metric).items()
                  if title != "contrasts" and (l, i) in
                  {c.key for c in cells}]
        row += (f" {np.median(theirs):.4f}, {max(theirs):.4f} |"
                if theirs else " — |")
      lines.append(row)
  return lines


RANKING_METRICS = ("ndcg@5", "mrr")


def _separated(effect: study_effects.Effect, rule: str) -> bool:
  return (effect.resolved_by_bootstrap if rule == "bootstrap" else
          effect.resolved)


def metric_claim_lines(statistics: selection_lib.Statistics,
                       metric_names: Sequence[str]) -> List[str]:
  """The paper's metric claim as it states it: among the pairs of cells an
  accuracy metric (Top-k) leaves unresolved, how many a ranking metric
  (NDCG@5, MRR) separates, against the pairs the ranking metric leaves
  unresolved that the accuracy metric separates; an exact sign test of the
  two counts (the pairs share cells, so its p is indicative)."""
  ranking = [m for m in metric_names if m in RANKING_METRICS]
  accuracy = [m for m in metric_names if m.startswith("top")]
  pairs = list(statistics.pair_effects.values())
  if not pairs:
    return ["Fewer than two cells: no pair to separate."]
  if not ranking or not accuracy:
    return ["This study lacks a ranking metric (NDCG@5, MRR) or an accuracy "
            "metric (Top-k): no comparison."]
  lines = [
      "Among the pairs of cells an accuracy metric leaves unresolved, how "
      "many a ranking metric separates, against the reverse; an exact sign "
      "test of the two counts (the pairs share cells, so its p is "
      "indicative). Separated: Holm p < 0.05 over the pairs family, by the "
      "bootstrap alone, then by both tests.", "",
      "| separated by | ranking metric | accuracy metric | pairs the "
      "accuracy metric leaves unresolved | of them the ranking metric "
      "separates | pairs the ranking metric leaves unresolved that the "
      "accuracy metric separates | sign test p |",
      "|---|---|---|---|---|---|---|"]
  for rule, title in (("bootstrap", "bootstrap"), ("both", "both tests")):
    for r in ranking:
      for a in accuracy:
        ties = [p for p in pairs if not _separated(p[a], rule)]
        gained = sum(_separated(p[r], rule) for p in ties)
        lost = sum(_separated(p[a], rule) and not _separated(p[r], rule)
                   for p in pairs)
        lines.append(
            f"| {title} | {common_lib.metric_title(r)} | "
            f"{common_lib.metric_title(a)} | {len(ties)} of {len(pairs)} | "
            f"{gained} | {lost} | "
            f"{common_lib.p_text(significance.sign_test(gained, lost))} |")
  return lines
