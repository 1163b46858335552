r"""Diabetes regression scored by Spearman's rho: MSE vs the SoDeep loss.

Example (the table in rank4class_tf/sorting/README.md; the end-to-end test
runs it with 2 epochs):

  .venv/bin/python -m pipelines.spearman_regression \
      --methods=mse,sodeep_spearman --sorter=lstm --batch_size=100 \
      --epochs=200 --seeds=0,1,2,3,4 --output=runs/diabetes_spearman.json

For every method and seed, trains an MLP on scikit-learn's load_diabetes
(80/20 split drawn from the seed) and prints one JSON line with the test
Spearman correlation; then one summary line per method (mean and standard
deviation over seeds). --output also receives everything as one JSON file.
With sodeep_spearman, --batch_size is the sorter's d (a shipped lstm/cnn/pairwise
sorter must exist for it; handcrafted and handcrafted_adaptive work for any
d).
"""

import json
import os
import sys

from absl import app
from absl import flags
import numpy as np

from . import console
from rank4class_tf.sorting import regression

flags.DEFINE_list("methods", list(regression.METHODS),
                  "Training losses to compare: mse, sodeep_spearman.")
flags.DEFINE_string("sorter", "lstm", "Sorter of sodeep_spearman.")
flags.DEFINE_integer("batch_size", 100, "Patients per step (the sorter's d).")
flags.DEFINE_integer("epochs", 200, "Passes over the training split.")
flags.DEFINE_integer("align_epochs", 1,
                     "First epochs adding the L1 alignment term (SoDeep).")
flags.DEFINE_integer("hidden_units", 64, "Width of the MLP's hidden layers.")
flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate.")
flags.DEFINE_list("seeds", ["0", "1", "2", "3", "4"], "Seeds to run.")
flags.DEFINE_string("output", None, "Optional JSON file of all results.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"spearman_regression: unexpected arguments: "
             f"{' '.join(argv[1:])}")
  runs, summary = [], {}
  try:
    for method in FLAGS.methods:
      values = []
      for seed in FLAGS.seeds:
        config = regression.RegressionConfig(
            method=method, sorter=FLAGS.sorter, batch_size=FLAGS.batch_size,
            epochs=FLAGS.epochs, align_epochs=FLAGS.align_epochs,
            hidden_units=FLAGS.hidden_units,
            learning_rate=FLAGS.learning_rate, seed=int(seed))
        result = dict(method=method, seed=int(seed), **regression.run(config))
        print(json.dumps(result), flush=True)
        runs.append(result)
        values.append(result["test_spearman"])
      summary[method] = {"test_spearman_mean": float(np.mean(values)),
                         "test_spearman_std": float(np.std(values)),
                         "num_seeds": len(values)}
      print(json.dumps({"method": method, **summary[method]}), flush=True)
  except ValueError as e:
    console.fail("spearman_regression", e)
  if FLAGS.output:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    with open(FLAGS.output, "w") as f:
      json.dump({"flags": {k: FLAGS[k].value for k in (
          "methods", "sorter", "batch_size", "epochs", "align_epochs",
          "hidden_units", "learning_rate", "seeds")},
                 "runs": runs, "summary": summary}, f, indent=2)


if __name__ == "__main__":
  app.run(main)
