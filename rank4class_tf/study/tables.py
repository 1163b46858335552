"""tables.md: the main loss x interaction tables, the summary, the pairwise
contrasts, the regime and what is missing, assembled with `findings` into
the whole file (`tables_markdown`)."""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf import catalog
from rank4class_tf.modeling import encoders
from rank4class_tf.study import common as common_lib
from rank4class_tf.study import findings as findings_lib
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_effects as paper_effects_lib
from rank4class_tf.study import paper_tables
from rank4class_tf.study import selection as selection_lib
from rank4class_tf.study import verdicts as verdicts_lib


def _cell_text(cell: selection_lib.Cell, metric: str,
               statistics: selection_lib.Statistics,
               marks: Dict[Tuple[str, str], str]) -> str:
  text = common_lib.mean_text(cell, metric)
  if cell.key in marks:
    text = f"**{text}**{marks[cell.key]}"
  if cell.key == study_grid.BASELINE:
    return text + " (base)"
  effect = statistics.effects.get((cell.key, metric))
  if effect is None:
    return text
  return (f"{text} (p={common_lib.p_text(effect.p)}, "
          f"Holm {common_lib.p_text(effect.p_holm)})" +
          ("†" if verdicts_lib.tests_differ(effect) else ""))


def _marks(cells: Sequence[selection_lib.Cell],
           metric: str) -> Dict[Tuple[str, str], str]:
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


def main_table(cells: Sequence[selection_lib.Cell], metric_names: Sequence[str],
               statistics: selection_lib.Statistics) -> List[str]:
  """Rows metric x interaction, columns losses (the paper's Tables 7-12)."""
  loss_axis = common_lib.axis(c.loss for c in cells)
  interaction_axis = common_lib.axis(c.interaction for c in cells)
  by_key = {c.key: c for c in cells}
  lines = ["| metric | interaction | " +
           " | ".join(common_lib.loss_title(l) for l in loss_axis) + " |",
           "|---|---|" + "---|" * len(loss_axis)]
  for metric in metric_names:
    marks = _marks(cells, metric)
    for interaction in interaction_axis:
      row = [
          common_lib.metric_title(metric),
          common_lib.INTERACTION_TITLES.get(interaction, interaction)
      ]
      for loss in loss_axis:
        cell = by_key.get((loss, interaction))
        row.append("—" if cell is None else
                   _cell_text(cell, metric, statistics, marks))
      lines.append("| " + " | ".join(row) + " |")
  return lines


def summary_table(cells: Sequence[selection_lib.Cell],
                  metric_names: Sequence[str],
                  statistics: selection_lib.Statistics,
                  paper: Sequence[paper_tables.PaperTable] = ()
                 ) -> List[str]:
  """Table 2: the classical classifier against the best Rank4Class cell,
  both tests; then what the best is taken from, against the paper's."""
  by_key = {c.key: c for c in cells}
  baseline = by_key.get(study_grid.BASELINE)
  if baseline is None:
    return ["No softmax + dot cell in this study: nothing to compare with."]
  others = [c for c in cells if c is not baseline]
  if not others:
    return ["Only the softmax + dot cell in this study."]
  lines = [
      "| metric | MCC (softmax + dot) | best Rank4Class cell | its value "
      "| Δ [95% interval] | p | Holm p | t-test Holm p | resolved |",
      "|---|---|---|---|---|---|---|---|---|"
  ]
  for metric in metric_names:
    best = max(others, key=lambda c: c.mean(metric))
    effect = statistics.effects[(best.key, metric)]
    lines.append(
        f"| {common_lib.metric_title(metric)} | "
        f"{common_lib.mean_text(baseline, metric)} | "
        f"{common_lib.cell_title(best.key)} | "
        f"{common_lib.mean_text(best, metric)} | "
        f"{common_lib.effect_text(effect)} | {common_lib.p_text(effect.p)} | "
        f"{common_lib.p_text(effect.p_holm)} | "
        f"{common_lib.holm_text(effect.p_seed_holm)} | "
        f"{'yes' if effect.resolved else 'no'} |")
  return lines + paper_effects_lib.missing_paper_cells(paper, cells, metric_names)


