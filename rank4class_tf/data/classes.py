"""What a dataset says about its classes beyond their ids: their texts, and
the classes held out of a zero-shot run.

* A class's text is its name and an optional description (`class_text`),
  read from a `name<TAB>description` file (`read_class_texts`, one clear
  line naming the file and line for a bad one) for `--class_encoder=text`.
* `--holdout_classes`: their ids (`holdout_ids`), a mask of the instances
  that have one (`holdout_mask`), and the data without them
  (`without_classes`), so that no training batch and no validation that
  picks the best checkpoint sees them.
"""

import codecs
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.data import user_files


def class_text(name: str, description: str = "") -> str:
  """The text a class is encoded from: its name (underscores read as
  spaces), then its description after a colon when it has one.

  >>> class_text("admiration"), class_text("sci_fi", "science fiction")
  ('admiration', 'sci fi: science fiction')
  """
  name = name.replace("_", " ")
  return f"{name}: {description}" if description else name


def read_class_texts(path: str, class_names: Sequence[str]) -> List[str]:
  """The class texts of a description file, in class id order.

  The file has one line per class, `name<TAB>description` or `name` alone,
  in any order; every class of the dataset appears exactly once.

  Args:
    path: the file.
    class_names: the dataset's class names, index = class id.

  Returns:
    One text per class (`class_text`), index = class id.

  Raises:
    ValueError: one line naming the file (and the line): missing file, an
      empty name, an unknown or repeated class, a class with no line.
  """
  if not tf.io.gfile.exists(path):
    raise ValueError(f"`class_descriptions`={path}: file not found.")
  index = {name: i for i, name in enumerate(class_names)}
  texts: Dict[int, str] = {}
  with tf.io.gfile.GFile(path, "rb") as f:
    lines = f.read().splitlines()
  for number, raw in enumerate(lines, start=1):
    try:
      line = raw.decode("utf-8")
    except UnicodeDecodeError:
      raise ValueError(f"{path}:{number}: not valid UTF-8.") from None
    name, _, description = line.partition("\t")
    name, description = name.strip(), description.strip()
    if not name:
      raise ValueError(f"{path}:{number}: empty class text (no class "
                       "name).")
    if "\t" in description:
      raise ValueError(f"{path}:{number}: expected name<TAB>description, "
                       "got more than one tab.")
    if name not in index:
      raise ValueError(f"{path}:{number}: {name!r} is not a class of the "
                       f"dataset ({len(class_names)} classes).")
    if index[name] in texts:
      raise ValueError(f"{path}:{number}: class {name!r} is described "
                       "twice.")
    texts[index[name]] = class_text(name, description)
  if len(lines) != len(class_names):
    missing = [n for i, n in enumerate(class_names) if i not in texts]
    raise ValueError(f"{path}: {len(lines)} lines for {len(class_names)} "
                     f"classes (no line for {', '.join(missing[:5])}"
                     f"{', ...' if len(missing) > 5 else ''}).")
  return [texts[i] for i in range(len(class_names))]


def class_texts(class_names: Sequence[str],
                descriptions: str = "") -> List[str]:
  """The class texts of a run: from `--class_descriptions` when set, else
  the class names (`class_text`)."""
  if descriptions:
    return read_class_texts(descriptions, class_names)
  return [class_text(name) for name in class_names]


def holdout_ids(names: Sequence[str],
                class_names: Sequence[str]) -> Tuple[int, ...]:
  """Class ids of `--holdout_classes`, sorted.

  >>> holdout_ids(["joy", "anger"], ["anger", "fear", "joy"])
  (0, 2)

  Raises:
    ValueError: an unknown or repeated name, or every class held out.
  """
  index = {name: i for i, name in enumerate(class_names)}
  ids = []
  for name in names:
    if name not in index:
      raise ValueError(f"`holdout_classes`: {name!r} is not a class of the "
                       f"dataset; classes: {', '.join(class_names)}.")
    if index[name] in ids:
      raise ValueError(f"`holdout_classes`: {name!r} is listed twice.")
    ids.append(index[name])
  if len(ids) >= len(class_names):
    raise ValueError("`holdout_classes` holds out every class: nothing is "
                     "left to train on.")
  return tuple(sorted(ids))


