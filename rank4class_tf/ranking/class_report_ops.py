"""The per-class report's maths: per-class numbers of a split's class scores,
which classes a model gets wrong, and what it takes them for (numpy only).

Everything is computed from two arrays, the split's `labels` and `scores`
[num_examples, num_classes] (what `exported_ranker.split_scores` returns),
in numpy; matplotlib (Agg) is imported only to draw the heat-map
(`class_report_figure.py`).

**Single-label** labels (class ids [num_examples]). The Top-1 prediction of
an instance is its best-scored class, ties broken by `evaluate_scores`'
pessimistic rule (`ops.tie_broken_scores`): a class tied with the true class
is predicted before it, and among other tied classes the lower class id. The
rank of the true class y is therefore r = 1 + |{j != y: s_j >= s_y}|. Per
class c, with support n_c (its instances), p_c (instances predicted c) and
tp_c (instances of c predicted c):

```
precision_c = tp_c / p_c      recall_c = tp_c / n_c
F1_c = 2 tp_c / (n_c + p_c)   (each 0 where its denominator is 0)
top{k}_accuracy_c = mean over the instances of c of [r <= k]
mrr_c = mean over the instances of c of 1 / r
```

recall_c is the Top-1 accuracy of the class's instances. The macro average
is the unweighted mean over the classes the split has or the model predicts
(scikit-learn's `average="macro"`; Top-k and MRR over the classes the split
has, the only ones where they are defined), the weighted average weighs each
class by its support (scikit-learn's `average="weighted"`): the weighted
recall, Top-k and MRR are `evaluate_scores`' `top1_accuracy`,
`top{k}_accuracy` and `mrr` of the split. `confusion` [true class, Top-1
class] holds the counts, and `confused_pairs` its largest off-diagonal
cells.

**Multi-label** labels (multi-hot [num_examples, num_classes]; >= 1 a
positive, < 0 padding, left out everywhere). A class is predicted when
sigmoid(score) >= `threshold` (`metric_ops.threshold_predictions`' rule, so
the macro F1 is `evaluate_scores`' `macro_f1`). Per class: support (its
positives), precision, recall and F1 of the thresholded predictions, and the
average precision of the instances ranked by the class's score,

```
AP_c = 1/|P| sum_{i in P} |{j in P: s_j >= s_i}| / |{j valid: s_j >= s_i}|
```

over its positives P (scikit-learn's `average_precision_score`, tied scores
one threshold; undefined for a class without positive). Macro: P/R/F1 over
every class (scikit-learn's `average="macro"` on a multi-hot matrix), AP
over the classes with a positive (`map_class`); weighted: by support. There
is no confusion matrix: an instance has no single true class to cross with
a predicted one.

`class_report.py` builds a report of either kind (`class_report`) and
writes its folder (`write`); the folder's files are written by
`class_report_tables.py` (CSV, markdown, JSON) and `class_report_figure.py`
(the heat-map).

Example:

>>> report = single_label_report([0, 1, 1], [[2., 1.], [3., 0.], [0., 1.]])
>>> report.recall.tolist(), report.precision.tolist(), report.mrr.tolist()
([1.0, 0.5], [0.5, 1.0], [1.0, 0.75])
>>> report.confusion.tolist()
[[1, 0], [1, 1]]
"""

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

TOP_KS = (1, 5)
CONFUSED_PAIRS = 20


@dataclasses.dataclass(frozen=True)
class ConfusedPair:
  """One off-diagonal cell of the confusion matrix.

  Attributes:
    true: the true class id.
    predicted: the Top-1 class id.
    count: instances of `true` predicted `predicted`.
    share: `count` over the instances of `true`.
  """
  true: int
  predicted: int
  count: int
  share: float