def tables_markdown(
    shared: Dict[str, object],
    grid: study_grid.Grid,
    cells: Sequence[selection_lib.Cell],
    records: Sequence[Dict],
    metric_names: Sequence[str],
    select_metric: str,
    statistics: selection_lib.Statistics,
    num_samples: int,  # pylint: disable=unused-argument
    paper: Sequence[paper_tables.PaperTable] = (),
    missing: Sequence[str] = (),
    unreadable: Optional[Dict[str, str]] = None,
    strays: Sequence[str] = (),
    fair: Optional[Dict[str, Dict]] = None,
    study: Optional[Dict] = None,
    labels: Optional[np.ndarray] = None,
    class_names: Sequence[str] = ()) -> str:
  """The whole tables.md.

  `num_samples`: the bootstrap resamples asked for (the ones used, raised
  past the Holm floor, are `statistics.num_samples`);
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
      f"{{{', '.join(study_grid.rate_text(r) for r in grid.learning_rates)}}}"
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
  # The study's runs: the grid's, its extensions' and (`choose_on_seed`)
  # the other seeds' (grid.runs() is the tuned seed's alone).
  num_runs = len(records) + len(missing)
  if missing:
    lines.append(f"**{len(missing)} of the grid's {num_runs} runs "
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
    lines += findings_lib.fairness_lines(cells, fair)
  lines += ["", "## Code", ""]
  lines += findings_lib.provenance_lines(records, study)
  family = max(0, len(cells) - 1) * len(metric_names)
  contrasts = verdicts_lib.contrast_effects(cells, metric_names, statistics)
  lines += ["", "## How the differences are tested", ""]
  lines += verdicts_lib.tests_lines(statistics, contrasts, metric_names)
  lines += [
      "", "## Test metrics (the paper's Tables 7-12 layout)", "",
      "Bold: the top three cells of a metric; `*`: the best. p: two-sided "
      "hierarchical bootstrap against softmax + dot (seeds resampled, then "
      f"test instances; {statistics.num_samples:,} resamples, fixed seed; "
      f"paired by seed and instance); Holm: adjusted over the family of "
      f"{family} comparisons ({max(0, len(cells) - 1)} cells × "
      f"{len(metric_names)} metrics against softmax + dot); †: the "
      "seed-level t-test decides it the other way at Holm p < "
      f"{selection_lib.ALPHA} (its Holm p: the next section).", ""]
  lines += main_table(cells, metric_names, statistics)
  lines += ["", "## Effects against softmax + dot, beside the paper's", ""]
  lines += paper_effects_lib.paper_effect_lines(paper, cells, metric_names,
                                                statistics, dataset)
  lines += ["", "## Classical classifier against the best Rank4Class cell "
            "(Table 2)", ""]
  lines += summary_table(cells, metric_names, statistics, paper)
  lines += ["", "## Ranking losses against softmax CE, interactions "
            "against dot", "",
            "Each ranking loss against softmax CE under the same "
            "interaction, then each interaction against dot under the same "
            "loss (SoDeep cells: each sorter against the handcrafted one, "
            "then against MSE): the difference of the means over seeds, "
            "the hierarchical bootstrap p, raw and Holm-adjusted, and the "
            "seed-level t-test's Holm p.", ""]
  lines += verdicts_lib.contrast_lines(contrasts, metric_names)
  lines += ["", "## What this study can detect", ""]
  lines += verdicts_lib.power_lines(cells, metric_names, statistics,
                                    contrasts, paper)
  lines += [
      "", "## Metric informativeness", "",
      "Over all pairs of cells, how many pairs each metric tells apart "
      f"(hierarchical bootstrap, p < {selection_lib.ALPHA}; Holm over all "
      f"{statistics.num_pairs} pairs × {len(metric_names)} metrics, each "
      "test apart).", ""
  ]
  lines += findings_lib.informativeness_lines(statistics, metric_names, cells)
  lines += ["", "### The metric claim as the paper states it", ""]
  lines += verdicts_lib.metric_claim_lines(statistics, metric_names)
  lines += [
      "", "## Robustness: the verdict under another selection metric", "",
      f"This report chooses each run by validation "
      f"{common_lib.metric_title(select_metric)}; the same study chosen by "
      "each of Top-1, NDCG@5 and MRR (means over seeds):", ""
  ]
  lines += findings_lib.robustness_lines(records, metric_names, select_metric,
                                         cells, grid.choose_on_seed)
  lines += ["", "## Per-class view", ""]
  lines += findings_lib.per_class_lines(cells, labels, class_names)
  lines += ["", "## Softmax cross-entropy and the ranking metrics (Bruch "
            "et al. 2019)", "",
            "The claim: softmax CE tracks the ranking metrics, so a model "
            "with lower test CE has higher MRR and NDCG. Spearman's ρ "
            "across every run of the study (all runs, then per loss); the "
            "claim predicts ρ < 0.", ""]
  lines += findings_lib.bruch_lines(records)
  lines += [
      "", "The identity CE ≥ −log MRR ≥ −log NDCG holds for every "
      "model by construction (a check of the code, not of the claim): "
      "mean over a cell's chosen runs.", ""
  ]
  lines += findings_lib.bound_lines(cells)
  lines += ["", "## Calibration by loss", ""]
  lines += findings_lib.calibration_lines(cells)
  lines += [
      "", "## Chosen runs", "",
      "| cell | seed | learning rate | MLP width | validation "
      f"{common_lib.metric_title(select_metric)} | best step | fairness |",
      "|---|---|---|---|---|---|---|"
  ]
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
      if marks.get("extension_round") and any(
          marks.get(key) in ("low", "high") for key in ("lr_edge",
                                                          "units_edge")):
        notes.append(f"after {marks['extension_round']} extension round"
                     + ("s" if marks["extension_round"] > 1 else ""))
      if marks.get("best_is_last"):
        notes.append("peaked last, extension limit" if marks.get(
            "lengthened") else "peaked last")
      lines.append(f"| {common_lib.cell_title(cell.key)} | {seed} | "
                   f"{study_grid.rate_text(r['learning_rate'])} | "
                   f"{r['mlp_units'] or '—'} | "
                   f"{r['validation'][select_metric]:.4f} | "
                   f"{r['best_step']} | {', '.join(notes) or '—'} |")
  lines += absent_lines(num_runs, missing, unreadable or {}, strays)
  return "\n".join(lines) + "\n"


def absent_lines(num_runs: int, missing: Sequence[str],
                 unreadable: Dict[str, str],
                 strays: Sequence[str]) -> List[str]:
  """tables.md's account of what the report leaves out (nothing when it
  leaves nothing out); `num_runs`: the study's runs, missing ones
  included."""
  lines = []
  if missing:
    names = ", ".join(f"`{name}`" + (f" (unreadable: `{unreadable[name]}`)"
                                     if name in unreadable else "")
                      for name in missing)
    lines += ["", "## Runs without a result", "",
              f"{len(missing)} of the {num_runs} runs of the grid in "
              f"{study_folder.STUDY_FILE} have no whole record (not run yet, "
              f"or their study file is unreadable): {names}."]
  if strays:
    lines += ["", "## Run folders the grid does not name", "",
              f"{study_folder.RUNS_DIR}/ holds {len(strays)} folders that name "
              f"no run of the grid in {study_folder.STUDY_FILE}; they are not in "
              "this report: " + ", ".join(f"`{n}`" for n in strays) + "."]
  return lines


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
