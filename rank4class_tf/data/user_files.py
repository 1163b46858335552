"""A user's own text classification files, read and checked: `text_files`.

`--dataset=text_files --data_dir=DIR` reads one file per split from DIR,
named after the split: `train`, and optionally `validation` and `test`, each
`.csv`, `.tsv` or `.jsonl`, optionally gzipped (`train.csv.gz`), or a
folder in Keras' `text_dataset_from_directory` layout (`train/<class>/*.txt`,
one text a file, the class its folder's name):

* CSV and TSV have a header row naming the columns; quoted fields may hold
  the delimiter, quotes (doubled) and line breaks; a UTF-8 byte-order mark
  and CRLF line ends are accepted.
* JSONL holds one JSON object per line.

The instance is the `text_column` (default `text`), the label the
`label_column` (default `label`): a class name, or an integer class id when
`class_names_file` names the classes (one a line, index = id). A label that
is a list (a JSON list, or, with `label_separator`, names joined by it)
makes the data set multi-label; every row of every split must then be so.
Without `class_names_file` the classes are the training labels' names,
sorted. A split without a file is cut from the training file by a seeded
stratified split (`split_seed`): 10% each for validation and test, or for
the one missing.

Nothing is guessed silently: a missing column, an empty text, a label that
train never has, an empty split, mixed label kinds (names and lists), bad
UTF-8 or a CSV quoting error stop with one line naming the file and line
(or record) and column. Plain Python, no TensorFlow: `datasets.get` turns
the rows into a `ClassificationData`.
"""

import codecs
import csv
import dataclasses
import gzip
import io
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple, Union

SPLITS = ("train", "validation", "test")
FORMATS = (".csv", ".tsv", ".jsonl")
# The share of the training file cut for each missing split.
HELD_OUT_FRACTION = 0.1

Label = Union[str, Tuple[str, ...]]


@dataclasses.dataclass(frozen=True)
class Columns:
  """Where a user's files keep the instance and the label, and the classes.

  Attributes:
    text: the text column (`text_column`).
    label: the label column (`label_column`).
    label_separator: joins the names of a multi-label row in one field
      (empty: a multi-label row is a JSON list).
    class_names_file: one class name a line, index = class id (empty: the
      training labels, sorted).
    split_seed: seed of the stratified split that makes a missing split.
  """
  text: str = "text"
  label: str = "label"
  label_separator: str = ""
  class_names_file: str = ""
  split_seed: int = 20220128


@dataclasses.dataclass(frozen=True)
class Rows:
  """The rows of one split: texts, and their labels as class names (a tuple
  of names for a multi-label row)."""
  path: str
  texts: List[str]
  labels: List[Label]
  places: List[str]  # Where each row is: `file:line`, or its own file.


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


