"""Pure TensorFlow maths of the multi-label metrics of `multilabel_metrics`.

Every function takes `labels` [batch_size, num_classes], multi-hot (a class is
a positive of an instance iff its label is >= 1, as in TF-Ranking; entries
< 0 are padding and are ignored everywhere), and `scores`
[batch_size, num_classes] raw logits. They run eagerly and inside
`tf.function`; `multilabel_metrics` names them and wraps them in Keras
metrics.

Average precision (AP) of a list (a row, or a column for the per-class AP)
equals `sklearn.metrics.average_precision_score`:

```
AP = 1/|P| * sum_{i in P} precision(s_i),
precision(t) = |{j in P: s_j >= t}| / |{j valid: s_j >= t}|
```

for the positives P of the list and scores s. Tied scores form one threshold,
as in scikit-learn: every item tied with a positive counts as ranked at or
above it, so AP does not depend on the order of ties. `map_class` averages
the AP of each class (ranking the instances by that class's score) over the
classes with a positive; `map_sample` the AP of each instance (ranking its
classes) over the instances with a positive.

Count statistics come from per-class counts over the instances: Nc true
positives, Np predicted positives and Ng label positives of each class:

```
cp  = mean_c Nc / Np        cr  = mean_c Nc / Ng       cf1 = 2 cp cr / (cp + cr)
op  = sum Nc / sum Np       or  = sum Nc / sum Ng      of1 = 2 op or / (op + or)
macro_f1 = mean_c 2 Nc / (Np + Ng)
```

Every ratio is 0 where its denominator is 0 (scikit-learn's
`zero_division=0`), and every class counts in the class means. A class is
predicted positive by one of three rules (`predictions`):

* threshold: iff sigmoid(score) >= threshold;
* top-k (`top_k_rule="top"`, the `_top{k}` metrics): iff it is among the k
  best-scored classes of its instance **and** sigmoid(score) >= threshold,
  ML-GCN's `AveragePrecisionMeter.overall_topk` (also in MulCon's code), the
  rule behind the published "top-3" CP/CR/CF1/OP/OR/OF1 on COCO and VOC: an
  instance predicts at most k classes, fewer when fewer pass the threshold;
* best-k (`top_k_rule="best"`, the `_best{k}` metrics): iff it is among the
  k best-scored classes, whatever its score: exactly k per instance.
"""

import math
from typing import Dict, Optional, Tuple

import tensorflow as tf

from rank4class_tf import lookup

# The keys of `statistics_from_counts`, in order.
COUNT_STATISTICS = ("cp", "cr", "cf1", "op", "or", "of1", "macro_f1")
# How a top-k prediction treats the threshold (see `predictions`): "top"
# keeps only the k best classes that also pass it (ML-GCN), "best" keeps the
# k best classes whatever their scores.
TOP_K_RULES = ("top", "best")


# ------------------------------------------------------ average precision ----

def relevance_and_mask(labels) -> Tuple[tf.Tensor, tf.Tensor]:
  """Which entries are positive (label >= 1) and valid (label >= 0).

  Args:
    labels: [batch_size, num_classes] labels.

  Returns:
    (positive, valid), each [batch_size, num_classes] float32 in {0, 1}.

  Example:

  >>> positive, valid = relevance_and_mask([[2., 0., -1.]])
  >>> positive.numpy(), valid.numpy()
  (array([[1., 0., 0.]], dtype=float32), array([[1., 1., 0.]], dtype=float32))
  """
  labels = tf.cast(labels, tf.float32)
  return (tf.cast(labels >= 1., tf.float32),
          tf.cast(labels >= 0., tf.float32))


