r"""Fine-tuning workers on one machine: one process on every core, or N.

A study's runs can be trained by one worker, whose TensorFlow threads use
every core (TensorFlow's default), or by N workers started together, each
on its share of the cores (`WORKERS=N bash tools/long_studies.sh`:
`TF_NUM_INTRAOP_THREADS` = `TF_NUM_INTEROP_THREADS` = cores / N). Which
trains more steps per second depends on how well one training step uses
more threads; this binary measures both on the fine-tuned long study's
step: MiniLM-L6 size encoder, `--loss` + `--interaction`, GoEmotions batch
32 of at most 32 tokens (one batch of the training stream), Adam, op
determinism on (as `--deterministic` sets it).

Each layout runs in fresh processes (`--child`), alternating in `--rounds`
rounds so that both meet the same machine load. Prints a markdown table:
ms per step of each process, the machine's steps per second (the sum over
its processes) and its ratio to one process, with the load before and after.

  .venv/bin/python -m benchmarks.text_workers --workers=2 --steps=40 \
      --rounds=2
"""

import os
import statistics
import subprocess
import sys

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import timing
from rank4class_tf.ranking import losses

flags.DEFINE_integer("workers", 2, "Processes sharing the cores.")
flags.DEFINE_integer("steps", 40, "Timed training steps per process.")
flags.DEFINE_integer("rounds", 2, "Alternating rounds of the two layouts.")
flags.DEFINE_string("loss", "pairwise_logistic", "Ranking loss.")
flags.DEFINE_string("interaction", "concat_mlp", "Interaction.")
flags.DEFINE_integer("mlp_units", 64, "Hidden width of an MLP interaction.")
flags.DEFINE_bool("child", False, "Time the step in this process and print "
                  "`ms=<ms per step>` (what each layout's processes run).")
FLAGS = flags.FLAGS


def time_here() -> float:
  """ms per training step in this process, on its own threads."""
  tf.keras.utils.set_random_seed(0)
  tf.config.experimental.enable_op_determinism()
  batch = timing.TextBatch.create(32, 32, FLAGS.mlp_units)
  step = timing.make_step(batch.ranker(FLAGS.interaction),
                          losses.get(FLAGS.loss),
                          tf.keras.optimizers.Adam(1e-5))
  return timing.time_step(step, batch.features, batch.labels, FLAGS.steps)


def threads_each(processes: int) -> int:
  """TensorFlow threads of each of `processes` (> 1) processes: the cores
  shared out, as tools/long_studies.sh shares them."""
  return max(1, (os.cpu_count() or 1) // processes)


def run_layout(processes: int):
  """ms per step of each of `processes` children started together."""
  env = dict(os.environ)
  if processes > 1:
    threads = str(threads_each(processes))
    env.update(TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS=threads)
  cmd = [sys.executable, "-m", "benchmarks.text_workers", "--child",
         f"--steps={FLAGS.steps}", f"--loss={FLAGS.loss}",
         f"--interaction={FLAGS.interaction}",
         f"--mlp_units={FLAGS.mlp_units}"]
  procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
           for _ in range(processes)]
  found = []
  for proc in procs:
    out, err = proc.communicate()
    lines = [l for l in out.splitlines() if l.startswith("ms=")]
    if proc.returncode != 0 or not lines:
      sys.exit(f"text_workers: a timed process failed (exit "
               f"{proc.returncode}):\n{err[-2000:]}")
    found.append(float(lines[-1][3:]))
  return found


def main(argv):
  del argv
  if FLAGS.child:
    print(f"ms={time_here():.3f}", flush=True)
    return
  if FLAGS.workers < 2:
    sys.exit(f"text_workers: --workers={FLAGS.workers}: compare 2 or more "
             "processes with one.")
  before = timing.uptime()
  layouts = {1: [], FLAGS.workers: []}
  for _ in range(FLAGS.rounds):
    for processes in layouts:
      layouts[processes].append(run_layout(processes))
  cores = os.cpu_count()
  print(f"{FLAGS.loss} + {FLAGS.interaction} (width {FLAGS.mlp_units}), "
        f"MiniLM-L6 size, GoEmotions batch 32, {FLAGS.steps} timed steps "
        f"per process, {FLAGS.rounds} round(s) alternating; {cores} cores.\n"
        f"before: {before}\nafter: {timing.uptime()}\n")
  print("| processes | TensorFlow threads each | ms / step of each process "
        "(per round) | steps / s of the machine (median) | ratio |")
  print("|---:|---|---|---:|---:|")
  rates = {p: statistics.median(sum(1e3 / ms for ms in r) for r in rounds)
           for p, rounds in layouts.items()}
  for processes, rounds in layouts.items():
    threads = ("default (every core)" if processes == 1 else
               str(threads_each(processes)))
    each = "; ".join(", ".join(f"{ms:.0f}" for ms in r) for r in rounds)
    print(f"| {processes} | {threads} | {each} | {rates[processes]:.2f} | "
          f"{rates[processes] / rates[1]:.2f} |")


if __name__ == "__main__":
  app.run(main)
