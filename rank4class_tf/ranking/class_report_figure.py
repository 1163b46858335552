"""The per-class report's figure: the confusion matrix heat-map
(`confusion_matrix.png`), drawn with matplotlib (Agg, imported only to draw).

The numbers it draws are `class_report_ops.py`'s; `class_report.py` writes it
into the report folder.
"""

import io
from typing import List, Tuple

import numpy as np

from rank4class_tf.ranking import class_report_ops

# The heat-map draws every class up to FULL_MATRIX_LIMIT classes; above it,
# the HEATMAP_CLASSES classes of the most-confused pairs. Counts are written
# in the cells of a drawn matrix of at most CELL_COUNT_LIMIT classes.
FULL_MATRIX_LIMIT = 40
HEATMAP_CLASSES = 30
CELL_COUNT_LIMIT = 30
_NAME_CHARS = 24

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
  for pair in class_report_ops.confused_pairs(
      confusion, limit=num_classes * num_classes):
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


def confusion_title(report: class_report_ops.SingleLabelReport,
                    title: str = "") -> str:
  """The heat-map's title: what it shows, and which classes it leaves out.

  >>> report = class_report_ops.single_label_report(
  ...     [0, 1], [[1., 0.], [1., 0.]], ["a", "b"])
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


def confusion_png(report: class_report_ops.SingleLabelReport,
                  title: str = "") -> bytes:
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
  shares = class_report_ops.ratio(
      counts, np.broadcast_to(support[:, None], counts.shape))
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
