"""Classification metrics read as ranking metrics, on TF-Ranking's Keras metrics.

With the classes of an instance ranked by score and one-hot labels:

* `top{k}_accuracy` = Hits@k (TF-Ranking `HitsMetric`): 1 if the true class is
  among the k best-scored classes. Top-1 accuracy = NDCG@1 = Precision@1.
* `ndcg@k` (TF-Ranking `NDCGMetric`): with one relevant class at rank r,
  NDCG@k = 1 / log2(1 + r) if r <= k else 0.
* `mrr` (TF-Ranking `MRRMetric`): 1 / r.

Softmax cross-entropy bounds MRR and NDCG (Bruch et al. 2019), which is why it
is a sound ranking loss; NDCG@5 and MRR tell apart models that Top-k ties.

Names use `@` in results (`ndcg@5`); Keras metric objects are named with `_`
(`ndcg_5`) because `@` is not allowed in TensorFlow name scopes. TF-Ranking
breaks score ties at random, so tied scores make these metrics random too.
"""

import re
from typing import Dict, Iterable, List

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import ops

DEFAULT_METRICS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")

_TOPK = re.compile(r"^top([1-9][0-9]*)_accuracy$")
_NDCG = re.compile(r"^ndcg@([1-9][0-9]*)$")


def keras_name(name: str) -> str:
  """The Keras/TensorBoard name of metric `name` (`ndcg@5` -> `ndcg_5`)."""
  return name.replace("@", "_")


def _parse(name: str):
  """(TF-Ranking metric class, its kwargs) of metric `name`."""
  match = _TOPK.match(name)
  if match:
    return tfr.keras.metrics.HitsMetric, {"topn": int(match.group(1))}
  match = _NDCG.match(name)
  if match:
    return tfr.keras.metrics.NDCGMetric, {"topn": int(match.group(1))}
  if name == "ndcg":
    return tfr.keras.metrics.NDCGMetric, {}
  if name == "mrr":
    return tfr.keras.metrics.MRRMetric, {}
  raise ValueError(f"Unknown metric {name!r}; valid names: top<k>_accuracy, "
                   "ndcg@<k>, ndcg, mrr (k a positive integer).")


def check_name(name: str) -> None:
  """Raises ValueError unless `name` is a valid metric name (builds nothing)."""
  _parse(name)


def get(name: str) -> tf.keras.metrics.Metric:
  """Builds the Keras metric called `name`.

  Args:
    name: `top{k}_accuracy`, `ndcg@{k}`, `ndcg` (whole list) or `mrr`, k >= 1.

  Returns:
    A TF-Ranking Keras metric named `keras_name(name)`.

  Raises:
    ValueError: for any other name.
  """
  cls, kwargs = _parse(name)
  return cls(name=keras_name(name), **kwargs)


def get_all(names: Iterable[str]) -> List[tf.keras.metrics.Metric]:
  """Builds one Keras metric per name (see `get`)."""
  return [get(n) for n in names]


def evaluate_scores(labels, scores,
                    metric_names: Iterable[str] = DEFAULT_METRICS
                   ) -> Dict[str, float]:
  """Ranking metrics of class scores, averaged over instances.

  Args:
    labels: integer class ids [batch_size], or one-hot / graded labels
      [batch_size, num_classes].
    scores: [batch_size, num_classes] scores.
    metric_names: names as accepted by `get`; default top1_accuracy,
      top5_accuracy, ndcg@5, mrr.

  Returns:
    A dict {name: Python float} with exactly the names given.

  Example:

  >>> evaluate_scores([1, 0], [[0.1, 0.9, 0.0], [0.2, 0.5, 0.1]])
  {'top1_accuracy': 0.5, 'top5_accuracy': 1.0, 'ndcg@5': 0.815..., 'mrr': 0.75}
  """
  scores = tf.convert_to_tensor(np.asarray(scores, np.float32))
  if scores.shape.rank != 2:
    raise ValueError(f"scores must be [batch_size, num_classes], got shape "
                     f"{scores.shape}.")
  labels = ops.one_hot_labels(np.asarray(labels), scores.shape[-1])
  if labels.shape != scores.shape:
    raise ValueError(f"labels of shape {labels.shape} do not match scores of "
                     f"shape {scores.shape}.")
  results = {}
  for name in metric_names:
    metric = get(name)
    metric.update_state(labels, scores)
    results[name] = float(metric.result().numpy())
  return results
