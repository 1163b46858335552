r"""Loss + gradient time and peak memory: TF-Ranking vs fast paths vs softmax CE.

Measures, for pairwise_logistic, approx_ndcg and gumbel_approx_ndcg (their
default hyper-parameters; Gumbel with sample_size 8 and seed 42), one
`tf.function` step computing the loss and its gradient w.r.t. random scores
[batch_size, num_classes] with one-hot labels, for

* impl=tfr:        TF-Ranking's Keras class (O(batch_size * n^2));
* impl=fast:       `rank4class_tf.ranking.losses.get(name)` (the `fast_losses` class);
* impl=softmax_ce: Keras `CategoricalCrossentropy(from_logits=True)`, the
                   baseline (one row per num_classes, loss="softmax_ce").

Runs (module docstring commands are the ones docs/benchmarks.md shows):

  .venv/bin/python -m benchmarks.losses                      # n = 10..10000
  .venv/bin/python -m benchmarks.losses --num_classes=1000 --batch_size=64
  .venv/bin/python -m benchmarks.losses --mode=train         # 1,000-class run

Output: one JSON object per line with keys loss, impl, num_classes,
batch_size, ms_per_step, peak_mem_mb, max_abs_diff_vs_tfr (the largest
absolute difference, over the loss value and every gradient entry, between
this implementation and TF-Ranking's on the same inputs and, for Gumbel, the
same seeds; 0 for tfr itself; null for softmax_ce, which is another loss, and
where TF-Ranking was skipped). A skipped TF-Ranking row has null figures and a
`skipped` key saying why; TF-Ranking is skipped only where its estimated
[lists, n, n] working set would not fit in the machine's available memory.

Method:
* every (loss, impl, num_classes) runs in its own subprocess, so that one
  configuration's allocations never count in another's memory figure;
* the step is traced with dynamic shapes and run once on a 1 x 2 list
  (tracing, graph optimisation and kernel creation happen there), then the
  kernel's peak-RSS mark is reset (`echo 5 > /proc/self/clear_refs`) and
  peak_mem_mb = VmHWM - VmRSS before the measured steps: the extra resident
  memory of the real steps (Linux only);
* ms_per_step is the median wall time of the measured steps (at least
  --min_steps, then until --min_time_s has passed or --max_steps ran).

--mode=train trains a 2-layer MLP (64 -> 256 -> n) on a synthetic n-class
task (n = 1,000 by default; Gaussian class centres in 64 dimensions, 64,000
training and 10,000 test points) with Adam (1e-3) for --train_steps steps of
softmax CE and of each fast loss (and --train_tfr_steps steps of TF-Ranking's
for comparison) and prints the median ms per `train_on_batch` step and the
held-out top-1 accuracy, one JSON object per run.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from absl import app
from absl import flags
from absl import logging
import numpy as np
import psutil

flags.DEFINE_enum("mode", "losses", ["losses", "train"],
                  "losses: loss + gradient micro-benchmark; train: 1,000-class "
                  "synthetic training.")
flags.DEFINE_integer("num_classes", None,
                     "One list size to measure (default: 10, 100, 1000, "
                     "10000; --mode=train: 1000).")
flags.DEFINE_integer("batch_size", 64, "Lists per step.")
flags.DEFINE_list("losses", ["pairwise_logistic", "approx_ndcg",
                             "gumbel_approx_ndcg"], "Ranking losses to time.")
flags.DEFINE_list("impls", ["tfr", "fast", "softmax_ce"],
                  "Implementations to time: tfr, fast, softmax_ce.")
flags.DEFINE_integer("min_steps", 3, "Fewest measured steps.")
flags.DEFINE_integer("max_steps", 200, "Most measured steps.")
flags.DEFINE_float("min_time_s", 1.0, "Measure until this much time passed.")
flags.DEFINE_float("memory_fraction", 0.5,
                   "TF-Ranking is skipped when its estimate exceeds this "
                   "fraction of the available memory.")
flags.DEFINE_integer("train_steps", 600, "--mode=train: steps per fast loss.")
flags.DEFINE_integer("train_tfr_steps", 3,
                     "--mode=train: steps of TF-Ranking's losses (0: none).")
# Internal: one configuration in this process.
flags.DEFINE_string("worker", None, "Internal: loss,impl to run here.")
flags.DEFINE_string("result_file", None, "Internal: where the worker writes.")

FLAGS = flags.FLAGS

DEFAULT_NUM_CLASSES = (10, 100, 1000, 10000)
SEED = 42
SAMPLE_SIZE = 8
# Live [lists, n, n] float32 tensors of one TF-Ranking loss + gradient step:
# peak_mem_mb / (4 bytes * lists * n^2) measured at n = 100 and 1000, rounded
# up.
_TFR_TENSORS = {"pairwise_logistic": 8, "approx_ndcg": 4,
                "gumbel_approx_ndcg": 3}


# ---------------------------------------------------------------------------
# Worker: one configuration.
# ---------------------------------------------------------------------------


def _build_loss(name: str, impl: str):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_ranking as tfr  # pylint: disable=g-import-not-at-top
  from rank4class_tf.ranking import losses  # pylint: disable=g-import-not-at-top
  if impl == "softmax_ce":
    return tf.keras.losses.CategoricalCrossentropy(from_logits=True)
  kwargs = {"seed": SEED, "sample_size": SAMPLE_SIZE} if name.startswith(
      "gumbel") else {}
  if impl == "fast":
    return losses.get(name, **kwargs)
  return {"pairwise_logistic": tfr.keras.losses.PairwiseLogisticLoss,
          "approx_ndcg": tfr.keras.losses.ApproxNDCGLoss,
          "gumbel_approx_ndcg": tfr.keras.losses.GumbelApproxNDCGLoss,
          }[name](**kwargs)


def _proc_status_kb(field: str) -> int:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  raise ValueError(field)


def _inputs(batch_size: int, n: int):
  rng = np.random.default_rng(0)
  scores = rng.normal(size=(batch_size, n)).astype(np.float32)
  labels = np.zeros((batch_size, n), np.float32)
  labels[np.arange(batch_size), rng.integers(0, n, batch_size)] = 1.
  return labels, scores


def run_worker(name: str, impl: str, n: int, batch_size: int,
               result_file: str) -> None:
  """Times one configuration; writes value, gradient and figures."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  loss = _build_loss(name, impl)
  spec = tf.TensorSpec([None, None], tf.float32)

  @tf.function(input_signature=[spec, spec])
  def step(labels, scores):
    with tf.GradientTape() as tape:
      tape.watch(scores)
      value = loss(labels, scores)
    return value, tape.gradient(value, scores)

  tf.random.set_seed(SEED)
  step(*[tf.constant(x) for x in _inputs(1, 2)])  # trace, optimise, warm up
  labels, scores = [tf.constant(x) for x in _inputs(batch_size, n)]
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
  baseline_kb = _proc_status_kb("VmRSS")
  times = []
  start = time.perf_counter()
  value, grad = None, None
  while (len(times) < FLAGS.min_steps or
         time.perf_counter() - start < FLAGS.min_time_s) and (
             len(times) < FLAGS.max_steps):
    t0 = time.perf_counter()
    out = step(labels, scores)
    times.append(time.perf_counter() - t0)
    if value is None:  # the first measured step: same noise for every impl
      value, grad = out[0].numpy(), out[1].numpy()
  peak_kb = _proc_status_kb("VmHWM")
  np.savez(result_file, value=value, grad=grad,
           ms_per_step=1e3 * float(np.median(times)),
           peak_mem_mb=(peak_kb - baseline_kb) / 1024., steps=len(times))


