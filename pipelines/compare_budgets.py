r"""Sets one grid's two training budgets side by side, cell by cell.

Example (issue 61: the frozen study trained until its runs stop improving,
against the 3,000-step study; both read from their committed summaries):

  .venv/bin/python -m pipelines.compare_budgets \
      --long_study=results/study_goemotions_frozen_long \
      --short_study=results/study_goemotions_frozen \
      --output=results/long_studies/frozen_budgets.md

Each study chooses its own runs on its own validation metric. For every
(loss, interaction) chosen in both, on every metric both record: the mean at
each budget over the seeds both have, long - short paired by seed and
test instance (mean, 95% t interval, the seed t-test and the hierarchical
bootstrap, each Holm-adjusted), and the cell's verdict against softmax + dot
at each budget by both tests (gain / loss where both give Holm p < 0.05,
"... by the bootstrap" where one alone does, else none detected), with
whether it survives, and the change of that effect, long - short (paired
by seed and test instance, both tests: did the longer training move the
cell against softmax + dot?) (`rank4class_tf/study/budgets.py`); the cells
only one study has are named above the tables. A cell the two share on one
seed only (a long study that chose on seed 0 before its followers) is set
out untested under each metric: each budget's run, long - short and the
effect's change with intervals over the test instances alone, beside the
short study's seed spread (`rank4class_tf/study/one_seed.py`).
Prints two markdown tables per metric; `--output` also writes them.
"""

import sys

from absl import app
from absl import flags

from . import console

flags.DEFINE_string("long_study", None, "The study (folder or committed "
                    "summary) trained longer.")
flags.DEFINE_string("short_study", None, "Its short counterpart.")
flags.DEFINE_list("metrics", [], "Test metrics (default: those both studies "
                  "record).")
flags.DEFINE_string("output", "", "Also write the tables here (markdown).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"compare_budgets: unexpected arguments: {' '.join(argv[1:])}")
  console.quiet()
  from rank4class_tf import fileio  # pylint: disable=g-import-not-at-top
  from rank4class_tf.study import budgets  # pylint: disable=g-import-not-at-top
  try:
    studies = {}
    for flag in ("long_study", "short_study"):
      if not FLAGS[flag].value:
        raise ValueError(f"--{flag} must be set.")
      try:
        studies[flag] = budgets.chosen_cells(FLAGS[flag].value)
      except ValueError as e:
        raise ValueError(f"--{flag}: {e}") from None
    (long_cells, long_metrics), (short_cells, short_metrics) = (
        studies["long_study"], studies["short_study"])
    names = tuple(FLAGS.metrics) or tuple(
        m for m in long_metrics if m in short_metrics)
    for name in names:
      if name not in long_metrics or name not in short_metrics:
        raise ValueError(f"--metrics: {name!r} is not recorded by both "
                         f"studies (long: {', '.join(long_metrics)}; short: "
                         f"{', '.join(short_metrics)}).")
    text = budgets.tables(FLAGS.long_study, FLAGS.short_study, long_cells,
                          short_cells, names)
    if FLAGS.output:
      fileio.write_text_atomically(FLAGS.output, text)
  except (ValueError, OSError) as e:
    console.fail("compare_budgets", e)
  print(text)


if __name__ == "__main__":
  app.run(main)
