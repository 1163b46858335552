"""The report's findings beyond the main table, one function per section of
tables.md: the CE bound (Bruch et al. 2019), metric informativeness,
fairness of the tuning, provenance, robustness to the selection metric and
the per-class view (the paper's effects beside ours, the tests and the
power: `verdicts`). Each returns markdown lines."""

import collections
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf import provenance
from rank4class_tf.study import common as common_lib
from rank4class_tf.study import effects as study_effects
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import selection as selection_lib


def bound_lines(cells: Sequence[selection_lib.Cell]) -> List[str]:
  """Bruch et al. 2019: softmax CE >= -log MRR >= -log NDCG, per cell."""
  lines = [
      "| cell | softmax CE | −log MRR | −log NDCG | CE ≥ −log MRR |",
      "|---|---|---|---|---|"
  ]
  for cell in cells:
    runs = [cell.runs[s] for s in sorted(cell.runs)]
    holds = sum(r["ce_bound_holds"] for r in runs)
    lines.append(
        f"| {common_lib.cell_title(cell.key)} | "
        f"{np.mean([r['test_softmax_ce'] for r in runs]):.4f} | "
        f"{np.mean([r['test_neg_log_mrr'] for r in runs]):.4f} | "
        f"{np.mean([r['test_neg_log_ndcg'] for r in runs]):.4f} | "
        f"holds in {holds}/{len(runs)} runs |")
  return lines


def calibration_lines(cells: Sequence[selection_lib.Cell]) -> List[str]:
  """Per cell and per loss: the temperature fitted on validation and the
  test ECE and NLL of softmax(scores) before and softmax(scores / T) after
  (means over the chosen runs; `evaluation.calibration_record`)."""
  runs = [(cell, r) for cell in cells for r in cell.runs.values()
          if (r.get("calibration") or {}).get("temperature") is not None]
  if not runs:
    return ["No chosen run records a calibration (records written before "
            "it existed): `pipelines.calibrate --study_dir=...` adds it "
            "from the runs' checkpoints."]
  lines = [
      "Probabilities are softmax(scores) before and softmax(scores / T) "
      "after temperature scaling, T fitted by NLL on validation "
      "(docs/model.md, \"Probabilities\"); ECE over "
      "15 equal-width confidence bins; test split; means over the chosen "
      "runs (seeds). Calibration never changes the ranking metrics.", "",
      "| cell | runs | temperature | ECE before | ECE after | NLL before | "
      "NLL after |", "|---|---|---|---|---|---|---|"]

  def row(title, chosen):
    values = {k: np.mean([r["calibration"][k] for r in chosen])
              for k in ("temperature", "ece", "calibrated_ece", "nll",
                        "calibrated_nll")}
    return (f"| {title} | {len(chosen)} | {values['temperature']:.3g} | "
            f"{values['ece']:.4f} | {values['calibrated_ece']:.4f} | "
            f"{values['nll']:.4f} | {values['calibrated_nll']:.4f} |")

  for cell in cells:
    chosen = [r for c, r in runs if c is cell]
    if chosen:
      lines.append(row(common_lib.cell_title(cell.key), chosen))
  losses = list(dict.fromkeys(cell.key[0] for cell in cells))
  for loss in losses:
    chosen = [r for c, r in runs if c.key[0] == loss]
    if chosen:
      lines.append(row(f"**{loss}** (every interaction)", chosen))
  return lines


