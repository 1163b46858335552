"""What a data set holds, before a model trains on it: `inspect`.

`inspect(data, preprocessor)` reads every split of a `ClassificationData`
once, in batches (`data.dataset(split)`, the pairs training reads), and
returns a report (a JSON-ready dict) of:

* every split: its instances, the instances of each class (for multi-label
  data: the instances that have the class), the imbalance ratio (the largest
  class count over the smallest, among the classes the split has) and the
  classes it lacks;
* multi-label data: how many labels each instance has;
* exact duplicates: `rows`, the instances equal to an earlier instance of
  the same split; `distinct`, the instances that occur more than once;
  `conflicting_labels`, the rows repeating an earlier instance with another
  label. Text compares the raw strings, images and feature vectors their
  values (and shapes);
* leakage: for each split after train, how many of its instances also occur
  in an earlier split (validation in train; test in train, in validation),
  with the first one. Data sets whose validation split is their test split
  (`catalog.VALIDATION_IS_TEST`) leave that pair out;
* text, tokenized with the run's tokenizer (`text.TextPreprocessor`): the
  tokens per instance as training packs them ([CLS] and [SEP] counted:
  `num_segments + 1` special tokens), their 50/90/95/99th percentiles and
  maximum (the q-th percentile is the smallest length that at least q% of
  the instances do not exceed), how many are longer than the preprocessor's
  `seq_length` and will be truncated, the share of tokens that are the
  vocabulary's `[UNK]`, and the empty or whitespace-only texts;
* images: the raw images' height and width percentiles; for `image_folder`
  with its `data_dir`, the image files left out when it was loaded
  (`skip_bad_records`) and those that cannot be decoded, with the first few
  paths;
* numeric feature vectors (`tabular_files`): each feature's mean, standard
  deviation, minimum and maximum per split, and the features constant in
  train.

The report's `warnings` say in plain words what deserves a look before
training (thresholds: `FEW_TRAIN_INSTANCES`, `IMBALANCE_WARNING`,
`UNKNOWN_WARNING`, `TRUNCATED_WARNING`; any duplicate, leaked instance,
empty text, class missing from a split, undecodable image or constant
feature), e.g. "12 test texts also appear in train (leakage)". They speak in
argument terms (`max_seq_length`); a binary shows them as its flags.
`summary(report)` is one screen of plain text; `write(report, output_dir)`
writes `inspection.json` and the class-count bar chart `class_counts.png`,
each atomically (`fileio`), into a new or empty folder or a previous
inspection's, never into a folder holding other files (`check_output_dir`).

Only per-instance numbers (token counts, image sizes, 16-byte digests of
the instances, for duplicates) are kept while reading, never the instances
themselves.
"""

import hashlib
import io
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf import fileio
from rank4class_tf.data import contract
from rank4class_tf.data import text
from rank4class_tf.data import image_files as image_files_lib
from rank4class_tf.data.inspect_splits import (  # pylint: disable=g-multiple-import,unused-import
    BATCH_SIZE, EXAMPLES, PERCENTILES, TEXT_CHARS, UNKNOWN_TOKEN, _Split,
    _clip, _leakage, _percent, _read_split, _share, _split_report,
    _unknown_id,
    percentiles)

REPORT_FILE = "inspection.json"
CHART_FILE = "class_counts.png"
# Warnings: a class with fewer train instances than this; a split whose
# largest class has this many times the smallest's instances; a share of
# [UNK] tokens, of truncated texts above these.
FEW_TRAIN_INSTANCES = 5
IMBALANCE_WARNING = 10.0
UNKNOWN_WARNING = 0.01
TRUNCATED_WARNING = 0.05
# Lines of the per-class table in `summary` (more: the smallest and largest).
CLASS_LINES = 20

_NOUNS = {"text": "texts", "image": "images", "numeric": "rows"}


def kind_of(data: contract.ClassificationData) -> str:
  """`text`, `image` or `numeric`: raw strings, images (rank-3 instances),
  or feature vectors."""
  if data.is_text:
    return "text"
  if len(data.instance_shape) == 1 and data.preprocessing is None:
    return "numeric"
  return "image"


