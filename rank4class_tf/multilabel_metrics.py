"""Multi-label classification metrics: pure TensorFlow maths and Keras metrics.

Every function takes `labels` [batch_size, num_classes], multi-hot (a class is
a positive of an instance iff its label is >= 1, as in TF-Ranking; entries
< 0 are padding and are ignored everywhere), and `scores`
[batch_size, num_classes] raw logits. They run eagerly and inside
`tf.function`; the Keras metrics below wrap them.

Ranking metrics (no threshold):

* `map_class`: the average precision (AP) of each class, ranking the
  instances by that class's score, averaged over the classes that have at
  least one positive instance (ML-GCN, ASL, MulCon "mAP").
* `map_sample`: the AP of each instance, ranking its classes, averaged over the
  instances that have at least one positive class. Instances without a
  positive are skipped; TF-Ranking's `MeanAveragePrecisionMetric` would count
  them as 0 instead.

AP equals `sklearn.metrics.average_precision_score`:

```
AP = 1/|P| * sum_{i in P} precision(s_i),
precision(t) = |{j in P: s_j >= t}| / |{j valid: s_j >= t}|
```

for the positives P of a list and scores s. Tied scores form one threshold, as
in scikit-learn: every item tied with a positive counts as ranked at or above
it, so AP does not depend on the order of ties.

Count metrics, from per-class counts over the instances: Nc true positives,
Np predicted positives and Ng label positives of each class:

* `cp` = mean over all classes of Nc / Np (0 where Np = 0);
  `cr` = mean over all classes of Nc / Ng (0 where Ng = 0);
  `cf1` = 2 cp cr / (cp + cr), the F1 of the averaged precision and recall
  (ML-GCN, MulCon), not the mean of per-class F1s;
* `op` = sum Nc / sum Np; `or` = sum Nc / sum Ng;
  `of1` = 2 op or / (op + or);
* `macro_f1` = mean over all classes of 2 Nc / (Np + Ng) (0 where
  Np + Ng = 0), i.e. sklearn's `f1_score(average="macro", zero_division=0)`,
  the figure the GoEmotions paper reports.

Every ratio is 0 where its denominator is 0, and every class counts in the
class means of cp, cr and macro_f1, even one without any positive or
prediction (as in scikit-learn), while map_class skips classes without a
positive. A class is predicted positive iff sigmoid(score) >= `threshold`
(default 0.5), computed as score >= log(threshold / (1 - threshold)) so that
no rounding of the sigmoid moves a score across the threshold. The `_top{k}`
variants (`cp_top3`, `of1_top3`...) predict instead the k best-scored classes
of each instance (ties: the lower class id first, `tf.math.top_k` order;
padded classes are never chosen while a valid one remains).

Example:

>>> labels = [[1., 0., 1.], [0., 1., 0.]]
>>> scores = [[2., -1., -3.], [0.5, 1., -2.]]
>>> multilabel_scores(labels, scores, ("map_class", "cf1", "of1_top1"))
{'map_class': 0.833..., 'cf1': 0.571..., 'of1_top1': 0.800...}
"""

import math
import re
from typing import Dict, Iterable, Optional, Tuple

import tensorflow as tf

COUNT_STATISTICS = ("cp", "cr", "cf1", "op", "or", "of1", "macro_f1")
MAP_METRICS = ("map_class", "map_sample")
# Metrics that need every score of a split at once (not streamable).
WHOLE_SPLIT_METRICS = ("map_class",)
DEFAULT_TOP_K = 3
MULTILABEL_METRICS = (MAP_METRICS + COUNT_STATISTICS +
                      tuple(f"{s}_top{DEFAULT_TOP_K}"
                            for s in COUNT_STATISTICS if s != "macro_f1"))

_COUNT_NAME = re.compile(
    r"^(cp|cr|cf1|op|or|of1|macro_f1)(?:_top([1-9][0-9]*))?$")


# ---------------------------------------------------------------- names ----

