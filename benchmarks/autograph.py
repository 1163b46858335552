r"""Whole-run time of `pipelines.train` with and without AutoGraph rewriting
this package and TF-Ranking.

`compat.leave_unconverted` puts `rank4class_tf` and `tensorflow_ranking` on
AutoGraph's list of packages it does not convert. This times the train
binary end to end (a new process: Python, TensorFlow, tracing, training,
validation, exports) as shipped ("neither") and with the two packages taken
off that list again ("both", as before), alternating `--repeats` times, for
each loss of `--losses`, and prints a markdown table: loss, what AutoGraph
converts, the median wall seconds, the functions AutoGraph converted and the
seconds it spent converting them (both of the first repeat), and the ratio;
then the machine's load.

  .venv/bin/python -m benchmarks.autograph --losses=softmax,approx_ndcg \
      --repeats=3

Extra flags for the runs go after `--`, e.g. `-- --train_steps=600`
(default: digits, `dot`, 20 steps, `--eval_every=10`, `--deterministic`).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import timing

flags.DEFINE_list("losses", ["softmax", "approx_ndcg"], "Losses to time.")
flags.DEFINE_integer("repeats", 3, "Runs per loss and setting.")
FLAGS = flags.FLAGS

MODES = ("neither", "both")

# The train binary; with argv[1] == "both", AutoGraph converts this package
# and TF-Ranking again. Writes the conversions' count and seconds to argv[2].
_RUN = """\
import atexit, json, runpy, sys, time
from rank4class_tf import compat
import tensorflow
from tensorflow.python.autograph.core import config
from tensorflow.python.autograph.impl import api
if sys.argv[1] == "both":
  config.CONVERSION_RULES = tuple(
      rule for rule in config.CONVERSION_RULES
      if not (isinstance(rule, config.DoNotConvert) and
              any(rule.matches(name) for name in compat.UNCONVERTED)))
spent = [0, 0.0]
convert = api._convert_actual
def timed(entity, program_ctx):
  start = time.perf_counter()
  try:
    return convert(entity, program_ctx)
  finally:
    spent[0] += 1
    spent[1] += time.perf_counter() - start
api._convert_actual = timed
def write(path):
  with open(path, "w") as f:
    json.dump(spent, f)
atexit.register(write, sys.argv[2])
sys.argv = ["pipelines.train"] + sys.argv[3:]
runpy.run_module("pipelines.train", run_name="__main__", alter_sys=True)
"""


def time_run(mode: str, loss: str, extra, root: str):
  """(wall seconds, functions converted, seconds converting) of one run."""
  folder = tempfile.mkdtemp(dir=root)
  spent = os.path.join(folder, "autograph.json")
  cmd = [sys.executable, "-c", _RUN, mode, spent, "--dataset=digits",
         f"--loss={loss}", "--deterministic", "--train_steps=20",
         "--eval_every=10", f"--model_dir={folder}/run", *extra]
  start = time.perf_counter()
  proc = subprocess.run(cmd, capture_output=True, text=True)
  took = time.perf_counter() - start
  if proc.returncode:
    sys.exit(f"autograph: the run failed:\n{proc.stderr[-2000:]}")
  with open(spent) as f:
    count, seconds = json.load(f)
  return took, count, seconds


def main(argv):
  extra = argv[1:]
  if FLAGS.repeats < 1 or not FLAGS.losses:
    sys.exit("autograph: --repeats must be >= 1 and --losses not empty.")
  root = tempfile.mkdtemp(prefix="autograph_bench_")
  print(f"{os.cpu_count()} cores, {timing.uptime()} before.\n")
  print(f"| loss | AutoGraph converts | median s (of {FLAGS.repeats}) | "
        "functions converted | converting s | vs both |")
  print("|---|---|---:|---:|---:|---:|")
  for loss in FLAGS.losses:
    runs = {mode: [] for mode in MODES}
    for _ in range(FLAGS.repeats):
      for mode in MODES:
        runs[mode].append(time_run(mode, loss, extra, root))
    medians = {mode: statistics.median(took for took, _, _ in runs[mode])
               for mode in MODES}
    for mode in MODES:
      _, count, seconds = runs[mode][0]
      print(f"| {loss} | {mode} | {medians[mode]:.2f} | {count} | "
            f"{seconds:.2f} | {medians[mode] / medians['both']:.2f} |")
  shutil.rmtree(root, ignore_errors=True)
  print(f"\n{timing.uptime()} at the end.")


if __name__ == "__main__":
  app.run(main)
