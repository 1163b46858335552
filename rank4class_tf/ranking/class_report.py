"""Per-class report of a split's class scores: its entry points.

`class_report(labels, scores)` builds the report of single-label or
multi-label scores; its maths, and the report classes, are
`class_report_ops.py`.

`write(report, report_dir)` writes the report folder whole or not at all
(`fileio.atomic_folder`): `per_class.csv` (one row per class, in class id
order), `per_class.md` (the table sorted by support, with the macro and
weighted rows, and the most-confused pairs), `report.json` (the averages,
the context, and the mark of a class report), and for single-label reports
`confusion_matrix.csv`, `confusion_matrix.png` and `confused_pairs.md`. An
existing `report_dir` is replaced only when it holds a previous report's
files and nothing else (or nothing at all); anything else is refused.
The files' text is `class_report_tables.py`, the heat-map
`class_report_figure.py`.
"""

import json
import os
from typing import List, Mapping, Optional, Sequence

import numpy as np

from rank4class_tf import fileio
from rank4class_tf.ranking import class_report_ops
from rank4class_tf.ranking import class_report_tables


def class_report(labels, scores, class_names: Optional[Sequence[str]] = None,
                 threshold: float = 0.5) -> class_report_ops.Report:
  """`single_label_report` for class ids [num_examples], else
  `multi_label_report` (multi-hot [num_examples, num_classes]; `threshold`
  is used by multi-label reports only)."""
  if np.ndim(labels) == 1:
    return class_report_ops.single_label_report(labels, scores, class_names)
  return class_report_ops.multi_label_report(labels, scores, class_names,
                                             threshold)


def _is_previous_report(folder: str) -> bool:
  """Whether `folder` holds nothing, or a previous report's files and
  nothing else (its report.json bearing `class_report_tables.REPORT_MARK`)."""
  entries = os.listdir(folder)
  if not entries:
    return True
  if (not set(entries) <= set(class_report_tables.REPORT_FILES) or
      class_report_tables.REPORT_JSON not in entries):
    return False
  try:
    with open(os.path.join(folder, class_report_tables.REPORT_JSON),
              encoding="utf-8") as f:
      return json.load(f).get("report") == class_report_tables.REPORT_MARK
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


def write(report: class_report_ops.Report, report_dir: str,
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
  contents = class_report_tables.report_files(report, context)
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
