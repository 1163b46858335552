"""Multi-label classification metrics by name, and their Keras metrics.

The maths (pure TensorFlow) is in `multilabel_metric_ops`; this module names
the metrics, computes them on a whole split by name, and wraps them in Keras
metrics that stream exactly. Every metric takes `labels` [batch_size,
num_classes], multi-hot (a class is a positive of an instance iff its label
is >= 1, as in TF-Ranking; entries < 0 are padding and are ignored
everywhere), and `scores` [batch_size, num_classes] raw logits.

Ranking metrics (no threshold):

* `map_class`: the average precision (AP) of each class, ranking the
  instances by that class's score, averaged over the classes that have at
  least one positive instance (ML-GCN, ASL, MulCon "mAP").
* `map_sample`: the AP of each instance, ranking its classes, averaged over the
  instances that have at least one positive class. Instances without a
  positive are skipped; TF-Ranking's `MeanAveragePrecisionMetric` would count
  them as 0 instead.

AP equals `sklearn.metrics.average_precision_score`, ties included (see
`multilabel_metric_ops`).

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
no rounding of the sigmoid moves a score across the threshold. Two
variants restrict the predictions to the k best-scored classes of each
instance (ties: the lower class id first, `tf.math.top_k` order; padded
classes are never chosen):

* `_top{k}` (`cp_top3` ... `of1_top3`, `macro_f1_top3`): among its k best
  classes, an instance predicts those that also pass the threshold. This is
  ML-GCN's `AveragePrecisionMeter.overall_topk` (MulCon's code evaluates with
  it too), the definition behind every published CF1 / OF1 "top-3" figure
  on COCO and VOC: at most k classes per instance, fewer when fewer pass.
* `_best{k}` (`cp_best3` ... `of1_best3`): the k best classes whatever
  their scores, exactly k per instance (this package's `_top{k}` before
  issue 15).

Example:

>>> labels = [[1., 0., 1.], [0., 1., 0.]]
>>> scores = [[2., -1., -3.], [0.5, 1., -2.]]
>>> names = ("map_class", "cf1", "of1_top2", "of1_best2")
>>> values = multilabel_scores(labels, scores, names)
>>> {name: round(value, 3) for name, value in values.items()}
{'map_class': 0.833, 'cf1': 0.571, 'of1_top2': 0.667, 'of1_best2': 0.571}
"""

import re
from typing import Dict, Iterable, Optional, Tuple

import tensorflow as tf

from rank4class_tf.multilabel import metric_ops as multilabel_metric_ops

COUNT_STATISTICS = multilabel_metric_ops.COUNT_STATISTICS
MAP_METRICS = ("map_class", "map_sample")
# Metrics that need every score of a split at once (not streamable).
WHOLE_SPLIT_METRICS = ("map_class",)
DEFAULT_TOP_K = 3
MULTILABEL_METRICS = (MAP_METRICS + COUNT_STATISTICS +
                      tuple(f"{s}_top{DEFAULT_TOP_K}"
                            for s in COUNT_STATISTICS if s != "macro_f1"))

_COUNT_NAME = re.compile(
    r"^(cp|cr|cf1|op|or|of1|macro_f1)(?:_(top|best)([1-9][0-9]*))?$")
_VALID_NAMES = (f"{', '.join(MAP_METRICS + COUNT_STATISTICS)}, or a count "
                "statistic with _top<k> (the k best classes over the "
                "threshold) or _best<k> (the k best classes), k >= 1")


# ---------------------------------------------------------------- names ----

