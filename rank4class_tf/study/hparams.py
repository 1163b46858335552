"""The study in TensorBoard's HParams plugin: the experiment in the study
folder, one session per run in its run folder, replaced on every report."""

import os
from typing import Dict, Sequence

import tensorflow as tf
from tensorboard.plugins.hparams import api as hp

from rank4class_tf import fileio
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid



HPARAMS_SUFFIX = ".study_hparams"


def write_hparams(study_dir: str, records: Sequence[Dict],
                  grid: study_grid.Grid, metric_names: Sequence[str],
                  chosen: Dict) -> None:
  """Logs every run to TensorBoard's HParams plugin.

  The experiment (hyper-parameters and their domains, the metrics) goes to
  the study folder, one session per run to its run folder: hyper-parameters
  (with `selected`: whether the run is the chosen one of its seed), and as
  scalars the validation metrics of its best checkpoint, its test metrics,
  softmax CE and training time. Earlier study HParams files (in every run
  folder) are removed once the new ones are written, so the view follows
  the latest report and never shows a run twice.
  """
  domains = [
      hp.HParam("loss", hp.Discrete(list(grid.losses))),
      hp.HParam("interaction", hp.Discrete(list(grid.interactions))),
      hp.HParam("learning_rate", hp.Discrete(
          [float(r) for r in grid.learning_rates])),
      hp.HParam("mlp_units", hp.Discrete([0] + list(grid.mlp_units))),
      hp.HParam("seed", hp.Discrete(list(grid.seeds))),
      hp.HParam("selected", hp.Discrete([False, True])),
  ]
  tags = ([f"validation/{m}" for m in metric_names] +
          [f"test/{m}" for m in metric_names] +
          ["test/softmax_ce", "train_seconds"])
  runs_dir = os.path.join(study_dir, study_folder.RUNS_DIR)
  # Every run folder, so that runs no longer reported lose theirs too.
  folders = [study_dir] + [os.path.join(runs_dir, n) for n in sorted(
      fileio.listdir(runs_dir) if fileio.isdir(runs_dir) else ())]
  earlier = [path for folder in folders for path in tf.io.gfile.glob(
      os.path.join(folder, "*" + HPARAMS_SUFFIX))]
  try:
    _write_sessions(study_dir, records, metric_names, chosen, domains, tags)
    for path in earlier:  # Replaced once the new logs are written.
      tf.io.gfile.remove(path)
  except (tf.errors.OpError, OSError) as e:
    message = getattr(e, "message", None) or getattr(e, "strerror", e)
    raise ValueError(f"cannot write the HParams logs in {study_dir}: "
                     f"{message}.") from None


def _write_sessions(study_dir, records, metric_names, chosen, domains,
                    tags) -> None:
  """The HParams experiment in `study_dir`, one session per run folder."""
  with tf.summary.create_file_writer(
      study_dir, filename_suffix=HPARAMS_SUFFIX).as_default():
    hp.hparams_config(hparams=domains,
                      metrics=[hp.Metric(t) for t in tags])
  chosen_runs = {r["run"] for r in chosen.values()}
  for r in records:
    folder = os.path.join(study_dir, study_folder.RUNS_DIR, r["run"])
    values = {"loss": r["loss"], "interaction": r["interaction"],
              "learning_rate": float(r["learning_rate"]),
              "mlp_units": r["mlp_units"] or 0, "seed": r["seed"],
              "selected": r["run"] in chosen_runs}
    scalars = {f"validation/{m}": r["validation"][m] for m in metric_names}
    scalars.update({f"test/{m}": r["test"][m] for m in metric_names})
    scalars["test/softmax_ce"] = r["test_softmax_ce"]
    scalars["train_seconds"] = r["train_seconds"] or 0.
    with tf.summary.create_file_writer(
        folder, filename_suffix=HPARAMS_SUFFIX).as_default():
      hp.hparams(values, trial_id=r["run"])
      for tag, value in scalars.items():
        tf.summary.scalar(tag, value, step=0)
