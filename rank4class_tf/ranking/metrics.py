"""Classification metrics read as ranking metrics, and multi-label metrics.

With the classes of an instance ranked by score and one-hot labels:

* `top{k}_accuracy` = Hits@k (TF-Ranking `HitsMetric`): 1 if the true class is
  among the k best-scored classes. Top-1 accuracy = NDCG@1 = Precision@1.
* `ndcg@k` (TF-Ranking `NDCGMetric`): with one relevant class at rank r,
  NDCG@k = 1 / log2(1 + r) if r <= k else 0.
* `mrr` (TF-Ranking `MRRMetric`): 1 / r.

Softmax cross-entropy bounds MRR and NDCG (Bruch et al. 2019), which is why it
is a sound ranking loss; NDCG@5 and MRR tell apart models that Top-k ties.

With multi-hot labels (a class is relevant iff its label is >= 1) the
TF-Ranking metrics keep their ranking meaning: `ndcg@k` uses the gain
2^y - 1 and the discount 1 / log2(1 + rank), `mrr` is 1 / the rank of the
first relevant class, `precision@k` (TF-Ranking `PrecisionMetric`) is the
fraction of relevant classes among the k best-scored ones; an instance without
a relevant class counts as 0 in all of them. The multi-label metrics of
`multilabel_metrics` are also accepted here (`MULTILABEL_METRICS`):
`map_class`, `map_sample`, `cp`, `cr`, `cf1`, `op`, `or`, `of1`, `macro_f1`
and the `_top{k}` variants of the count statistics (`cf1_top3`...: the k best
classes that pass the threshold, ML-GCN's rule) and `_best{k}` ones (the k
best classes whatever their scores).

Names use `@` in results (`ndcg@5`); Keras metric objects are named with `_`
(`ndcg_5`, `precision_3`) because `@` is not allowed in TensorFlow name
scopes; the multi-label names are their own Keras names. TF-Ranking breaks
score ties at random, so tied scores make its metrics random too; the
multi-label metrics are deterministic.

`evaluate_scores` (and so `pipelines.evaluate` and the study) is deterministic:
it ranks the classes of each instance once, ties broken by the pessimistic rule
of `ops.tie_broken_scores` (among equal scores the less relevant class first,
then the lower class id), and hands that one ranking to every metric, so the
same inputs always give the same numbers and Top-1 accuracy = NDCG@1 =
Precision@1 on one-hot labels. The Keras metrics of training and validation
(`get`) keep TF-Ranking's random tie-breaking: with continuous scores ties are
rare, and breaking them there would cost a sort per metric and step.
"""

import re
from typing import Dict, Iterable, List, Optional

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr
# TF-Ranking's Keras metrics average per-instance values that their public API
# does not return; the paired tests of the study need them, so they come from
# the module those Keras metrics wrap (the same maths, not a copy of it).
from tensorflow_ranking.python import metrics_impl

from rank4class_tf.multilabel import metrics as multilabel_metrics
from rank4class_tf import ops

DEFAULT_METRICS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")

_TOPK = re.compile(r"^top([1-9][0-9]*)_accuracy$")
_NDCG = re.compile(r"^ndcg@([1-9][0-9]*)$")
_PRECISION = re.compile(r"^precision@([1-9][0-9]*)$")
MULTILABEL_METRICS = multilabel_metrics.MULTILABEL_METRICS
WHOLE_SPLIT_METRICS = multilabel_metrics.WHOLE_SPLIT_METRICS


def keras_name(name: str) -> str:
  """The Keras/TensorBoard name of metric `name` (`ndcg@5` -> `ndcg_5`)."""
  return name.replace("@", "_")


# TF-Ranking's Keras metric class -> the per-list class it wraps.
_PER_LIST = {
    tfr.keras.metrics.HitsMetric: metrics_impl.HitsMetric,
    tfr.keras.metrics.NDCGMetric: metrics_impl.NDCGMetric,
    tfr.keras.metrics.MRRMetric: metrics_impl.MRRMetric,
    tfr.keras.metrics.PrecisionMetric: metrics_impl.PrecisionMetric,
}


