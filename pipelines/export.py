r"""Writes the SavedModels of a run trained with --export=false.

Example (a frozen study's chosen run; its name is in the study's tables.md):

  .venv/bin/python -m pipelines.export \
      --model_dir=runs/study_goemotions_frozen/runs/softmax.dot.lr0.01.seed0

Writes `export/latest_model` (final checkpoint) and
`export/best_model_by_metric` (best checkpoint) exactly as `pipelines.train`
would have at the end of training, for a run trained from a feature cache
the model over raw text with the frozen encoder. Prints the two paths.
A run that is unfinished or already exported exits with status 1 and one
line, writing nothing; so does a run whose data changed since it trained
(its data record, docs/data.md "The data record": a table's
standardisation comes from its train file). --allow_changed_data exports
anyway, a table's run with the standardisation it trained with, and says so
in the run's log.txt.
"""

import sys

from absl import app
from absl import flags

from . import console
from rank4class_tf.training import trainer as training

flags.DEFINE_string("model_dir", None, "Directory of a finished run.")
flags.DEFINE_bool("allow_changed_data", False,
                  "Export even when the run's data files changed since it "
                  "trained (never another class list); logged in the run's "
                  "log.txt.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"export: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.model_dir:
    sys.exit("export: --model_dir must be set.")
  console.quiet()
  try:
    latest, best = training.export_run(FLAGS.model_dir,
                                       FLAGS.allow_changed_data)
  except ValueError as e:
    console.fail("export", e)
  print(f"Exported {latest}")
  print(f"Exported {best}")


if __name__ == "__main__":
  app.run(main)