def parse_name(name: str) -> Optional[Tuple[str, Optional[int]]]:
  """Splits a multi-label metric name into (statistic, top_k).

  Args:
    name: `map_class`, `map_sample`, one of `COUNT_STATISTICS`, or a count
      statistic followed by `_top{k}`, k >= 1 (`cf1_top3`).

  Returns:
    (`map_class` | `map_sample` | a count statistic, k or None), or None when
    `name` is not a multi-label metric name.
  """
  if name in MAP_METRICS:
    return name, None
  match = _COUNT_NAME.match(name)
  if not match:
    return None
  return match.group(1), int(match.group(2)) if match.group(2) else None


def is_multilabel_name(name: str) -> bool:
  """Whether `name` is a metric of this module (see `parse_name`)."""
  return parse_name(name) is not None


def metric_name(statistic: str, top_k: Optional[int] = None) -> str:
  """The result key of a count statistic: `cf1`, or `cf1_top3` for top_k=3."""
  return statistic if top_k is None else f"{statistic}_top{top_k}"


# ----------------------------------------------------------------- maths ----

def relevance_and_mask(labels) -> Tuple[tf.Tensor, tf.Tensor]:
  """(positive, valid) float32 masks of `labels`: label >= 1, label >= 0."""
  labels = tf.cast(labels, tf.float32)
  return (tf.cast(labels >= 1., tf.float32),
          tf.cast(labels >= 0., tf.float32))


def average_precision(labels, scores) -> Tuple[tf.Tensor, tf.Tensor]:
  """Average precision of each row, ranking its entries by score.

  Equals `sklearn.metrics.average_precision_score(labels[i], scores[i])` on the
  valid entries of each row i, ties included (see the module docstring):
  `AP = 1/|P| sum_{i in P} |{j in P: s_j >= s_i}| / |{j valid: s_j >= s_i}|`.
  Costs one sort of each row, O(n log n) for rows of n entries.

  Args:
    labels: [num_lists, list_size] labels; >= 1 relevant, < 0 padding.
    scores: [num_lists, list_size] scores.

  Returns:
    (ap [num_lists] float32, 0 for a row without positive;
     has_positive [num_lists] bool).
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
  """AP of each class over the instances [batch_size, num_classes].

  Returns:
    (ap [num_classes], has_positive [num_classes] bool); see
    `average_precision`.
  """
  return average_precision(tf.transpose(labels), tf.transpose(scores))


def average_precision_per_instance(labels,
                                   scores) -> Tuple[tf.Tensor, tf.Tensor]:
  """AP of each instance over its classes, (ap, has_positive) [batch_size]."""
  return average_precision(labels, scores)


def _masked_mean(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
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
  """
  return _masked_mean(*average_precision_per_instance(labels, scores))


def _logit(threshold: float) -> float:
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
  """
  scores = tf.cast(scores, tf.float32)
  return scores >= tf.constant(_logit(threshold), tf.float32)


def top_k_predictions(scores, top_k: int = DEFAULT_TOP_K,
                      mask=None) -> tf.Tensor:
  """Predicted positives: the `top_k` best-scored classes of each instance.

  Args:
    scores: [batch_size, num_classes] scores.
    top_k: classes predicted per instance (all of them if fewer).
    mask: optional [batch_size, num_classes] bool, False for padded classes,
      which are chosen only after every valid class.

  Returns:
    [batch_size, num_classes] bool. Ties keep the lower class id
    (`tf.math.top_k` order).
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


def predictions(labels, scores, threshold: float = 0.5,
                top_k: Optional[int] = None) -> tf.Tensor:
  """Thresholded (`top_k` None) or top-k predictions, bool, padding masked."""
  _, valid = relevance_and_mask(labels)
  if top_k is None:
    predicted = threshold_predictions(scores, threshold)
  else:
    predicted = top_k_predictions(scores, top_k, mask=valid > 0.)
  return tf.logical_and(predicted, valid > 0.)


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
    {statistic: scalar} for every name of `COUNT_STATISTICS`, in the dtype of
    the counts; see the module docstring for the formulas.
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


