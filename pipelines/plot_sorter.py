r"""Draws the paper's Fig. 5: the rank of y_1 as y_1 moves from -1 to 1.

Example (the end-to-end test runs it):

  .venv/bin/python -m pipelines.plot_sorter --seq_len=100 \
      --sorters=handcrafted,lstm,cnn --output=runs/fig5_sorters.png

y_1 moves in steps of 0.001 inside a fixed seeded vector of --seq_len
uniform[-1, 1] scores; the PNG shows the exact rank (a staircase) and each
sorter's prediction (lstm, cnn and pairwise are the shipped sorters for
--seq_len).
Also prints, per sorter, the mean absolute rank error along the sweep as one
JSON line.
"""

import json
import os
import sys

from absl import app
from absl import flags
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np

from pipelines import console
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import training

flags.DEFINE_integer("seq_len", 100, "d, the length of the score vector.")
flags.DEFINE_list("sorters", ["handcrafted", "lstm", "cnn"],
                  "Sorters to draw: handcrafted, handcrafted_adaptive, lstm, "
                  "cnn, pairwise.")
flags.DEFINE_integer("seed", 0, "Seed of the fixed vector.")
flags.DEFINE_string("output", None, "Path of the PNG to write.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"plot_sorter: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.output:
    sys.exit("plot_sorter: --output must be set.")
  console.quiet()
  try:
    loaded = {name: sorters.load_sorter(name, FLAGS.seq_len)
              for name in FLAGS.sorters}
  except ValueError as e:
    sys.exit(f"plot_sorter: {e}")
  values, exact = training.sweep_first_score(None, FLAGS.seq_len, FLAGS.seed)
  fig, ax = plt.subplots(figsize=(7, 4.5))
  ax.plot(values, exact, color="black", lw=2, label="exact rank")
  errors = {}
  for name, sorter in loaded.items():
    _, ranks = training.sweep_first_score(sorter, FLAGS.seq_len, FLAGS.seed)
    errors[name] = round(float(np.mean(np.abs(ranks - exact))), 4)
    ax.plot(values, ranks, lw=1.2, label=f"{name} (mean |error| "
            f"{errors[name]:.2f} positions)")
  ax.set_xlabel("$y_1$")
  ax.set_ylabel("rank of $y_1$ (1 = largest)")
  ax.set_title(f"Predicted rank of $y_1$ in a fixed vector of d = "
               f"{FLAGS.seq_len} scores")
  ax.legend()
  ax.grid(alpha=0.3)
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
  fig.tight_layout()
  fig.savefig(FLAGS.output, dpi=120)
  print(json.dumps({"output": FLAGS.output, "mean_abs_rank_error": errors}))


if __name__ == "__main__":
  app.run(main)
