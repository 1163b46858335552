"""One study run evaluated: its best checkpoint's validation and test metrics
(the deterministic `metrics.evaluate_scores`), the per-instance test arrays
the report's paired tests use, its softmax CE and validation curves."""

import math
from typing import Dict, List, Tuple

import numpy as np

from rank4class_tf import config as config_lib
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving
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
    ranker = serving.ExportedRanker(config.trainer.model_dir,
                                    run_dir_lib.BEST_EXPORT)
    val_labels, val_scores = serving.split_scores(ranker, data, "validation")
    labels, scores = serving.split_scores(ranker, data, "test")
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
  arrays = {name: per[name] for name in names}
  arrays.update(softmax_ce=ce, labels=np.asarray(labels, np.int64))
  return record, arrays
