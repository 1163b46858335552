r"""The embedded demo: Rank4Class on scikit-learn digits, softmax vs ranking losses.

`make demo` runs:

  .venv/bin/python -m pipelines.demo --model_dir=runs/demo

For each loss it trains the small-CNN `dot` model (the classical classifier
read as a ranker), keeps the best validation checkpoint, evaluates the export
on the test split and prints a table of Top-1, Top-5, NDCG@5 and MRR with the
wall time. Each loss's run is a full model_dir under --model_dir/<loss>.
"""

import os
import shutil
import sys
import time

from absl import app
from absl import flags

from . import console
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training

flags.DEFINE_string("model_dir", "runs/demo", "Parent directory of the runs.")
flags.DEFINE_list("losses", ["softmax", "approx_ndcg", "pairwise_logistic"],
                  "Losses to compare.")
flags.DEFINE_string("interaction", "dot", "Interaction of every run.")
flags.DEFINE_integer("train_steps", 1500, "Training steps per run.")
flags.DEFINE_integer("eval_every", 150, "Steps between validations.")
flags.DEFINE_integer("seed", 42, "Seed of every run.")

FLAGS = flags.FLAGS

COLUMNS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")


def format_table(rows):
  """Markdown table of {loss, metrics..., seconds} rows."""
  header = "| loss | " + " | ".join(COLUMNS) + " | train s |"
  lines = [header, "|" + "---|" * (len(COLUMNS) + 2)]
  for row in rows:
    cells = [f"{row[c]:.4f}" for c in COLUMNS]
    lines.append(f"| {row['loss']} | " + " | ".join(cells) +
                 f" | {row['seconds']:.1f} |")
  return "\n".join(lines)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"demo: unexpected arguments: {' '.join(argv[1:])}")
  base = config_lib.TrainConfig.create(
      dataset="digits", interaction=FLAGS.interaction,
      train_steps=FLAGS.train_steps, eval_every=FLAGS.eval_every,
      seed=FLAGS.seed, model_dir="unset")
  configs = []
  try:
    for loss in FLAGS.losses:
      config = base.replace(loss=loss,
                            model_dir=os.path.join(FLAGS.model_dir, loss))
      checks.validate(config)
      configs.append(config)
  except ValueError as e:
    console.fail("demo", e)
  console.quiet(FLAGS.model_dir)
  start = time.time()
  rows = []
  for config in configs:
    model_dir = config.trainer.model_dir
    if os.path.exists(os.path.join(model_dir, run_dir_lib.CONFIG_FILE)):
      shutil.rmtree(model_dir)  # A previous demo run: start afresh.
    run_start = time.time()
    training.train(config)
    seconds = time.time() - run_start
    results = exported_ranker.evaluate(model_dir, builders.load_data(config),
                                       "test")
    rows.append(dict(results, loss=config.loss.name, seconds=seconds))
  print(f"\nRank4Class on digits (test split, {rows[0]['num_examples']} "
        f"images), interaction={FLAGS.interaction}, "
        f"{FLAGS.train_steps} steps per loss:\n")
  print(format_table(rows))
  print(f"\nTotal wall time: {time.time() - start:.1f} s; runs in "
        f"{FLAGS.model_dir}/<loss>.")


if __name__ == "__main__":
  app.run(main)