def _records(path: str) -> List[Tuple[int, Dict[str, object]]]:
  """(line, record) of every row: CSV / TSV rows under their header, or
  JSONL objects."""
  text = _text(path)
  stem = path[:-3] if path.endswith(".gz") else path
  records = []
  if stem.endswith(".jsonl"):
    for number, line in enumerate(text.splitlines(), start=1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except ValueError as e:
        raise ValueError(f"{path}:{number}: not a JSON object ({e}).") from None
      if not isinstance(record, dict):
        raise ValueError(f"{path}:{number}: not a JSON object.")
      records.append((number, record))
    return records
  reader = csv.reader(io.StringIO(text, newline=""),
                      delimiter="\t" if stem.endswith(".tsv") else ",",
                      strict=True)
  try:
    header = next(reader, None)
    if header is None:
      raise ValueError(f"{path}: empty file (a header row is needed).")
    start = reader.line_num + 1
    for row in reader:
      if row:
        if len(row) != len(header):
          raise ValueError(f"{path}:{start}: {len(row)} fields, the header "
                           f"has {len(header)}.")
        records.append((start, dict(zip(header, row))))
      start = reader.line_num + 1
  except csv.Error as e:
    raise ValueError(f"{path}:{reader.line_num}: CSV quoting error "
                     f"({e}).") from None
  return records


def _label(value, path: str, number: int, column: str,
           separator: str) -> Label:
  """A row's label: a name, or a tuple of names (multi-label)."""
  if isinstance(value, list):
    names = value
  elif isinstance(value, str) and separator and separator in value:
    names = value.split(separator)
  elif isinstance(value, str) and value.startswith("["):
    try:
      names = json.loads(value)
    except ValueError:
      raise ValueError(f"{path}:{number}: column {column!r}: {value!r} is "
                       "neither a label nor a JSON list.") from None
  elif isinstance(value, bool) or not isinstance(value, (str, int)):
    raise ValueError(f"{path}:{number}: column {column!r}: {value!r} is not "
                     "a class name or id.")
  else:
    name = str(value).strip()
    if not name:
      raise ValueError(f"{path}:{number}: column {column!r} is empty.")
    return name
  if not isinstance(names, list) or not all(
      isinstance(n, (str, int)) and not isinstance(n, bool) for n in names):
    raise ValueError(f"{path}:{number}: column {column!r}: {value!r} is not "
                     "a list of class names or ids.")
  return tuple(str(n).strip() for n in names)


def read_rows(path: str, columns: Columns) -> Rows:
  """The texts and labels of one split's file (see the module doc).

  Raises:
    ValueError: `file:line` naming the column for a missing column, an
      empty text or label, or a malformed row; naming the file when it
      holds no row.
  """
  if os.path.isdir(path):
    return _folder_rows(path)
  texts, labels, places = [], [], []
  for number, record in _records(path):
    for column in (columns.text, columns.label):
      if column not in record:
        flag = "text_column" if column == columns.text else "label_column"
        raise ValueError(f"{path}:{number}: no column {column!r} (columns: "
                         f"{', '.join(map(str, record))}); name it with "
                         f"`{flag}`.")
    text = record[columns.text]
    if not isinstance(text, str) or not text.strip():
      raise ValueError(f"{path}:{number}: column {columns.text!r}: empty "
                       "text.")
    texts.append(text)
    labels.append(_label(record[columns.label], path, number, columns.label,
                         columns.label_separator))
    places.append(f"{path}:{number}")
  if not texts:
    raise ValueError(f"{path}: no rows.")
  return Rows(path, texts, labels, places)


def _folder_rows(folder: str) -> Rows:
  """Keras' `text_dataset_from_directory` layout: `folder/<class>/*.txt`,
  one text a file, the class its folder's name."""
  classes = sorted(n for n in os.listdir(folder)
                   if os.path.isdir(os.path.join(folder, n)))
  if not classes:
    raise ValueError(f"{folder}: no class folders (<split>/<class>/*.txt).")
  texts, labels, places = [], [], []
  for name in classes:
    for file in sorted(os.listdir(os.path.join(folder, name))):
      path = os.path.join(folder, name, file)
      if not file.endswith(".txt") or not os.path.isfile(path):
        continue
      text = _text(path)
      if not text.strip():
        raise ValueError(f"{path}: empty text.")
      texts.append(text)
      labels.append(name)
      places.append(path)
  if not texts:
    raise ValueError(f"{folder}: no .txt files in its class folders.")
  return Rows(folder, texts, labels, places)


def class_names(rows: Dict[str, Rows], columns: Columns,
                read_names) -> Tuple[Tuple[str, ...], bool]:
  """(class names, whether they came from the labels): `class_names_file`
  read with `read_names`, else the training labels' names, sorted."""
  if columns.class_names_file:
    return tuple(read_names(columns.class_names_file)), False
  seen = set()
  for label in rows["train"].labels:
    seen.update(label if isinstance(label, tuple) else (label,))
  return tuple(sorted(seen)), True


def label_ids(rows: Rows, names: Sequence[str], from_file: bool,
              train_ids: Optional[set] = None) -> List[Tuple[int, ...]]:
  """Each row's class ids. A label is a name of `names`, or, when the names
  came from a file, an integer id into them.

  Raises:
    ValueError: `file:line` for an unknown label, a class no train row has
      (`train_ids` given), or single labels mixed with lists.
  """
  index = {name: i for i, name in enumerate(names)}
  multi = isinstance(rows.labels[0], tuple)
  out = []
  for label, place in zip(rows.labels, rows.places):
    if isinstance(label, tuple) != multi:
      raise ValueError(
          f"{place}: a {'single label' if multi else 'list'} "
          f"among {'lists' if multi else 'single labels'}: a data set is "
          "single- or multi-label.")
    ids = []
    for name in (label if multi else (label,)):
      if name in index:
        ids.append(index[name])
      elif from_file and name.isdigit() and int(name) < len(names):
        ids.append(int(name))
      else:
        source = "" if from_file else ", named by the train labels"
        raise ValueError(f"{place}: label {name!r} is not a "
                         f"class ({len(names)} classes{source}).")
      if train_ids is not None and ids[-1] not in train_ids:
        raise ValueError(f"{place}: label {name!r}: no train "
                         "row has this class.")
    out.append(tuple(ids))
  return out
