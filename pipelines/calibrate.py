r"""Fits the calibrated probabilities of a trained run again, without training.

Example (a digits run trained with a ranking loss):

  .venv/bin/python -m pipelines.calibrate --model_dir=runs/digits_approx_ndcg

Both exports are written anew from the run's final and best checkpoints,
each with the calibration fitted on the validation split (temperature
scaling for single-label runs, shared Platt scaling for multi-label ones:
docs/model.md, "Probabilities"), so that `serving_default` returns
`probabilities`; a run trained before calibration existed gets them this
way. Writes the best export's reliability diagram to
<model_dir>/reliability.png and prints one JSON line: per export, the
fitted parameters and the validation NLL, ECE and Brier score before and
after, e.g.

  {"best_model_by_metric": {"calibration": {"kind": "temperature",
   "temperature": 0.31, ...}, "metrics": {"ece": 0.21,
   "calibrated_ece": 0.03, ...}, ...}, "latest_model": {...}}

A folder that holds no finished run, or a run whose scores are not finite
(it diverged, or its weights are NaN), exits with status 1 and one line,
writing nothing: both calibrations are fitted before either export is
written. So does a run whose data changed since it trained (its data
record, docs/data.md "The data record"); --allow_changed_data calibrates on
it anyway, says so in the run's log.txt, and adds `"data_changed": "..."`
to the JSON line.

A study trained before calibration existed (docs/study.md):

  .venv/bin/python -m pipelines.calibrate --study_dir=runs/study_digits

adds each finished run's calibration to its record, from its best
checkpoint (no training, no export: a temperature fitted on validation, the
test NLL, ECE and Brier before and after), then rewrites the report, whose
tables.md gains the section "Calibration by loss". `--recompute` does it for
every finished run, also those with a calibration: a study calibrated by a
release before commit 8018d6d has the NLL of probabilities clipped at 1e-12
(too low where a model is confidently wrong).
"""

import json
import os
import sys

from absl import app
from absl import flags

from . import console
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.ranking import calibration
from rank4class_tf.study import evaluation as study_evaluation
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import report as study_report
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training

flags.DEFINE_string("model_dir", None, "Directory of a finished run.")
flags.DEFINE_string("study_dir", None, "A study folder: calibrate every "
                    "finished run's record that has no calibration, then "
                    "rewrite its report.")
flags.DEFINE_bool("allow_changed_data", False,
                  "With --model_dir: calibrate even when the run's data "
                  "files changed since it trained (never another class "
                  "list); logged in its log.txt and the JSON line.")
flags.DEFINE_bool("recompute", False, "With --study_dir: calibrate every "
                  "finished run's record, also those that have a "
                  "calibration (computed by an older release).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"calibrate: unexpected arguments: {' '.join(argv[1:])}")
  if bool(FLAGS.model_dir) == bool(FLAGS.study_dir):
    sys.exit("calibrate: set one of --model_dir and --study_dir.")
  if FLAGS.allow_changed_data and not FLAGS.model_dir:
    sys.exit("calibrate: --allow_changed_data is read with --model_dir "
             "only.")
  if FLAGS.recompute and not FLAGS.study_dir:
    sys.exit("calibrate: --recompute is read with --study_dir only "
             "(--model_dir always fits the calibration again).")
  console.quiet()
  if FLAGS.study_dir:
    try:
      if not os.path.isfile(os.path.join(FLAGS.study_dir,
                                         study_folder.STUDY_FILE)):
        raise ValueError(f"--study_dir={FLAGS.study_dir} holds no study "
                         f"({study_folder.STUDY_FILE} not found).")
      done = study_evaluation.add_calibration(FLAGS.study_dir,
                                              recompute=FLAGS.recompute)
      paths = study_report.write_report(FLAGS.study_dir)
    except ValueError as e:
      console.fail("calibrate", e)
    print(f"Calibrated {done} run(s); wrote {paths['tables']}.")
    return
  try:
    records = training.recalibrate(FLAGS.model_dir,
                                   FLAGS.allow_changed_data)
    run = run_dir_lib.RunDir(FLAGS.model_dir)
    best = records[run_dir_lib.BEST_EXPORT]
    data, changes = builders.load_run_data(FLAGS.model_dir,
                                           FLAGS.allow_changed_data)
    if changes:
      records["data_changed"] = console.flag_terms(changes.line())
    labels, scores = exported_ranker.split_scores(
        exported_ranker.ExportedRanker(FLAGS.model_dir), data, "validation")
    calibration.reliability_diagram(
        scores, labels, calibration.Calibration.from_json(
            best["calibration"]), run.reliability_diagram,
        title=f"{run_dir_lib.BEST_EXPORT}, validation")
  except ValueError as e:
    console.fail("calibrate", e)
  print(json.dumps(records, sort_keys=True))


if __name__ == "__main__":
  app.run(main)