def average_precision(labels, scores) -> Tuple[tf.Tensor, tf.Tensor]:
  """Average precision of each row, ranking its entries by score.

  ```
  AP = 1/|P| sum_{i in P} |{j in P: s_j >= s_i}| / |{j valid: s_j >= s_i}|
  ```

  Equals `sklearn.metrics.average_precision_score(labels[i], scores[i])` on the
  valid entries of each row i, ties included (see the module docstring).
  Costs one sort of each row, O(n log n) for rows of n entries.

  Args:
    labels: [num_lists, list_size] labels; >= 1 relevant, < 0 padding.
    scores: [num_lists, list_size] scores.

  Returns:
    (ap [num_lists] float32, 0 for a row without positive;
     has_positive [num_lists] bool).

  Example:

  >>> ap, has_positive = average_precision([[1., 0., 1.], [0., 0., 0.]],
  ...                                      [[2., 1., 0.], [1., 2., 3.]])
  >>> ap.numpy(), has_positive.numpy()  # (1/1 + 2/3) / 2; no positive
  (array([0.8333334, 0.       ], dtype=float32), array([ True, False]))
  """
  scores = tf.cast(scores, tf.float32)
  positive, valid = relevance_and_mask(labels)
  order = tf.argsort(scores, axis=-1, direction="DESCENDING", stable=True)
  sorted_scores = tf.gather(scores, order, batch_dims=1)
  sorted_positive = tf.gather(positive, order, batch_dims=1)
  cum_positive = tf.cumsum(sorted_positive, axis=-1)
  cum_valid = tf.cumsum(tf.gather(valid, order, batch_dims=1), axis=-1)
  # Position of the last entry tied with each entry: the counts there are
  # those of the threshold s_i (padding adds to neither count).
  negated = -sorted_scores  # Ascending, as searchsorted wants.
  last_tied = tf.searchsorted(negated, negated, side="right") - 1
  precision = tf.math.divide_no_nan(
      tf.gather(cum_positive, last_tied, batch_dims=1),
      tf.gather(cum_valid, last_tied, batch_dims=1))
  num_positive = tf.reduce_sum(positive, axis=-1)
  ap = tf.math.divide_no_nan(
      tf.reduce_sum(sorted_positive * precision, axis=-1), num_positive)
  return ap, num_positive > 0.


def average_precision_per_class(labels, scores) -> Tuple[tf.Tensor, tf.Tensor]:
  """AP of each class, ranking the instances by that class's score.

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    scores: [batch_size, num_classes] scores.

  Returns:
    (ap [num_classes], has_positive [num_classes] bool); see
    `average_precision`.
  """
  return average_precision(tf.transpose(labels), tf.transpose(scores))


def average_precision_per_instance(labels,
                                   scores) -> Tuple[tf.Tensor, tf.Tensor]:
  """AP of each instance, ranking its classes.

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    scores: [batch_size, num_classes] scores.

  Returns:
    (ap [batch_size], has_positive [batch_size] bool); see
    `average_precision`.
  """
  return average_precision(labels, scores)