def parse_name(name: str
               ) -> Optional[Tuple[str, Optional[int], Optional[str]]]:
  """Splits a multi-label metric name into (statistic, top_k, top_k_rule).

  Args:
    name: `map_class`, `map_sample`, one of `COUNT_STATISTICS`, or a count
      statistic followed by `_top{k}` or `_best{k}`, k >= 1 (`cf1_top3`).

  Returns:
    (`map_class` | `map_sample` | a count statistic, k or None, "top" |
    "best" | None), or None when `name` is not a multi-label metric name.

  Example:

  >>> parse_name("cf1_top3"), parse_name("of1_best2"), parse_name("cp")
  (('cf1', 3, 'top'), ('of1', 2, 'best'), ('cp', None, None))
  """
  if name in MAP_METRICS:
    return name, None, None
  match = _COUNT_NAME.match(name)
  if not match:
    return None
  if not match.group(2):
    return match.group(1), None, None
  return match.group(1), int(match.group(3)), match.group(2)


def is_multilabel_name(name: str) -> bool:
  """Whether `name` is a metric of this module (see `parse_name`)."""
  return parse_name(name) is not None


def metric_name(statistic: str, top_k: Optional[int] = None,
                top_k_rule: str = "top") -> str:
  """The result key of a count statistic: `cf1`; `cf1_top3` for top_k=3;
  `cf1_best3` for top_k=3 and top_k_rule="best"."""
  return statistic if top_k is None else f"{statistic}_{top_k_rule}{top_k}"


# ------------------------------------------------- a whole split by name ----

def count_metrics(labels, scores, threshold: float = 0.5,
                  top_k: Optional[int] = None,
                  top_k_rule: str = "top") -> Dict[str, tf.Tensor]:
  """All count statistics of one prediction rule, float32 scalars.

  Args:
    labels: [batch_size, num_classes] multi-hot labels, < 0 padding.
    scores: [batch_size, num_classes] logits.
    threshold: probability threshold (ignored by the "best" rule).
    top_k: None to threshold, else predict among the k best classes per
      instance.
    top_k_rule: with `top_k`, "top" (the k best that pass the threshold) or
      "best" (the k best); see `multilabel_metric_ops.predictions`.

  Returns:
    {key: value} with keys `COUNT_STATISTICS`, suffixed with `_top{k}` or
    `_best{k}` when `top_k` is set (`cp_top3`...).
  """
  statistics = multilabel_metric_ops.count_statistics(
      labels, scores, threshold, top_k, top_k_rule)
  return {metric_name(s, top_k, top_k_rule): v for s, v in statistics.items()}


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
                       f"{_VALID_NAMES}.")
  results, counted = {}, {}
  for name, (statistic, top_k, rule) in parsed.items():
    if statistic == "map_class":
      results[name] = multilabel_metric_ops.map_class(labels, scores)
    elif statistic == "map_sample":
      results[name] = multilabel_metric_ops.map_sample(labels, scores)
    else:
      key = (top_k, rule)
      if key not in counted:
        counted[key] = count_metrics(labels, scores, threshold, top_k,
                                     rule or "top")
      results[name] = counted[key][name]
  return results


