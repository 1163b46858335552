r"""Training-step time and peak memory of the interactions against `dot`.

One training step (forward, TF-Ranking softmax loss, gradients, Adam update)
of the ranking head `ClassRankingHead(n, interaction)` on h of the ResNet-50
feature size (2048, so h' has 2049 coordinates), for n = 10, 100, 1000
classes and two instance encoders:

* `features`: h is given (precomputed 2048-d features), so the step is the
  interaction's own cost: the worst case for the MLP interactions;
* `resnet50`: the Model Garden ResNet-50 on [--image_size]^2 images (the
  paper's ImageNet model), the same encoder for every interaction.

Interactions: `dot`, `lc_mlp` and `concat_mlp` as the library computes them
(first layer factorised, see `interactions.py`), and `lc_mlp_naive` /
`concat_mlp_naive`: the same maths with the [batch_size, n, dim] MLP input
built explicitly (what `lc_mlp` did before; `concat_mlp` already was
factorised).

  .venv/bin/python -m benchmarks.interactions                    # features
  .venv/bin/python -m benchmarks.interactions --encoders=resnet50 \
      --num_classes=1000 --interactions=dot,lc_mlp,concat_mlp

Method: every configuration runs in its own subprocess; one warm-up step
(tracing, graph optimisation), then the kernel's peak-RSS mark is reset and
peak MB = VmHWM - VmRSS over the measured steps (Linux); ms/step is the
median of the measured steps. "x dot" divides by the `dot` row of the same
encoder and n. Every cost grows linearly with the batch, so the ResNet-50
ratios at --resnet_batch_size hold at batch 64 too.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

flags.DEFINE_list("num_classes", ["10", "100", "1000"], "Class counts n.")
flags.DEFINE_list("encoders", ["features"], "features, resnet50.")
flags.DEFINE_list("interactions",
                  ["dot", "lc_mlp", "lc_mlp_naive", "concat_mlp",
                   "concat_mlp_naive"], "Interactions to time.")
flags.DEFINE_integer("batch_size", 64, "Batch size of the `features` rows.")
flags.DEFINE_integer("resnet_batch_size", 16,
                     "Batch size of the `resnet50` rows.")
flags.DEFINE_integer("image_size", 224, "ResNet-50 input side.")
flags.DEFINE_integer("units", 128, "Hidden width of the MLP interactions.")
flags.DEFINE_integer("steps", 20, "Measured steps (`features`).")
flags.DEFINE_integer("resnet_steps", 3, "Measured steps (`resnet50`).")
flags.DEFINE_string("worker", None, "Internal: encoder,interaction,n.")
flags.DEFINE_string("result_file", None, "Internal: worker output.")
FLAGS = flags.FLAGS

FEATURE_DIM = 2048


def naive_interaction(name: str, units: int):
  """The MLP interactions with their [batch, n, dim] input built explicitly."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  class Naive(tf.keras.layers.Layer):

    def __init__(self):
      super().__init__(name="interaction")
      self.mlp = tf.keras.Sequential([
          tf.keras.layers.Dense(units, activation="relu"),
          tf.keras.layers.Dense(units, activation="relu"),
          tf.keras.layers.Dense(1)])

    def call(self, inputs):
      h, classes = inputs
      n, b = tf.shape(classes)[0], tf.shape(h)[0]
      if name == "lc_mlp_naive":
        x = (1. + classes[tf.newaxis]) * h[:, tf.newaxis]
      else:
        x = tf.concat([tf.tile(h[:, tf.newaxis], [1, n, 1]),
                       tf.tile(classes[tf.newaxis], [b, 1, 1])], axis=-1)
      return tf.squeeze(self.mlp(x), axis=-1)

  return Naive()


def _proc_status_kb(field: str) -> int:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  raise ValueError(field)


