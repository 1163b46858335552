"""A user's own text classification files, read and checked: `text_files`.

`--dataset=text_files --data_dir=DIR` reads one file per split from DIR,
named after the split: `train`, and optionally `validation` and `test`, each
`.csv`, `.tsv` or `.jsonl`, optionally gzipped (`train.csv.gz`), or a
folder in Keras' `text_dataset_from_directory` layout (`train/<class>/*.txt`,
one text a file, the class its folder's name; hidden entries, a name
starting with `.`, skipped and counted: `class_folders`):

* CSV and TSV have a header row naming the columns (or `Options.columns`);
  quoted fields (unless not `Options.quoted`) may hold the delimiter, quotes
  (doubled) and line breaks; a UTF-8 BOM and CRLF line ends are accepted.
* JSONL holds one JSON object per line.

The instance is the `text_column` (default `text`), the label the
`label_column` (default `label`): a class name, or an integer class id when
`class_names_file` names the classes (one a line, index = id; `read_as`
says which reading a label takes when the names are numbers). A label that
is a list makes the data set multi-label, and every row of every split must
then be so: a JSON list, a field that looks like one (`LIST_PATTERN`), or,
with `label_separator` set, every label (`anger` is then a list of one).
Without `class_names_file` the classes are the training labels' names,
sorted. Class names lose their surrounding whitespace (`labels.clean_labels`:
two spellings that differ only there are refused, never merged) and may hold
no control character (`class_name_problem`). A split without a file is cut
from the training file by a seeded stratified split (`split_seed`): 10%
each for validation and test, or for the one missing.

Nothing is guessed silently: a missing column, a column named twice, an
empty text or one that is not a string, a label that train never has, an
empty split, mixed label kinds (names and lists), bad UTF-8 or a CSV
quoting error stop with one line naming the file and line (or record) and
column. CSV fields have no size limit (Python's default, 128 KiB, is
lifted while a file is read). Plain Python, no TensorFlow: the sources turn
the rows into a `ClassificationData`; `labels` reads the labels as class ids,
and `streaming` applies the same rules to the files that stream.
"""

import codecs
import contextlib
import csv
import dataclasses
import gzip
import io
import json
import logging
import math
import os
import re
import struct
import sys
import unicodedata
from typing import (Callable, Collection, Dict, Iterable, Iterator, List,
                    Optional, Sequence, Tuple, Union)

SPLITS = ("train", "validation", "test")
FORMATS = (".csv", ".tsv", ".jsonl")
# The share of the training file cut for each missing split.
HELD_OUT_FRACTION = 0.1

Label = Union[str, Tuple[str, ...]]
Record = Union[Dict[str, object], str]  # A row, or why it is not one.
# A label field read as a JSON list of classes: `[` then a comma or a quote
# (`["joy", "love"]`, and Python's `['joy']`, refused as not JSON), or an
# empty list or a list of one id (`[]`, `[3]`). Any other field starting
# with `[` (`[urgent]`) is a class name. RE2 and Python read it alike
# (`streaming` matches it in TensorFlow).
LIST_PATTERN = r"(?s)\[(.*[,\"'].*|\s*[0-9]*\s*\])"
_LIST = re.compile(LIST_PATTERN)
# CSV fields of any size (Python's csv refuses one over 128 KiB by default);
# a C long on every platform.
FIELD_SIZE_LIMIT = min(sys.maxsize, 2**31 - 1)


