"""Per-class report of a split's class scores: which classes a model gets
wrong, and what it takes them for.

Everything is computed from two arrays, the split's `labels` and `scores`
[num_examples, num_classes] (what `serving.split_scores` returns), in numpy;
matplotlib (Agg) is imported only to draw the heat-map.

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

`write(report, report_dir)` writes the report folder whole or not at all
(`fileio.atomic_folder`): `per_class.csv` (one row per class, in class id
order), `per_class.md` (the table sorted by support, with the macro and
weighted rows, and the most-confused pairs), `report.json` (the averages,
the context, and the mark of a class report), and for single-label reports
`confusion_matrix.csv`, `confusion_matrix.png` and `confused_pairs.md`. An
existing `report_dir` is replaced only when it holds a previous report's
files and nothing else (or nothing at all); anything else is refused.

Example:

>>> report = single_label_report([0, 1, 1], [[2., 1.], [3., 0.], [0., 1.]])
>>> report.recall.tolist(), report.precision.tolist(), report.mrr.tolist()
([1.0, 0.5], [0.5, 1.0], [1.0, 0.75])
>>> report.confusion.tolist()
[[1, 0], [1, 1]]
"""

import csv
import dataclasses
import io
import json
import math
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from rank4class_tf import fileio

PER_CLASS_CSV = "per_class.csv"
PER_CLASS_MD = "per_class.md"
CONFUSION_CSV = "confusion_matrix.csv"
CONFUSION_PNG = "confusion_matrix.png"
CONFUSED_PAIRS_MD = "confused_pairs.md"
REPORT_JSON = "report.json"
# Every file a report may hold: a folder of these and nothing else is a
# previous report, which `write` may replace.
REPORT_FILES = (PER_CLASS_CSV, PER_CLASS_MD, CONFUSION_CSV, CONFUSION_PNG,
                CONFUSED_PAIRS_MD, REPORT_JSON)
# `report.json`'s "report" value: the mark of a folder this module wrote.
REPORT_MARK = "rank4class_tf per-class report"

TOP_KS = (1, 5)
CONFUSED_PAIRS = 20
# The heat-map draws every class up to FULL_MATRIX_LIMIT classes; above it,
# the HEATMAP_CLASSES classes of the most-confused pairs. Counts are written
# in the cells of a drawn matrix of at most CELL_COUNT_LIMIT classes.
FULL_MATRIX_LIMIT = 40
HEATMAP_CLASSES = 30
CELL_COUNT_LIMIT = 30
_NAME_CHARS = 24


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


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
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
      precision=_ratio(true_positives, predicted),
      recall=_ratio(true_positives, support),
      f1=_ratio(2 * true_positives, support + predicted),
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
      precision=_ratio(true_positives, predicted),
      recall=_ratio(true_positives, support),
      f1=_ratio(2 * true_positives, support + predicted),
      ap=ap,
      threshold=float(threshold),
      num_examples=int(scores.shape[0]))


def class_report(labels, scores, class_names: Optional[Sequence[str]] = None,
                 threshold: float = 0.5) -> Report:
  """`single_label_report` for class ids [num_examples], else
  `multi_label_report` (multi-hot [num_examples, num_classes]; `threshold`
  is used by multi-label reports only)."""
  if np.ndim(labels) == 1:
    return single_label_report(labels, scores, class_names)
  return multi_label_report(labels, scores, class_names, threshold)


# ------------------------------------------------------------- heat-map ----

def heatmap_classes(confusion, limit: int = FULL_MATRIX_LIMIT,
                    shown: int = HEATMAP_CLASSES) -> Tuple[List[int], bool]:
  """The class ids the heat-map draws, in id order, and whether that is
  fewer than all of them.

  Up to `limit` classes: all. Above: the first `shown` classes met walking
  the confused pairs from the most confused (every class with an error when
  fewer have one; the first `shown` ids when the model makes no error).

  >>> confusion = np.eye(50, dtype=int) * 3
  >>> confusion[7, 40] = 5; confusion[3, 7] = 2; confusion[9, 1] = 1
  >>> heatmap_classes(confusion, shown=3)
  ([3, 7, 40], True)
  """
  confusion = np.asarray(confusion)
  num_classes = confusion.shape[0]
  if num_classes <= limit:
    return list(range(num_classes)), False
  chosen: List[int] = []
  for pair in confused_pairs(confusion, limit=num_classes * num_classes):
    for class_id in (pair.true, pair.predicted):
      if class_id not in chosen and len(chosen) < shown:
        chosen.append(class_id)
    if len(chosen) >= shown:
      break
  if not chosen:
    chosen = list(range(shown))
  return sorted(chosen), True


