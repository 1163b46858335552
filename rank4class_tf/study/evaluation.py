"""One study run evaluated: its best checkpoint's validation and test metrics
(the deterministic `metrics.evaluate_scores`), the per-instance test arrays
the report's paired tests use, its softmax CE, its calibration (a
temperature fitted on validation, the test NLL / ECE / Brier before and
after) and validation curves."""

import dataclasses
import json
import math
import os
from typing import Dict, List, Tuple

import numpy as np

from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf.data import identity
from rank4class_tf.ranking import calibration as calibration_lib
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.study import folder as study_folder
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training


def validation_curves(model_dir: str, eval_every: int
                      ) -> Dict[str, List[List[float]]]:
  """{metric Keras name: [[training step, value], ...]} of the validations,
  epoch e ending at training step (e + 1) * eval_every."""
  return {tag: [[(epoch + 1) * eval_every, v]
                for epoch, v in sorted(points.items())]
          for tag, points in
          run_dir_lib.RunDir(model_dir).validation_curves().items()}


def softmax_cross_entropy(labels: np.ndarray, scores: np.ndarray
                         ) -> np.ndarray:
  """Per-instance -log softmax(scores)[label], [n] float64."""
  scores = np.asarray(scores, np.float64)
  top = scores.max(axis=1, keepdims=True)
  log_norm = np.log(np.exp(scores - top).sum(axis=1)) + top[:, 0]
  return log_norm - scores[np.arange(len(labels)), labels]


def evaluate_run(config: config_lib.TrainConfig, data
                ) -> Tuple[Dict[str, object], Dict[str, np.ndarray]]:
  """Scores a finished run's best export on validation and test (its best
  checkpoint, for a run with no export or trained from a feature cache).

  Returns:
    (its record's metrics, per-instance test arrays: one [n] per metric,
    `softmax_ce`, and the labels).
  """
  names = tuple(config.trainer.metrics)
  if builders.uses_feature_cache(config) or not config.trainer.export:
    # The best checkpoint, from the cached features when the run has them
    # (seconds, where the export would run the encoder on both splits).
    scored = training.checkpoint_scores(config, data)
    (val_labels, val_scores), (labels, scores) = (scored["validation"],
                                                  scored["test"])
  else:
    ranker = exported_ranker.ExportedRanker(config.trainer.model_dir,
                                    run_dir_lib.BEST_EXPORT)
    val_labels, val_scores = exported_ranker.split_scores(ranker, data,
                                                          "validation")
    labels, scores = exported_ranker.split_scores(ranker, data, "test")
  validation = metrics.evaluate_scores(val_labels, val_scores, names)
  per = metrics.per_instance(labels, scores,
                             tuple(dict.fromkeys(names + ("mrr", "ndcg"))))
  # One-hot labels: every list has weight 1, so these means are exactly what
  # `evaluate_scores` returns, without ranking the test split twice.
  test = {name: float(per[name].mean()) for name in names}
  ce = softmax_cross_entropy(labels, scores)
  mrr, ndcg = float(per["mrr"].mean()), float(per["ndcg"].mean())
  record = {
      "validation": validation,
      "test": test,
      "num_test": int(len(labels)),
      # Bruch et al. 2019: CE >= mean log rank >= -log MRR >= -log NDCG.
      "test_softmax_ce": float(ce.mean()),
      "test_neg_log_mrr": -math.log(mrr) if mrr > 0 else math.inf,
      "test_neg_log_ndcg": -math.log(ndcg) if ndcg > 0 else math.inf,
  }
  record["ce_bound_holds"] = bool(record["test_softmax_ce"] >=
                                  record["test_neg_log_mrr"])
  record["calibration"] = calibration_record(val_labels, val_scores, labels,
                                             scores)
  arrays = {name: per[name] for name in names}
  arrays.update(softmax_ce=ce, labels=np.asarray(labels, np.int64))
  return record, arrays


def calibration_record(val_labels: np.ndarray, val_scores: np.ndarray,
                       labels: np.ndarray, scores: np.ndarray
                      ) -> Dict[str, object]:
  """The run's temperature, fitted on validation (`calibration.fit`), and
  the test split's `nll`, `ece`, `brier` before it and `calibrated_...`
  after it; {"temperature": None, "reason": ...} when the scores are not
  finite."""
  try:
    fitted = calibration_lib.fit(val_scores, val_labels)
  except ValueError as e:
    return {"temperature": None, "reason": str(e)}
  return dict(calibration_lib.report(scores, labels, fitted),
              temperature=fitted.temperature)


def add_calibration(study_dir: str, progress=print,
                    recompute: bool = False) -> int:
  """Adds `calibration` to every finished run record of a study that has
  none (runs trained before calibration existed), from the run's best
  checkpoint (`training.checkpoint_scores`: no training, no export); with
  `recompute`, to every finished run's record (one computed by an older
  release: before commit 8018d6d the NLL was of clipped probabilities).

  Returns:
    How many records were updated.
  """
  runs = os.path.join(study_dir, study_folder.RUNS_DIR)
  done, data_of = 0, {}
  with study_folder.locked(study_dir):
    for name in sorted(fileio.listdir(runs)) if fileio.isdir(runs) else []:
      done += _calibrate_record(os.path.join(runs, name), data_of, progress,
                                recompute)
  return done


def _calibrate_record(folder: str, data_of: Dict, progress,
                      recompute: bool) -> int:
  """`add_calibration` for one run folder: 1 if its record was updated."""
  path = os.path.join(folder, study_folder.RESULT_FILE)
  if not fileio.exists(path):
    return 0
  record = study_folder.read_json(path)
  if "calibration" in record and not recompute:
    return 0
  config = exported_ranker.load_config(folder).replace(model_dir=folder)
  key = json.dumps(dataclasses.asdict(config.data), sort_keys=True)
  if key not in data_of:
    data_of[key] = builders.load_data(config)
  identity.check_runs([folder], config.data, data_of[key])
  scored = training.checkpoint_scores(config, data_of[key])
  record["calibration"] = calibration_record(*scored["validation"],
                                             *scored["test"])
  fileio.write_json_atomically(path, record)
  progress(f"calibrated {os.path.basename(folder)}: temperature "
           f"{record['calibration']['temperature']}")
  return 1