def run_worker(encoder: str, interaction: str, n: int, result_file: str):
  """Times one configuration in this process; writes its figures."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from benchmarks import timing  # pylint: disable=g-import-not-at-top
  from rank4class_tf.modeling import encoders  # pylint: disable=g-import-not-at-top
  from rank4class_tf.modeling import interactions  # pylint: disable=g-import-not-at-top
  from rank4class_tf.ranking import losses  # pylint: disable=g-import-not-at-top
  from rank4class_tf.modeling import model as model_lib  # pylint: disable=g-import-not-at-top

  tf.keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  if encoder == "features":
    batch_size, steps = FLAGS.batch_size, FLAGS.steps
    shape = [FEATURE_DIM]
    inputs = tf.keras.Input(shape)
    h = inputs
  else:
    batch_size, steps = FLAGS.resnet_batch_size, FLAGS.resnet_steps
    shape = [FLAGS.image_size, FLAGS.image_size, 3]
    inputs = tf.keras.Input(shape)
    h = encoders.get("resnet50")(inputs)
  if interaction.endswith("_naive"):
    layer = naive_interaction(interaction, FLAGS.units)
  else:
    layer = interactions.get(interaction, units=FLAGS.units)
  class_ids = tf.keras.Input([n], dtype=tf.int64)
  scores = model_lib.ClassRankingHead(n, layer)([h, class_ids])
  model = tf.keras.Model([inputs, class_ids], scores)
  step = timing.make_step(model, losses.get("softmax"),
                          tf.keras.optimizers.Adam())
  x = [tf.constant(rng.normal(size=[batch_size] + shape), tf.float32),
       tf.tile(tf.range(n, dtype=tf.int64)[tf.newaxis], [batch_size, 1])]
  y = tf.one_hot(rng.integers(0, n, batch_size), n)
  step(x, y).numpy()  # Trace, optimise, warm up.
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
  baseline_kb = _proc_status_kb("VmRSS")
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step(x, y).numpy()
    times.append(time.perf_counter() - start)
  peak_kb = _proc_status_kb("VmHWM")
  with open(result_file, "w") as f:
    json.dump({"ms_per_step": 1e3 * float(np.median(times)),
               "peak_mem_mb": (peak_kb - baseline_kb) / 1024.,
               "batch_size": batch_size, "steps": steps}, f)


def main(argv):
  del argv
  if FLAGS.worker:
    encoder, interaction, n = FLAGS.worker.split(",")
    run_worker(encoder, interaction, int(n), FLAGS.result_file)
    return
  tmp = tempfile.mkdtemp()
  rows = []
  for encoder in FLAGS.encoders:
    for n in FLAGS.num_classes:
      dot_ms = None
      for interaction in FLAGS.interactions:
        result_file = os.path.join(tmp, f"{encoder}-{interaction}-{n}.json")
        flags_out = [f"--{name}={getattr(FLAGS, name)}" for name in (
            "batch_size", "resnet_batch_size", "image_size", "units", "steps",
            "resnet_steps")]
        cmd = [sys.executable, "-m", "benchmarks.interactions",
               f"--worker={encoder},{interaction},{n}",
               f"--result_file={result_file}"] + flags_out
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
          raise RuntimeError(f"{' '.join(cmd)} failed:\n"
                             f"{proc.stderr[-3000:]}")
        with open(result_file) as f:
          row = dict(json.load(f), encoder=encoder, num_classes=int(n),
                     interaction=interaction, units=FLAGS.units)
        if interaction == "dot":
          dot_ms = row["ms_per_step"]
        row["x_dot"] = (round(row["ms_per_step"] / dot_ms, 2) if dot_ms
                        else None)
        print(json.dumps(row), flush=True)
        rows.append(row)
  print("\n| encoder | batch | n | interaction | ms/step | peak MB | x dot |")
  print("|---|---:|---:|---|---:|---:|---:|")
  for r in rows:
    print(f"| {r['encoder']} | {r['batch_size']} | {r['num_classes']} | "
          f"{r['interaction']} | {r['ms_per_step']:,.1f} | "
          f"{r['peak_mem_mb']:,.1f} | {r['x_dot']} |")


if __name__ == "__main__":
  app.run(main)