def inspect(data: contract.ClassificationData,
            preprocessor: Optional[text.TextPreprocessor] = None,
            data_dir: Optional[str] = None,
            batch_size: int = BATCH_SIZE) -> Dict[str, Any]:
  """The report of `data` (see the module doc).

  Args:
    data: the data set, as training reads it.
    preprocessor: text data: the run's tokenizer and `seq_length`; None
      leaves the token statistics out.
    data_dir: `image_folder`: its folder, where the images left out when it
      was loaded are looked for.
    batch_size: instances read (and tokenized) at a time.

  Returns:
    A JSON-ready dict: `dataset`, `kind`, `multi_label`, `num_classes`,
    `class_names`, `splits` ({split: counts, duplicates, and per kind
    `tokens`, `image_height`, `features`, ...}), `leakage`, `tokenizer`,
    `image_files` and `warnings`.

  Raises:
    ValueError: one line naming the split, or the file, that cannot be read.
  """
  kind = kind_of(data)
  unknown_id = None
  if kind == "text" and preprocessor is not None:
    unknown_id = _unknown_id(preprocessor.vocab_file)
  read: Dict[str, _Split] = {}
  for split in data.split_names:
    read[split] = _read_split(data, split, kind, preprocessor, unknown_id,
                              batch_size, dict(read))
  report = {
      "dataset": data.name,
      "kind": kind,
      "multi_label": data.multi_label,
      "num_classes": data.num_classes,
      "class_names": list(data.class_names),
      "splits": {split: _split_report(s, data, kind)
                 for split, s in read.items()},
      "leakage": _leakage(read, data),
      "tokenizer": None,
      "image_files": None,
  }
  if kind == "text" and preprocessor is not None:
    report["tokenizer"] = {
        "vocab_file": preprocessor.vocab_file,
        "max_seq_length": preprocessor.seq_length,
        "unknown_token": UNKNOWN_TOKEN if unknown_id is not None else None}
  if data.name == "image_folder" and data_dir:
    report["image_files"] = image_files(
        data_dir, sum(s.size for s in read.values()))
  report["warnings"] = warnings(report)
  return report


def image_files(data_dir: str, loaded: int) -> Dict[str, Any]:
  """The image files of an `image_folder` and those loading left out.

  Counts the files `sources.image_folder.load_image_folder` reads
  (`<split>/<class>/*` with an image extension); when that is more than the
  `loaded` images (`skip_bad_records` left some out), decodes every file to
  find those that cannot be decoded. Nothing is decoded when none was left
  out.

  Returns:
    {`files`, `loaded`, `skipped` (files - loaded: undecodable, or labelled
    with a class train lacks), `undecodable`, `undecodable_paths` (the
    first `EXAMPLES`), `first_problem` (why the first cannot be decoded)}.
  """
  paths = []
  for split in contract.SPLITS:
    folder = os.path.join(data_dir, split)
    if not os.path.isdir(folder):
      continue
    for name in sorted(os.listdir(folder)):
      if not os.path.isdir(os.path.join(folder, name)):
        continue
      for file in sorted(os.listdir(os.path.join(folder, name))):
        path = os.path.join(folder, name, file)
        if (file.lower().endswith(image_files_lib.IMAGE_EXTENSIONS) and
            not os.path.isdir(path)):
          paths.append(path)
  bad, first_problem = [], None
  if len(paths) > loaded:
    for path in paths:
      problem = image_files_lib.undecodable(path)
      if problem:
        bad.append(path)
        first_problem = first_problem or problem
  return {"files": len(paths), "loaded": loaded,
          "skipped": max(0, len(paths) - loaded), "undecodable": len(bad),
          "undecodable_paths": bad[:EXAMPLES], "first_problem": first_problem}


def _names(names: Sequence[str], limit: int = EXAMPLES) -> str:
  shown = ", ".join(repr(n) for n in names[:limit])
  return shown + (f" and {len(names) - limit} more" if len(names) > limit
                  else "")


def _count(count: int, noun: str) -> str:
  """`1 text`, `2 texts` (`noun` is the plural)."""
  return f"{count} {noun if count != 1 else noun[:-1]}"


def _shown(example: Dict[str, Any]) -> str:
  return "" if example["instance"] is None else f": {example['instance']!r}"


def _verb(count: int, plural: str, singular: str) -> str:
  return plural if count != 1 else singular


