"""How a user's labels become class ids: labels cleaned (`clean_labels`),
the class names (a names file, else the train labels sorted), and one
reading of the labels for the whole data set (`label_reading`: names, or
ids into the names when every label is a number), with the ids of each
split's rows (`label_ids`). Used by the in-memory splits (`splits`) and the
streamed files (`streaming`), which keep the same rules.
"""

import dataclasses
import logging
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from rank4class_tf.data.user_files import (  # pylint: disable=g-multiple-import
    SPLITS, Options, Rows, class_name_problem)

# How the labels of a data set are read: class names, or ids into them.
NAMES, IDS, EITHER = "names", "ids", "either"


def clean_labels(rows: Dict[str, Rows]) -> Dict[str, Rows]:
  """The rows with every label name stripped of surrounding whitespace.

  Raises:
    ValueError: `file:line` (or the file of a text or image) for a name
      holding a control character (`class_name_problem`), and for two
      spellings of one name that differ in surrounding whitespace only
      (`'joy '` and `'joy'`: one class or two? never merged silently), in
      any two splits.
  """
  seen: Dict[str, Tuple[str, str]] = {}  # Stripped name: (as written, where).
  out = {}
  for split in sorted(rows, key=lambda s: SPLITS.index(s)
                      if s in SPLITS else len(SPLITS)):
    labels = []
    for label, place in zip(rows[split].labels, rows[split].places):
      multi = isinstance(label, tuple)
      names = []
      for name in (label if multi else (label,)):
        problem = class_name_problem(name)
        if problem:
          raise ValueError(f"{place}: label {name!r} {problem}")
        clean = name.strip()
        written, first = seen.setdefault(clean, (name, place))
        if written != name:
          raise ValueError(
              f"{place}: label {name!r} and {written!r} ({first}) differ "
              "only in surrounding whitespace: one class or two? Write them "
              "alike.")
        names.append(clean)
      labels.append(tuple(names) if multi else names[0])
    out[split] = dataclasses.replace(rows[split], labels=labels)
  return out


def class_names(rows: Dict[str, Rows], options: Options,
                read_names) -> Tuple[Tuple[str, ...], bool]:
  """(class names, whether they came from the labels): `class_names_file`
  read with `read_names`, else the training labels' names, sorted."""
  if options.class_names_file:
    return tuple(read_names(options.class_names_file)), False
  seen = set()
  for label in rows["train"].labels:
    seen.update(label if isinstance(label, tuple) else (label,))
  return tuple(sorted(seen)), True


def as_id(name: str, count: int) -> Optional[int]:
  """The class id a label spells (ASCII digits, below `count`), or None."""
  if name.isascii() and name.isdigit() and int(name) < count:
    return int(name)
  return None


def read_as(labels: Iterable[str], names: Sequence[str]
           ) -> Tuple[Optional[str], Optional[str]]:
  """(how `labels` are read against a class names file's `names`, the first
  label that reads as two classes): `NAMES`, `IDS` or `EITHER` (each label
  as the one it is), and None when the labels cannot be read one way.

  A label may be a class name or a class id (its line in the file, from 0).
  They conflict only when the names are numbers: with classes `3`, `2`, `1`
  the label `1` is the class named `1` (id 2) or the id 1 (class `2`). Then
  one reading holds for the whole data set: names when every label is a
  class name, ids when every label is an id; never both. When every label
  is both, or the labels mix the two, there is no one reading.

  >>> read_as(["0", "1", "2"], ["3", "2", "1"])
  ('ids', '1')
  >>> read_as(["3", "1"], ["3", "2", "1"]), read_as(["1", "0"], ["1", "0"])
  (('names', '1'), (None, '1'))
  >>> read_as(["joy", "0"], ["joy", "anger"])
  ('either', None)
  """
  index = {name: i for i, name in enumerate(names)}
  every_name = every_id = True
  conflict = None
  for label in labels:
    by_name, by_id = index.get(label), as_id(label, len(names))
    if by_name is None and by_id is None:
      continue  # Not a class either way: refused by `label_ids`.
    every_name &= by_name is not None
    every_id &= by_id is not None
    if conflict is None and None not in (by_name, by_id) and by_name != by_id:
      conflict = label
  if conflict is None:
    return EITHER, None
  if every_name != every_id:
    return (NAMES if every_name else IDS), conflict
  return None, conflict


