"""Every loss and metric of the package on fixed inputs, for comparing stacks.

`compute()` evaluates each loss of `losses.LOSS_NAMES` and each metric name
below on fixed scores and labels; `tests/test_stacks.py` compares the result
with the values recorded on the reference stack (TensorFlow 2.15) in
`tests/data/reference_stack_values.json`, so that the current stack
(TensorFlow 2.20, TF-Ranking through `rank4class_tf/compat.py`) is held to the
reference's numbers. `digits_run()` trains the same short digits run with
`pipelines.train` and returns its test metrics, recorded beside them.
Re-record, on the reference stack only, with

  .venv/bin/python -m tests.stack_values
"""

import json
import os
import sys
import tempfile
from typing import Dict

import numpy as np
# pylint: disable=g-bad-import-order
import rank4class_tf  # Before TensorFlow (rank4class_tf/compat.py).
import tensorflow as tf

from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics
from tests import helpers

RECORDED = os.path.join(os.path.dirname(__file__), "data",
                        "reference_stack_values.json")
NUM_CLASSES = 10  # A list length the shipped SoDeep sorters cover (d = 10).
BATCH_SIZE = 6
RANKING_METRICS = ("top1_accuracy", "top3_accuracy", "ndcg@3", "ndcg", "mrr",
                   "precision@2")
# The digits run held to the reference: 100 steps of softmax + dot.
DIGITS_FLAGS = ("--dataset=digits", "--train_steps=100", "--eval_every=50")
MULTILABEL_METRICS = ("map_class", "map_sample", "cp", "cr", "cf1", "op", "or",
                      "of1", "macro_f1", "cf1_top3", "of1_top3")


def inputs() -> Dict[str, np.ndarray]:
  """Fixed scores with ties, single-label and multi-label labels."""
  rng = np.random.RandomState(20240301)
  single = np.eye(NUM_CLASSES, dtype=np.float32)[
      rng.randint(NUM_CLASSES, size=BATCH_SIZE)]
  multi = (rng.uniform(size=(BATCH_SIZE, NUM_CLASSES)) < 0.3).astype(
      np.float32)
  multi[np.arange(BATCH_SIZE), np.argmax(single, axis=1)] = 1.
  # Scores that rank the labels somewhat well, so that the metrics differ.
  scores = (rng.normal(size=(BATCH_SIZE, NUM_CLASSES)) + multi +
            0.5 * single).astype(np.float32)
  scores[0, 3] = scores[0, 7]  # A tie.
  return {"scores": scores, "single": single, "multi": multi}


def compute() -> Dict[str, float]:
  """name -> value of every loss (on both label sets) and metric."""
  data = inputs()
  scores = tf.constant(data["scores"])
  values = {}
  for name in losses.LOSS_NAMES:
    kwargs = {"d": NUM_CLASSES} if "d" in losses.hyperparameters(name) else {}
    if "seed" in losses.hyperparameters(name):
      kwargs["seed"] = 7
    for labels in ("single", "multi"):
      # The Gumbel loss draws its samples from TensorFlow's eager random
      # state, which depends on what the process drew before (other tests
      # in the same pytest worker); resetting it makes the draws repeat.
      tf.random.set_seed(0)
      loss = losses.get(name, **kwargs)
      values[f"loss/{name}/{labels}"] = float(
          loss(tf.constant(data[labels]), scores))
  for name, labels in ([(n, "single") for n in RANKING_METRICS] +
                       [(n, "multi") for n in MULTILABEL_METRICS]):
    metric = metrics.get(name, num_classes=NUM_CLASSES)
    metric.update_state(tf.constant(data[labels]), scores)
    values[f"metric/{name}/{labels}"] = float(metric.result())
  return values


def digits_run() -> Dict[str, float]:
  """Test metrics of the `DIGITS_FLAGS` run, trained in a fresh process."""
  model_dir = os.path.join(tempfile.mkdtemp(), "digits")
  helpers.run_module("pipelines.train", *DIGITS_FLAGS,
                     f"--model_dir={model_dir}")
  line = helpers.run_module("pipelines.evaluate", f"--model_dir={model_dir}",
                            "--split=test").stdout.strip().splitlines()[-1]
  # The ranking metrics (the calibration's NLL / ECE / Brier are not
  # recorded across stacks).
  return {f"digits/{k}": v for k, v in json.loads(line).items()
          if isinstance(v, float) and not k.endswith(("nll", "ece", "brier"))}


def main() -> None:
  if not tf.__version__.startswith("2.15."):
    sys.exit(f"record on the reference stack (TensorFlow 2.15), not "
             f"{tf.__version__}")
  values = {**compute(), **digits_run()}
  os.makedirs(os.path.dirname(RECORDED), exist_ok=True)
  with open(RECORDED, "w", encoding="utf-8") as f:
    json.dump({"tensorflow": tf.__version__, "values": values}, f, indent=1,
              sort_keys=True)
    f.write("\n")
  print(f"{len(values)} values written to {RECORDED}")


if __name__ == "__main__":
  main()
