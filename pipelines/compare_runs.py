r"""Compares trained runs over their seeds: mean, std and 95% t-intervals.

Example (the multi-label GoEmotions methods of docs/multilabel.md, 3 seeds
each; runs that differ only by --seed form one row):

  .venv/bin/python -m pipelines.compare_runs \
      --runs=runs/ml_frozen/bce.seed0,runs/ml_frozen/bce.seed1 \
      --metrics=map_class,map_sample,cf1,of1

`--runs` also takes shell patterns (quote them): --runs='runs/ml_frozen/*'.
Each run's best checkpoint is scored on --split (from the feature cache for
runs trained from one). Prints a markdown table: one row per group of runs
equal but for their seed, named by the settings in which the groups differ;
each metric as mean ± sample std [95% Student-t interval of the mean].
Runs of other data (--dataset, --data_dir) are other rows; runs of one
setting whose saved classes differ (their data changed), runs that did not
finish training (diverged, stopped) and runs whose best checkpoint scores
non-finite are refused, naming them (exit 1), as is a --split their data
lacks.

Calibration (docs/model.md, "Probabilities"): `--metrics` also takes
`nll`, `ece` and `brier` of softmax (multi-label: sigmoid) of the scores,
and `calibrated_nll`, `calibrated_ece`, `calibrated_brier` after the map
fitted on each run's validation split, e.g.
--metrics=top1_accuracy,ece,calibrated_ece.

Zero-shot runs (`--holdout_classes`): `--instances=holdout` scores only the
instances of the held-out classes, every class still ranked (generalized
zero-shot); `--instances=seen` the others. `--metrics` also takes the GZSL
metrics of every instance (`ranking.gzsl`): `seen_top1`, `unseen_top5`,
`unseen_mrr`, their harmonic mean `gzsl_h` (seen Top-1, unseen Top-5),
`gzsl_h1` (Top-1 both) and `ausuc`, e.g.

  .venv/bin/python -m pipelines.compare_runs \
      --runs='runs/zero_shot/*.seed*' \
      --metrics=seen_top1,unseen_top5,unseen_mrr,gzsl_h,ausuc
"""

import sys

from absl import app
from absl import flags

from . import console
from . import flag_utils
from rank4class_tf.ranking import gzsl
from rank4class_tf.ranking import metrics
from rank4class_tf.study import compare

flags.DEFINE_list("runs", None, "Run folders (model_dirs) or shell patterns.")
flags.DEFINE_list("metrics", None, "Metrics (default: the first run's "
                  "--metrics).")
flags.DEFINE_string("split", "test", "validation or test.")
flags.DEFINE_float("threshold", 0.5, "Multi-label count metrics: a class is "
                   "predicted when sigmoid(score) >= threshold.")

flags.DEFINE_enum("instances", "all", compare.INSTANCES,
                  "Instances scored: all; holdout: those of held-out "
                  "classes (zero-shot, every class still ranked); seen: the "
                  "others.")
flags.DEFINE_list("holdout_classes", [],
                  "--instances=holdout/seen: the held-out classes (default: "
                  "each run's own --holdout_classes).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"compare_runs: unexpected arguments: {' '.join(argv[1:])}")
  console.quiet()
  try:
    model_dirs = flag_utils.folders("runs", FLAGS.runs)
    groups = compare.group_runs(model_dirs)
    names = tuple(FLAGS.metrics or ())
    if not names:
      from rank4class_tf.serving import exported_ranker  # pylint: disable=g-import-not-at-top
      names = tuple(exported_ranker.load_config(model_dirs[0]).trainer.metrics)
    zero_shot = [name for name in names if name in gzsl.GZSL_METRICS]
    for name in names:
      if name in compare.CALIBRATION_METRICS or name in zero_shot:
        continue
      try:
        metrics.check_name(name)
      except ValueError as e:
        raise ValueError(f"--metrics: {e}") from None
    if FLAGS.split not in ("validation", "test"):
      raise ValueError(f"--split={FLAGS.split!r} is not valid; choose one "
                       "of: validation, test.")
    others = [name for name in names if name not in zero_shot]
    if others:
      compare.evaluate_groups(groups, others, FLAGS.split, FLAGS.threshold,
                              FLAGS.instances, FLAGS.holdout_classes)
    if zero_shot:
      if FLAGS.instances != "all":
        raise ValueError(f"--metrics: {', '.join(zero_shot)} read every "
                         "instance (seen and unseen); leave --instances "
                         "out.")
      from rank4class_tf.training import zero_shot_fit  # pylint: disable=g-import-not-at-top
      for group in groups:
        for model_dir in group.model_dirs:
          values = zero_shot_fit.gzsl_values(model_dir, zero_shot,
                                             FLAGS.split,
                                             FLAGS.holdout_classes)
          for name in zero_shot:
            group.values.setdefault(name, []).append(values[name])
  except ValueError as e:
    console.fail("compare_runs", e)
  print("\n".join(compare.markdown(groups, names)))


if __name__ == "__main__":
  app.run(main)
