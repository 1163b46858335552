"""Prices issue 61's two converged studies from the committed records.

Reads the `train_seconds` of every run of the committed GoEmotions studies
(`results/study_goemotions_frozen/runs/*/study_result.json`, frozen MiniLM
from the feature cache, batch 64; `results/study_goemotions_finetuned/...`,
fine-tuned MiniLM, batch 32, length 32), divides each by the steps it
trained (its last validation's step less `resumed_at_step`), and prices the
runs `tools/long_studies.sh` plans at their 30,000-step ceiling:

* frozen: the frozen study's own grid on seed 0 (5 losses x 3 interactions,
  rates 1e-4 ... 1e-2, widths 64 ... 512 for the MLPs: 225 runs) and 30
  followers (seeds 1 and 2 at each cell's choice, priced at the 3,000-step
  study's choices), each run at the median seconds a step of the committed
  runs of its interaction and width;
* fine-tuned: 6 cells x 2 rates on seed 0 (the two MLP cells x widths 64
  and 256), the one `--extend_grid=1` round every choice then needs (a
  2-value grid's choice is always on an edge: a rate for every cell, a
  width for the MLP cells), and 12 followers: 36 runs, at the fine-tuned
  study's fast band (alone on the machine) and its median.

Then what is left of the fine-tuned long study after its committed summary
(`results/study_goemotions_finetuned_long`): the `--extend_grid=1` runs
and followers not yet in it, a follower at the steps its seed-0 choice
trained (its last validation), an extension run between the fewest steps
any finished run trained and the ceiling; in hours at the steps a second
two workers of one thread train (`results/text_workers/benchmark.md`,
training steps alone: validations and start-up come on top).

A ceiling: `--patience=5` stops a run 5 validations after its best, so the
studies cost less where runs converge earlier; extensions past the ceiling
(`--extend_steps`, frozen only) come on top.

  .venv/bin/python tools/price_long_studies.py

prints one line per item (docs/text.md quotes them).
"""

import collections
import csv
import glob
import json
import os
import statistics

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CEILING = 30000
FROZEN_RATES = 5
FROZEN_WIDTHS = (64, 128, 256, 512)
FROZEN_LOSSES = 5
FINETUNED_RUNS = {"grid (seed 0)": 4 * 2 + 2 * 2 * 2,
                  "--extend_grid=1 (seed 0)": 4 * 1 + 2 * 2,
                  "followers (seeds 1, 2)": 6 * 2}


def records(study):
  pattern = os.path.join(REPO, "results", study, "runs", "*",
                         "study_result.json")
  out = []
  for path in sorted(glob.glob(pattern)):
    with open(path, encoding="utf-8") as f:
      out.append(json.load(f))
  return out


def last_step(record):
  """The step of the record's last validation (where its run stopped)."""
  return max(step for curve in record["validation_curve"].values()
             for step, _ in curve)


def seconds_a_step(record):
  """train_seconds / the steps the record's training covered (None: none)."""
  steps = last_step(record) - (record.get("resumed_at_step") or 0)
  return record["train_seconds"] / steps if steps > 0 else None


def key(record):
  return (record["interaction"],
          None if record["interaction"] == "dot" else record["mlp_units"])