def _parse(name: str):
  """(TF-Ranking Keras metric class, its `topn`) of ranking metric `name`."""
  match = _TOPK.match(name)
  if match:
    return tfr.keras.metrics.HitsMetric, int(match.group(1))
  match = _NDCG.match(name)
  if match:
    return tfr.keras.metrics.NDCGMetric, int(match.group(1))
  if name == "ndcg":
    return tfr.keras.metrics.NDCGMetric, None
  if name == "mrr":
    return tfr.keras.metrics.MRRMetric, None
  match = _PRECISION.match(name)
  if match:
    return tfr.keras.metrics.PrecisionMetric, int(match.group(1))
  raise ValueError(f"Unknown metric {name!r}; valid names: top<k>_accuracy, "
                   "ndcg@<k>, ndcg, mrr, precision@<k>, map_class, "
                   "map_sample, cp, cr, cf1, op, or, of1, macro_f1, and "
                   "cp_top<k>, cr_top<k>, cf1_top<k>, op_top<k>, or_top<k>, "
                   "of1_top<k>, macro_f1_top<k>, the same with _best<k> "
                   "(k a positive integer).")


def check_name(name: str) -> None:
  """Raises ValueError unless `name` is a valid metric name (builds nothing)."""
  if not is_multilabel(name):
    _parse(name)


def is_multilabel(name: str) -> bool:
  """Whether `name` is one of the multi-label metrics (`multilabel_metrics`)."""
  return multilabel_metrics.is_multilabel_name(name)


def get(name: str, num_classes: Optional[int] = None,
        threshold: float = 0.5) -> tf.keras.metrics.Metric:
  """Builds the Keras metric called `name`.

  Args:
    name: `top{k}_accuracy`, `ndcg@{k}`, `ndcg` (whole list), `mrr`,
      `precision@{k}`, k >= 1, or a multi-label metric (`map_class`,
      `map_sample`, `cp`, `cr`, `cf1`, `op`, `or`, `of1`, `macro_f1`, or one
      of the count statistics with `_top{k}` or `_best{k}`).
    num_classes: optional; lets the multi-label metrics build their weights
      now instead of at their first update (ignored by the others).
    threshold: probability threshold of the thresholded and `_top{k}`
      multi-label count statistics (ignored by the others).

  Returns:
    A Keras metric named `keras_name(name)`: TF-Ranking's for the ranking
    names, `multilabel_metrics`' for the multi-label ones.

  Raises:
    ValueError: for any other name.
  """
  if is_multilabel(name):
    return multilabel_metrics.get(name, num_classes=num_classes,
                                  threshold=threshold)
  cls, topn = _parse(name)
  return cls(name=keras_name(name), topn=topn)


def get_all(names: Iterable[str], num_classes: Optional[int] = None,
            threshold: float = 0.5) -> List[tf.keras.metrics.Metric]:
  """Builds one Keras metric per name (see `get`)."""
  return [get(n, num_classes=num_classes, threshold=threshold) for n in names]


def _labels_and_scores(labels, scores):
  """float32 [batch_size, num_classes] labels and scores, shapes checked."""
  scores = tf.convert_to_tensor(np.asarray(scores, np.float32))
  if scores.shape.rank != 2:
    raise ValueError(f"scores must be [batch_size, num_classes], got shape "
                     f"{scores.shape}.")
  labels = ops.one_hot_labels(np.asarray(labels), scores.shape[-1])
  if labels.shape != scores.shape:
    raise ValueError(f"labels of shape {labels.shape} do not match scores of "
                     f"shape {scores.shape}.")
  return labels, scores


