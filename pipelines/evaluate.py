r"""Evaluates a trained run's exported model and prints one JSON line.

Example:

  .venv/bin/python -m pipelines.evaluate --model_dir=runs/digits_approx_ndcg \
      --split=test

Multi-label runs:

  .venv/bin/python -m pipelines.evaluate --model_dir=runs/goemotions_ml_bce \
      --metrics=map_class,map_sample,cf1,of1,cf1_top3,of1_top3,macro_f1

Prints e.g. {"top1_accuracy": 0.98, "top5_accuracy": 1.0, "ndcg@5": 0.99,
"mrr": 0.99, "num_examples": 270, "split": "test", ...}.
"""

import json
import sys

from absl import app
from absl import flags

from pipelines import console
from rank4class_tf.data import datasets
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving

flags.DEFINE_string("model_dir", None, "Directory of a trained run.")
flags.DEFINE_string("split", "test", "train, validation or test.")
flags.DEFINE_enum("export", run_dir_lib.BEST_EXPORT, run_dir_lib.EXPORTS,
                  "Which exported SavedModel to evaluate.")
flags.DEFINE_list("metrics", None,
                  "Metrics to compute (default: the run's --metrics), e.g. "
                  "map_class,map_sample,cf1,of1 for multi-label runs.")
flags.DEFINE_float("threshold", 0.5,
                   "Multi-label cp/cr/cf1/op/or/of1/macro_f1 and their "
                   "_top<k> forms: a class is predicted when sigmoid(score) "
                   ">= threshold (_top<k>: and it is among the k best).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"evaluate: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.model_dir:
    sys.exit("evaluate: --model_dir must be set.")
  console.quiet()
  try:
    data = datasets.from_config(serving.load_config(FLAGS.model_dir).data)
    results = serving.evaluate(FLAGS.model_dir, data, FLAGS.split,
                               FLAGS.export, metric_names=FLAGS.metrics,
                               threshold=FLAGS.threshold)
  except ValueError as e:
    console.fail("evaluate", e)
  results.update({"split": FLAGS.split, "export": FLAGS.export})
  if any(metrics.is_multilabel(name) for name in results):
    results["threshold"] = FLAGS.threshold
  print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
  app.run(main)
