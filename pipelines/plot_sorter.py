r"""Draws the paper's Fig. 5 (the rank of y_1 as y_1 moves from -1 to 1), or
sorters' learning curves.

Examples (the end-to-end test runs both):

  .venv/bin/python -m pipelines.plot_sorter --seq_len=100 \
      --sorters=handcrafted,lstm,cnn --output=runs/fig5_sorters.png
  .venv/bin/python -m pipelines.plot_sorter \
      --curves=pairwise_d100,pairwise_d28,pairwise_d10 \
      --output=runs/sorter_curves.png

With --curves (shipped sorters as `<sorter>_d<d>` keys of
pretrained/sorters.json, or train_sorter run folders) it draws each one's
validation L1 against the vectors seen (the --init_from runs' curves first),
log-scaled, and prints the last point of each as one JSON line.

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

from . import console
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import training

flags.DEFINE_integer("seq_len", 100, "d, the length of the score vector.")
flags.DEFINE_list("sorters", ["handcrafted", "lstm", "cnn"],
                  "Sorters to draw: handcrafted, handcrafted_adaptive, lstm, "
                  "cnn, pairwise.")
flags.DEFINE_integer("seed", 0, "Seed of the fixed vector.")
flags.DEFINE_list("curves", [],
                  "Learning curves to draw instead of Fig. 5: shipped keys "
                  "(pairwise_d100) or train_sorter run folders.")
flags.DEFINE_string("output", None, "Path of the PNG to write.")

FLAGS = flags.FLAGS


def _learning_curves(names, output):
  """Draws the recorded learning curves; returns each one's last point."""
  index = sorters.pretrained_index()
  curves = {}
  for name in names:
    record = (index[name] if name in index and not os.path.isdir(name)
              else training.read_record(name))
    if not record.get("curve"):
      raise ValueError(f"{name} has no recorded learning curve (trained "
                       "before train_sorter recorded one).")
    curves[name] = record["curve"]
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for name, curve in curves.items():
    ax.plot([c["vectors"] for c in curve], [c["val_l1"] for c in curve],
            marker="o", ms=3, label=name)
  # The paper's Table 1 at d = 100, for reference.
  for value, label in ((0.0120, "paper CNN, d=100"),
                       (0.0033, "paper LSTM, d=100")):
    ax.axhline(value, color="gray", ls="--", lw=0.8)
    ax.annotate(label, (0.01, value), xycoords=("axes fraction", "data"),
                va="bottom", fontsize=7, color="gray")
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("training vectors seen")
  ax.set_ylabel("validation L1 (2,000 vectors)")
  ax.set_title("Sorter learning curves")
  ax.legend()
  ax.grid(alpha=0.3, which="both")
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  fig.tight_layout()
  fig.savefig(output, dpi=120)
  return {name: curve[-1] for name, curve in curves.items()}


def main(argv):
  if len(argv) > 1:
    sys.exit(f"plot_sorter: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.output:
    sys.exit("plot_sorter: --output must be set.")
  console.quiet()
  if FLAGS.curves:
    try:
      last = _learning_curves(FLAGS.curves, FLAGS.output)
    except ValueError as e:
      console.fail("plot_sorter", e)
    print(json.dumps({"output": FLAGS.output, "last_point": last}))
    return
  try:
    loaded = {name: sorters.load_sorter(name, FLAGS.seq_len)
              for name in FLAGS.sorters}
  except ValueError as e:
    console.fail("plot_sorter", e)
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