@dataclasses.dataclass(frozen=True)
class SingleLabelReport:
  """Per-class numbers of single-label scores (see the module doc).

  Every per-class array is [num_classes], in class id order; the float ones
  are NaN where undefined (Top-k and MRR of a class without instances).

  Attributes:
    class_names: one name per class.
    support: int64 instances of each class.
    predicted: int64 instances whose Top-1 class is the class.
    precision, recall, f1: float64, of the Top-1 prediction.
    top_k: {k: float64 Top-k accuracy of the class's instances}.
    mrr: float64 mean reciprocal rank of the class's instances.
    confusion: int64 [num_classes, num_classes], [true class, Top-1 class].
  """
  class_names: Tuple[str, ...]
  support: np.ndarray
  predicted: np.ndarray
  precision: np.ndarray
  recall: np.ndarray
  f1: np.ndarray
  top_k: Dict[int, np.ndarray]
  mrr: np.ndarray
  confusion: np.ndarray

  multi_label = False

  @property
  def num_examples(self) -> int:
    return int(self.support.sum())

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  def columns(self) -> Dict[str, np.ndarray]:
    """{column name: [num_classes] values} of the per-class table."""
    return {"precision": self.precision, "recall": self.recall,
            "f1": self.f1,
            **{f"top{k}_accuracy": v for k, v in self.top_k.items()},
            "mrr": self.mrr}

  def averages(self) -> Dict[str, Dict[str, float]]:
    """{"macro": {column: value}, "weighted": {column: value}}."""
    present = (self.support > 0) | (self.predicted > 0)
    has_instances = self.support > 0
    macro, weighted = {}, {}
    for name, values in self.columns().items():
      counted = (present if name in ("precision", "recall", "f1")
                 else has_instances)
      macro[name] = _mean(values, counted)
      weighted[name] = _weighted_mean(values, self.support)
    return {"macro": macro, "weighted": weighted}

  def confused_pairs(self, limit: int = CONFUSED_PAIRS) -> List[ConfusedPair]:
    """The `limit` largest off-diagonal cells of `confusion`: by count, then
    by share of the true class (the smaller class first), then by class
    ids; cells of count 0 are left out."""
    return confused_pairs(self.confusion, limit)


@dataclasses.dataclass(frozen=True)
class MultiLabelReport:
  """Per-class numbers of multi-label scores (see the module doc).

  Attributes:
    class_names: one name per class.
    support: int64 positives of each class.
    predicted: int64 instances predicting the class at `threshold`.
    precision, recall, f1: float64, of the thresholded predictions.
    ap: float64 average precision, NaN for a class without positive.
    threshold: the probability threshold of the predictions.
    num_examples: the instances of the split.
  """
  class_names: Tuple[str, ...]
  support: np.ndarray
  predicted: np.ndarray
  precision: np.ndarray
  recall: np.ndarray
  f1: np.ndarray
  ap: np.ndarray
  threshold: float
  num_examples: int

  multi_label = True

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  def columns(self) -> Dict[str, np.ndarray]:
    return {"precision": self.precision, "recall": self.recall,
            "f1": self.f1, "ap": self.ap}

  def averages(self) -> Dict[str, Dict[str, float]]:
    everyone = np.ones(self.num_classes, bool)
    macro = {name: _mean(values, everyone if name != "ap"
                         else self.support > 0)
             for name, values in self.columns().items()}
    weighted = {name: _weighted_mean(values, self.support)
                for name, values in self.columns().items()}
    return {"macro": macro, "weighted": weighted}


Report = Union[SingleLabelReport, MultiLabelReport]


def _mean(values: np.ndarray, mask: np.ndarray) -> float:
  """Mean of `values` where `mask`; NaN when the mask is empty."""
  return float(values[mask].mean()) if mask.any() else math.nan


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
  """sum(w v) / sum(w) over the entries of positive weight; NaN if none."""
  mask = weights > 0
  if not mask.any():
    return math.nan
  return float((values[mask] * weights[mask]).sum() / weights[mask].sum())


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
  """numerator / denominator as float64, 0 where the denominator is 0."""
  numerator = numerator.astype(np.float64)
  denominator = denominator.astype(np.float64)
  return np.divide(numerator, denominator, out=np.zeros_like(numerator),
                   where=denominator > 0)