# ---------------------------------------------------------------------------
# Parent: every configuration in a subprocess.
# ---------------------------------------------------------------------------


def _tfr_skip_reason(name: str, n: int, batch_size: int) -> Optional[str]:
  lists = batch_size * (SAMPLE_SIZE if name.startswith("gumbel") else 1)
  need = _TFR_TENSORS[name] * 4. * lists * n * n
  available = psutil.virtual_memory().available
  if need > FLAGS.memory_fraction * available:
    return (f"needs ~{need / 2**30:.1f} GiB ({_TFR_TENSORS[name]} x "
            f"[{lists}, {n}, {n}] float32) > {FLAGS.memory_fraction:g} x "
            f"{available / 2**30:.1f} GiB available")
  return None


def _run_config(name: str, impl: str, n: int, batch_size: int,
                tmp: str) -> Dict[str, Any]:
  result_file = os.path.join(tmp, f"{name}-{impl}-{n}.npz")
  cmd = [sys.executable, "-m", "benchmarks.losses", f"--worker={name},{impl}",
         f"--num_classes={n}", f"--batch_size={batch_size}",
         f"--result_file={result_file}", f"--min_steps={FLAGS.min_steps}",
         f"--max_steps={FLAGS.max_steps}", f"--min_time_s={FLAGS.min_time_s}"]
  proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
  if proc.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
  with np.load(result_file) as r:
    return {k: r[k] for k in r.files}


def _row(name, impl, n, batch_size, result=None, diff=None, skipped=None):
  row = {"loss": name, "impl": impl, "num_classes": n,
         "batch_size": batch_size,
         "ms_per_step": None if result is None else round(
             float(result["ms_per_step"]), 3),
         "peak_mem_mb": None if result is None else round(
             float(result["peak_mem_mb"]), 1),
         "max_abs_diff_vs_tfr": diff}
  if skipped:
    row["skipped"] = skipped
  return row


