"""Issue 61's patience probe: is `--patience=5` long enough?

The converged studies stop a run once its validation Top-1 has not
improved for 5 validations (every 1,000 steps). A run can plateau and then
improve again; the probe (`tools/patience_probe.sh`) trains the issue's
frozen `dot` cells (softmax CE and ApproxNDCG at 3e-3, seeds 0-2) both
ways: to the 30,000-step ceiling (`full`) and under the studies' rule
(`p5`). This script

* replays the rule on every full run's validation curve for several
  patiences (`study.budgets.patience_stop`): where it would have stopped,
  which validation it would have kept, what that misses of the run's best;
* checks each p5 run retraces its full run (the same validation values up
  to its stop, the stop the replay predicts);
* sets both budgets side by side on test, paired by seed (mean, 95% t
  interval, seed t-test p Holm-adjusted over the table): each loss's
  full - p5, and ApproxNDCG - softmax CE at each budget.

  .venv/bin/python tools/patience_probe.py --runs=PROBE_OUT \\
      --output=results/long_studies/patience_probe

scores every run's best checkpoint on the test split (TensorFlow) and
writes OUTPUT/runs.csv (one row per run), OUTPUT/curves.csv (every
validation) and OUTPUT/tables.md;

  .venv/bin/python tools/patience_probe.py \\
      --output=results/long_studies/patience_probe

(no --runs) rewrites tables.md from the two CSV files alone, as
tests/test_long_studies.py checks the committed one.
"""

import argparse
import csv
import glob
import math
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np

from rank4class_tf.study import budgets
from rank4class_tf.study import compare
from rank4class_tf.study import significance

METRICS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")
MONITOR = "top1_accuracy"
PATIENCES = (2, 3, 5, 10, 15)
STUDY_PATIENCE = 5
LOSSES = ("softmax", "approx_ndcg")
RUN_FIELDS = ("run", "loss", "seed", "patience", "eval_every", "train_steps",
              "commit", "best_step", "last_step") + tuple(
                  f"test_{m}" for m in METRICS)
CURVE_FIELDS = ("run", "step", f"validation_{MONITOR}")


def _fail(message):
  sys.exit(f"patience_probe: {message}")


def _commit(folder):
  proc = subprocess.run(["git", "-C", folder, "rev-parse", "--short=8",
                         "HEAD"], capture_output=True, text=True, check=False)
  return proc.stdout.strip() or "unknown"


def score(runs_dir):
  """(run rows, curve rows) of every run folder in `runs_dir`."""
  from rank4class_tf import run_dir as run_dir_lib
  from rank4class_tf.serving import exported_ranker
  model_dirs = sorted(d for d in glob.glob(os.path.join(runs_dir, "*"))
                      if os.path.isfile(os.path.join(d, "config.json")))
  if not model_dirs:
    _fail(f"--runs={runs_dir}: no run folder (with config.json) in it.")
  groups = compare.group_runs(model_dirs)
  compare.evaluate_groups(groups, METRICS)
  tested = {d: {m: g.values[m][i] for m in METRICS}
            for g in groups for i, d in enumerate(g.model_dirs)}
  commit = _commit(runs_dir)
  runs, curves = [], []
  for model_dir in model_dirs:
    config = exported_ranker.load_config(model_dir)
    every = config.trainer.eval_every
    curve = run_dir_lib.RunDir(model_dir).validation_curves().get(MONITOR)
    if not curve:
      _fail(f"{model_dir}: no validation {MONITOR} in its logs.")
    epochs = sorted(curve)
    values = [curve[e] for e in epochs]
    best = epochs[int(np.argmax(values))]
    name = os.path.basename(model_dir.rstrip("/"))
    runs.append({
        "run": name, "loss": config.loss.name, "seed": config.trainer.seed,
        "patience": config.trainer.patience or 0, "eval_every": every,
        "train_steps": config.trainer.train_steps, "commit": commit,
        "best_step": (best + 1) * every, "last_step": (epochs[-1] + 1) * every,
        **{f"test_{m}": repr(tested[model_dir][m]) for m in METRICS}})
    curves += [{"run": name, "step": (e + 1) * every,
                f"validation_{MONITOR}": repr(curve[e])} for e in epochs]
  return runs, curves