def _per_list(labels: tf.Tensor, scores: tf.Tensor, metric_names
             ) -> Dict[str, tuple]:
  """{name: (values [batch_size], weights [batch_size])} of one ranking."""
  ranked = ops.tie_broken_scores(scores, labels)
  results = {}
  for name in metric_names:
    if is_multilabel(name):
      raise ValueError(f"{name!r} is a whole-split metric, not a per-instance "
                       "ranking metric.")
    cls, topn = _parse(name)
    values, weights = _PER_LIST[cls](name, topn=topn).compute(labels, ranked)
    results[name] = (values.numpy()[:, 0].astype(np.float64),
                     weights.numpy()[:, 0].astype(np.float64))
  return results


def per_instance(labels, scores, metric_names: Iterable[str] = DEFAULT_METRICS
                ) -> Dict[str, np.ndarray]:
  """Ranking metrics of each instance, from one tie-broken ranking.

  The classes of each instance are ranked once by `ops.tie_broken_scores`
  (ties: less relevant class first, then lower class id) and every metric
  reads that ranking through TF-Ranking's per-list maths, so the values
  repeat exactly and agree with each other (Top-1 accuracy = NDCG@1 =
  Precision@1 on one-hot labels). `evaluate_scores` averages them.

  Args:
    labels: integer class ids [batch_size], or one-hot / graded / multi-hot
      labels [batch_size, num_classes] (entries < 0 are padding).
    scores: [batch_size, num_classes] scores.
    metric_names: ranking metric names (`top<k>_accuracy`, `ndcg@<k>`,
      `ndcg`, `mrr`, `precision@<k>`).

  Returns:
    {name: float64 [batch_size]}; 0 for an instance without a relevant class
    (TF-Ranking's convention).

  Example:

  >>> per_instance([0, 1], [[2., 1.], [0., 0.]], ["top1_accuracy", "mrr"])
  {'top1_accuracy': array([1., 0.]), 'mrr': array([1. , 0.5])}
  """
  labels, scores = _labels_and_scores(labels, scores)
  return {name: values for name, (values, _) in
          _per_list(labels, scores, list(metric_names)).items()}


def evaluate_scores(labels, scores,
                    metric_names: Iterable[str] = DEFAULT_METRICS,
                    threshold: float = 0.5) -> Dict[str, float]:
  """Metrics of the class scores of a whole split, deterministically.

  Ranking metrics are the means of `per_instance` (one tie-broken ranking
  shared by every metric, weighted as TF-Ranking's Keras metrics weigh
  lists); the multi-label ones are computed exactly on the whole
  split at once by `multilabel_metrics.multilabel_scores`. The same inputs
  always give the same numbers.

  Args:
    labels: integer class ids [batch_size], or one-hot / graded / multi-hot
      labels [batch_size, num_classes] (entries < 0 are padding).
    scores: [batch_size, num_classes] scores (logits).
    metric_names: names as accepted by `get`; default top1_accuracy,
      top5_accuracy, ndcg@5, mrr.
    threshold: probability threshold of the thresholded and `_top{k}`
      multi-label count statistics.

  Returns:
    A dict {name: Python float} with exactly the names given.

  Example:

  >>> evaluate_scores([1, 0], [[0.1, 0.9, 0.0], [0.2, 0.5, 0.1]])
  {'top1_accuracy': 0.5, 'top5_accuracy': 1.0, 'ndcg@5': 0.815..., 'mrr': 0.75}
  """
  labels, scores = _labels_and_scores(labels, scores)
  metric_names = list(metric_names)
  for name in metric_names:
    check_name(name)
  multilabel = multilabel_metrics.multilabel_scores(
      labels, scores, [n for n in metric_names if is_multilabel(n)],
      threshold=threshold)
  ranking = _per_list(labels, scores,
                      [n for n in metric_names if not is_multilabel(n)])
  results = {}
  for name in metric_names:
    if name in multilabel:
      results[name] = multilabel[name]
    else:  # The weighted mean of TF-Ranking's Keras metrics (weights: 1).
      values, weights = ranking[name]
      total = weights.sum()
      results[name] = float((values * weights).sum() / total) if total else 0.
  return results
