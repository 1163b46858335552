r"""Zero-shot baselines that need no training: random ranking and cosine.

Example (GoEmotions, the five held-out emotions of docs/class_encoders.md):

  .venv/bin/python -m pipelines.zero_shot_baselines --dataset=goemotions \
      --init_checkpoint=minilm --feature_cache_dir=runs/feature_cache \
      --holdout_classes=gratitude,fear,surprise,disappointment,optimism

Scores every instance of --split against every class in two ways:

* `random`: uniform random scores, one ranking per seed of --seeds;
* `cosine`: the untrained sentence encoder's cosine similarity between the
  instance's embedding (mean-pooled MiniLM h, from the feature cache) and
  each class text's (`classes_lib.class_texts`).

Prints a markdown table like `pipelines.compare_runs`: one row per baseline
and instance set (all instances; those of the held-out classes), each metric
as mean ± std [95% t-interval] over seeds (cosine is deterministic). With
--holdout_classes a second table gives each baseline's GZSL metrics
(`ranking.gzsl`: seen_top1, unseen_top5, unseen_mrr, gzsl_h, gzsl_h1,
ausuc; seen = the classes not held out).
"""

import sys

from absl import app
import numpy as np
from absl import flags

from . import console
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import classes as classes_lib
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import zero_shot_baselines
from rank4class_tf.ranking import gzsl
from rank4class_tf.ranking import metrics
from rank4class_tf.study import compare
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache

flags.DEFINE_string("dataset", "goemotions", "A text dataset.")
flags.DEFINE_string("data_dir", None, "Directory of the dataset's files.")
flags.DEFINE_string("encoder", "bert", "bert or electra.")
flags.DEFINE_string("encoder_size", "minilm_l6", "Its architecture.")
flags.DEFINE_string("init_checkpoint", "minilm", "Its weights.")
flags.DEFINE_string("pooling", "", "Its pooling (default: the "
                    "checkpoint's own).")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per text.")
flags.DEFINE_string("feature_cache_dir", "runs/feature_cache",
                    "Feature cache folder (built when missing).")
flags.DEFINE_string("class_descriptions", "", "name<TAB>description file.")
flags.DEFINE_list("holdout_classes", [], "Held-out classes: their instances "
                  "get rows of their own.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds of the random rankings.")
flags.DEFINE_string("split", "test", "The split scored.")
flags.DEFINE_list("metrics", ["top1_accuracy", "top5_accuracy", "ndcg@5",
                              "mrr"], "Metrics.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"zero_shot_baselines: unexpected arguments: "
             f"{' '.join(argv[1:])}")
  console.quiet()
  try:
    for name in FLAGS.metrics:
      try:
        metrics.check_name(name)
      except ValueError as e:
        raise ValueError(f"--metrics: {e}") from None
    seeds = [int(seed) for seed in FLAGS.seeds]
    config = config_lib.TrainConfig.create(
        dataset=FLAGS.dataset, data_dir=FLAGS.data_dir, encoder=FLAGS.encoder,
        encoder_size=FLAGS.encoder_size,
        init_checkpoint=FLAGS.init_checkpoint, pooling=FLAGS.pooling,
        max_seq_length=FLAGS.max_seq_length, freeze_encoder=True,
        class_encoder="text", class_descriptions=FLAGS.class_descriptions,
        holdout_classes=tuple(FLAGS.holdout_classes),
        feature_cache_dir=FLAGS.feature_cache_dir, model_dir="unused")
    checks.validate(config)
    config = builders.resolve_defaults(config)
    data = builders.load_data(config)
    checks.check_files(config, data)
    if FLAGS.split not in data.split_names:
      raise ValueError(f"--split={FLAGS.split!r} is not valid; choose one "
                       f"of: {', '.join(data.split_names)}.")
    cache = feature_cache.load(FLAGS.feature_cache_dir,
                               builders.cache_spec(config), data)
    instances, labels = cache.data.splits[FLAGS.split]
    texts = classes_lib.class_texts(data.class_names,
                                       FLAGS.class_descriptions)
    classes = builders.frozen_class_features(
        config, builders.build_inputs(config, data), texts)
    subsets = {"all": slice(None)}
    if FLAGS.holdout_classes:
      subsets["holdout"] = classes_lib.holdout_mask(
          labels, classes_lib.holdout_ids(FLAGS.holdout_classes,
                                             data.class_names))
    baselines = {
        "cosine": ([None], lambda _: zero_shot_baselines.cosine_scores(
            instances, classes)),
        "random": (seeds, lambda seed: zero_shot_baselines.random_scores(
            len(labels), data.num_classes, seed)),
    }
    groups = []
    for name, (group_seeds, scores_of) in baselines.items():
      for subset, chosen in subsets.items():
        group = compare.Group(f"{name}, {subset} instances "
                              f"({len(labels[chosen])})", [],
                              [s for s in group_seeds if s is not None])
        for seed in group_seeds:
          results = metrics.evaluate_scores(
              labels[chosen], scores_of(seed)[chosen], FLAGS.metrics)
          for metric in FLAGS.metrics:
            group.values.setdefault(metric, []).append(float(
                results[metric]))
        groups.append(group)
    zero_shot = []
    if FLAGS.holdout_classes:
      seen = np.ones(data.num_classes, bool)
      seen[list(classes_lib.holdout_ids(FLAGS.holdout_classes,
                                        data.class_names))] = False
      for name, (group_seeds, scores_of) in baselines.items():
        group = compare.Group(f"{name}, GZSL ({len(labels)})", [],
                              [s for s in group_seeds if s is not None])
        for seed in group_seeds:
          values = gzsl.gzsl_metrics(labels, scores_of(seed), seen)
          for metric, value in values.items():
            group.values.setdefault(metric, []).append(value)
        zero_shot.append(group)
  except ValueError as e:
    console.fail("zero_shot_baselines", e)
  print("\n".join(compare.markdown(groups, FLAGS.metrics)))
  if zero_shot:
    print()
    print("\n".join(compare.markdown(zero_shot, gzsl.GZSL_METRICS)))


if __name__ == "__main__":
  app.run(main)