@dataclasses.dataclass(frozen=True)
class Options:
  """How to read a user's data: where the instance and the label are, the
  classes, the split seed, and what to do with a bad record.

  Attributes:
    text: the text column (`text_column`).
    label: the label column or feature (`label_column`).
    label_separator: joins the names of a multi-label row in one field
      (empty: a multi-label row is a JSON list).
    class_names_file: one class name a line, index = class id (empty: the
      training labels, sorted).
    split_seed: seed of the stratified split that makes a missing split.
    feature_columns: tabular files: the numeric columns (empty: every
      column but the label).
    instance_feature: TFRecord / TFDS: the text or image feature (empty: the
      one there is besides the label).
    tfds_splits: TFDS: `split=expression` entries mapping our splits to
      TFDS split expressions.
    skip_bad_records: skip (and count) a row, record or image that cannot be
      read, instead of stopping at it.
    split_rule: how a missing split is cut from streamed train data
      (`splits.cut_parts`; `config.SPLIT_RULES`).
    columns: CSV / TSV without a header row: its columns' names, in order.
    quoted: CSV / TSV fields may be quoted (`"a, b"`); False: as written, as
      in IANA TSV (`shipped_text`). Not for streamed files (`streaming`).
  """
  text: str = "text"
  label: str = "label"
  label_separator: str = ""
  class_names_file: str = ""
  split_seed: int = 20220128
  feature_columns: Tuple[str, ...] = ()
  instance_feature: str = ""
  tfds_splits: Tuple[str, ...] = ()
  skip_bad_records: bool = False
  split_rule: str = "seed_file_record"
  columns: Tuple[str, ...] = ()
  quoted: bool = True


@dataclasses.dataclass(frozen=True)
class Rows:
  """The rows of one split: texts (or, for tabular files, feature vectors),
  and their labels as class names (a tuple of names for a multi-label row).

  `skipped` holds the one-line reason of every bad row left out
  (`skip_bad_records`)."""
  path: str
  texts: List
  labels: List[Label]
  places: List[str]  # Where each row is: `file:line`, or its own file.
  skipped: List[str] = dataclasses.field(default_factory=list)


def split_files(data_dir: Optional[str]) -> Dict[str, str]:
  """{split: its file} in `data_dir`; `train` must be there, the others may.

  Raises:
    ValueError: `data_dir` missing or not a folder, no train file, or two
      files for one split.
  """
  if not data_dir:
    raise ValueError("`data_dir` must name the folder holding the train "
                     "(and validation, test) files for `dataset`=text_files.")
  if not os.path.isdir(data_dir):
    raise ValueError(f"`data_dir`={data_dir}: not a folder.")
  found = {}
  names = sorted(os.listdir(data_dir))
  for split in SPLITS:
    mine = [n for n in names
            if any(n in (split + ext, split + ext + ".gz") for ext in FORMATS)
            or (n == split and os.path.isdir(os.path.join(data_dir, n)))]
    if len(mine) > 1:
      raise ValueError(f"`data_dir`={data_dir} holds {' and '.join(mine)}: "
                       f"one file per split.")
    if mine:
      found[split] = os.path.join(data_dir, mine[0])
  if "train" not in found:
    raise ValueError(f"`data_dir`={data_dir} holds no train file (train.csv, "
                     "train.tsv or train.jsonl, optionally .gz) or train/ "
                     "folder (train/<class>/*.txt).")
  return found


def _text(path: str) -> str:
  """The file's text: gunzipped if `.gz`, UTF-8 without a byte-order mark."""
  try:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
      raw = f.read()
  except (OSError, EOFError) as e:
    raise ValueError(f"{path}: cannot be read "
                     f"({getattr(e, 'strerror', None) or e}).") from None
  if raw.startswith(codecs.BOM_UTF8):
    raw = raw[len(codecs.BOM_UTF8):]
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as e:
    line = raw[:e.start].count(b"\n") + 1
    raise ValueError(f"{path}:{line}: not valid UTF-8.") from None


def class_name_problem(name: str) -> Optional[str]:
  """Why `name` cannot be a class name, or None: a control character (a
  tab, a line break, ...) would break the one `name<TAB>score` line per class
  that `predict` prints, and the one name a line of a class names file.

  >>> class_name_problem("joy") is None
  True
  >>> print(class_name_problem("a\\tb"))
  holds a control character ('\\t'): a class name is one printable line.
  """
  for char in name:
    if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
      return (f"holds a control character ({char!r}): a class name is one "
              "printable line.")
  return None