def multilabel_scores(labels, scores, names: Iterable[str] = MULTILABEL_METRICS,
                      threshold: float = 0.5) -> Dict[str, float]:
  """Multi-label metrics of a whole split (eager), {name: Python float}.

  Args:
    labels: [num_instances, num_classes] multi-hot labels, < 0 padding.
    scores: [num_instances, num_classes] logits.
    names: names as accepted by `parse_name`; default `MULTILABEL_METRICS`.
    threshold: probability threshold of the thresholded and `_top{k}` count
      metrics.

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

  >>> # Top 3: classes 0, 1, 2, of which only class 0 has sigmoid >= 0.5.
  >>> metric = MultiLabelCountMetric("op", top_k=3)   # named op_top3
  >>> metric.update_state([[1., 0., 0., 1.]], [[3., -1., -2., -3.]])
  >>> float(metric.result())
  1.0
  >>> metric = MultiLabelCountMetric("op", top_k=3, top_k_rule="best")
  >>> metric.update_state([[1., 0., 0., 1.]], [[3., -1., -2., -3.]])
  >>> metric.name, round(float(metric.result()), 4)
  ('op_best3', 0.3333)

  Args:
    statistic: one of `COUNT_STATISTICS`.
    threshold: predicted positive iff sigmoid(score) >= threshold (with
      `top_k`: only for the "top" rule).
    top_k: None to threshold, else predict among the k best-scored classes.
    top_k_rule: with `top_k`, "top" (the k best that pass the threshold,
      ML-GCN) or "best" (the k best whatever their scores).
    num_classes: builds the weights now; otherwise they are built at the
      first update from the static last dimension of the scores.
    name: defaults to `metric_name(statistic, top_k, top_k_rule)`.
    dtype: dtype of the result.
  """

  def __init__(self, statistic: str = "cf1", threshold: float = 0.5,
               top_k: Optional[int] = None, top_k_rule: str = "top",
               num_classes: Optional[int] = None,
               name: Optional[str] = None, dtype=None, **kwargs):
    if statistic not in COUNT_STATISTICS:
      raise ValueError(f"Unknown statistic {statistic!r}; valid ones: "
                       f"{', '.join(COUNT_STATISTICS)}.")
    multilabel_metric_ops.threshold_logit(threshold)  # Validates it.
    multilabel_metric_ops.check_top_k_rule(top_k_rule)
    if top_k is not None and top_k < 1:
      raise ValueError(f"top_k must be >= 1, got {top_k}.")
    super().__init__(name=name or metric_name(statistic, top_k, top_k_rule),
                     dtype=dtype, **kwargs)
    self._statistic = statistic
    self._threshold = float(threshold)
    self._top_k = top_k
    self._top_k_rule = top_k_rule
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
    nc, npred, ng = multilabel_metric_ops.class_counts(
        labels, multilabel_metric_ops.predictions(
            labels, scores, self._threshold, self._top_k, self._top_k_rule))
    return tf.group(self.true_positives.assign_add(nc),
                    self.predicted_positives.assign_add(npred),
                    self.label_positives.assign_add(ng))

  def result(self):
    if self._num_classes is None:
      return tf.constant(0., self.dtype)
    values = multilabel_metric_ops.statistics_from_counts(
        self.true_positives, self.predicted_positives, self.label_positives)
    return tf.cast(values[self._statistic], self.dtype)

  def reset_state(self):
    # Keras' default assigns a scalar 0, which [num_classes] weights refuse.
    for weight in self.variables:
      weight.assign(tf.zeros(weight.shape, weight.dtype))

  def get_config(self):
    config = super().get_config()
    config.update({"statistic": self._statistic, "threshold": self._threshold,
                   "top_k": self._top_k, "top_k_rule": self._top_k_rule,
                   "num_classes": self._num_classes})
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
    ap, has_positive = multilabel_metric_ops.average_precision_per_instance(
        labels, scores)
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
  O(n^2) sorting; for large splits compute it once with
  `multilabel_metric_ops.map_class` or
  `rank4class_tf.ranking.metrics.evaluate_scores` instead.

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
    return tf.cast(multilabel_metric_ops.map_class(self.labels, self.scores),
                   self.dtype)

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
    name: `map_class`, `map_sample`, a count statistic, or one with `_top{k}`
      or `_best{k}`.
    num_classes: optional; builds the weights at once.
    threshold: probability threshold of the thresholded and `_top{k}` count
      statistics.

  Returns:
    The metric, named `name`.

  Raises:
    ValueError: for any other name.
  """
  parsed = parse_name(name)
  if parsed is None:
    raise ValueError(f"Unknown multi-label metric {name!r}; valid names: "
                     f"{_VALID_NAMES}.")
  statistic, top_k, rule = parsed
  if statistic == "map_class":
    return ClassMeanAveragePrecision(num_classes=num_classes, name=name)
  if statistic == "map_sample":
    return SampleMeanAveragePrecision(name=name)
  return MultiLabelCountMetric(statistic, threshold=threshold, top_k=top_k,
                               top_k_rule=rule or "top",
                               num_classes=num_classes, name=name)