def informativeness_lines(
    statistics: selection_lib.Statistics,
    metric_names: Sequence[str],
    cells: Sequence[selection_lib.Cell] = ()
) -> List[str]:
  """Pairs each metric separates (raw and Holm p), and which metrics sit
  at their ceiling (every cell's mean 1.0), where no claim can be read."""
  lines = [
      f"| metric | pairs separated at p < {selection_lib.ALPHA} | "
      f"Holm p < {selection_lib.ALPHA} | share (Holm) | seed-level t-test, "
      "Holm | both (resolved) |", "|---|---|---|---|---|---|"
  ]
  for metric in metric_names:
    count = statistics.separated[metric]
    holm = statistics.separated_holm.get(metric, 0)
    share = holm / statistics.num_pairs if statistics.num_pairs else 0.
    found = [by_metric[metric] for by_metric in
             statistics.pair_effects.values() if metric in by_metric]
    lines.append(f"| {common_lib.metric_title(metric)} | {count} of "
                 f"{statistics.num_pairs} | {holm} | {share:.0%} | "
                 f"{sum(e.resolved_by_seeds for e in found)} | "
                 f"{sum(e.resolved for e in found)} |")
  lines += ["", f"Bootstrap B = {statistics.num_samples:,}: its Holm floor "
            f"over these {statistics.num_pairs * len(metric_names)} tests is "
            f"{statistics.num_pairs * len(metric_names) * statistics.floor:.4f}"
            " (\"How the differences are tested\"); counts at Holm p < 0.05 "
            "move with B near that floor, so compare metrics within one "
            "report, not across reports of another B."]
  ceiling = [common_lib.metric_title(m) for m in metric_names
             if cells and all(c.mean(m) >= 1.0 - 1e-12 for c in cells)]
  if ceiling:
    lines += ["", f"{', '.join(ceiling)} is 1.0 in every cell here: at its "
              "ceiling it separates nothing, so this study says nothing "
              "about its informativeness."]
  return lines


