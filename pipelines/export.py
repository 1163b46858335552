r"""Writes the SavedModels of a run trained with --export=false.

Example (a frozen study's chosen run; its name is in the study's tables.md):

  .venv/bin/python -m pipelines.export \
      --model_dir=runs/study_goemotions_frozen/runs/softmax.dot.lr0.01.seed0

Writes `export/latest_model` (final checkpoint) and
`export/best_model_by_metric` (best checkpoint) exactly as `pipelines.train`
would have at the end of training, for a run trained from a feature cache
the model over raw text with the frozen encoder. Prints the two paths.
A run that is unfinished or already exported exits with status 1 and one
line, writing nothing.
"""

import sys

from absl import app
from absl import flags

from pipelines import console
from rank4class_tf.training import trainer as training

flags.DEFINE_string("model_dir", None, "Directory of a finished run.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"export: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.model_dir:
    sys.exit("export: --model_dir must be set.")
  console.quiet()
  try:
    latest, best = training.export_run(FLAGS.model_dir)
  except ValueError as e:
    console.fail("export", e)
  print(f"Exported {latest}")
  print(f"Exported {best}")


if __name__ == "__main__":
  app.run(main)