def _clip(name: str, chars: int = _NAME_CHARS) -> str:
  name = " ".join(name.split())
  return name if len(name) <= chars else name[:chars - 1] + "\u2026"


def confusion_title(report: SingleLabelReport, title: str = "") -> str:
  """The heat-map's title: what it shows, and which classes it leaves out.

  >>> report = single_label_report([0, 1], [[1., 0.], [1., 0.]], ["a", "b"])
  >>> confusion_title(report, "the test split")
  'Confusion matrix of the test split: 2 instances, 2 classes'
  """
  heading = ("Confusion matrix" + (f" of {title}" if title else "") +
             f": {report.num_examples} instances, {report.num_classes} "
             "classes")
  ids, reduced = heatmap_classes(report.confusion)
  if not reduced:
    return heading
  if np.trace(report.confusion) == report.confusion.sum():
    return (heading + f"\nonly {len(ids)} of {report.num_classes} classes "
            "drawn (no errors)")
  return (heading + f"\nonly {len(ids)} of {report.num_classes} classes "
          "drawn: those of the most-confused pairs; last column: predicted "
          "as any class not drawn")


def confusion_png(report: SingleLabelReport, title: str = "") -> bytes:
  """The confusion matrix heat-map as PNG bytes (see `heatmap_classes`).

  Rows: true classes (tick: name and support); columns: Top-1 classes.
  Colours: each cell's share of its row's instances (row-normalised over
  every class, drawn or not); counts written in the cells of a drawn matrix
  of at most `CELL_COUNT_LIMIT` classes. A reduced matrix gets a last column,
  "other classes": the row's instances predicted as a class not drawn. No
  date or version in the bytes: the same report draws the same file.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  confusion = report.confusion
  ids, reduced = heatmap_classes(confusion)
  counts = confusion[np.ix_(ids, ids)]
  column_names = [_clip(report.class_names[i]) for i in ids]
  if reduced:
    counts = np.concatenate(
        [counts, (confusion[ids].sum(axis=1) - counts.sum(axis=1))[:, None]],
        axis=1)
    column_names.append("(other classes)")
  support = report.support[ids]
  shares = _ratio(counts, np.broadcast_to(support[:, None], counts.shape))
  rows, cols = counts.shape
  side = 2.8 + 0.3 * max(rows, cols)
  fig, ax = plt.subplots(figsize=(max(6.0, side + 1.2), max(5.0, side)))
  try:
    image = ax.imshow(shares, cmap="Blues", vmin=0., vmax=1.,
                      interpolation="nearest", aspect="auto")
    colorbar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    colorbar.set_label("share of the true class's instances", fontsize=8)
    if max(rows, cols - reduced) <= CELL_COUNT_LIMIT:
      size = 8 if max(rows, cols) <= 12 else 6
      for i in range(rows):
        for j in range(cols):
          if counts[i, j]:
            ax.text(j, i, str(counts[i, j]), ha="center", va="center",
                    fontsize=size,
                    color="white" if shares[i, j] > 0.5 else "black")
    ax.set_xticks(range(cols))
    ax.set_xticklabels(column_names, rotation=90, fontsize=7)
    ax.set_yticks(range(rows))
    ax.set_yticklabels([f"{_clip(report.class_names[i])} ({support[k]})"
                        for k, i in enumerate(ids)], fontsize=7)
    ax.set_xlabel("Top-1 predicted class")
    ax.set_ylabel("true class (instances)")
    if reduced:
      ax.axvline(cols - 1.5, color="black", lw=0.8)
    heading = confusion_title(report, title)
    ax.set_title(heading, fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    # The title is also the PNG's Title text: a reader (and a test) finds
    # what the picture shows without drawing it.
    fig.savefig(buffer, format="png", dpi=100,
                metadata={"Software": None, "Title": heading})
    return buffer.getvalue()
  finally:
    plt.close(fig)


# ---------------------------------------------------------------- files ----

def _number(value: float) -> str:
  return "–" if math.isnan(value) else f"{value:.4f}"


def _cell(text: str) -> str:
  """A markdown table cell: one line, `|` escaped."""
  return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]],
           numeric_from: int) -> List[str]:
  lines = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i < numeric_from else "---:"
                          for i in range(len(header))) + "|"]
  lines += ["| " + " | ".join(row) + " |" for row in rows]
  return lines


_TITLES = {"precision": "precision", "recall": "recall", "f1": "F1",
           "mrr": "MRR", "ap": "AP"}


def _title(column: str) -> str:
  return _TITLES.get(column, column.replace("_accuracy", " accuracy")
                     .replace("top", "Top-"))


def per_class_csv(report: Report) -> str:
  """One row per class in class id order: class_id, class, support,
  predicted, then the report's columns (NaN as an empty field)."""
  columns = report.columns()
  buffer = io.StringIO()
  writer = csv.writer(buffer, lineterminator="\n")
  writer.writerow(["class_id", "class", "support", "predicted", *columns])
  for c, name in enumerate(report.class_names):
    writer.writerow([c, name, int(report.support[c]),
                     int(report.predicted[c])] +
                    ["" if math.isnan(v[c]) else repr(float(v[c]))
                     for v in columns.values()])
  return buffer.getvalue()