def main():
  frozen = collections.defaultdict(list)
  for record in records("study_goemotions_frozen"):
    step = seconds_a_step(record)
    if step is not None:
      frozen[key(record)].append(step)
  median = {k: statistics.median(v) for k, v in frozen.items()}
  print("frozen, ms a step (median of the committed runs): " + "; ".join(
      f"{i}{'' if u is None else f' {u}'} {1000 * median[(i, u)]:.1f}"
      for i, u in [("dot", None)] + [(i, u) for i in ("lc_mlp", "concat_mlp")
                                     for u in FROZEN_WIDTHS]))
  hours = {}
  hours["dot"] = FROZEN_LOSSES * FROZEN_RATES * CEILING * median[("dot", None)]
  for interaction in ("lc_mlp", "concat_mlp"):
    hours[interaction] = FROZEN_LOSSES * FROZEN_RATES * CEILING * sum(
        median[(interaction, u)] for u in FROZEN_WIDTHS)
  grid = sum(hours.values())
  print(f"frozen, seed 0 grid at {CEILING} steps: "
        f"{FROZEN_LOSSES * FROZEN_RATES * (1 + 2 * len(FROZEN_WIDTHS))} "
        f"runs, {grid / 3600:.1f} h (dot {hours['dot'] / 3600:.1f} h, "
        f"lc_mlp {hours['lc_mlp'] / 3600:.1f} h, concat_mlp "
        f"{hours['concat_mlp'] / 3600:.1f} h)")
  chosen = [r for r in records("study_goemotions_frozen")
            if r["seed"] == 0 and r["run"] in {
                r2["follows"] for r2 in records("study_goemotions_frozen")
                if r2.get("follows")}]
  followers = 2 * CEILING * sum(median[key(r)] for r in chosen)
  print(f"frozen, followers at {CEILING} steps: {2 * len(chosen)} runs, "
        f"{followers / 3600:.1f} h; total {(grid + followers) / 3600:.1f} h")
  tuned = [seconds_a_step(r) for r in records("study_goemotions_finetuned")
           if not r.get("resumed_at_step") and not r.get("extended_steps")]
  fast, middle = min(tuned), statistics.median(tuned)
  runs = sum(FINETUNED_RUNS.values())
  print(f"fine-tuned, s a step (the {len(tuned)} uninterrupted 3,400-step "
        f"runs): fastest {fast:.2f}, median {middle:.2f}")
  print(f"fine-tuned, {runs} runs ("
        + ", ".join(f"{v} {k}" for k, v in FINETUNED_RUNS.items())
        + f") at {CEILING} steps: {runs * CEILING * fast / 3600:.0f} h to "
        f"{runs * CEILING * middle / 3600:.0f} h; one run "
        f"{CEILING * fast / 3600:.1f} h to {CEILING * middle / 3600:.1f} h")

  left()


def two_workers_rate():
  """The machine's steps a second with two workers of one thread (the
  benchmark's row of 2 processes)."""
  path = os.path.join(REPO, "results", "text_workers", "benchmark.md")
  with open(path, encoding="utf-8") as f:
    for line in f:
      cells = [c.strip() for c in line.strip("|\n").split("|")]
      if cells[:2] == ["2", "1"]:
        return float(cells[3])
  raise ValueError(f"{path}: no row of 2 processes of 1 thread.")


def left():
  """What the fine-tuned long study has still to train."""
  done = records("study_goemotions_finetuned_long")
  with open(os.path.join(REPO, "results", "study_goemotions_finetuned_long",
                         "results.csv"), encoding="utf-8") as f:
    chosen = {row["run"] for row in csv.DictReader(f)
              if row["selected"] == "True"}
  extensions = FINETUNED_RUNS["--extend_grid=1 (seed 0)"] - sum(
      bool(r.get("extension")) for r in done)
  followers = collections.Counter(r.get("follows") for r in done)
  follower_steps = [last_step(r) for r in done
                    if r["run"] in chosen and r["seed"] == 0
                    for _ in range(2 - followers[r["run"]])]
  fewest = min(last_step(r) for r in done)
  low = sum(follower_steps) + extensions * fewest
  high = sum(follower_steps) + extensions * CEILING
  rate = two_workers_rate()
  print(f"fine-tuned long, left after the {len(done)} runs committed: "
        f"{extensions} --extend_grid=1 runs at {fewest} to {CEILING} steps "
        f"each (the fewest any finished run trained, the ceiling), "
        f"{len(follower_steps)} followers at their seed-0 choice's steps "
        f"({sum(follower_steps)} in all, at today's choices): {low} to "
        f"{high} steps")
  print(f"at the {rate:.2f} steps a second of two workers (training steps "
        f"alone): {low / rate / 3600:.0f} h to {high / rate / 3600:.0f} h; "
        f"in one worker a run of {fewest} steps takes "
        f"{fewest / (rate / 2) / 3600:.1f} h, the longest follower "
        f"({max(follower_steps)} steps) "
        f"{max(follower_steps) / (rate / 2) / 3600:.1f} h")


if __name__ == "__main__":
  main()
