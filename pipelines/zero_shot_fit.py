r"""Chooses the zero-shot remedies' constants on pseudo-unseen classes.

Example (docs/class_encoders.md: the five held-out emotions H, and five
seen ones held out as pseudo-unseen in a run of its own):

  .venv/bin/python -m pipelines.zero_shot_fit \
      --pseudo_runs='runs/zero_shot/text.pseudo.seed*' \
      --holdout_classes=gratitude,fear,surprise,disappointment,optimism

Each pseudo run was trained with --holdout_classes=H plus some seen classes
(the pseudo-unseen ones). Its validation split is scored whole but for H's
instances, every class ranked; for each remedy (`stacking`: --seen_margin,
`fusion`: --cosine_fusion, `stacking_fusion`: both) the constants that
maximise the harmonic mean of seen Top-1 and pseudo-unseen Top-5 are
printed, as a markdown table and as the flags to train the runs of H with
(Chao et al. 2016's calibrated stacking, fitted as they fit it). The test's
unseen classes are never read. `--output` also writes them as JSON.
"""

import json
import sys

from absl import app
from absl import flags

from . import console
from . import flag_utils

flags.DEFINE_list("pseudo_runs", None, "Runs trained with --holdout_classes "
                  "and pseudo-unseen classes held out (folders or shell "
                  "patterns; their instances are pooled).")
flags.DEFINE_list("holdout_classes", None, "The test's unseen classes: "
                  "their instances are left out of the fit.")
flags.DEFINE_list("methods", ["stacking", "fusion", "stacking_fusion"],
                  "Remedies to fit.")
flags.DEFINE_string("split", "validation", "The split fitted on.")
flags.DEFINE_string("output", "", "Also write the constants here (JSON).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"zero_shot_fit: unexpected arguments: {' '.join(argv[1:])}")
  console.quiet()
  from rank4class_tf import fileio  # pylint: disable=g-import-not-at-top
  from rank4class_tf.training import zero_shot_fit  # pylint: disable=g-import-not-at-top
  try:
    if not FLAGS.pseudo_runs or not FLAGS.holdout_classes:
      raise ValueError("--pseudo_runs and --holdout_classes must be set.")
    runs = flag_utils.folders("pseudo_runs", FLAGS.pseudo_runs)
    fitted = zero_shot_fit.fit(runs, FLAGS.holdout_classes, FLAGS.methods,
                               FLAGS.split)
  except ValueError as e:
    console.fail("zero_shot_fit", e)
  print(f"Fitted on {FLAGS.split} of: {', '.join(runs)}\n")
  print("| remedy | seen_margin | cosine_fusion | seen_top1 | unseen_top5 "
        "| gzsl_h |\n|---|---|---|---|---|---|")
  for method, values in fitted.items():
    print(f"| {method} | {values['seen_margin']:.4f} | "
          f"{values['cosine_fusion']:.4f} | {values['seen_top1']:.4f} | "
          f"{values['unseen_top5']:.4f} | {values['gzsl_h']:.4f} |")
  print()
  for method, values in fitted.items():
    print(f"{method}: --seen_margin={values['seen_margin']:.6g} "
          f"--cosine_fusion={values['cosine_fusion']:.6g}")
  if FLAGS.output:
    fileio.write_json_atomically(FLAGS.output, {"pseudo_runs": runs,
                                     "holdout_classes": FLAGS.holdout_classes,
                                     "split": FLAGS.split, "fitted": fitted})


if __name__ == "__main__":
  app.run(main)