def holdout_mask(labels: np.ndarray, ids: Sequence[int]) -> np.ndarray:
  """Which instances have a held-out class: [n] bool.

  Args:
    labels: class ids [n], or multi-hot [n, num_classes].
    ids: held-out class ids.
  """
  labels = np.asarray(labels)
  if labels.ndim == 2:
    return labels[:, list(ids)].max(axis=1) > 0 if len(ids) else (
        np.zeros(len(labels), bool))
  return np.isin(labels, list(ids))


def without_classes(data, ids: Sequence[int],
                    splits: Sequence[str] = ("train", "validation")):
  """The dataset with the instances of held-out classes removed from
  `splits` (zero-shot training: those classes are never a label in them).

  The class list is unchanged: the model still ranks every class.

  Args:
    data: a `contract.ClassificationData` held in memory.
    ids: held-out class ids.
    splits: the splits to filter.

  Raises:
    ValueError: the dataset streams from files, or a split is left empty.
  """
  if data.streams:
    raise ValueError(f"`holdout_classes`: {data.name} streams its splits "
                     "from files; held-out classes need a dataset held in "
                     "memory.")
  new_splits = dict(data.splits)
  for split in splits:
    instances, labels = data.splits[split]
    keep = ~holdout_mask(labels, ids)
    if not keep.any():
      raise ValueError(f"`holdout_classes` leaves no {split} instance.")
    # Instances are an array, or a dict of arrays (token features, masks).
    if isinstance(instances, dict):
      kept = {name: value[keep] for name, value in instances.items()}
    else:
      kept = instances[keep]
    new_splits[split] = (kept, labels[keep])
  return type(data)(**dict(vars(data), splits=new_splits))


def read_lines(path: str) -> List[str]:
  """The lines of a UTF-8 text file, without line ends (and without the
  byte-order mark some editors put at its start).

  Raises:
    ValueError: naming the file (and the line for bad UTF-8) when it is
      missing, a directory, unreadable or not UTF-8.
  """
  if not os.path.exists(path):
    raise ValueError(f"{path}: file not found.")
  if os.path.isdir(path):
    raise ValueError(f"{path}: is a directory, expected a file.")
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except OSError as e:
    raise ValueError(f"{path}: cannot be read ({e.strerror}).") from None
  lines = raw.split(b"\n")
  if lines and lines[-1] == b"":
    lines.pop()
  if lines and lines[0].startswith(codecs.BOM_UTF8):
    lines[0] = lines[0][len(codecs.BOM_UTF8):]  # Editors' UTF-8 signature.
  out = []
  for number, line in enumerate(lines, start=1):
    try:
      out.append(line.decode("utf-8").rstrip("\r"))
    except UnicodeDecodeError:
      raise ValueError(f"{path}:{number}: not valid UTF-8.") from None
  return out


def read_class_names(path: str) -> Tuple[str, ...]:
  """One class name per line, index = class id (surrounding spaces dropped).

  Raises:
    ValueError: `file:line` for a blank or duplicate name (`' joy'` and
      `'joy'` are one name, given twice), a name holding a control
      character (a tab: `user_files.class_name_problem`), or naming the file
      when it holds no name (and as `read_lines`).
  """
  names, first_seen = [], {}
  for number, line in enumerate(read_lines(path), start=1):
    name = line.strip()
    if not name:
      raise ValueError(f"{path}:{number}: blank class name (one name per "
                       "line, no empty lines).")
    problem = user_files.class_name_problem(name)
    if problem:
      raise ValueError(f"{path}:{number}: class name {name!r} {problem}")
    if name in first_seen:
      raise ValueError(f"{path}:{number}: duplicate class name {name!r} "
                       f"(first on line {first_seen[name]}).")
    first_seen[name] = number
    names.append(name)
  if not names:
    raise ValueError(f"{path}: no class names.")
  return tuple(names)