def fairness_lines(cells: Sequence[selection_lib.Cell], fair: Dict[str, Dict]
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
  limit = [r for r in last if fair[r["run"]].get("lengthened")]
  extended = [r for r in edge if fair[r["run"]].get("extension_round")]
  near_end = [r for _, r in chosen if peaked_near_end(r)]
  lines = [f"**{len(edge)} of {len(chosen)} chosen runs are on an edge of "
           f"the learning rates or widths tried; {len(last)} of "
           f"{len(chosen)} peaked at their last validation** (still "
           "improving when they stopped). A choice on an edge may have its "
           "optimum outside the grid (`--extend_grid`); a run that peaked "
           "last may gain from more steps."]
  if near_end:
    lines.append(f"{len(near_end)} of {len(chosen)} peaked at one of their "
                 "last two validations: trained about as long as their "
                 "curve still rose, not to a plateau.")
  sides = []
  for key, name in (("lr_edge", "learning rate"), ("units_edge", "width")):
    low = sum(fair[r["run"]][key] == "low" for _, r in chosen)
    high = sum(fair[r["run"]][key] == "high" for _, r in chosen)
    if low or high:
      sides.append(f"{name} at the lowest tried in {low}, at the highest "
                   f"in {high}")
  if sides:
    lines.append("On an edge: " + "; ".join(sides) + ".")
  if extended:
    lines.append(f"{len(extended)} of those {len(edge)} on an edge were "
                 "added by `--extend_grid` and are still on an edge: the "
                 "extension limit (its N rounds) once the study is complete, "
                 "marked \"after N extension rounds\" below.")
  if limit:
    lines.append(f"{len(limit)} of those {len(last)} peaked last after "
                 "`--extend_steps` had trained them on: the extension limit "
                 "(a study lengthens a run once), marked \"peaked last, "
                 "extension limit\" below.")
  if untuned:
    lines.append(f"Not tuned (one value tried): {' and '.join(untuned)}; "
                 "counted as \"only\" below, not as an edge.")
  # `--patience` (runs without it, or older, record no `converged`).
  ruled = any(fair[r["run"]].get("converged") is not None for _, r in chosen)
  if ruled:
    lines += convergence_lines([r for _, r in chosen], fair)
  lines += ["",
           "| cell | learning rate on an edge | width on an edge | peaked "
           "last | peaked in the last two |" + (" not converged |" if ruled
                                               else ""),
           "|---|---|---|---|---|" + ("---|" if ruled else "")]
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
    lines.append(
        f"| {common_lib.cell_title(cell.key)} | {lr_text} | {units_text} | "
        f"{count('best_is_last')} of {len(runs)} | "
        f"{sum(map(peaked_near_end, runs))} of {len(runs)} |" + (
            f" {sum(fair[r['run']].get('converged') is False for r in runs)}"
            f" of {len(runs)} |" if ruled else ""))
  return lines


def convergence_lines(chosen: Sequence[Dict], fair: Dict[str, Dict]
                     ) -> List[str]:
  """How many chosen runs did not converge under `--patience` (their best
  followed by fewer than that many validations when they stopped at their
  ceiling), and how many of those `--extend_steps` had trained on (its
  limit reached)."""
  ruled = [r for r in chosen if fair[r["run"]].get("converged") is not None]
  open_runs = [r for r in ruled if not fair[r["run"]]["converged"]]
  limit = [r for r in open_runs if fair[r["run"]].get("lengthened")]
  lines = [f"**{len(open_runs)} of {len(chosen)} chosen runs did not "
           "converge** (`--patience`: their best validation is followed by "
           "fewer validations than the patience when they reached their "
           "last step); the others stopped, or reached their last step, "
           "that many validations after their best."]
  if len(ruled) < len(chosen):
    lines.append(f"{len(chosen) - len(ruled)} chosen run(s) were trained "
                 "without `--patience`: not counted.")
  if limit:
    lines.append(f"{len(limit)} of those {len(open_runs)} did not converge "
                 "after `--extend_steps` had trained them on: its limit "
                 "(`--extend_steps_limit`).")
  return lines


def peaked_near_end(record: Dict) -> bool:
  """The run's best validation is one of its last two (its curve's steps;
  False without a curve)."""
  steps = sorted({int(step) for curve in
                  (record.get("validation_curve") or {}).values()
                  for step, _ in curve})
  return bool(steps) and record.get("best_step") in steps[-2:]


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
  return lines + _machine_lines(made)


def _machine_lines(made: Sequence[Optional[Dict]]) -> List[str]:
  """Which machines finished the runs, when their records say (runs made
  before machines were recorded name none, and then nothing is said)."""
  machines = [provenance.describe_machine(m) for m in made]
  if all(m == "unrecorded" for m in machines):
    return []
  counts = collections.Counter(machines)
  lines = [f"- {counts[m]} run(s) finished on: {m}" for m in counts]
  if len(counts) > 1:
    lines.append("- more than one kind of machine finished these runs: "
                 "their training times are not comparable, and "
                 "`--deterministic` runs may differ in their last bits "
                 "(oneDNN picks its kernels by the CPU).")
  return lines


def bruch_lines(records: Sequence[Dict]) -> List[str]:
  """Spearman's rho between test softmax CE and MRR / NDCG across runs."""
  found = study_effects.bruch_correlations(
      records, group_of=lambda r: r["loss"])
  lines = ["| runs | number | ρ(CE, MRR) | ρ(CE, NDCG) |",
           "|---|---|---|---|"]
  for key, row in found.items():
    title = "all" if key is None else common_lib.loss_title(key)
    text = lambda v: "—" if math.isnan(v) else f"{v:+.3f}"
    lines.append(f"| {title} | {row['runs']} | {text(row['mrr'])} | "
                 f"{text(row['ndcg'])} |")
  within = study_effects.bruch_within_runs(records)
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
                     select_metric: str,
                     cells: Sequence[selection_lib.Cell],
                     choose_on_seed: Optional[int] = None) -> List[str]:
  """The verdict under selection by each of Top-1, NDCG@5 and MRR: Table 2
  (the best Rank4Class cell against softmax + dot) and the signs of the
  contrasts, with the contrasts whose sign changes named. Computed from the
  records (means over seeds), so it needs no other runs' test arrays.

  Under `choose_on_seed` only that seed has runs to choose among: the other
  seeds ran at the first metric's choice only, and are not rerun at
  another's; the lines say so, and how many choices stay the same (all of
  them: the section compares the study with itself)."""
  selections = [m for m in ROBUSTNESS_METRICS if m in metric_names]
  if len(selections) < 2:
    return ["Fewer than two of Top-1, NDCG@5 and MRR were recorded: no "
            "other selection to compare with."]
  means = {m: {} for m in selections}
  choices = {}
  for selection in selections:
    chosen = selection_lib.select(records, selection)
    choices[selection] = chosen
    for metric in metric_names:
      means[selection][metric] = _cell_means(chosen, metric)
  lines = []
  if choose_on_seed is not None:
    tuned = {k: r["run"] for k, r in choices[select_metric].items()
             if k[2] == choose_on_seed} if select_metric in choices else {}
    same = {sel: sum(choices[sel].get(k, {}).get("run") == run
                     for k, run in tuned.items())
            for sel in selections if sel != select_metric}
    lines += [
        f"**Only seed {choose_on_seed} is reselected** (`--choose_on_seed`): "
        "the other seeds ran at its "
        f"{common_lib.metric_title(select_metric)} choice only and are not "
        "rerun at another metric's choice, so a changed choice mixes seed "
        f"{choose_on_seed}'s new run with the others' old ones. Seed "
        f"{choose_on_seed}'s choice stays the same in " +
        ", ".join(f"{n} of {len(tuned)} cells by "
                  f"{common_lib.metric_title(sel)}"
                  for sel, n in same.items()) + "." +
        (" Every choice is the same: this section compares the study with "
         "itself and shows no robustness." if all(
             n == len(tuned) for n in same.values()) else "") +
        _rerun_cost(records, choose_on_seed), ""]
  lines += ["| selected by | metric | best Rank4Class cell | Δ against "
            "softmax + dot |", "|---|---|---|---|"]
  for selection in selections:
    for metric in metric_names:
      table = means[selection][metric]
      if study_grid.BASELINE not in table or len(table) < 2:
        continue
      base = table[study_grid.BASELINE]
      key, value = max(((k, v) for k, v in table.items()
                        if k != study_grid.BASELINE), key=lambda kv: kv[1])
      lines.append(
          f"| {common_lib.metric_title(selection)} | "
          f"{common_lib.metric_title(metric)} | "
          f"{common_lib.cell_title(key)} | {value - base:+.4f} |")
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
            f"{common_lib.cell_title(a)} vs {common_lib.cell_title(b)}, "
            f"{common_lib.metric_title(metric)} (" + ", ".join(
                f"{common_lib.metric_title(sel)}: "
                f"{'+' if v > 0 else '−' if v < 0 else '0'}"
                for sel, v in signs.items()) + ")")
  lines += ["", f"Of the {len(pairs) * len(metric_names)} contrasts "
            f"(loss against softmax CE, interaction against dot, × "
            f"{len(metric_names)} metrics), {len(changed)} change sign with "
            "the selection metric" + (":" if changed else ".")]
  lines += [f"- {text}" for text in changed]
  return lines


