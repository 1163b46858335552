"""The per-class report's tables: the text of each file of the report folder
(`per_class.csv`, `per_class.md`, `confusion_matrix.csv`, `confused_pairs.md`,
`report.json`), and `report_files`, every file's bytes.

The numbers are `class_report_ops.py`'s, the heat-map
`class_report_figure.py`'s; `class_report.py` writes the folder.
"""

import csv
import io
import json
import math
from typing import Dict, List, Mapping, Optional, Sequence

from rank4class_tf.ranking import class_report_figure
from rank4class_tf.ranking import class_report_ops

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
# `report.json`'s "report" value: the mark of a folder `class_report.write`
# wrote.
REPORT_MARK = "rank4class_tf per-class report"


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


def per_class_csv(report: class_report_ops.Report) -> str:
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


def confusion_csv(report: class_report_ops.SingleLabelReport) -> str:
  """The confusion matrix: a header of the Top-1 class names, then one row
  per true class, its name then its counts."""
  buffer = io.StringIO()
  writer = csv.writer(buffer, lineterminator="\n")
  writer.writerow(["true \\ predicted", *report.class_names])
  for name, row in zip(report.class_names, report.confusion):
    writer.writerow([name, *(int(v) for v in row)])
  return buffer.getvalue()


def confused_pairs_markdown(report: class_report_ops.SingleLabelReport,
                            limit: int = class_report_ops.CONFUSED_PAIRS
                            ) -> List[str]:
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


def per_class_markdown(report: class_report_ops.Report,
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
              f"{class_report_ops.CONFUSED_PAIRS})", ""]
    lines += confused_pairs_markdown(report)
    lines += ["", f"Counts: [{CONFUSION_CSV}]({CONFUSION_CSV}); heat-map: "
              f"[{CONFUSION_PNG}]({CONFUSION_PNG})."]
  return "\n".join(lines) + "\n"


def _json_number(value: float) -> Optional[float]:
  return None if math.isnan(value) else value


def report_json(report: class_report_ops.Report,
                context: Optional[Mapping[str, str]] = None,
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


def report_files(report: class_report_ops.Report,
                 context: Optional[Mapping[str, str]] = None
                 ) -> Dict[str, bytes]:
  """{file name: bytes} of every file of the report folder."""
  files = {PER_CLASS_CSV: per_class_csv(report),
           PER_CLASS_MD: per_class_markdown(report, context)}
  if not report.multi_label:
    split = (context or {}).get("split")
    title = f"the {split} split" if split else ""
    files[CONFUSION_CSV] = confusion_csv(report)
    files[CONFUSION_PNG] = class_report_figure.confusion_png(report, title)
    files[CONFUSED_PAIRS_MD] = "\n".join(
        ["# Most-confused pairs", ""] + _context_line(context or {}) +
        confused_pairs_markdown(report)) + "\n"
  files[REPORT_JSON] = report_json(report, context,
                                   sorted([*files, REPORT_JSON]))
  return {name: data if isinstance(data, bytes) else data.encode("utf-8")
          for name, data in files.items()}