def confusion_csv(report: SingleLabelReport) -> str:
  """The confusion matrix: a header of the Top-1 class names, then one row
  per true class, its name then its counts."""
  buffer = io.StringIO()
  writer = csv.writer(buffer, lineterminator="\n")
  writer.writerow(["true \\ predicted", *report.class_names])
  for name, row in zip(report.class_names, report.confusion):
    writer.writerow([name, *(int(v) for v in row)])
  return buffer.getvalue()


def confused_pairs_markdown(report: SingleLabelReport,
                            limit: int = CONFUSED_PAIRS) -> List[str]:
  """The most-confused pairs as markdown lines (a table, or a sentence)."""
  pairs = report.confused_pairs(limit)
  if not pairs:
    return ["No instance is misclassified: no confused pair."]
  names = report.class_names
  return _table(["true class", "predicted", "count", "share of true class"],
                [[_cell(names[p.true]), _cell(names[p.predicted]),
                  str(p.count), f"{p.share:.1%}"] for p in pairs],
                numeric_from=2)


def _context_line(context: Mapping[str, str]) -> List[str]:
  if not context:
    return []
  return [", ".join(f"{key}: `{value}`" for key, value in context.items()),
          ""]


def per_class_markdown(report: Report,
                       context: Optional[Mapping[str, str]] = None) -> str:
  """The per-class table sorted by support (largest first, then class id),
  a macro-average and a weighted-average row, and for single-label reports
  the most-confused pairs."""
  columns = report.columns()
  lines = ["# Per-class report", ""] + _context_line(context or {})
  kind = "multi-label" if report.multi_label else "single-label"
  lines.append(f"{report.num_examples} instances, {report.num_classes} "
               f"classes ({kind}).")
  if report.multi_label:
    lines.append(
        f"Support: the class's positives. Precision, recall and F1 of the "
        f"predictions sigmoid(score) >= {report.threshold:g}; AP: average "
        "precision of the instances ranked by the class's score (– without "
        "positive).")
  else:
    lines.append(
        "Support: the class's instances. Precision, recall and F1 of the "
        "Top-1 prediction; Top-k accuracy and MRR of the class's instances "
        "(– without instances).")
  lines.append("Macro: unweighted mean over the classes; weighted: by "
               "support.")
  lines.append("")
  order = sorted(range(report.num_classes),
                 key=lambda c: (-int(report.support[c]), c))
  rows = [[_cell(report.class_names[c]), str(int(report.support[c]))] +
          [_number(v[c]) for v in columns.values()] for c in order]
  averages = report.averages()
  total = str(int(report.support.sum()))
  for name in ("macro", "weighted"):
    rows.append([f"**{name} average**", total] +
                [_number(averages[name][column]) for column in columns])
  lines += _table(["class", "support", *(_title(c) for c in columns)], rows,
                  numeric_from=1)
  lines.append("")
  if report.multi_label:
    lines.append("No confusion matrix: an instance of multi-label data has "
                 "several true classes, none to cross with one predicted "
                 "class.")
  else:
    lines += [f"## Most-confused pairs (true -> Top-1 class, at most "
              f"{CONFUSED_PAIRS})", ""]
    lines += confused_pairs_markdown(report)
    lines += ["", f"Counts: [{CONFUSION_CSV}]({CONFUSION_CSV}); heat-map: "
              f"[{CONFUSION_PNG}]({CONFUSION_PNG})."]
  return "\n".join(lines) + "\n"


def _json_number(value: float) -> Optional[float]:
  return None if math.isnan(value) else value


def report_json(report: Report, context: Optional[Mapping[str, str]] = None,
                files: Sequence[str] = ()) -> str:
  """The report's mark, context, sizes and averages as JSON."""
  value = {
      "report": REPORT_MARK,
      "labels": "multi-label" if report.multi_label else "single-label",
      "context": dict(context or {}),
      "num_examples": report.num_examples,
      "num_classes": report.num_classes,
      "files": list(files),
      **{name: {k: _json_number(v) for k, v in values.items()}
         for name, values in report.averages().items()},
  }
  if report.multi_label:
    value["threshold"] = report.threshold
  return json.dumps(value, indent=1, sort_keys=True) + "\n"