def _rerun_cost(records: Sequence[Dict], choose_on_seed: int) -> str:
  """What rerunning the followers at a changed choice would cost: their
  number per cell and the median training time of a follower here."""
  followers = [r for r in records if r["seed"] != choose_on_seed and
               r.get("train_seconds") is not None]
  seeds = sorted({r["seed"] for r in followers})
  if not followers:
    return ""
  median = float(np.median([r["train_seconds"] for r in followers]))
  return (f" Rerunning them at a changed choice costs {len(seeds)} runs a "
          f"cell, a median {median:,.0f} s of training each here (the "
          "followers' `train_seconds`).")


def per_class_lines(cells: Sequence[selection_lib.Cell],
                    labels: Optional[np.ndarray],
                    class_names: Sequence[str],
                    top: int = 3) -> List[str]:
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
    row = (f"| {common_lib.cell_title(cell.key)} | "
           f"{per_class(cell, 'top1_accuracy').mean():.4f} |")
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
    rows.append(f"| {common_lib.cell_title(cell.key)} | {gains} | {losses} |")
  if rows:
    lines += ["", f"Per-class Top-1 against softmax CE with the same "
              f"interaction: the {top} classes gained and lost most (n: the "
              "class's test instances; small classes move most).", "",
              "| cell | gains most | loses most |", "|---|---|---|"] + rows
  return lines