def _surrogate(value: str) -> Optional[str]:
  """The first lone surrogate of `value` (a JSON `\\ud83d` escape without
  its pair), escaped, or None."""
  try:
    value.encode("utf-8")  # At C speed; only a surrogate cannot be encoded.
  except UnicodeEncodeError as e:
    return value[e.start].encode("unicode_escape").decode("ascii")
  return None


def _json_kind(value) -> str:
  """What a JSON value is, for an error: `a number (42)`, `a list ([1])`."""
  shown = json.dumps(value, ensure_ascii=False)
  shown = shown if len(shown) <= 40 else shown[:37] + "..."
  if value is None:
    return "null"
  if isinstance(value, bool):
    return f"a boolean ({shown})"
  if isinstance(value, (int, float)):
    return f"a number ({shown})"
  if isinstance(value, list):
    return f"a list ({shown})"
  return f"an object ({shown})"


def text_problem(value, column: str) -> Optional[str]:
  """Why a row's text cannot be read, or None: it is not a string (a JSON
  number, list, object, null), blank, or holds a lone surrogate.

  >>> text_problem(42, "text")
  "column 'text' is a number (42), not a string."
  """
  if not isinstance(value, str):
    return f"column {column!r} is {_json_kind(value)}, not a string."
  if not value.strip():
    return f"column {column!r}: empty text."
  surrogate = _surrogate(value)
  if surrogate:
    return (f"column {column!r}: a lone surrogate ({surrogate}, half of a "
            "UTF-16 pair) is not text.")
  return None


def _unique_keys(pairs: List[Tuple[str, object]]) -> Dict[str, object]:
  """A JSON object's keys, refused when one is given twice (`json.loads`
  would keep the last silently)."""
  record = dict(pairs)
  if len(record) < len(pairs):
    seen = set()
    for key, _ in pairs:
      if key in seen:
        raise ValueError(f"key {key!r} given twice")
      seen.add(key)
  return record


# Parses one JSONL line (a str), refusing a key given twice.
JSON_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def _looks_like_list(value: str) -> bool:
  """Whether a label field is read as a JSON list (`LIST_PATTERN`)."""
  value = value.strip()
  return value.startswith("[") and _LIST.fullmatch(value) is not None


def check_header(path: str, header: Sequence[str]) -> None:
  """Refuses a header naming a column twice (a row, read by name, would
  keep the last silently)."""
  first = {}
  for number, name in enumerate(header, start=1):
    if name in first:
      raise ValueError(f"{path}:1: columns {first[name]} and {number} are "
                       f"both named {name!r}; name every column once.")
    first[name] = number


def check_columns(place: str, wanted: Iterable[Tuple[str, str]],
                  columns: Collection[str]) -> None:
  """Refuses, naming `place` (`file:line`), the first column of `wanted`
  (`(column, flag)` pairs) missing from `columns` (a header, or a row's
  record), with the flag that names another column."""
  for column, flag in wanted:
    if column not in columns:
      raise ValueError(f"{place}: no column {column!r} (columns: "
                       f"{', '.join(map(str, columns))}); name it with "
                       f"`{flag}`.")


@contextlib.contextmanager
def no_field_limit():
  """Lifts `csv.field_size_limit` (128 KiB by default) to `FIELD_SIZE_LIMIT`
  while a file is read, and restores it after."""
  old = csv.field_size_limit(FIELD_SIZE_LIMIT)
  try:
    yield
  finally:
    csv.field_size_limit(old)


def fits_float32(value: float) -> bool:
  """Whether a finite number stays finite as a float32 (the model's
  features): not beyond +-3.4028235e38 once rounded, as `1e39` is.

  >>> fits_float32(3.4028235e38), fits_float32(1e39), fits_float32(-1e39)
  (True, False, False)
  """
  try:
    struct.pack("<f", value)  # Rounds as float32 does; beyond: overflow.
  except OverflowError:
    return False
  return True