def report_files(report: Report, context: Optional[Mapping[str, str]] = None
                ) -> Dict[str, bytes]:
  """{file name: bytes} of every file of the report folder."""
  files = {PER_CLASS_CSV: per_class_csv(report),
           PER_CLASS_MD: per_class_markdown(report, context)}
  if not report.multi_label:
    split = (context or {}).get("split")
    title = f"the {split} split" if split else ""
    files[CONFUSION_CSV] = confusion_csv(report)
    files[CONFUSION_PNG] = confusion_png(report, title)
    files[CONFUSED_PAIRS_MD] = "\n".join(
        ["# Most-confused pairs", ""] + _context_line(context or {}) +
        confused_pairs_markdown(report)) + "\n"
  files[REPORT_JSON] = report_json(report, context,
                                   sorted([*files, REPORT_JSON]))
  return {name: data if isinstance(data, bytes) else data.encode("utf-8")
          for name, data in files.items()}


# --------------------------------------------------------------- folder ----

def _is_previous_report(folder: str) -> bool:
  """Whether `folder` holds nothing, or a previous report's files and
  nothing else (its report.json bearing `REPORT_MARK`)."""
  entries = os.listdir(folder)
  if not entries:
    return True
  if not set(entries) <= set(REPORT_FILES) or REPORT_JSON not in entries:
    return False
  try:
    with open(os.path.join(folder, REPORT_JSON), encoding="utf-8") as f:
      return json.load(f).get("report") == REPORT_MARK
  except (OSError, ValueError, AttributeError):
    return False


def check_report_dir(report_dir: str) -> None:
  """Raises ValueError, naming `report_dir`, unless a report can go there:
  a new folder whose parent exists or can be made, an empty folder, or a
  previous report's folder (replaced). Changes nothing on disk.
  """
  if not report_dir or not report_dir.strip():
    raise ValueError("`report_dir` is empty: give the folder the report "
                     "goes to.")
  fileio.check_output_folder(report_dir, "report_dir", _is_previous_report,
                             "a previous per-class report",
                             "a previous report's folder")
  path = os.path.abspath(report_dir)
  ancestor = os.path.dirname(path)
  while not os.path.lexists(ancestor):
    ancestor = os.path.dirname(ancestor)
  if not os.path.isdir(ancestor):
    raise ValueError(f"`report_dir`={report_dir} cannot be made: {ancestor} "
                     "is a file.")
  if not os.access(ancestor, os.W_OK | os.X_OK):
    raise ValueError(f"`report_dir`={report_dir} cannot be made: no "
                     f"permission to write in {ancestor}.")


def _missing_folders(folder: str) -> List[str]:
  """The ancestors of `folder` (itself included) that do not exist yet,
  outermost first."""
  missing = []
  while not os.path.lexists(folder):
    missing.append(folder)
    folder = os.path.dirname(folder)
  return missing[::-1]


def write(report: Report, report_dir: str,
          context: Optional[Mapping[str, str]] = None) -> List[str]:
  """Writes the report folder whole, or nothing.

  Every file is made in memory first (the heat-map drawn), then written to a
  temporary sibling folder and renamed to `report_dir`
  (`fileio.atomic_folder`); on any error the temporary folder and any
  parent folder made for it are removed. An existing `report_dir` is
  replaced only if `check_report_dir` accepts it (checked again just before
  the rename).

  Args:
    report: a `SingleLabelReport` or `MultiLabelReport`.
    report_dir: the folder to write.
    context: {name: value} shown at the top of the markdown files and kept
      in report.json (e.g. the model_dir, export and split).

  Returns:
    The paths of the files written.

  Raises:
    ValueError: naming `report_dir` when it is refused or cannot be written.
  """
  check_report_dir(report_dir)
  path = os.path.abspath(report_dir)
  contents = report_files(report, context)
  made = _missing_folders(os.path.dirname(path))
  try:
    with fileio.atomic_folder(path) as tmp:
      for name, data in contents.items():
        with open(os.path.join(tmp, name), "wb") as f:
          f.write(data)
          f.flush()
          os.fsync(f.fileno())
      check_report_dir(report_dir)  # Nothing else arrived meanwhile.
  except (OSError, ValueError) as e:
    for folder in reversed(made):
      try:
        os.rmdir(folder)
      except OSError:
        break
    if isinstance(e, ValueError):
      raise
    raise ValueError(f"`report_dir`={report_dir} cannot be written "
                     f"({e.strerror or e}); nothing was written.") from None
  return [os.path.join(report_dir, name) for name in contents]