def _masked_mean(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """Mean of `values` where `mask`; 0 when the mask is empty."""
  mask = tf.cast(mask, values.dtype)
  return tf.math.divide_no_nan(tf.reduce_sum(values * mask),
                               tf.reduce_sum(mask))


def map_class(labels, scores) -> tf.Tensor:
  """Mean over classes with a positive of the per-class AP (float32 scalar).

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    scores: [batch_size, num_classes] scores.

  Returns:
    The mean AP; 0 when no class has a positive.

  Example:

  >>> map_class([[1., 0.], [0., 0.]], [[1., 2.], [3., 4.]]).numpy()  # class 0
  0.5
  """
  return _masked_mean(*average_precision_per_class(labels, scores))


def map_sample(labels, scores) -> tf.Tensor:
  """Mean over instances with a positive of the per-instance AP (scalar).

  Instances without a positive are skipped (TF-Ranking counts them as 0).

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    scores: [batch_size, num_classes] scores.

  Returns:
    The mean AP; 0 when no instance has a positive.

  Example:

  >>> map_sample([[1., 0.], [0., 0.]], [[1., 2.], [3., 4.]]).numpy()  # row 0
  0.5
  """
  return _masked_mean(*average_precision_per_instance(labels, scores))


# ------------------------------------------------------------ predictions ----

def threshold_logit(threshold: float) -> float:
  """The logit log(threshold / (1 - threshold)) of a probability threshold.

  Args:
    threshold: probability in [0, 1]; 0 and 1 give -inf and +inf.

  Returns:
    The logit, a Python float.

  Raises:
    ValueError: for a threshold outside [0, 1].
  """
  if not 0. <= threshold <= 1.:
    raise ValueError(f"threshold must be in [0, 1], got {threshold}.")
  if threshold == 0.:
    return -math.inf
  if threshold == 1.:
    return math.inf
  return math.log(threshold) - math.log1p(-threshold)


def threshold_predictions(scores, threshold: float = 0.5) -> tf.Tensor:
  """Predicted positives: sigmoid(scores) >= threshold, as a bool tensor.

  Computed as `scores >= log(threshold / (1 - threshold))`: the same set
  without rounding the sigmoid (only the logit of the threshold is rounded to
  float32; it is exact for 0.5, where it is 0).

  Args:
    scores: [batch_size, num_classes] logits.
    threshold: probability threshold in [0, 1].

  Returns:
    [batch_size, num_classes] bool.

  Example:

  >>> threshold_predictions([[-1., 0., 1.]]).numpy()
  array([[False,  True,  True]])
  """
  scores = tf.cast(scores, tf.float32)
  return scores >= tf.constant(threshold_logit(threshold), tf.float32)


def top_k_predictions(scores, top_k: int, mask=None) -> tf.Tensor:
  """Predicted positives: the `top_k` best-scored classes of each instance.

  Args:
    scores: [batch_size, num_classes] scores.
    top_k: classes predicted per instance (all of them if fewer).
    mask: optional [batch_size, num_classes] bool, False for padded classes,
      which are chosen only after every valid class.

  Returns:
    [batch_size, num_classes] bool. Ties keep the lower class id
    (`tf.math.top_k` order).

  Example:

  >>> top_k_predictions([[1., 3., 1., 0.]], top_k=2).numpy()  # tie: class 0
  array([[ True,  True, False, False]])
  """
  if top_k < 1:
    raise ValueError(f"top_k must be >= 1, got {top_k}.")
  scores = tf.cast(scores, tf.float32)
  if mask is not None:
    scores = tf.where(mask, scores, -math.inf)
  num_classes = scores.shape[-1]
  if num_classes is None:
    num_classes = tf.shape(scores)[-1]
    k = tf.minimum(top_k, num_classes)
  else:
    k = min(top_k, num_classes)
  _, ids = tf.math.top_k(scores, k=k)
  return tf.reduce_max(tf.one_hot(ids, num_classes), axis=-2) > 0.


def check_top_k_rule(top_k_rule: str) -> None:
  """Raises ValueError unless `top_k_rule` is one of `TOP_K_RULES`."""
  lookup.check_choice("top_k_rule", top_k_rule, TOP_K_RULES)


def predictions(labels, scores, threshold: float = 0.5,
                top_k: Optional[int] = None,
                top_k_rule: str = "top") -> tf.Tensor:
  """Thresholded, top-k or best-k predictions, never on padded entries.

  ```
  threshold (top_k None):  sigmoid(s) >= threshold
  top-k ("top"):           c in k best classes  and  sigmoid(s) >= threshold
  best-k ("best"):         c in k best classes
  ```

  The k best classes are those of `top_k_predictions` among the valid ones
  (ties: the lower class id first; padded classes never). "top" is ML-GCN's
  `overall_topk` (the top k scores per instance, then `score >= 0` on the
  logits, i.e. sigmoid >= 0.5): an instance with fewer than k classes over
  the threshold predicts only those, and a class tied with the k-th best but
  of a higher id is not predicted even when it passes the threshold (ML-GCN's
  `torch.topk` leaves the order of ties unspecified; ours is fixed).

  Args:
    labels: [batch_size, num_classes] labels; only their padding (< 0) is
      used.
    scores: [batch_size, num_classes] logits.
    threshold: probability threshold (used unless `top_k` is set with
      `top_k_rule="best"`).
    top_k: None to threshold alone, else predict among the k best valid
      classes of each instance.
    top_k_rule: with `top_k`, "top" (also pass the threshold) or "best"
      (whatever the score); see `TOP_K_RULES`.

  Returns:
    [batch_size, num_classes] bool, False on padded entries.

  Raises:
    ValueError: for an unknown `top_k_rule`, or `top_k` < 1.

  Example:

  >>> labels, scores = [[0., -1., 1., 0.]], [[1., 5., 0., -2.]]
  >>> predictions(labels, scores, top_k=3).numpy()  # -2 fails the threshold
  array([[ True, False,  True, False]])
  >>> predictions(labels, scores, top_k=3, top_k_rule="best").numpy()
  array([[ True, False,  True,  True]])
  """
  check_top_k_rule(top_k_rule)
  _, valid = relevance_and_mask(labels)
  valid = valid > 0.
  if top_k is None:
    predicted = threshold_predictions(scores, threshold)
  else:
    predicted = top_k_predictions(scores, top_k, mask=valid)
    if top_k_rule == "top":
      predicted = tf.logical_and(predicted,
                                 threshold_predictions(scores, threshold))
  return tf.logical_and(predicted, valid)


# ------------------------------------------------------- count statistics ----

def class_counts(labels, predicted) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Per-class counts over the instances, float64 (exact for any split).

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    predicted: [batch_size, num_classes] bool predictions.

  Returns:
    (Nc true positives, Np predicted positives, Ng label positives), each
    [num_classes] float64. Padded entries count nowhere.
  """
  positive, valid = relevance_and_mask(labels)
  positive = tf.cast(positive, tf.float64)
  predicted = tf.cast(predicted, tf.float64) * tf.cast(valid, tf.float64)
  return (tf.reduce_sum(predicted * positive, axis=0),
          tf.reduce_sum(predicted, axis=0),
          tf.reduce_sum(positive, axis=0))


def _f1(precision: tf.Tensor, recall: tf.Tensor) -> tf.Tensor:
  return tf.math.divide_no_nan(2. * precision * recall, precision + recall)


def statistics_from_counts(true_positives: tf.Tensor,
                           predicted_positives: tf.Tensor,
                           label_positives: tf.Tensor) -> Dict[str, tf.Tensor]:
  """cp, cr, cf1, op, or, of1 and macro_f1 from per-class counts.

  Args:
    true_positives: Nc [num_classes].
    predicted_positives: Np [num_classes].
    label_positives: Ng [num_classes].

  Returns:
    {statistic: scalar} for every name of `COUNT_STATISTICS`, in that order
    and in the dtype of the counts; see the module docstring for the
    formulas.

  Example:

  >>> # Class 0: Nc = 1, Np = 2, Ng = 1; class 1: Nc = Np = 0, Ng = 1.
  >>> stats = statistics_from_counts(tf.constant([1., 0.]),
  ...                                tf.constant([2., 0.]),
  ...                                tf.constant([1., 1.]))
  >>> [round(float(stats[name]), 4) for name in ("cp", "cr", "cf1", "op")]
  [0.25, 0.5, 0.3333, 0.5]
  """
  nc, npred, ng = true_positives, predicted_positives, label_positives
  cp = tf.reduce_mean(tf.math.divide_no_nan(nc, npred))
  cr = tf.reduce_mean(tf.math.divide_no_nan(nc, ng))
  op = tf.math.divide_no_nan(tf.reduce_sum(nc), tf.reduce_sum(npred))
  orr = tf.math.divide_no_nan(tf.reduce_sum(nc), tf.reduce_sum(ng))
  return {
      "cp": cp, "cr": cr, "cf1": _f1(cp, cr),
      "op": op, "or": orr, "of1": _f1(op, orr),
      "macro_f1": tf.reduce_mean(tf.math.divide_no_nan(2. * nc, npred + ng)),
  }


def count_statistics(labels, scores, threshold: float = 0.5,
                     top_k: Optional[int] = None,
                     top_k_rule: str = "top") -> Dict[str, tf.Tensor]:
  """All count statistics of one prediction rule, float32 scalars.

  `statistics_from_counts(*class_counts(labels, predictions(...)))`.

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    scores: [batch_size, num_classes] logits.
    threshold: probability threshold (ignored by the "best" top-k rule).
    top_k: None to threshold, else predict among the k best classes per
      instance.
    top_k_rule: with `top_k`, "top" or "best" (see `predictions`).

  Returns:
    {statistic: float32 scalar} for every name of `COUNT_STATISTICS`.
  """
  counts = class_counts(labels, predictions(labels, scores, threshold, top_k,
                                            top_k_rule))
  return {statistic: tf.cast(value, tf.float32)
          for statistic, value in statistics_from_counts(*counts).items()}