def _records(path: str, options: "Options") -> List[Tuple[int, Record]]:
  """(line, record) of every row: CSV / TSV rows under their header (or
  `options.columns`), or JSONL objects. A row that is not a record (a JSONL
  line that is not a JSON object, a CSV row of another number of fields than
  the header) comes as (line, the one-line reason); a quoting error or bad
  UTF-8 stops the file (the reader cannot find the next row for sure)."""
  text = _text(path)
  stem = path[:-3] if path.endswith(".gz") else path
  records = []
  if stem.endswith(".jsonl"):
    # Lines end at \n only, as in `tf.data.TextLineDataset`: a JSON string
    # may hold U+2028 and other characters `str.splitlines` breaks at.
    for number, line in enumerate(text.split("\n"), start=1):
      if not line.strip():
        continue
      try:
        record = JSON_DECODER.decode(line)
      except ValueError as e:
        records.append((number, f"{path}:{number}: not a JSON object ({e})."))
        continue
      if not isinstance(record, dict):
        record = f"{path}:{number}: not a JSON object."
      records.append((number, record))
    return records
  reader = csv.reader(io.StringIO(text, newline=""),
                      delimiter="\t" if stem.endswith(".tsv") else ",",
                      strict=True, quoting=csv.QUOTE_MINIMAL if options.quoted
                      else csv.QUOTE_NONE)
  with no_field_limit():
    return _csv_records(path, reader, options.columns)


def _csv_records(path: str, reader, columns) -> List[Tuple[int, Record]]:
  """`_records` of a CSV / TSV `reader`; the header: `columns`, else row 1."""
  records = []
  try:
    header = list(columns) or next(reader, None)
    if header is None:
      raise ValueError(f"{path}: empty file (a header row is needed).")
    check_header(path, header)
    start = reader.line_num + 1
    for row in reader:
      if row:
        if len(row) != len(header):
          records.append((start, f"{path}:{start}: {len(row)} fields, "
                                 f"expected {len(header)} "
                                 f"({', '.join(header)})."))
        else:
          records.append((start, dict(zip(header, row))))
      start = reader.line_num + 1
  except csv.Error as e:
    raise ValueError(f"{path}:{reader.line_num}: CSV quoting error "
                     f"({e}).") from None
  return records


def _parse_rows(path: str, records: List[Tuple[int, Record]],
                options: "Options", parse: Callable) -> "Rows":
  """The rows of `records` (`_records` of `path`): each row's instance is
  `parse(line, record)` and its label the label column's. A bad row (not a
  record, or a ValueError of `parse` or of its label) raises its ValueError,
  or is added to the rows' `skipped` (`options.skip_bad_records`).

  Raises:
    ValueError: a bad row's; naming the file when it holds no good row.
  """
  instances, labels, places, skipped = [], [], [], []
  for number, record in records:
    try:
      if isinstance(record, str):
        raise ValueError(record)
      instance = parse(number, record)
      label = _label(record[options.label], path, number, options.label,
                     options.label_separator)
    except ValueError as e:
      if not options.skip_bad_records:
        raise
      skipped.append(str(e))
      continue
    instances.append(instance)
    labels.append(label)
    places.append(f"{path}:{number}")
  if not instances:
    raise ValueError(f"{path}: no rows" +
                     (f" ({len(skipped)} bad, skipped)." if skipped else "."))
  return Rows(path, instances, labels, places, skipped)


def report_skipped(rows: "Rows") -> None:
  """Logs how many bad rows of `rows` were skipped, and the first's reason."""
  if rows.skipped:
    logging.warning("%s: skipped %d bad row(s) (`skip_bad_records`); the "
                    "first: %s", rows.path, len(rows.skipped), rows.skipped[0])


