r"""Training-step time of the learned SoDeep sorters, and what it means in hours.

Pretraining a sorter is a long run of one step repeated (issue 18): this
prints, for each architecture, the median milliseconds of one Adam step on
the L1 loss at batch --batch_size and list length --seq_len, the vectors per
second that makes, and the hours 10 million vectors would take at that pace
(the paper halves its learning rate every 10 M vectors). Run it on a quiet
machine and quote the load it prints.

  .venv/bin/python -m benchmarks.sorters --threads=2
  .venv/bin/python -m benchmarks.sorters --configs=pairwise,lstm,cnn --threads=1 --steps=20

Configs (`CONFIGS`): the shipped sorters' hyper-parameters (`lstm`, `cnn`,
`pairwise`), the paper's LSTM (`lstm_paper`: 2 x 512, full projection) and a
wider CNN (`cnn_w32`). Output: one JSON object per line (config, sorter,
hyperparameters, weights, seq_len, batch_size, threads, ms_per_step,
vectors_per_second, hours_per_10m_vectors, load_average).
"""

import json
import os
import statistics
import sys
import time

from absl import app
from absl import flags

flags.DEFINE_list("configs", ["pairwise", "lstm", "cnn", "cnn_w32",
                              "lstm_paper"], "Sorter configs to time.")
flags.DEFINE_integer("seq_len", 100, "d, the list length.")
flags.DEFINE_integer("batch_size", 256, "Vectors per step.")
flags.DEFINE_integer("threads", 0, "TensorFlow intra-op threads (0: all).")
flags.DEFINE_integer("steps", 10, "Timed steps per config (after one "
                     "warm-up step); the median is printed.")

FLAGS = flags.FLAGS

CONFIGS = {
    "pairwise": ("pairwise", {"units": 16, "num_layers": 2,
                              "max_sharpness": 60.}),
    "lstm": ("lstm", {"units": 64, "num_layers": 2, "projection": "shared"}),
    "lstm_paper": ("lstm", {"units": 512, "num_layers": 2,
                            "projection": "full"}),
    "cnn": ("cnn", {"width": 16}),
    "cnn_w32": ("cnn", {"width": 32}),
}


def time_config(name: str) -> dict:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rank4class_tf.sorting import sorters  # pylint: disable=g-import-not-at-top
  from rank4class_tf.sorting import synthetic  # pylint: disable=g-import-not-at-top
  from benchmarks import timing  # pylint: disable=g-import-not-at-top

  sorter_name, kwargs = CONFIGS[name]
  d, batch = FLAGS.seq_len, FLAGS.batch_size
  scores = tf.keras.Input([d])
  model = tf.keras.Model(scores, sorters.get(sorter_name, d, **kwargs)(scores))
  step = timing.make_step(model, tf.keras.losses.MeanAbsoluteError(),
                          tf.keras.optimizers.Adam(1e-3))
  x, y = next(iter(synthetic.dataset(batch, d, seed=0)))
  step(x, y).numpy()  # Trace and warm up.
  times = []
  for _ in range(FLAGS.steps):
    start = time.perf_counter()
    step(x, y).numpy()
    times.append(time.perf_counter() - start)
  seconds = statistics.median(times)
  return {"config": name, "sorter": sorter_name, "hyperparameters": kwargs,
          "weights": int(model.count_params()), "seq_len": d,
          "batch_size": batch, "threads": FLAGS.threads,
          "ms_per_step": round(seconds * 1e3, 2),
          "vectors_per_second": round(batch / seconds, 1),
          "hours_per_10m_vectors": round(1e7 / (batch / seconds) / 3600, 2),
          "load_average": round(os.getloadavg()[0], 2)}


def main(argv):
  if len(argv) > 1:
    sys.exit(f"sorters: unexpected arguments: {' '.join(argv[1:])}")
  unknown = [c for c in FLAGS.configs if c not in CONFIGS]
  if unknown:
    sys.exit(f"sorters: --configs: unknown {', '.join(unknown)}; choose from "
             f"{', '.join(CONFIGS)}.")
  for name in ("seq_len", "batch_size", "steps"):
    if getattr(FLAGS, name) < 1:
      sys.exit(f"sorters: --{name}={getattr(FLAGS, name)} must be >= 1.")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if FLAGS.threads:
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
  for name in FLAGS.configs:
    print(json.dumps(time_config(name)), flush=True)


if __name__ == "__main__":
  app.run(main)
