r"""bfloat16 against float32 in test metrics: the 1,000-step fine-tune, seeds.

Runs the README's text command (GoEmotions, MiniLM-L6 from
all-MiniLM-L6-v2, softmax + dot, batch 32, length 32, learning rate 5e-5)
with `--train_steps` steps for each seed and each precision, alternating
(seed 1 float32, seed 1 bfloat16, seed 2 float32, ...), then
`pipelines.evaluate` on the 4,590 test comments, each in its own process,
and prints the paired table of `results/text_speed/accuracy.md`: per seed
and metric, then mean ± standard deviation and the mean paired difference,
with `uptime` and the wall time of each run.

  .venv/bin/python -m benchmarks.bfloat16_accuracy --runs_dir=runs/acc

Precisions: `float32`, `bfloat16` (today's: the sensitive layers in float32,
`--float32_layers`) and `bfloat16_keras` (`--nofloat32_layers`, what
bfloat16 was before issue 60). The issue's rule: bfloat16 becomes the
default where the hardware has it when, over 3 seeds, its mean Top-1 and
NDCG@5 are within float32's seed spread (one standard deviation).

A run folder that already holds a finished run is evaluated again, not
trained again (`pipelines.train` leaves it as it is), so an interrupted
comparison resumes. On a CPU without bfloat16 instructions the bfloat16
runs are refused (`checks`): run it where bfloat16 is native (about 7 min a
run on the 2-core AVX512-BF16 machine of issue 34, 3 seeds x 2 precisions
about 45 min).
"""

import json
import os
import subprocess
import sys
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks import timing

flags.DEFINE_string("runs_dir", "runs/bfloat16_accuracy", "Folder of the "
                    "runs (one per seed and precision).")
flags.DEFINE_list("seeds", ["42", "1", "2"], "Training seeds.")
flags.DEFINE_list("precisions", ["float32", "bfloat16"], "float32, bfloat16 "
                  "(sensitive layers in float32), bfloat16_keras (Keras' "
                  "policy on every layer).")
flags.DEFINE_integer("train_steps", 1000, "Steps per run.")
flags.DEFINE_integer("eval_every", 500, "Steps between validations.")
FLAGS = flags.FLAGS

METRICS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")
NAMES = {"top1_accuracy": "Top-1", "top5_accuracy": "Top-5",
         "ndcg@5": "NDCG@5", "mrr": "MRR"}
PRECISION_FLAGS = {
    "float32": ["--mixed_precision=float32"],
    "bfloat16": ["--mixed_precision=bfloat16", "--float32_layers"],
    "bfloat16_keras": ["--mixed_precision=bfloat16", "--nofloat32_layers"],
}


def run(module: str, *args: str) -> str:
  """Runs `python -m module args` and returns its stdout."""
  result = subprocess.run([sys.executable, "-m", module, *args],
                          capture_output=True, text=True, check=False)
  if result.returncode:
    raise SystemExit(f"{module} {' '.join(args)} failed:\n"
                     f"{result.stderr[-3000:]}")
  return result.stdout


def train_and_evaluate(seed: str, precision: str) -> dict:
  model_dir = os.path.join(FLAGS.runs_dir, f"{precision}_seed{seed}")
  start = time.time()
  run("pipelines.train", "--dataset=goemotions", "--encoder=bert",
      "--init_checkpoint=minilm", "--loss=softmax", "--interaction=dot",
      "--batch_size=32", "--max_seq_length=32", "--learning_rate=5e-5",
      f"--train_steps={FLAGS.train_steps}",
      f"--eval_every={FLAGS.eval_every}", f"--seed={seed}",
      f"--model_dir={model_dir}", *PRECISION_FLAGS[precision])
  trained = time.time() - start
  out = run("pipelines.evaluate", f"--model_dir={model_dir}")
  values = json.loads(out[out.index("{"):].splitlines()[0])
  return {"metrics": {m: float(values[m]) for m in METRICS},
          "seconds": trained, "load": timing.uptime()}


def main(argv):
  del argv
  results = {}
  print(f"start: {timing.uptime()}", flush=True)
  for seed in FLAGS.seeds:
    for precision in FLAGS.precisions:
      results[seed, precision] = train_and_evaluate(seed, precision)
      print(f"seed {seed} {precision}: {results[seed, precision]}",
            flush=True)
  base = FLAGS.precisions[0]
  others = FLAGS.precisions[1:]
  print(f"\n{FLAGS.train_steps}-step fine-tunes, test split; {base} "
        f"against {', '.join(others)}:\n")
  print(f"| metric | seed | {' | '.join(FLAGS.precisions)} | " +
        " | ".join(f"{p} − {base}" for p in others) + " |")
  print("|---|---|" + "---|" * (2 * len(FLAGS.precisions) - 1))
  for metric in METRICS:
    for seed in FLAGS.seeds:
      values = [results[seed, p]["metrics"][metric]
                for p in FLAGS.precisions]
      print(f"| {NAMES[metric]} | {seed} | " +
            " | ".join(f"{v:.4f}" for v in values) + " | " +
            " | ".join(f"{v - values[0]:+.4f}" for v in values[1:]) + " |")
  print("\nMean ± standard deviation over the seeds (ddof 1); within "
        "spread: |mean difference| <= the base's standard deviation:\n")
  print(f"| metric | {' | '.join(FLAGS.precisions)} | " +
        " | ".join(f"mean {p} − {base} (seeds below)" for p in others) +
        " | within spread |")
  print("|---|" + "---|" * (2 * len(FLAGS.precisions)))
  for metric in METRICS:
    per = {p: np.array([results[s, p]["metrics"][metric]
                        for s in FLAGS.seeds]) for p in FLAGS.precisions}
    spread = per[base].std(ddof=1) if len(FLAGS.seeds) > 1 else 0.0
    cells = [f"{v.mean():.4f} ± {v.std(ddof=1) if len(v) > 1 else 0:.4f}"
             for v in per.values()]
    diffs = [per[p] - per[base] for p in others]
    print(f"| {NAMES[metric]} | {' | '.join(cells)} | " +
          " | ".join(f"{d.mean():+.4f} ({int((d < 0).sum())} of {len(d)})"
                     for d in diffs) + " | " +
          ", ".join("yes" if abs(d.mean()) <= spread else "no"
                    for d in diffs) + " |")
  print("\n| run | train s | load after |")
  print("|---|---|---|")
  for (seed, precision), result in results.items():
    print(f"| {precision}, seed {seed} | {result['seconds']:.0f} | "
          f"{result['load']} |")


if __name__ == "__main__":
  app.run(main)