def _write_csv(path, fields, rows):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.DictWriter(f, fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


def _read_csv(path, fields):
  try:
    with open(path, newline="", encoding="utf-8") as f:
      reader = csv.DictReader(f)
      if tuple(reader.fieldnames or ()) != fields:
        _fail(f"{path}: its columns are {reader.fieldnames}, not "
              f"{list(fields)}.")
      return list(reader)
  except OSError as e:
    _fail(f"{path}: {e.strerror}.")


def _pair(runs, loss, patience):
  """{seed: run row} of `loss` at `patience` (0: full)."""
  return {int(r["seed"]): r for r in runs
          if r["loss"] == loss and int(r["patience"]) == patience}


def _curves(curves):
  """{run: [(step, validation Top-1)] in step order} of curves.csv's rows."""
  by_run = {}
  for row in curves:
    by_run.setdefault(row["run"], []).append(
        (int(row["step"]), float(row[f"validation_{MONITOR}"])))
  for points in by_run.values():
    points.sort()
  return by_run


def _stops(runs, by_run):
  """Where each patience stops each full run, and what it keeps."""
  lines = [
      "## Where each patience would have stopped the full runs", "",
      "The `--patience` rule replayed on each full run's validation Top-1 "
      "(`study.budgets.patience_stop`): the step it stops at / the step of "
      "the validation it keeps, and that validation's Top-1 below the full "
      "run's best (0: it keeps the best).", "",
      "| run | best step | best validation Top-1 | " + " | ".join(
          f"patience {k}" for k in PATIENCES) + " |",
      "|---|---|---|" + "---|" * len(PATIENCES)]
  missed = {k: [] for k in PATIENCES}
  for run in (r for r in runs if int(r["patience"]) == 0):
    points = by_run[run["run"]]
    values = [v for _, v in points]
    top = max(values)
    cells = []
    for k in PATIENCES:
      kept, last = budgets.patience_stop(values, k)
      missed[k].append(top - values[kept])
      cells.append(f"{points[last][0]:,} / {points[kept][0]:,} / "
                   f"{top - values[kept]:.4f}")
    lines.append(f"| {run['run']} | {int(run['best_step']):,} | {top:.4f} | "
                 + " | ".join(cells) + " |")
  return lines + [
      "", "Runs whose kept validation is below their best, and the largest "
      "shortfall: " + "; ".join(
          f"patience {k}: {sum(m > 0 for m in missed[k])} of "
          f"{len(missed[k])} ({max(missed[k]):.4f})" for k in PATIENCES)
      + ".", ""]


def _retraced(runs, by_run):
  """Each patience run against its full run's first validations."""
  lines = ["## The p5 runs retrace the full runs", "",
           f"A `--patience={STUDY_PATIENCE}` run is its full run cut short: "
           "the same validation values up to its stop, where the replay says "
           "it stops.", "",
           "| run | stopped at | kept | replayed stop / kept | same "
           "validations |", "|---|---|---|---|---|"]
  for loss in LOSSES:
    whole = _pair(runs, loss, 0)
    for seed, run in sorted(_pair(runs, loss, STUDY_PATIENCE).items()):
      mine = by_run[run["run"]]
      theirs = by_run[whole[seed]["run"]] if seed in whole else []
      replay = "(no full run)"
      if theirs:
        kept, last = budgets.patience_stop([v for _, v in theirs],
                                           STUDY_PATIENCE)
        replay = f"{theirs[last][0]:,} / {theirs[kept][0]:,}"
      same = "yes" if mine == theirs[:len(mine)] else "no"
      lines.append(f"| {run['run']} | {int(run['last_step']):,} | "
                   f"{int(run['best_step']):,} | {replay} | {same} |")
  return lines + [""]


def _on_test(runs):
  """Both budgets on test: the paired differences, then the means."""
  lines = ["## On test, paired by seed", "",
           "Each budget's chosen checkpoint (its best validation) on the "
           "4,590 test comments; mean over the seeds [95% t interval]; p: "
           "paired t-test over the seeds, Holm-adjusted over the table's "
           "rows. 3 seeds detect only differences large against the seeds' "
           "spread.", "",
           "| comparison | metric | seeds | mean Δ [95% t] | p | Holm p |",
           "|---|---|---|---|---|---|"]
  budget_names = ((STUDY_PATIENCE, f"p{STUDY_PATIENCE}"), (0, "full"))
  comparisons = [(f"{loss}: full - p{STUDY_PATIENCE}", _pair(runs, loss, 0),
                  _pair(runs, loss, STUDY_PATIENCE)) for loss in LOSSES]
  comparisons += [(f"approx_ndcg - softmax, {name}",
                   _pair(runs, "approx_ndcg", patience),
                   _pair(runs, "softmax", patience))
                  for patience, name in budget_names]
  rows = []
  for label, first, second in comparisons:
    common = sorted(set(first) & set(second))
    for metric in METRICS:
      d = np.array([float(first[s][f"test_{metric}"]) -
                    float(second[s][f"test_{metric}"]) for s in common])
      p = (float(significance.seed_t_test(d[:, None])[0])
           if len(d) >= 2 and d.std() > 0 else math.nan)
      rows.append((label, metric, common, compare.seed_interval(d), p))
  tested = [i for i, row in enumerate(rows) if not math.isnan(row[4])]
  adjusted = dict(zip(tested, significance.holm([rows[i][4]
                                                 for i in tested])))
  for i, (label, metric, common, (mean, _, low, high), p) in enumerate(rows):
    interval = "" if math.isnan(low) else f" [{low:+.4f}, {high:+.4f}]"
    p_text = "(no spread)" if math.isnan(p) else f"{p:.4f}"
    holm = f"{adjusted[i]:.4f}" if i in adjusted else "-"
    lines.append(f"| {label} | {metric} | {','.join(map(str, common))} | "
                 f"{mean:+.4f}{interval} | {p_text} | {holm} |")
  lines += ["", "Means on test:", "", "| loss | budget | " +
            " | ".join(METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
  for loss in LOSSES:
    for patience, name in budget_names:
      group = _pair(runs, loss, patience)
      cells = []
      for metric in METRICS:
        mean, std, low, high = compare.seed_interval(
            [float(r[f"test_{metric}"]) for r in group.values()])
        interval = "" if math.isnan(low) else f" [{low:.4f}, {high:.4f}]"
        cells.append(f"{mean:.4f} ± {std:.4f}{interval}")
      lines.append(f"| {loss} | {name} | " + " | ".join(cells) + " |")
  return lines


def tables(runs, curves):
  """The markdown of tables.md from the rows of the two CSV files."""
  by_run = _curves(curves)
  ceiling = max(int(r["train_steps"]) for r in runs)
  seeds = sorted({int(r["seed"]) for r in runs})
  lines = [
      "# Is patience 5 long enough? (issue 61's probe)", "",
      f"Frozen MiniLM (feature cache), `dot`, learning rate 3e-3, batch 64, "
      f"32 tokens, `--deterministic`; softmax CE and ApproxNDCG, seeds "
      f"{', '.join(map(str, seeds))}; validation every "
      f"{int(runs[0]['eval_every']):,} steps; made by commit "
      f"{', '.join(sorted({r['commit'] for r in runs}))} "
      "(`bash tools/patience_probe.sh`, scored by `tools/patience_probe.py`)"
      f". Each run trained twice: `full`, every one of the {ceiling:,} "
      f"steps; `p{STUDY_PATIENCE}`, the converged studies' rule "
      f"(`--patience={STUDY_PATIENCE}`, {ceiling:,} the ceiling).", ""]
  lines += _stops(runs, by_run) + _retraced(runs, by_run) + _on_test(runs)
  return "\n".join(lines) + "\n"


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--runs", default="", help="The probe's run folders' "
                      "parent (tools/patience_probe.sh's OUT); without it, "
                      "tables.md is rewritten from OUTPUT's CSV files.")
  parser.add_argument("--output", required=True,
                      help="Folder of runs.csv, curves.csv and tables.md.")
  args = parser.parse_args()
  runs_csv = os.path.join(args.output, "runs.csv")
  curves_csv = os.path.join(args.output, "curves.csv")
  if args.runs:
    if not os.path.isdir(args.runs):
      _fail(f"--runs={args.runs}: no such folder.")
    try:
      runs, curves = score(args.runs)
    except ValueError as e:
      _fail(str(e))
    os.makedirs(args.output, exist_ok=True)
    _write_csv(runs_csv, RUN_FIELDS, runs)
    _write_csv(curves_csv, CURVE_FIELDS, curves)
  runs = _read_csv(runs_csv, RUN_FIELDS)
  curves = _read_csv(curves_csv, CURVE_FIELDS)
  if not runs:
    _fail(f"{runs_csv}: no run.")
  text = tables(runs, curves)
  with open(os.path.join(args.output, "tables.md"), "w",
            encoding="utf-8") as f:
    f.write(text)
  print(text, end="")


if __name__ == "__main__":
  main()