def count_metrics(labels, scores, threshold: float = 0.5,
                  top_k: Optional[int] = None) -> Dict[str, tf.Tensor]:
  """All count statistics of one prediction rule, float32 scalars.

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    scores: [batch_size, num_classes] logits.
    threshold: probability threshold (ignored when `top_k` is set).
    top_k: None to threshold, else predict the k best classes per instance.

  Returns:
    {key: value} with keys `COUNT_STATISTICS`, suffixed with `_top{k}` when
    `top_k` is set (`cp_top3`...).
  """
  counts = class_counts(labels, predictions(labels, scores, threshold, top_k))
  return {metric_name(s, top_k): tf.cast(v, tf.float32)
          for s, v in statistics_from_counts(*counts).items()}


def metric_tensors(labels, scores, names: Iterable[str],
                   threshold: float = 0.5) -> Dict[str, tf.Tensor]:
  """The multi-label metrics `names` of a whole split, as float32 scalars.

  Graph-safe counterpart of `multilabel_scores`; each prediction rule is
  counted once however many of its statistics are asked.

  Raises:
    ValueError: for a name that `parse_name` rejects.
  """
  labels = tf.cast(labels, tf.float32)
  scores = tf.cast(scores, tf.float32)
  parsed = {}
  for name in names:
    parsed[name] = parse_name(name)
    if parsed[name] is None:
      raise ValueError(f"Unknown multi-label metric {name!r}; valid names: "
                       f"{', '.join(MAP_METRICS + COUNT_STATISTICS)}, or a "
                       "count statistic with _top<k> (k >= 1).")
  results, counted = {}, {}
  for name, (statistic, top_k) in parsed.items():
    if statistic == "map_class":
      results[name] = map_class(labels, scores)
    elif statistic == "map_sample":
      results[name] = map_sample(labels, scores)
    else:
      if top_k not in counted:
        counted[top_k] = count_metrics(labels, scores, threshold, top_k)
      results[name] = counted[top_k][name]
  return results


def multilabel_scores(labels, scores, names: Iterable[str] = MULTILABEL_METRICS,
                      threshold: float = 0.5) -> Dict[str, float]:
  """Multi-label metrics of a whole split (eager), {name: Python float}.

  Args:
    labels: [num_instances, num_classes] multi-hot labels, < 0 padding.
    scores: [num_instances, num_classes] logits.
    names: names as accepted by `parse_name`; default `MULTILABEL_METRICS`.
    threshold: probability threshold of the thresholded count metrics.

  Returns:
    A dict with exactly the names given, in their order.
  """
  names = list(names)
  tensors = metric_tensors(labels, scores, names, threshold)
  return {name: float(tensors[name].numpy()) for name in names}


# ----------------------------------------------------------- Keras metrics --

def _prepare(metric: tf.keras.metrics.Metric, y_true, y_pred, sample_weight):
  """Casts and checks the inputs of an update; returns (labels, scores)."""
  if sample_weight is not None:
    raise ValueError(f"Metric {metric.name!r} does not support sample_weight.")
  y_pred = tf.cast(y_pred, tf.float32)
  y_true = tf.cast(y_true, tf.float32)
  if y_pred.shape.rank != 2:
    raise ValueError(f"Metric {metric.name!r} expects [batch_size, num_classes]"
                     f" scores, got shape {y_pred.shape}.")
  return y_true, y_pred


def _prepare_and_build(metric, y_true, y_pred, sample_weight):
  """`_prepare`, then builds `metric` (its `_build(num_classes)`) on its
  first update; returns (labels, scores)."""
  labels, scores = _prepare(metric, y_true, y_pred, sample_weight)
  # pylint: disable=protected-access
  num_classes = _static_num_classes(metric, metric._num_classes, scores)
  if metric._num_classes is None:
    metric._build(num_classes)
  return labels, scores


