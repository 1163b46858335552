r"""Evaluates a trained run's exported model and prints one JSON line.

Example:

  .venv/bin/python -m pipelines.evaluate --model_dir=runs/digits_approx_ndcg \
      --split=test

Multi-label runs:

  .venv/bin/python -m pipelines.evaluate --model_dir=runs/goemotions_ml_bce \
      --metrics=map_class,map_sample,cf1,of1,cf1_top3,of1_top3,macro_f1

Prints e.g. {"top1_accuracy": 0.98, "top5_accuracy": 1.0, "ndcg@5": 0.99,
"mrr": 0.99, "num_examples": 270, "split": "test", ...}.

A per-class report (`ranking/class_report.py`):

  .venv/bin/python -m pipelines.evaluate --model_dir=runs/digits_approx_ndcg \
      --split=test --report_dir=runs/digits_approx_ndcg/report_test

writes per_class.csv, per_class.md, report.json and, for single-label runs,
confusion_matrix.csv, confusion_matrix.png and confused_pairs.md into
--report_dir, whole or not at all, and prints a second line naming it after
the JSON line. An existing --report_dir is replaced only when it is empty or
holds a previous report and nothing else; any other folder, a file, or a
path that cannot be made exits with status 1 before anything is scored.

The run's data is checked against what it trained on (its data record,
docs/data.md "The data record"): changed files, another class list, a moved
`--data_dir` exit with status 1 and one line saying what changed;
--allow_changed_data evaluates changed files anyway and adds
`"data_changed": "..."` to the JSON line (and to the report).
"""

import json
import os
import sys
from typing import Dict, List, Optional

from absl import app
from absl import flags

from . import console
from rank4class_tf.data import identity
from rank4class_tf.ranking import class_report
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders

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
flags.DEFINE_string("report_dir", None,
                    "Folder for a per-class report of the split (per-class "
                    "table, confusion matrix, most-confused pairs), written "
                    "whole or not at all; an existing one is replaced only "
                    "if it holds a previous report.")

flags.DEFINE_bool("allow_changed_data", False,
                  "Evaluate even when the run's data files changed since it "
                  "trained (never another class list); the JSON line then "
                  "says what changed (`data_changed`).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"evaluate: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.model_dir:
    sys.exit("evaluate: --model_dir must be set.")
  console.quiet()
  report_dir = FLAGS.report_dir
  try:
    if report_dir is not None:  # Before anything is scored.
      class_report.check_report_dir(report_dir)
    data, changes = builders.load_run_data(FLAGS.model_dir,
                                           FLAGS.allow_changed_data)
    results = exported_ranker.evaluate(FLAGS.model_dir, data, FLAGS.split,
                               FLAGS.export, metric_names=FLAGS.metrics,
                               threshold=FLAGS.threshold)
    written = [] if report_dir is None else write_report(
        FLAGS.model_dir, data, FLAGS.split, FLAGS.export, FLAGS.threshold,
        report_dir, changes)
  except ValueError as e:
    console.fail("evaluate", e)
  results.update({"split": FLAGS.split, "export": FLAGS.export})
  if changes:
    results["data_changed"] = console.flag_terms(changes.line())
  if any(metrics.is_multilabel(name) for name in results):
    results["threshold"] = FLAGS.threshold
  print(json.dumps(results, sort_keys=True))
  if written:
    print(f"Wrote the per-class report to {report_dir} "
          f"({', '.join(sorted(os.path.basename(p) for p in written))}).")


def write_report(model_dir: str, data, split: str, export: str,
                 threshold: float, report_dir: str,
                 changes: Optional[identity.Changes] = None) -> List[str]:
  """Scores the split again (`exported_ranker.evaluate` keeps its scores to
  itself) and writes its per-class report, which names the data's changes
  that `--allow_changed_data` accepted; returns the paths written."""
  ranker = exported_ranker.ExportedRanker(model_dir, export)
  labels, scores = exported_ranker.split_scores(ranker, data, split)
  report = class_report.class_report(labels, scores, ranker.class_names,
                                     threshold=threshold)
  context: Dict[str, str] = {"model_dir": model_dir, "export": export,
                             "split": split}
  if changes:
    context["data_changed"] = console.flag_terms(changes.line())
  return class_report.write(report, report_dir, context)


if __name__ == "__main__":
  app.run(main)