def warnings(report: Dict[str, Any]) -> List[str]:
  """What deserves a look before training, one plain sentence each (see
  the module doc for the thresholds)."""
  out = []
  splits = report["splits"]
  noun = _NOUNS[report["kind"]]
  train = splits.get("train")
  if train:
    few = [(name, count) for name, count in train["class_counts"].items()
           if 0 < count < FEW_TRAIN_INSTANCES]
    for name, count in few[:3]:
      out.append(f"class {name!r} has {count} train "
                 f"instance{'s' if count != 1 else ''}.")
    if len(few) > 3:
      out.append(f"{len(few) - 3} more classes have fewer than "
                 f"{FEW_TRAIN_INSTANCES} train instances: "
                 f"{_names([n for n, _ in few[3:]])}.")
  for split, s in splits.items():
    missing = s["missing_classes"]
    if missing:
      out.append(f"{split} has no instance of "
                 + (f"class {missing[0]!r}." if len(missing) == 1 else
                    f"{len(missing)} classes: {_names(missing)}."))
    ratio = s["imbalance_ratio"]
    if ratio is not None and ratio >= IMBALANCE_WARNING:
      present = {n: c for n, c in s["class_counts"].items() if c > 0}
      largest = max(present, key=present.get)
      smallest = min(present, key=present.get)
      out.append(f"{split} is imbalanced: class {largest!r} has "
                 f"{present[largest]} instances, {smallest!r} "
                 f"{present[smallest]} ({ratio:.3g}x).")
    dup = s["duplicates"]
    if dup["rows"]:
      example = dup["example"]
      conflicts = dup["conflicting_labels"]
      out.append(f"{_count(dup['rows'], f'{split} {noun}')} "
                 f"{_verb(dup['rows'], 'repeat', 'repeats')} an earlier one "
                 f"({dup['distinct']} distinct"
                 + (f", {conflicts} with another label" if conflicts else "")
                 + f"), e.g. {split} row {example['row']} (= row "
                 f"{example['first_row']}){_shown(example)}.")
    empty = s.get("empty", {}).get("count")
    if empty:
      out.append(f"{_count(empty, f'{split} {noun}')} "
                 f"{_verb(empty, 'are', 'is')} empty or whitespace only "
                 f"(rows {', '.join(map(str, s['empty']['rows']))}"
                 f"{', ...' if empty > len(s['empty']['rows']) else ''}).")
    unlabelled = s.get("labels_per_instance", {}).get("0")
    if unlabelled:
      out.append(f"{_count(unlabelled, f'{split} instances')} "
                 f"{_verb(unlabelled, 'have', 'has')} no label.")
  for leak in report["leakage"]:
    count = leak["count"]
    if count:
      example = leak["example"]
      out.append(f"{_count(count, leak['split'] + ' ' + noun)} also "
                 f"{_verb(count, 'appear', 'appears')} in {leak['in']} "
                 f"(leakage), e.g. {leak['split']} row {example['row']} (= "
                 f"{leak['in']} row {example['row_in']}){_shown(example)}.")
  tokenizer = report["tokenizer"]
  if tokenizer:
    tokens = sum(s["total_tokens"] for s in splits.values())
    unknown = sum(s["unknown_tokens"] for s in splits.values())
    if tokens and unknown / tokens > UNKNOWN_WARNING:
      out.append(f"{_percent(unknown / tokens)} of tokens are "
                 f"{UNKNOWN_TOKEN} for this vocabulary "
                 f"({os.path.basename(tokenizer['vocab_file'])}).")
    size = sum(s["size"] for s in splits.values())
    truncated = sum(s["truncated"]["count"] for s in splits.values())
    if size and truncated / size > TRUNCATED_WARNING:
      out.append(f"{_percent(truncated / size)} of {noun} are longer than "
                 f"`max_seq_length`={tokenizer['max_seq_length']} tokens and "
                 "will be truncated.")
  files = report["image_files"]
  if files and files["undecodable"]:
    bad = files["undecodable"]
    out.append(f"{_count(bad, 'images')} cannot be decoded and "
               f"{_verb(bad, 'were', 'was')} left out: "
               f"{', '.join(files['undecodable_paths'])}"
               f"{', ...' if bad > len(files['undecodable_paths']) else ''}.")
  other = files["skipped"] - files["undecodable"] if files else 0
  if other:
    out.append(f"{_count(other, 'image files')} "
               f"{_verb(other, 'were', 'was')} left out for their label.")
  if train and train.get("constant_features"):
    constant = train["constant_features"]
    out.append(f"feature{'s' if len(constant) > 1 else ''} "
               f"{_names(constant)} {_verb(len(constant), 'are', 'is')} "
               "constant in train: no information for the model.")
  return out