def label_value(value, column: str, separator: str) -> Label:
  """A row's label field as a class name, or a tuple of names (multi-label),
  each as written (`clean_labels` strips them).

  A list is a JSON list, or a string field that looks like one
  (`LIST_PATTERN`: parsed as JSON), or with `separator` set any string field
  (split at it: `anger` is a list of one). An integer is read as its digits.

  Raises:
    ValueError: the reason, naming `column`: an empty label, list or name in
      a list, a field that looks like a list but is not JSON, a lone
      surrogate, a value that is not a name, an id or a list of them.
  """
  if isinstance(value, str):
    surrogate = _surrogate(value)
    if surrogate:
      raise ValueError(f"column {column!r}: a lone surrogate ({surrogate}, "
                       "half of a UTF-16 pair) is not text.")
  if isinstance(value, list):
    names = value
  elif isinstance(value, str) and _looks_like_list(value):
    try:
      names = json.loads(value)
    except ValueError:
      raise ValueError(
          f"column {column!r}: {value!r} starts like a list of classes but "
          'is not JSON (write ["joy", "love"], double quotes; or name the '
          "classes joined by `label_separator`).") from None
  elif isinstance(value, str) and separator:
    names = value.split(separator)
  elif isinstance(value, bool) or not isinstance(value, (str, int)):
    raise ValueError(f"column {column!r}: {value!r} is not a class name or "
                     "id.")
  else:
    if not str(value).strip():
      raise ValueError(f"column {column!r} is empty.")
    return str(value)
  if not isinstance(names, list) or not all(
      isinstance(n, (str, int)) and not isinstance(n, bool) for n in names):
    raise ValueError(f"column {column!r}: {value!r} is not a list of class "
                     "names or ids.")
  if not names:
    raise ValueError(f"column {column!r}: an empty list; a row has at least "
                     "one class.")
  names = [str(n) for n in names]
  if not all(n.strip() for n in names):
    joined = (f"joined by `label_separator`={separator!r}"
              if isinstance(value, str) and separator and
              not _looks_like_list(value) else "in a list")
    raise ValueError(f"column {column!r}: {value!r} holds an empty class "
                     f"name ({joined}).")
  return tuple(names)


def _label(value, path: str, number: int, column: str,
           separator: str) -> Label:
  """`label_value`, its error naming `path:number`."""
  try:
    return label_value(value, column, separator)
  except ValueError as e:
    raise ValueError(f"{path}:{number}: {e}") from None


def read_rows(path: str, options: Options) -> Rows:
  """The texts and labels of one split's file (see the module doc).

  Raises:
    ValueError: `file:line` naming the column for a missing column, an
      empty text or label, or a malformed row (unless `skip_bad_records`:
      then skipped and counted); naming the file when it holds no row.
  """
  if os.path.isdir(path):
    return _folder_rows(path, options)

  def text(number: int, record: Record) -> str:
    check_columns(f"{path}:{number}", ((options.text, "text_column"),
                                       (options.label, "label_column")),
                  record)
    problem = text_problem(record[options.text], options.text)
    if problem:
      raise ValueError(f"{path}:{number}: {problem}")
    return record[options.text]

  return _parse_rows(path, _records(path, options), options, text)


