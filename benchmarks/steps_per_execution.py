r"""Whole-run time of `pipelines.train` at 1 and at 10 steps per call.

`builders.steps_per_execution` gives Keras' `steps_per_execution` of a run:
1 (10 on a TPU). This times the train binary end to end (a new process:
Python, TensorFlow, tracing, training, validation, exports) with that
function returning 10 and 1, alternating `--repeats` times, for each
`--train_steps`, and prints a markdown table: steps, steps per call,
median wall seconds, and the ratio; then the machine's load.

  .venv/bin/python -m benchmarks.steps_per_execution --train_steps=20,600 \
      --repeats=2

Extra flags for the runs go after `--`, e.g. `-- --dataset=digits
--loss=approx_ndcg` (default: digits, softmax, `--eval_every` 10 for 20
steps, 100 otherwise).
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

flags.DEFINE_list("train_steps", ["20", "600"], "Run lengths to time.")
flags.DEFINE_integer("repeats", 2, "Runs per length and setting.")
FLAGS = flags.FLAGS

# The train binary with builders.steps_per_execution returning argv[1].
_RUN = ("import runpy, sys\n"
        "from rank4class_tf.training import builders\n"
        "n = int(sys.argv[1])\n"
        "builders.steps_per_execution = lambda trainer: n\n"
        "sys.argv = ['pipelines.train'] + sys.argv[2:]\n"
        "runpy.run_module('pipelines.train', run_name='__main__', "
        "alter_sys=True)\n")


def time_run(steps_per_call: int, steps: int, extra, root: str) -> float:
  eval_every = 10 if steps <= 20 else 100
  cmd = [sys.executable, "-c", _RUN, str(steps_per_call),
         "--dataset=digits", "--dropout=0", "--deterministic",
         f"--train_steps={steps}", f"--eval_every={eval_every}",
         f"--model_dir={tempfile.mkdtemp(dir=root)}/run", *extra]
  start = time.perf_counter()
  proc = subprocess.run(cmd, capture_output=True, text=True)
  took = time.perf_counter() - start
  if proc.returncode:
    sys.exit(f"steps_per_execution: the run failed:\n{proc.stderr[-2000:]}")
  return took


def main(argv):
  extra = argv[1:]
  try:
    lengths = [int(s) for s in FLAGS.train_steps]
  except ValueError:
    sys.exit(f"steps_per_execution: --train_steps={FLAGS.train_steps}: "
             "integers expected.")
  if FLAGS.repeats < 1 or any(n < 10 for n in lengths):
    sys.exit("steps_per_execution: --repeats must be >= 1 and every "
             "--train_steps >= 10.")
  root = tempfile.mkdtemp(prefix="spe_bench_")
  print(f"| train steps | steps per call | median s (of {FLAGS.repeats}) "
        "| vs 10 |")
  print("|---:|---:|---:|---:|")
  for steps in lengths:
    seconds = {10: [], 1: []}
    for _ in range(FLAGS.repeats):
      for steps_per_call in (10, 1):
        seconds[steps_per_call].append(
            time_run(steps_per_call, steps, extra, root))
    base = statistics.median(seconds[10])
    for steps_per_call in (10, 1):
      median = statistics.median(seconds[steps_per_call])
      print(f"| {steps} | {steps_per_call} | {median:.2f} | "
            f"{median / base:.2f} |")
  shutil.rmtree(root, ignore_errors=True)
  print(f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} "
        "(1 min) at the end.")


if __name__ == "__main__":
  app.run(main)
