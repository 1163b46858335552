"""How splits are drawn: the seeded stratified split and the labelled splits
of a user's rows (a missing validation or test split cut from train).

One hash rule cuts a missing validation or test split from streamed train
data, every streamed format alike (a user's large text files: `streaming`;
TFRecords: `record_streams`): `cut_parts`, a record going to the k-th
missing split when the FarmHash `Fingerprint64` of
`split_seed:file name:record number` (the same on every machine) falls in
the k-th tenth of [0, `CUT_BUCKETS`). Runs made before the rule was one
(`config.LEGACY_VALUES`: `split_rule`=by_format) keep streamed text's old
rule, `split_seed:row number` in 10 buckets (`streaming.bucket`).
"""

import logging
from typing import Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.data import labels as labels_lib
from rank4class_tf.data import user_files
from rank4class_tf.data.classes import read_class_names
from rank4class_tf.data.contract import SPLITS

def stratified_split(labels: Sequence[int], fractions: Sequence[float],
                     seed: int) -> List[np.ndarray]:
  """Seeded stratified split of example indices.

  Each class's examples are shuffled with `seed` and cut by `fractions`
  (rounded down, the last part takes the rest), so every part keeps the class
  proportions and the same input gives the same split.

  Returns:
    One sorted index array per fraction.
  """
  labels = np.asarray(labels)
  rng = np.random.RandomState(seed)
  parts = [[] for _ in fractions]
  bounds = np.cumsum(fractions)[:-1]
  for label in np.unique(labels):
    members = np.flatnonzero(labels == label)
    rng.shuffle(members)
    cuts = (bounds * len(members)).astype(int)
    for part, chunk in zip(parts, np.split(members, cuts)):
      part.extend(chunk.tolist())
  return [np.array(sorted(p), np.int64) for p in parts]


def labelled_splits(rows: Dict[str, user_files.Rows],
                    options: user_files.Options, dataset: str
                   ) -> Tuple[Tuple[str, ...], Dict[str, Tuple[list, list]]]:
  """Class names, and every split's (instances, class id tuples).

  `rows` holds train and the splits that have a file; the others are cut
  from train (seeded, stratified on each row's first class).

  Raises:
    ValueError: one line naming the file and line, or the file.
  """
  rows = labels_lib.clean_labels(rows)
  names, from_labels = labels_lib.class_names(rows, options,
                                              read_class_names)
  names_file = "" if from_labels else options.class_names_file
  if from_labels:
    logging.info("%s: %d classes named by the train labels, sorted: %s.",
                 dataset, len(names), ", ".join(names))
  reading = labels_lib.label_reading(rows, names, names_file)
  skip = options.skip_bad_records
  rows["train"], train_ids = labels_lib.label_ids(
      rows["train"], names, names_file, skip=skip, reading=reading)
  train = rows["train"]
  multi = isinstance(train.labels[0], tuple)
  present = {i for row in train_ids for i in row}
  absent = [name for i, name in enumerate(names) if i not in present]
  if absent:
    raise ValueError(f"{train.path}: no train row has the class(es) "
                     f"{', '.join(absent)} of "
                     f"`class_names_file`={options.class_names_file}.")
  out = {"train": (train.texts, train_ids)}
  for split in rows:
    if split == "train":
      continue
    if isinstance(rows[split].labels[0], tuple) != multi:
      raise ValueError(f"{rows[split].places[0]}: "
                       f"{'single' if multi else 'multi'}-label rows, but "
                       f"{train.path} is {'multi' if multi else 'single'}-"
                       "label.")
    rows[split], ids = labels_lib.label_ids(rows[split], names, names_file,
                                            present, skip=skip,
                                            reading=reading)
    out[split] = (rows[split].texts, ids)
  for split_rows in rows.values():
    user_files.report_skipped(split_rows)
  missing = [split for split in SPLITS if split not in rows]
  if missing:
    fraction = user_files.HELD_OUT_FRACTION
    parts = stratified_split(
        [row[0] for row in train_ids],
        [fraction] * len(missing) + [1. - fraction * len(missing)],
        options.split_seed)
    instances = train.texts
    for split, part in zip(missing + ["train"], parts):
      if not len(part):
        raise ValueError(f"{train.path}: {len(train_ids)} rows are too few "
                         f"to cut a {split} split from; give a {split} file.")
      out[split] = ([instances[i] for i in part], [train_ids[i] for i in part])
    logging.info("%s: %s cut from %s (stratified, `split_seed`=%d).",
                 dataset, " and ".join(missing), train.path,
                 options.split_seed)
  return tuple(names), out


def label_array(ids: Sequence[Tuple[int, ...]], num_classes: int,
                multi: bool) -> np.ndarray:
  """int64 class ids [n], or for multi-label rows float32 multi-hot
  [n, num_classes]."""
  if not multi:
    return np.array([row[0] for row in ids], np.int64)
  y = np.zeros([len(ids), num_classes], np.float32)
  for i, classes in enumerate(ids):
    y[i, list(classes)] = 1.0
  return y


CUT_BUCKETS = 1000


def cut_keys(split_seed: int, file_name: str,
             numbers: tf.Tensor) -> tf.Tensor:
  """`split_seed:file name:record number` of each of `numbers`."""
  return tf.strings.join([f"{split_seed}:{file_name}:",
                          tf.strings.as_string(numbers)])


def cut_parts(keys: tf.Tensor, cut: int) -> tf.Tensor:
  """The part of each record of a split's files: 0 the split itself, k the
  k-th of the `cut` missing splits cut from it (10% each).

  Args:
    keys: each record's `cut_keys` [n].
    cut: how many missing splits are cut (0: every record is in part 0).

  Returns:
    int32 [n].
  """
  if not cut:
    return tf.zeros_like(keys, tf.int32)
  bucket = tf.strings.to_hash_bucket_fast(keys, CUT_BUCKETS)
  share = int(round(user_files.HELD_OUT_FRACTION * CUT_BUCKETS))
  part = tf.zeros_like(bucket, tf.int32)
  for k in range(cut):
    part = tf.where((bucket >= k * share) & (bucket < (k + 1) * share),
                    k + 1, part)
  return part
