r"""Study workers: wall time of one digits grid with 1, 2 and 4 workers.

Runs the same 24-run digits grid (2 losses x 2 interactions x 2 seeds x 3
learning rates) into a new study folder once per worker count, each time
with that many `pipelines.study` processes started together on the folder
(claims share the runs; docs/distributed.md), and prints a markdown table:
workers, wall seconds until the last worker exited, speed-up over one
worker, the runs each worker trained, and the machine's cores and load.

  .venv/bin/python -m benchmarks.study_workers --workers=1,2,4 \
      --train_steps=300

A run is short (digits, a few hundred steps), so the fixed cost of a
worker (starting Python and TensorFlow, loading the data: a few seconds)
and every run's export and evaluation weigh in as they do in a real grid's
short runs. TensorFlow's own threads already use every core for one run,
which bounds what more workers on one machine can give: they fill the gaps
(start-up, data loading, the single-threaded parts of export and
evaluation), not the cores.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

flags.DEFINE_list("workers", ["1", "2", "4"], "Worker counts to time.")
flags.DEFINE_integer("train_steps", 300, "Steps per run.")
flags.DEFINE_integer("eval_every", 100, "Steps between validations.")
flags.DEFINE_string("root", None, "Where the study folders go (default: a "
                    "new temporary folder).")
FLAGS = flags.FLAGS

GRID = ["--dataset=digits", "--losses=softmax,approx_ndcg",
        "--interactions=dot,lc_mlp", "--seeds=0,1",
        "--learning_rates=3e-3,1e-2,3e-2", "--mlp_units=64",
        "--deterministic"]


def time_workers(count: int, root: str):
  """(wall seconds, {worker: runs trained}) of `count` workers."""
  study_dir = os.path.join(root, f"workers{count}")
  cmd = [sys.executable, "-m", "pipelines.study", f"--study_dir={study_dir}",
         *GRID, f"--train_steps={FLAGS.train_steps}",
         f"--eval_every={FLAGS.eval_every}"]
  start = time.time()
  procs = [subprocess.Popen(cmd + [f"--worker_name=w{i}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True) for i in range(count)]
  outputs = [p.communicate() for p in procs]
  wall = time.time() - start
  trained = {}
  for p, (out, err) in zip(procs, outputs):
    if p.returncode != 0:
      sys.exit(f"study_workers: a worker failed:\n{err[-2000:]}")
    for line in out.splitlines():
      found = re.match(r"^\[\d+/\d+\] \S+ .*\(worker (w\d+)\):", line)
      if found:
        trained[found.group(1)] = trained.get(found.group(1), 0) + 1
  return wall, trained


def _uptime() -> str:
  return subprocess.run(["uptime"], capture_output=True,
                        text=True).stdout.strip()


def main(argv):
  del argv
  root = FLAGS.root or tempfile.mkdtemp(prefix="study_workers_")
  before = _uptime()
  rows, base = [], None
  for count in map(int, FLAGS.workers):
    wall, trained = time_workers(count, root)
    base = base or wall
    rows.append((count, wall, base / wall, trained))
  print(f"24-run digits grid, {FLAGS.train_steps} steps per run; "
        f"{os.cpu_count()} cores.\nuptime before: {before}\nuptime after: "
        f"{_uptime()}")
  print()
  print("| workers | wall (s) | speed-up | runs per worker |")
  print("|---:|---:|---:|---|")
  for count, wall, speedup, trained in rows:
    per = ", ".join(f"{k}: {v}" for k, v in sorted(trained.items()))
    print(f"| {count} | {wall:.0f} | {speedup:.2f}x | {per} |")


if __name__ == "__main__":
  app.run(main)