def _class_names(class_names: Optional[Sequence[str]],
                 num_classes: int) -> Tuple[str, ...]:
  if class_names is None:
    return tuple(str(i) for i in range(num_classes))
  class_names = tuple(str(n) for n in class_names)
  if len(class_names) != num_classes:
    raise ValueError(f"{len(class_names)} class names for scores of "
                     f"{num_classes} classes.")
  return class_names


def _scores(scores) -> np.ndarray:
  """Scores as a float array, checked; float32 stays float32 (50,000
  ImageNet instances x 1,000 classes: 200 MB, not 400)."""
  scores = np.asarray(scores)
  if not np.issubdtype(scores.dtype, np.floating):
    scores = scores.astype(np.float64)
  if scores.ndim != 2 or scores.shape[0] == 0 or scores.shape[1] == 0:
    raise ValueError(f"scores must be [num_examples, num_classes] with at "
                     f"least one of each, got shape {scores.shape}.")
  bad = int((~np.isfinite(scores).all(axis=1)).sum())
  if bad:
    raise ValueError(f"{bad} of {scores.shape[0]} instances have non-finite "
                     "scores (NaN or Inf): no report.")
  return scores


def top_ks(num_classes: int, ks: Sequence[int] = TOP_KS) -> Tuple[int, ...]:
  """The k of the Top-k columns: `ks` clipped to `num_classes`.

  >>> top_ks(10), top_ks(3), top_ks(1)
  ((1, 5), (1, 3), (1,))
  """
  return tuple(sorted({min(int(k), num_classes) for k in ks}))


def single_label_report(labels, scores,
                        class_names: Optional[Sequence[str]] = None,
                        ks: Sequence[int] = TOP_KS) -> SingleLabelReport:
  """Per-class precision, recall, F1, Top-k, MRR and the confusion matrix.

  Args:
    labels: class ids [num_examples], in [0, num_classes).
    scores: [num_examples, num_classes] scores, all finite.
    class_names: one name per class (default: the ids).
    ks: the k of the Top-k columns, clipped to num_classes (`top_ks`).

  Returns:
    A `SingleLabelReport`.

  Raises:
    ValueError: shapes that do not match, a label outside the classes,
      non-finite scores.
  """
  scores = _scores(scores)
  num_examples, num_classes = scores.shape
  labels = np.asarray(labels)
  if labels.shape != (num_examples,):
    raise ValueError(f"labels of shape {labels.shape} do not match scores of "
                     f"shape {scores.shape}: give one class id per instance.")
  if labels.size and not np.array_equal(labels, np.round(labels)):
    raise ValueError("labels must be class ids (integers).")
  labels = labels.astype(np.int64)
  outside = (labels < 0) | (labels >= num_classes)
  if outside.any():
    raise ValueError(f"{int(outside.sum())} labels are not class ids in "
                     f"[0, {num_classes}), e.g. {labels[outside][0]}.")
  names = _class_names(class_names, num_classes)
  rows = np.arange(num_examples)
  true_scores = scores[rows, labels]
  # r = 1 + the other classes scored at least as high (y counts itself).
  rank = (scores >= true_scores[:, None]).sum(axis=1)
  # Top-1 class: a class tied with the true class goes first, then the lower
  # class id among the other tied classes (`ops.tie_broken_scores`).
  best = scores.max(axis=1)
  others_at_best = scores == best[:, None]
  others_at_best[rows, labels] = False
  predicted_ids = np.where(others_at_best.any(axis=1),
                           others_at_best.argmax(axis=1), labels)
  confusion = np.zeros((num_classes, num_classes), np.int64)
  np.add.at(confusion, (labels, predicted_ids), 1)
  support = confusion.sum(axis=1)
  predicted = confusion.sum(axis=0)
  true_positives = np.diag(confusion)

  def per_class_mean(values):
    sums = np.bincount(labels, weights=values.astype(np.float64),
                       minlength=num_classes)
    means = np.full(num_classes, math.nan)
    np.divide(sums, support, out=means, where=support > 0)
    return means

  return SingleLabelReport(
      class_names=names,
      support=support,
      predicted=predicted,
      precision=ratio(true_positives, predicted),
      recall=ratio(true_positives, support),
      f1=ratio(2 * true_positives, support + predicted),
      top_k={k: per_class_mean(rank <= k) for k in top_ks(num_classes, ks)},
      mrr=per_class_mean(1.0 / rank),
      confusion=confusion)