def _max_abs_diff(a: Dict[str, Any], b: Dict[str, Any]) -> float:
  return float(max(np.abs(a["value"] - b["value"]).max(),
                   np.abs(a["grad"] - b["grad"]).max()))


def run_losses(num_classes: List[int], batch_size: int) -> None:
  with tempfile.TemporaryDirectory() as tmp:
    for n in num_classes:
      if "softmax_ce" in FLAGS.impls:
        result = _run_config("softmax_ce", "softmax_ce", n, batch_size, tmp)
        print(json.dumps(_row("softmax_ce", "softmax_ce", n, batch_size,
                              result)), flush=True)
      for name in FLAGS.losses:
        reference = None
        if "tfr" in FLAGS.impls:
          reason = _tfr_skip_reason(name, n, batch_size)
          if reason:
            logging.info("Skipping tfr %s at n=%d: %s", name, n, reason)
            print(json.dumps(_row(name, "tfr", n, batch_size,
                                  skipped=reason)), flush=True)
          else:
            reference = _run_config(name, "tfr", n, batch_size, tmp)
            print(json.dumps(_row(name, "tfr", n, batch_size, reference,
                                  0.0)), flush=True)
        if "fast" in FLAGS.impls:
          result = _run_config(name, "fast", n, batch_size, tmp)
          diff = None if reference is None else _max_abs_diff(reference,
                                                              result)
          print(json.dumps(_row(name, "fast", n, batch_size, result, diff)),
                flush=True)


# ---------------------------------------------------------------------------
# --mode=train: a synthetic 1,000-class task.
# ---------------------------------------------------------------------------


def synthetic_task(num_classes: int, dim: int = 64, train_size: int = 64_000,
                   test_size: int = 10_000, noise: float = 1.5, seed: int = 0):
  """Gaussian class centres; x = centre[y] + noise * N(0, I)."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(num_classes, dim)).astype(np.float32)

  def split(size):
    y = rng.integers(0, num_classes, size)
    x = centres[y] + noise * rng.normal(size=(size, dim)).astype(np.float32)
    return x.astype(np.float32), y
  return split(train_size), split(test_size)


def run_train(n: int, batch_size: int) -> None:
  """Trains a 2-layer MLP with each loss; prints ms/step and accuracy."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  (x_train, y_train), (x_test, y_test) = synthetic_task(n)
  runs = [("softmax_ce", "softmax_ce", FLAGS.train_steps)]
  for name in FLAGS.losses:
    if name.startswith("gumbel"):
      continue
    runs.append((name, "fast", FLAGS.train_steps))
    if FLAGS.train_tfr_steps:
      runs.append((name, "tfr", FLAGS.train_tfr_steps))
  for name, impl, steps in runs:
    tf.keras.utils.set_random_seed(SEED)
    inputs = tf.keras.Input([x_train.shape[1]])
    hidden = tf.keras.layers.Dense(256, activation="relu")(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(n)(hidden))
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                  loss=_build_loss(name, impl))
    data = tf.data.Dataset.from_tensor_slices(
        (x_train, tf.one_hot(y_train, n))).shuffle(10_000, seed=SEED).repeat(
        ).batch(batch_size).prefetch(2)
    iterator = iter(data)
    model.train_on_batch(*next(iterator))  # trace
    times = []
    for _ in range(steps):
      batch = next(iterator)
      start = time.perf_counter()
      model.train_on_batch(*batch)
      times.append(time.perf_counter() - start)
    ms = 1e3 * float(np.median(times))
    accuracy = None
    if impl != "tfr":
      pred = model.predict(x_test, batch_size=1024, verbose=0).argmax(-1)
      accuracy = round(float(np.mean(pred == y_test)), 4)
    print(json.dumps({"mode": "train", "loss": name, "impl": impl,
                      "num_classes": n, "batch_size": batch_size,
                      "train_steps": steps, "ms_per_step": round(ms, 2),
                      "test_top1_accuracy": accuracy}), flush=True)


def main(argv):
  del argv
  if FLAGS.worker:
    name, impl = FLAGS.worker.split(",")
    run_worker(name, impl, FLAGS.num_classes, FLAGS.batch_size,
               FLAGS.result_file)
  elif FLAGS.mode == "train":
    run_train(FLAGS.num_classes or 1000, FLAGS.batch_size)
  else:
    num_classes = ([FLAGS.num_classes] if FLAGS.num_classes
                   else list(DEFAULT_NUM_CLASSES))
    run_losses(num_classes, FLAGS.batch_size)


if __name__ == "__main__":
  app.run(main)