def _table(rows: Sequence[Sequence[Any]]) -> List[str]:
  """Left-aligned first column, right-aligned others."""
  widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
  return ["  ".join(str(cell).ljust(w) if i == 0 else str(cell).rjust(w)
                    for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
          for row in rows]


def summary(report: Dict[str, Any]) -> str:
  """One screen of plain text: splits, classes, tokens or sizes, leakage,
  warnings."""
  splits = report["splits"]
  lines = []
  kind = report["kind"]
  total = sum(s["size"] for s in splits.values())
  label = "multi-label" if report["multi_label"] else "single-label"
  lines.append(f"{report['dataset']}: {_count(total, _NOUNS[kind])}, "
               f"{report['num_classes']} classes ({label})")
  tokenizer = report["tokenizer"]
  if tokenizer:
    lines.append(f"tokenizer: {tokenizer['vocab_file']}, `max_seq_length`="
                 f"{tokenizer['max_seq_length']} ([CLS] and [SEP] counted)")
  lines.append("")
  rows = [("split", "instances", "smallest class", "largest class",
           "imbalance", "missing classes")]
  for split, s in splits.items():
    present = {n: c for n, c in s["class_counts"].items() if c > 0}
    smallest = min(present, key=present.get) if present else None
    largest = max(present, key=present.get) if present else None
    rows.append((split, s["size"],
                 f"{_clip(smallest, 16)} {present[smallest]}" if present
                 else "-",
                 f"{_clip(largest, 16)} {present[largest]}" if present
                 else "-",
                 f"{s['imbalance_ratio']:.3g}" if s["imbalance_ratio"]
                 else "-",
                 len(s["missing_classes"])))
  lines += _table(rows) + [""]
  names = report["class_names"]
  first = next(iter(splits.values()))["class_counts"]
  shown = list(names)
  note = ""
  if len(names) > CLASS_LINES:
    ordered = sorted(names, key=lambda n: first[n])
    half = CLASS_LINES // 2
    shown = ordered[:half] + ordered[-half:]
    note = (f"({len(names) - len(shown)} more classes between them; every "
            f"class in {REPORT_FILE})")
  rows = [("class",) + tuple(splits)]
  rows += [(_clip(n, 24),) + tuple(s["class_counts"][n] for s in
                                   splits.values()) for n in shown]
  lines += _table(rows)
  if note:
    lines.append(note)
  lines.append("")
  if report["multi_label"]:
    rows = [("labels per instance", "mean", "0", "1", "2", "3+")]
    for split, s in splits.items():
      per = {int(k): v for k, v in s["labels_per_instance"].items()}
      rows.append((split, f"{s['mean_labels_per_instance']:.2f}",
                   per.get(0, 0), per.get(1, 0), per.get(2, 0),
                   sum(v for k, v in per.items() if k >= 3)))
    lines += _table(rows) + [""]
  if kind == "text":
    rows = [("tokens",) + tuple(f"p{q}" for q in PERCENTILES) +
            ("max", "truncated", UNKNOWN_TOKEN, "empty", "duplicates")]
    for split, s in splits.items():
      t = s.get("tokens")
      rows.append((split,) + (tuple(t[f"p{q}"] for q in PERCENTILES) +
                              (t["max"], f"{s['truncated']['count']} ("
                               f"{_percent(s['truncated']['share'])})",
                               _percent(s["unknown_share"]))
                              if t else ("-",) * 7) +
                  (s["empty"]["count"], s["duplicates"]["rows"]))
    lines += _table(rows) + [""]
  elif kind == "image":
    rows = [("image height x width",) + tuple(f"p{q}" for q in PERCENTILES) +
            ("max", "duplicates")]
    for split, s in splits.items():
      h, w = s.get("image_height", {}), s.get("image_width", {})
      rows.append((split,) + tuple(
          f"{h.get(k, '-')}x{w.get(k, '-')}"
          for k in [f"p{q}" for q in PERCENTILES] + ["max"]) +
                  (s["duplicates"]["rows"],))
    lines += _table(rows)
    files = report["image_files"]
    if files:
      lines.append(f"image files: {files['files']}, loaded {files['loaded']},"
                   f" undecodable {files['undecodable']}")
    lines.append("")
  elif "features" in next(iter(splits.values())):
    features = next(iter(splits.values()))["features"]
    rows = [(f"features ({next(iter(splits))})", "mean", "std", "min",
             "max")]
    for name, f in list(features.items())[:CLASS_LINES]:
      rows.append((_clip(name, 24),) + tuple(
          f"{f[k]:.4g}" for k in ("mean", "std", "min", "max")))
    lines += _table(rows)
    if len(features) > CLASS_LINES:
      lines.append(f"({len(features) - CLASS_LINES} more features in "
                   f"{REPORT_FILE})")
    lines.append("duplicate rows: " + ", ".join(
        f"{split} {s['duplicates']['rows']}" for split, s in splits.items()))
    lines.append("")
  leaks = [f"{leak['count']} of {splits[leak['split']]['size']} "
           f"{leak['split']} in {leak['in']}"
           for leak in report["leakage"]]
  lines.append("leakage (exact duplicates across splits): " +
               (", ".join(leaks) if leaks else "-"))
  lines.append("")
  if report["warnings"]:
    lines.append("warnings:")
    lines += [f"  - {w}" for w in report["warnings"]]
  else:
    lines.append("warnings: none")
  return "\n".join(lines)


def class_count_chart(report: Dict[str, Any]) -> bytes:
  """The class-count bar chart as PNG bytes: one group of bars per class,
  one bar per split (matplotlib, Agg; no date or version in the bytes)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  names = report["class_names"]
  splits = report["splits"]
  fig, ax = plt.subplots(figsize=(min(40.0, max(6.4, 0.35 * len(names) *
                                                max(1, len(splits)) / 2)),
                                  4.8))
  try:
    width = 0.8 / max(1, len(splits))
    for j, (split, s) in enumerate(splits.items()):
      ax.bar([i - 0.4 + width * (j + 0.5) for i in range(len(names))],
             [s["class_counts"][n] for n in names], width, label=split)
    if len(names) <= 100:
      ax.set_xticks(range(len(names)))
      ax.set_xticklabels([_clip(n, 20) for n in names], rotation=60,
                         ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_ylabel("instances" + (" with the class" if report["multi_label"]
                                 else ""))
    ax.set_title(f"{report['dataset']}: instances per class")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()
  finally:
    plt.close(fig)


def _is_previous_inspection(folder: str) -> bool:
  """Whether `folder` holds nothing, or a previous inspection's files and
  nothing else: `inspection.json` (an inspection report), `class_counts.png`
  and the temporary files of an interrupted write of them."""
  entries = os.listdir(folder)
  ours = (REPORT_FILE, CHART_FILE)
  for name in entries:
    if name not in ours and not any(
        name.startswith(f".{own}{fileio.TMP_MARK}") for own in ours):
      return False
  if REPORT_FILE not in entries:
    return not any(name in ours for name in entries)
  try:
    with open(os.path.join(folder, REPORT_FILE), encoding="utf-8") as f:
      report = json.load(f)
  except (OSError, ValueError):
    return False
  return isinstance(report, dict) and {"dataset", "splits",
                                       "warnings"} <= set(report)


def check_output_dir(output_dir: str) -> None:
  """Raises ValueError, naming `output_dir`, unless an inspection can go
  there: a new folder, an empty one, or a previous inspection's (its
  files are replaced). A folder holding anything else (a user's files) is
  refused, as `evaluate`'s `report_dir` is. Changes nothing on disk."""
  if not output_dir or not output_dir.strip():
    raise ValueError("`output_dir` is empty: give the folder the inspection "
                     "goes to.")
  fileio.check_output_folder(
      output_dir, "output_dir", _is_previous_inspection,
      f"a previous inspection ({REPORT_FILE}, {CHART_FILE})",
      "a previous inspection's folder")


def write(report: Dict[str, Any], output_dir: str) -> Tuple[str, str]:
  """Writes `inspection.json` and `class_counts.png` into `output_dir` (made
  if missing), each atomically: the chart is drawn before either is written,
  and a failed write leaves that file as it was. An existing `output_dir`
  is written only if `check_output_dir` accepts it.

  Returns:
    The two paths.

  Raises:
    ValueError: naming the folder or file that cannot be written, or the
      folder when it is refused.
  """
  check_output_dir(output_dir)
  chart = class_count_chart(report)
  try:
    os.makedirs(output_dir, exist_ok=True)
  except OSError as e:
    raise ValueError(f"`output_dir`={output_dir}: cannot be made "
                     f"({e.strerror or e}).") from None
  report_path = os.path.join(output_dir, REPORT_FILE)
  chart_path = os.path.join(output_dir, CHART_FILE)
  for path, write_file, binary in (
      (report_path, lambda f: json.dump(report, f, indent=1, sort_keys=True),
       False),
      (chart_path, lambda f: f.write(chart), True)):
    try:
      fileio.write_atomically(path, write_file, binary=binary)
    except OSError as e:
      raise ValueError(f"{path}: cannot be written "
                       f"({e.strerror or e}).") from None
  return report_path, chart_path
