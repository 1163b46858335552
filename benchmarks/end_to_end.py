r"""The README's text fine-tune end to end, code against code, alternating.

Runs `pipelines.train` (GoEmotions, MiniLM-L6 from all-MiniLM-L6-v2,
softmax + dot, batch 32, length 32, learning rate 5e-5, `--train_steps`
steps, a validation every `--eval_every`, both exports) then
`pipelines.evaluate` on the test split, once per variant and round,
alternating (round 1: A, B, ...; round 2: A, B, ...), each in a fresh
process and run folder, and prints each run's seconds (train, evaluate,
total), its test Top-1 and the load average before and after it, then the
median total per variant and its ratio to the first.

A variant is `NAME=TREE[:FLAGS]`: the code of the checkout TREE (`.` is
this one; another commit's: `git worktree add /tmp/base <commit>`, or
`git archive <commit> | tar -x -C /tmp/base`), with extra train flags
separated by `+`, e.g. `release0.1=.:--nolength_bucketing`.

  .venv/bin/python -m benchmarks.end_to_end --variants=before=/tmp/base,after=. --train_steps=100 --eval_every=100

The 1,000-step table of issue 60 is `--train_steps=1000 --eval_every=500
--rounds=2` with release 0.1 (`--nolength_bucketing` on the commit
before issue 60), the commit before issue 60 and today's defaults (about
an hour on a quiet 2-core machine).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import timing

flags.DEFINE_list("variants", ["today=."], "NAME=TREE[:FLAG+FLAG...] each.")
flags.DEFINE_integer("rounds", 1, "Alternating rounds.")
flags.DEFINE_integer("train_steps", 100, "Steps per run.")
flags.DEFINE_integer("eval_every", 100, "Steps between validations.")
flags.DEFINE_integer("seed", 42, "Training seed.")
FLAGS = flags.FLAGS


def run(tree: str, module: str, *args: str) -> str:
  env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
  result = subprocess.run([sys.executable, "-m", module, *args], env=env,
                          cwd=os.path.abspath(tree), capture_output=True,
                          text=True, check=False)
  if result.returncode:
    raise SystemExit(f"{module} in {tree} failed:\n{result.stderr[-3000:]}")
  return result.stdout


def one_run(name: str, tree: str, extra, folder: str, index: int):
  model_dir = os.path.join(folder, f"{name}_{index}")
  load_before = timing.uptime().split()[2].rstrip(",")
  start = time.time()
  run(tree, "pipelines.train", "--dataset=goemotions", "--encoder=bert",
      "--init_checkpoint=minilm", "--loss=softmax", "--interaction=dot",
      "--batch_size=32", "--max_seq_length=32", "--learning_rate=5e-5",
      f"--train_steps={FLAGS.train_steps}",
      f"--eval_every={FLAGS.eval_every}", f"--seed={FLAGS.seed}",
      f"--model_dir={model_dir}", *extra)
  trained = time.time() - start
  out = run(tree, "pipelines.evaluate", f"--model_dir={model_dir}")
  evaluated = time.time() - start - trained
  top1 = json.loads(out[out.index("{"):].splitlines()[0])["top1_accuracy"]
  return (trained, evaluated, top1, load_before,
          timing.uptime().split()[2].rstrip(","))


def main(argv):
  del argv
  variants = []
  for spec in FLAGS.variants:
    name, _, rest = spec.partition("=")
    tree, _, extra = rest.partition(":")
    variants.append((name, tree, [f for f in extra.split("+") if f]))
  folder = tempfile.mkdtemp(prefix="end_to_end-")
  rows, totals = [], {name: [] for name, _, _ in variants}
  for index in range(FLAGS.rounds):
    for name, tree, extra in variants:
      trained, evaluated, top1, before, after = one_run(
          name, tree, extra, folder, index)
      totals[name].append(trained + evaluated)
      rows.append((name, index + 1, trained, evaluated, top1, before, after))
      print(f"{name} round {index + 1}: train {trained:.1f} s, evaluate "
            f"{evaluated:.1f} s", flush=True)
  print(f"\nGoEmotions, MiniLM-L6, softmax + dot, batch 32, length 32, "
        f"{FLAGS.train_steps} steps, a validation every {FLAGS.eval_every}, "
        f"seed {FLAGS.seed}; {FLAGS.rounds} alternating round(s):\n")
  print("| variant | round | train s | evaluate s | total s | test Top-1 | "
        "1-min load before / after |")
  print("|---|---|---|---|---|---|---|")
  for name, index, trained, evaluated, top1, before, after in rows:
    print(f"| {name} | {index} | {trained:.1f} | {evaluated:.1f} | "
          f"{trained + evaluated:.1f} | {top1:.4f} | {before} / {after} |")
  base = statistics.median(totals[variants[0][0]])
  print("\n| variant | median total s | speed-up over "
        f"{variants[0][0]} |")
  print("|---|---|---|")
  for name, values in totals.items():
    median = statistics.median(values)
    print(f"| {name} | {median:.1f} | {base / median:.2f} |")


if __name__ == "__main__":
  app.run(main)