def _static_num_classes(metric, built: Optional[int], y_pred) -> int:
  num_classes = y_pred.shape[-1]
  if num_classes is None:
    if built is None:
      raise ValueError(f"Metric {metric.name!r} needs a static number of "
                       "classes; pass num_classes.")
    return built
  if built is not None and built != num_classes:
    raise ValueError(f"Metric {metric.name!r} was built for {built} classes, "
                     f"got scores with {num_classes}.")
  return num_classes


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class MultiLabelCountMetric(tf.keras.metrics.Metric):
  """A count statistic (cp, cr, cf1, op, or, of1, macro_f1), streamed exactly.

  Accumulates the per-class counts Nc, Np, Ng [num_classes] (float64) over the
  updates, so that `result()` equals `count_metrics` on the concatenation of
  every batch, on any number of replicas (the counts are summed).

  Example:

  >>> metric = MultiLabelCountMetric("cf1", top_k=3)   # named cf1_top3
  >>> metric.update_state([[1., 0., 0., 1.]], [[3., 2., 1., 0.]])
  >>> float(metric.result())
  0.25

  Args:
    statistic: one of `COUNT_STATISTICS`.
    threshold: predicted positive iff sigmoid(score) >= threshold (ignored
      when `top_k` is set).
    top_k: None to threshold, else the k best-scored classes are predicted.
    num_classes: builds the weights now; otherwise they are built at the
      first update from the static last dimension of the scores.
    name: defaults to `metric_name(statistic, top_k)`.
    dtype: dtype of the result.
  """

  def __init__(self, statistic: str = "cf1", threshold: float = 0.5,
               top_k: Optional[int] = None, num_classes: Optional[int] = None,
               name: Optional[str] = None, dtype=None, **kwargs):
    if statistic not in COUNT_STATISTICS:
      raise ValueError(f"Unknown statistic {statistic!r}; valid ones: "
                       f"{', '.join(COUNT_STATISTICS)}.")
    _logit(threshold)  # Validates it.
    if top_k is not None and top_k < 1:
      raise ValueError(f"top_k must be >= 1, got {top_k}.")
    super().__init__(name=name or metric_name(statistic, top_k), dtype=dtype,
                     **kwargs)
    self._statistic = statistic
    self._threshold = float(threshold)
    self._top_k = top_k
    self._num_classes = None
    if num_classes is not None:
      self._build(int(num_classes))

  def _build(self, num_classes: int) -> None:
    def weight(name):
      return self.add_weight(name, shape=[num_classes], initializer="zeros",
                             dtype=tf.float64)
    self.true_positives = weight("true_positives")
    self.predicted_positives = weight("predicted_positives")
    self.label_positives = weight("label_positives")
    self._num_classes = num_classes

  def update_state(self, y_true, y_pred, sample_weight=None):
    """Adds the counts of a batch [batch_size, num_classes]."""
    labels, scores = _prepare_and_build(self, y_true, y_pred, sample_weight)
    nc, npred, ng = class_counts(
        labels, predictions(labels, scores, self._threshold, self._top_k))
    return tf.group(self.true_positives.assign_add(nc),
                    self.predicted_positives.assign_add(npred),
                    self.label_positives.assign_add(ng))

  def result(self):
    if self._num_classes is None:
      return tf.constant(0., self.dtype)
    values = statistics_from_counts(self.true_positives,
                                    self.predicted_positives,
                                    self.label_positives)
    return tf.cast(values[self._statistic], self.dtype)

  def reset_state(self):
    # Keras' default assigns a scalar 0, which [num_classes] weights refuse.
    for weight in self.variables:
      weight.assign(tf.zeros(weight.shape, weight.dtype))

  def get_config(self):
    config = super().get_config()
    config.update({"statistic": self._statistic, "threshold": self._threshold,
                   "top_k": self._top_k, "num_classes": self._num_classes})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class SampleMeanAveragePrecision(tf.keras.metrics.Metric):
  """`map_sample`, streamed exactly: mean AP of instances with a positive.

  Accumulates the sum of per-instance AP and the count of instances with a
  positive label (float64 scalars), so `result()` equals `map_sample` on the
  concatenation of every batch, on any number of replicas.

  Args:
    name: metric name.
    dtype: dtype of the result.
  """

  def __init__(self, name: str = "map_sample", dtype=None, **kwargs):
    super().__init__(name=name, dtype=dtype, **kwargs)
    self.total = self.add_weight("total", shape=[], initializer="zeros",
                                 dtype=tf.float64)
    self.count = self.add_weight("count", shape=[], initializer="zeros",
                                 dtype=tf.float64)

  def update_state(self, y_true, y_pred, sample_weight=None):
    """Adds the per-instance APs of a batch [batch_size, num_classes]."""
    labels, scores = _prepare(self, y_true, y_pred, sample_weight)
    ap, has_positive = average_precision_per_instance(labels, scores)
    has_positive = tf.cast(has_positive, tf.float64)
    return tf.group(
        self.total.assign_add(
            tf.reduce_sum(tf.cast(ap, tf.float64) * has_positive)),
        self.count.assign_add(tf.reduce_sum(has_positive)))

  def result(self):
    return tf.cast(tf.math.divide_no_nan(self.total, self.count), self.dtype)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ClassMeanAveragePrecision(tf.keras.metrics.Metric):
  """`map_class`: mean per-class AP over every instance seen since a reset.

  The per-class AP ranks all instances of the split, so it cannot be streamed:
  this metric keeps every label and score it is given, in two variables of
  shape [None, num_classes] that grow by concatenation (the whole split in
  memory, 8 bytes per instance and class), and `result()` sorts them all.
  Keras calls `result()` after every step, so an epoch of n steps costs
  O(n^2) sorting; for large splits compute it once with `map_class` or
  `rank4class_tf.metrics.evaluate_scores` instead.

  Exact on one replica only: under a multi-replica strategy each replica would
  keep its own part of the split (the training code refuses it there; see
  `WHOLE_SPLIT_METRICS`).

  Args:
    num_classes: builds the variables now; otherwise they are built at the
      first update from the static last dimension of the scores.
    name: metric name.
    dtype: dtype of the result.
  """

  def __init__(self, num_classes: Optional[int] = None,
               name: str = "map_class", dtype=None, **kwargs):
    super().__init__(name=name, dtype=dtype, **kwargs)
    self._num_classes = None
    if num_classes is not None:
      self._build(int(num_classes))

  def _build(self, num_classes: int) -> None:
    def variable(name):
      return tf.Variable(tf.zeros([0, num_classes]), trainable=False,
                         shape=tf.TensorShape([None, num_classes]), name=name)
    self.labels = variable("labels")
    self.scores = variable("scores")
    self._num_classes = num_classes

  def update_state(self, y_true, y_pred, sample_weight=None):
    """Appends a batch [batch_size, num_classes] to the stored split."""
    labels, scores = _prepare_and_build(self, y_true, y_pred, sample_weight)
    return tf.group(
        self.labels.assign(tf.concat([self.labels, labels], axis=0)),
        self.scores.assign(tf.concat([self.scores, scores], axis=0)))

  def result(self):
    if self._num_classes is None:
      return tf.constant(0., self.dtype)
    return tf.cast(map_class(self.labels, self.scores), self.dtype)

  def reset_state(self):
    if self._num_classes is not None:
      empty = tf.zeros([0, self._num_classes])
      self.labels.assign(empty)
      self.scores.assign(empty)

  def get_config(self):
    config = super().get_config()
    config.update({"num_classes": self._num_classes})
    return config


def get(name: str, num_classes: Optional[int] = None,
        threshold: float = 0.5) -> tf.keras.metrics.Metric:
  """Builds the Keras metric called `name` (see `parse_name`).

  Args:
    name: `map_class`, `map_sample`, a count statistic, or one with `_top{k}`.
    num_classes: optional; builds the weights at once.
    threshold: probability threshold of the thresholded count statistics.

  Returns:
    The metric, named `name`.

  Raises:
    ValueError: for any other name.
  """
  parsed = parse_name(name)
  if parsed is None:
    raise ValueError(f"Unknown multi-label metric {name!r}; valid names: "
                     f"{', '.join(MAP_METRICS + COUNT_STATISTICS)}, or a "
                     "count statistic with _top<k> (k >= 1).")
  statistic, top_k = parsed
  if statistic == "map_class":
    return ClassMeanAveragePrecision(num_classes=num_classes, name=name)
  if statistic == "map_sample":
    return SampleMeanAveragePrecision(name=name)
  return MultiLabelCountMetric(statistic, threshold=threshold, top_k=top_k,
                               num_classes=num_classes, name=name)