def confused_pairs(confusion, limit: int = CONFUSED_PAIRS
                  ) -> List[ConfusedPair]:
  """The `limit` largest off-diagonal cells of a confusion matrix.

  Ordered by count, then by share of the true class's instances (the
  smaller class first), then by true and predicted class id; cells of
  count 0 are left out.

  >>> [(p.true, p.predicted, p.count) for p in confused_pairs(
  ...     [[5, 2, 0], [2, 1, 0], [0, 3, 0]])]
  [(2, 1, 3), (1, 0, 2), (0, 1, 2)]
  """
  confusion = np.asarray(confusion, np.int64)
  support = confusion.sum(axis=1)
  true, predicted = np.nonzero(confusion)
  keep = true != predicted
  true, predicted = true[keep], predicted[keep]
  counts = confusion[true, predicted]
  shares = counts / support[true]
  order = np.lexsort((predicted, true, -shares, -counts))[:limit]
  return [ConfusedPair(int(true[i]), int(predicted[i]), int(counts[i]),
                       float(shares[i])) for i in order]


def _average_precision(positive: np.ndarray, scores: np.ndarray) -> float:
  """AP of one list (its valid entries): tied scores one threshold."""
  num_positive = positive.sum()
  if not num_positive:
    return math.nan
  order = np.argsort(-scores, kind="stable")
  sorted_scores = scores[order]
  cum_positive = np.cumsum(positive[order])
  # The last entry tied with each entry: the counts at that entry's threshold.
  last_tied = np.searchsorted(-sorted_scores, -sorted_scores,
                              side="right") - 1
  precision = cum_positive[last_tied] / (last_tied + 1)
  return float((precision * positive[order]).sum() / num_positive)


def _threshold_logit(threshold: float) -> float:
  """log(t / (1 - t)): sigmoid(s) >= t iff s >= this (the rule of
  `metric_ops.threshold_predictions`, compared in float32 as there)."""
  if not 0. < threshold < 1.:
    raise ValueError(f"`threshold`={threshold!r} must be in (0, 1).")
  return math.log(threshold) - math.log1p(-threshold)


def multi_label_report(labels, scores,
                       class_names: Optional[Sequence[str]] = None,
                       threshold: float = 0.5) -> MultiLabelReport:
  """Per-class AP, and precision, recall and F1 at `threshold`.

  Args:
    labels: multi-hot [num_examples, num_classes]; >= 1 a positive, < 0
      padding (left out).
    scores: [num_examples, num_classes] logits, all finite.
    class_names: one name per class (default: the ids).
    threshold: a class is predicted when sigmoid(score) >= threshold.

  Returns:
    A `MultiLabelReport`.

  Raises:
    ValueError: shapes that do not match, non-finite scores, a threshold
      outside (0, 1).
  """
  scores = _scores(scores)
  labels = np.asarray(labels, np.float64)
  if labels.shape != scores.shape:
    raise ValueError(f"labels of shape {labels.shape} do not match scores of "
                     f"shape {scores.shape}.")
  logit = np.float32(_threshold_logit(threshold))
  names = _class_names(class_names, scores.shape[1])
  positive = labels >= 1.
  valid = labels >= 0.
  predicted_mask = (scores.astype(np.float32) >= logit) & valid
  support = positive.sum(axis=0).astype(np.int64)
  predicted = predicted_mask.sum(axis=0).astype(np.int64)
  true_positives = (predicted_mask & positive).sum(axis=0)
  ap = np.array([
      _average_precision(positive[valid[:, c], c], scores[valid[:, c], c])
      for c in range(scores.shape[1])])
  return MultiLabelReport(
      class_names=names,
      support=support,
      predicted=predicted,
      precision=ratio(true_positives, predicted),
      recall=ratio(true_positives, support),
      f1=ratio(2 * true_positives, support + predicted),
      ap=ap,
      threshold=float(threshold),
      num_examples=int(scores.shape[0]))