def ambiguous(place: str, label: str, names: Sequence[str],
              names_file: str) -> str:
  """The one line refusing a label `read_as` finds no one reading for."""
  by_id = as_id(label, len(names))
  return (f"{place}: label {label!r} is ambiguous: the class named {label!r} "
          f"({names_file}:{list(names).index(label) + 1}) or the class id "
          f"{by_id} ({names[by_id]!r}); with class names that are numbers, "
          "write every label as a name, or every label as an id.")


def label_reading(rows: Dict[str, Rows], names: Sequence[str],
                  names_file: str) -> str:
  """How the labels of every split are read against `names_file`
  (`read_as`); `NAMES` when the names came from the labels.

  Raises:
    ValueError: `file:line` of the first label that reads as two classes,
      when the labels have no one reading.
  """
  if not names_file:
    return NAMES
  places = {}
  for split in SPLITS:
    for label, place in zip(*((rows[split].labels, rows[split].places)
                              if split in rows else ((), ()))):
      for name in (label if isinstance(label, tuple) else (label,)):
        places.setdefault(name, place)
  how, conflict = read_as(places, names)
  if how is None:
    raise ValueError(ambiguous(places[conflict], conflict, names,
                               names_file))
  if conflict is not None:
    logging.info("%s: the class names are numbers; every label is read as "
                 "a class %s.", names_file, how[:-1])
  return how


def label_ids(rows: Rows, names: Sequence[str], names_file: str = "",
              train_ids: Optional[set] = None, skip: bool = False,
              reading: str = EITHER) -> Tuple[Rows, List[Tuple[int, ...]]]:
  """The rows kept and each one's class ids. A label is a name of `names`,
  or, when the names came from `names_file`, an integer id into them, as
  `reading` (`label_reading`) says.

  Raises:
    ValueError: `file:line` for an unknown label or a class no train row has
      (`train_ids` given), unless `skip`: then the row is left out and its
      reason added to the rows' `skipped`; for single labels mixed with lists
      (always: the data, not a row, is wrong).
  """
  index = {name: i for i, name in enumerate(names)}
  multi = isinstance(rows.labels[0], tuple)
  out, kept = [], []
  for row, (label, place) in enumerate(zip(rows.labels, rows.places)):
    if isinstance(label, tuple) != multi:
      raise ValueError(
          f"{place}: a {'single label' if multi else 'list'} "
          f"among {'lists' if multi else 'single labels'}: a data set is "
          "single- or multi-label.")
    ids, reason = [], None
    for name in (label if multi else (label,)):
      by_name = index.get(name) if reading != IDS else None
      by_id = (as_id(name, len(names)) if names_file and reading != NAMES
               else None)
      if by_name is not None:
        ids.append(by_name)
      elif by_id is not None:
        ids.append(by_id)
      else:
        source = (", named by the train labels" if not names_file else
                  f", labels read as {reading}" if reading != EITHER else "")
        reason = (f"{place}: label {name!r} is not a "
                  f"class ({len(names)} classes{source}).")
        break
      if train_ids is not None and ids[-1] not in train_ids:
        reason = f"{place}: label {name!r}: no train row has this class."
        break
    if reason:
      if not skip:
        raise ValueError(reason)
      rows.skipped.append(reason)
      continue
    out.append(tuple(ids))
    kept.append(row)
  if len(kept) == len(rows.labels):
    return rows, out
  if not kept:
    raise ValueError(f"{rows.path}: no rows ({len(rows.skipped)} bad, "
                     "skipped).")
  return Rows(rows.path, [rows.texts[i] for i in kept],
              [rows.labels[i] for i in kept],
              [rows.places[i] for i in kept], rows.skipped), out