def read_table(path: str, options: Options) -> Tuple[Tuple[str, ...], Rows]:
  """The feature columns (`options.feature_columns`, else every column but
  the label, in the header's order) and rows of one split's tabular file:
  each row's `texts` entry is its list of float features, in that order.

  Raises:
    ValueError: `file:line` naming the column for a missing column, a value
      that is not a finite number or is beyond float32's range (`1e39`:
      inf to the model), or a malformed row (unless
      `options.skip_bad_records`); naming the file when it holds no row.
  """
  if os.path.isdir(path) or path.endswith((".jsonl", ".jsonl.gz")):
    raise ValueError(f"{path}: tabular_files reads CSV or TSV files.")
  records = _records(path, options)
  # Every column but the label, in the first record's order.
  names = tuple(options.feature_columns) or next(
      (tuple(c for c in record if c != options.label)
       for _, record in records if not isinstance(record, str)), None)
  if names == ():
    raise ValueError(f"{path}: no feature column besides "
                     f"{options.label!r}.")

  def features(number: int, record: Record) -> List[float]:
    check_columns(f"{path}:{number}", [
        (c, "label_column" if c == options.label else "feature_columns")
        for c in names + (options.label,)], record)
    vector = []
    for column in names:
      value = str(record[column]).strip()
      try:
        number_value = float(value)
      except ValueError:
        number_value = float("nan")
      if not math.isfinite(number_value):
        raise ValueError(f"{path}:{number}: column {column!r}: {value!r} "
                         "is not a finite number.")
      if not fits_float32(number_value):
        raise ValueError(f"{path}:{number}: column {column!r}: {value!r} "
                         "is beyond float32's range (+-3.4028235e38), in "
                         "which the model reads features.")
      vector.append(number_value)
    return vector

  return names, _parse_rows(path, records, options, features)


def class_folders(folder: str, kind: str
                 ) -> List[Tuple[str, List[str]]]:
  """(class, its file paths, sorted) of each class folder of a split folder
  (`folder/<class>/*`), the classes sorted.

  Hidden entries, a name starting with `.`, are not data and are skipped:
  folders (`.ipynb_checkpoints/`, `.thumbnails/`), as Keras'
  `*_dataset_from_directory` skips them, and files (macOS's AppleDouble
  `._001.png`, `.DS_Store`), which Keras would read; how many is logged,
  with the first few.

  Raises:
    ValueError: naming `folder` when it has no class folder (`kind`: the
      layout's file pattern, for the message).
  """
  hidden = []

  def visible(parent: str) -> List[str]:
    names = sorted(os.listdir(parent))
    hidden.extend(os.path.join(parent, n) for n in names if n.startswith("."))
    return [n for n in names if not n.startswith(".")]

  classes = [n for n in visible(folder)
             if os.path.isdir(os.path.join(folder, n))]
  if not classes:
    raise ValueError(f"{folder}: no class folders (<split>/<class>/{kind})" +
                     (f"; {len(hidden)} hidden entries (a name starting "
                      "with '.') skipped." if hidden else "."))
  out = [(name, [os.path.join(folder, name, file)
                 for file in visible(os.path.join(folder, name))])
         for name in classes]
  if hidden:
    shown = [os.path.relpath(h, folder) + ("/" if os.path.isdir(h) else "")
             for h in hidden]
    logging.info("%s: skipped %d hidden entr%s (a name starting with '.'): "
                 "%s", folder, len(hidden),
                 "y" if len(hidden) == 1 else "ies",
                 ", ".join(shown[:5]) + (", ..." if len(shown) > 5 else ""))
  return out


def _folder_rows(folder: str, options: Options) -> Rows:
  """Keras' `text_dataset_from_directory` layout: `folder/<class>/*.txt`,
  one text a file, the class its folder's name (`class_folders`)."""
  texts, labels, places, skipped = [], [], [], []
  for name, paths in class_folders(folder, "*.txt"):
    for path in paths:
      file = os.path.basename(path)
      if not file.endswith(".txt") or not os.path.isfile(path):
        continue
      try:
        text = _text(path)
        if not text.strip():
          raise ValueError(f"{path}: empty text.")
      except ValueError as e:
        if not options.skip_bad_records:
          raise
        skipped.append(str(e))
        continue
      texts.append(text)
      labels.append(name)
      places.append(path)
  if not texts:
    raise ValueError(f"{folder}: no .txt files in its class folders.")
  return Rows(folder, texts, labels, places, skipped)
