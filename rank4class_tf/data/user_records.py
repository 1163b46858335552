"""A user's TFRecord files and any TFDS classification data set.

* `tfrecord`: `--dataset=tfrecord --data_dir=DIR` reads TFRecord files of
  `tf.train.Example`s from DIR. The files of a split are named after it:
  `<split>.tfrecord`, or shards `<split>-<anything>.tfrecord` (as
  `train-00000-of-00004.tfrecord`) or `<split>.tfrecord-<anything>` (TFDS
  and Beam's names); `.tfrecords` is accepted as well, and a name ending in
  `.gz` is read as GZIP. `train` must be there; `validation` and `test` may.
  A split's files are read in the order of their names.

  Each example holds the instance, a bytes feature (`instance_feature`;
  empty: the one bytes feature of train's first record besides the label),
  and the label (`label_column`, default `label`). The instance is an image
  when the first record's bytes start like a JPEG, PNG, GIF or BMP file,
  else UTF-8 text (logged). Labels are bytes class names, or int64 class ids
  into `class_names_file`; without that file the classes are the distinct
  train label values, sorted (ids as their decimal names; logged). A label
  feature holding several values (a bytes or int64 list) in a train record
  makes the data set multi-label: multi-hot float32 labels.

  Files larger than memory stream: nothing is held but the class list and
  the counts. One pass per split, through tf.data, parses the instance and
  label features of every record (images are not decoded: their first bytes
  are checked) and counts its records and classes, so every split's
  `Stream` has its exact size. A bad record (not an Example, a missing or
  empty feature, a feature of another type than train's first record's,
  several instances, empty or non-UTF-8 text, bytes that are not an image,
  a label that is not a class, several labels in single-label data) stops
  with one line `FILE: record N: reason` (N counted from 1); with
  `skip_bad_records` it is counted, reported (`logging.warning`, the count
  and the first reason) and left out of the split's stream by the same
  checks (`RecordChecker`). An image whose first bytes are right but whose
  body is corrupt stops training when it is read; its stream's
  `unreadable` (`first_unreadable`) then finds it, decoding the images
  again, for the one-line message `FILE: record N: ...`; with
  `skip_bad_records` it is left out where it is read, and counted
  (`user_datasets.decoded_or_skipped`).

  A missing validation or test split is cut from the train files: a record
  goes to it when a hash of `split_seed`, its file's name and its record
  number falls in the first 10% of the hash range (the second 10% for test
  when both are missing; FarmHash `Fingerprint64`, the same on every
  machine). The cut does not depend on the labels (it is not stratified),
  so a rare class may have no record left in train (logged).

  Training reads the files in a seeded order reshuffled every epoch, 8 at a
  time, and shuffles the encoded records (`RECORD_SHUFFLE_BUFFER`) before
  decoding them; evaluation reads them in order.

* `tfds:<name>`: any TFDS classification data set with one text
  (`tfds.features.Text`) or image (`tfds.features.Image`) feature and one
  `tfds.features.ClassLabel`, read with TFDS's builder from `data_dir`
  (prepared there: nothing is downloaded unless `download`). The features
  are `instance_feature` and `label_column` when named; else the one Text or
  Image feature, and the `label` ClassLabel or else the only one; several
  candidates are refused, naming them. The classes are the ClassLabel's
  names. `tfds_splits` maps our splits to TFDS split expressions
  (`train=train[:90%]`, `validation=train[90%:]`, `test=test`) and must then
  name all three; without it they are TFDS's `train`, `validation` and
  `test`, a missing one cut from the end of train with TFDS's slicing (10%
  each: `train[:90%]` and `train[90%:]`; logged). A version TFDS lacks is
  refused in one line; `download` goes through `tfds_download` (offline:
  one line at once, nothing written; a failed download cleaned up).

Every format's train data must hold two classes or more (`load`).

Images of both are decoded with `user_datasets.decode` (grey and RGBA
become RGB) and preprocessed as `image_folder`'s
(`images.MultiLabelImagePreprocessing` to `image_size`, 224 by default).

`load` is the one entry for every user data set (`catalog.USER_DATASETS`
and `tfds:<name>`): `datasets.get` calls it.
"""

import collections
import dataclasses
import logging
import os
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from google.protobuf import message
import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf.data import datasets
from rank4class_tf.data import images
from rank4class_tf.data import tfds_download
from rank4class_tf.data import user_datasets
from rank4class_tf.data import user_files
from rank4class_tf.data.datasets import (  # pylint: disable=g-multiple-import
    SPLITS, ClassificationData, Stream)

# <split>.tfrecord, <split>-00000-of-00004.tfrecord,
# <split>.tfrecord-00000-of-00004; .tfrecords too; .gz: GZIP.
_RECORD_FILE = re.compile(r"^(train|validation|test)(-[^.]*)?\.tfrecords?"
                          r"(-[^.]*)?(\.gz)?$")
# The share of the train records cut for each missing split, and the hash
# range it is a share of.
HELD_OUT_FRACTION = user_files.HELD_OUT_FRACTION
_HASH_BUCKETS = 1000
# Records parsed per call in the checking pass.
CHECK_BATCH = 512
# Training: encoded records shuffled before decoding (a decoded image takes
# ten times more memory), then decoded examples in `ranking_dataset`.
RECORD_SHUFFLE_BUFFER = {"text": 10_000, "image": 1_000}
DECODED_SHUFFLE_BUFFER = user_datasets.IMAGE_SHUFFLE_BUFFER
# Files read at once in training.
PARALLEL_FILES = 8
# How an image's file starts (`looks_like_image`).
IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a")
# A BMP starts with `BM`, and its bytes 6 to 9 are zero (reserved).
BMP_MAGIC = (b"BM", b"\x00\x00\x00\x00")


# ---------------------------------------------------------------------------
# TFRecord files.


@dataclasses.dataclass(frozen=True)
class RecordFile:
  """One TFRecord file: its path and compression (`GZIP`, or empty)."""
  path: str
  compression: str


def record_files(data_dir: Optional[str]) -> Dict[str, List[RecordFile]]:
  """{split: its files, sorted by name} in `data_dir` (see the module doc).

  Raises:
    ValueError: `data_dir` missing or not a folder, or no train file.
  """
  if not data_dir:
    raise ValueError("`data_dir` must name the folder holding the train "
                     "(and validation, test) TFRecord files for "
                     "`dataset`=tfrecord.")
  if not os.path.isdir(data_dir):
    raise ValueError(f"`data_dir`={data_dir}: not a folder.")
  found = collections.defaultdict(list)
  for name in sorted(os.listdir(data_dir)):
    match = _RECORD_FILE.match(name)
    path = os.path.join(data_dir, name)
    if match and os.path.isfile(path):
      found[match.group(1)].append(
          RecordFile(path, "GZIP" if name.endswith(".gz") else ""))
  if "train" not in found:
    raise ValueError(f"`data_dir`={data_dir} holds no train TFRecord file "
                     "(train.tfrecord or shards train-00000-of-00004.tfrecord"
                     ", optionally .gz).")
  return dict(found)


def describe(files: Sequence[RecordFile]) -> str:
  """The files in a message: the path, or the first and how many more."""
  if len(files) == 1:
    return files[0].path
  return f"{files[0].path} (and {len(files) - 1} more files)"


def looks_like_image(data: bytes) -> bool:
  """Whether `data` starts as a JPEG, PNG, GIF or BMP file does."""
  return data.startswith(IMAGE_MAGIC) or (
      data.startswith(BMP_MAGIC[0]) and data[6:10] == BMP_MAGIC[1])


def looks_like_images(data: tf.Tensor) -> tf.Tensor:
  """`looks_like_image` of every string of `data` [n] -> bool [n]."""
  head = tf.strings.substr(data, 0, 10) + b"\x01" * 10  # Short ones fail.
  starts = [tf.strings.substr(head, 0, len(magic)) == magic
            for magic in IMAGE_MAGIC]
  starts.append((tf.strings.substr(head, 0, 2) == BMP_MAGIC[0]) &
                (tf.strings.substr(head, 6, 4) == BMP_MAGIC[1]))
  return tf.reduce_any(tf.stack(starts), axis=0)


def _valid_utf8(data: tf.Tensor) -> tf.Tensor:
  """Whether each string of `data` is valid UTF-8 (dropping the invalid
  bytes leaves it as it is)."""
  return tf.strings.unicode_transcode(data, "UTF-8", "UTF-8",
                                      errors="ignore") == data


@dataclasses.dataclass(frozen=True)
class RecordLayout:
  """Where the instance and the label of a TFRecord's examples are.

  Attributes:
    instance: the bytes feature holding the text or the encoded image.
    label: the label feature.
    label_dtype: tf.int64 (class ids) or tf.string (class names).
    kind: `text` or `image`.
  """
  instance: str
  label: str
  label_dtype: tf.DType
  kind: str


def _kind_name(kind: Optional[str]) -> str:
  return {"int64_list": "int64", "bytes_list": "bytes",
          "float_list": "float"}.get(kind, "no")


def layout_of(record: bytes, place: str,
              options: user_files.Options) -> RecordLayout:
  """The layout that train's first record shows (see the module doc).

  Raises:
    ValueError: `place: reason` when the record is not an Example, has no
      label or instance feature of a usable type, or several candidate
      instance features, or an instance that is neither an image nor UTF-8.
  """
  try:
    example = tf.train.Example.FromString(record)
  except message.DecodeError:
    raise ValueError(f"{place}: not a tf.train.Example.") from None
  features = example.features.feature
  listed = f"features: {', '.join(sorted(features)) or 'none'}"
  label = options.label
  if label not in features:
    raise ValueError(f"{place}: no feature {label!r} ({listed}); name the "
                     "label with `label_column`.")
  label_kind = features[label].WhichOneof("kind")
  if label_kind not in ("int64_list", "bytes_list"):
    raise ValueError(f"{place}: feature {label!r} holds "
                     f"{_kind_name(label_kind)} values; a label is int64 "
                     "class ids or bytes class names.")
  if options.instance_feature:
    instance = options.instance_feature
    if instance not in features:
      raise ValueError(f"{place}: no feature {instance!r} ({listed}); name "
                       "the text or image with `instance_feature`.")
    if features[instance].WhichOneof("kind") != "bytes_list":
      raise ValueError(
          f"{place}: feature {instance!r} holds "
          f"{_kind_name(features[instance].WhichOneof('kind'))} values; the "
          "instance is a bytes feature (text or an encoded image).")
  else:
    candidates = [name for name in sorted(features) if name != label and
                  features[name].WhichOneof("kind") == "bytes_list"]
    if len(candidates) != 1:
      raise ValueError(
          f"{place}: " +
          (f"{len(candidates)} bytes features besides {label!r} "
           f"({', '.join(candidates)}): name the text or image one with "
           "`instance_feature`." if candidates else
           f"no bytes feature besides {label!r} ({listed}) to read as the "
           "text or image."))
    instance = candidates[0]
  values = features[instance].bytes_list.value
  if len(values) != 1:
    raise ValueError(f"{place}: feature {instance!r} holds {len(values)} "
                     "values; one text or image is expected.")
  if looks_like_image(values[0]):
    kind = "image"
    try:
      user_datasets.decode(tf.constant(values[0]))
    except tf.errors.OpError as e:
      raise ValueError(f"{place}: feature {instance!r} starts like an image "
                       "but cannot be decoded "
                       f"({e.message.splitlines()[0]}).") from None
  else:
    kind = "text"
    try:
      values[0].decode("utf-8")
    except UnicodeDecodeError:
      raise ValueError(f"{place}: feature {instance!r} is neither an image "
                       "(JPEG, PNG, GIF, BMP) nor UTF-8 text.") from None
  return RecordLayout(
      instance, label,
      tf.int64 if label_kind == "int64_list" else tf.string, kind)


def first_layout(files: Sequence[RecordFile],
                 options: user_files.Options) -> RecordLayout:
  """The layout of train's first record; with `options.skip_bad_records`,
  of its first record that shows one.

  Raises:
    ValueError: as `layout_of`; naming the files when they hold no record
      (or no usable one).
  """
  if options.instance_feature and options.instance_feature == options.label:
    raise ValueError(f"`instance_feature`={options.label!r} is the label "
                     "feature too.")
  first_error = None
  for file in files:
    records = tf.data.TFRecordDataset(file.path, file.compression)
    try:
      for number, record in enumerate(records.as_numpy_iterator(), 1):
        try:
          return layout_of(record, f"{file.path}: record {number}", options)
        except ValueError as e:
          if not options.skip_bad_records:
            raise
          first_error = first_error or str(e)
    except tf.errors.OpError as e:
      raise ValueError(_unreadable(file, e)) from None
  raise ValueError(f"{describe(files)}: no record" +
                   (f" that can be read; the first: {first_error}"
                    if first_error else "."))


def _unreadable(file: RecordFile, error: tf.errors.OpError) -> str:
  """The one-line message for a file TensorFlow cannot read."""
  return (f"{file.path}: cannot be read as a "
          f"{'GZIP ' if file.compression else ''}TFRecord file "
          f"({error.message.splitlines()[0]}); a GZIP file's name ends in "
          ".gz.")


# ---------------------------------------------------------------------------
# Classes and checks.


class Classes:
  """The class list and the lookup of raw label values into it.

  Args:
    names: class names, index = class id.
    keys: the raw label value (bytes or int) of each class; None: the
      labels are int64 ids into `names` (`class_names_file`).
    source: how the classes were named, for messages.
    dtype: the keys' dtype (tf.string or tf.int64).
  """

  def __init__(self, names: Sequence[str], keys: Optional[Sequence],
               source: str, dtype: tf.DType = tf.int64):
    self.names = tuple(names)
    self.source = source
    self._keys = None if keys is None else {k: i for i, k in enumerate(keys)}
    self._table = None
    if keys is not None:
      self._table = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(
              tf.constant(list(keys), dtype),
              tf.range(len(keys), dtype=tf.int64)), default_value=-1)

  def ids(self, values: tf.Tensor) -> tf.Tensor:
    """Raw label values -> class ids, -1 for a value that is no class."""
    if self._table is None:
      inside = (values >= 0) & (values < len(self.names))
      return tf.where(inside, values, tf.constant(-1, tf.int64))
    return self._table.lookup(values)

  def id_of(self, value) -> Optional[int]:
    """`ids` of one value, in Python (None: no class)."""
    if self._keys is None:
      return value if 0 <= value < len(self.names) else None
    return self._keys.get(value)


# Why `RecordChecker.examine` finds a record bad; 0: a good record.
(GOOD, NO_INSTANCE, SEVERAL_INSTANCES, EMPTY_TEXT, NOT_UTF8, NOT_IMAGE,
 NO_LABEL, EMPTY_LABEL, LABEL_NOT_UTF8, SEVERAL_LABELS,
 UNKNOWN_LABEL) = range(11)
UNPARSED = -1  # The record does not parse as the layout's Example.


class RecordChecker:
  """Parses examples of a `RecordLayout` and says which are bad, and why.

  The checking pass and the streams call the same `examine`, so a stream
  leaves out exactly the records the pass counted as bad.

  Args:
    layout: the examples' features.
    classes: the class list, or None (the train pass before it is known):
      then a label is not looked up.
    single_label: the data is single-label (several labels in a record are
      bad); None: not known yet.
    train: the train files, for messages.
  """

  def __init__(self, layout: RecordLayout, classes: Optional[Classes] = None,
               single_label: Optional[bool] = None, train: str = ""):
    self.layout = layout
    self.classes = classes
    self.single_label = single_label
    self.train = train
    self._spec = {layout.instance: tf.io.VarLenFeature(tf.string),
                  layout.label: tf.io.VarLenFeature(layout.label_dtype)}

  def examine(self, records: tf.Tensor
             ) -> Tuple[tf.Tensor, tf.Tensor, tf.RaggedTensor,
                        Optional[tf.RaggedTensor]]:
    """Parses serialized examples [n].

    Returns:
      (codes int32 [n] (`GOOD` or why not), instances string [n] (empty when
      missing), raw labels [n, None], class ids [n, None] (-1: no class;
      None without `classes`)).

    Raises:
      tf.errors.InvalidArgumentError: a record that is not an Example or
        holds a feature of another type (`UNPARSED`).
    """
    layout = self.layout
    parsed = tf.io.parse_example(records, self._spec)
    instances = tf.RaggedTensor.from_sparse(parsed[layout.instance])
    labels = tf.RaggedTensor.from_sparse(parsed[layout.label])
    count = instances.row_lengths()
    instance = instances.to_tensor("", shape=[None, 1])[:, 0]
    bad = [(count == 0, NO_INSTANCE), (count > 1, SEVERAL_INSTANCES)]
    if layout.kind == "text":
      bad += [(tf.strings.strip(instance) == "", EMPTY_TEXT),
              (~_valid_utf8(instance), NOT_UTF8)]
    else:
      bad.append((~looks_like_images(instance), NOT_IMAGE))
    bad.append((labels.row_lengths() == 0, NO_LABEL))
    if layout.label_dtype == tf.string:
      bad += [(tf.reduce_any(tf.ragged.map_flat_values(
          lambda names: tf.strings.strip(names) == "", labels), axis=1),
               EMPTY_LABEL),
              (tf.reduce_any(~tf.ragged.map_flat_values(_valid_utf8, labels),
                             axis=1), LABEL_NOT_UTF8)]
    if self.single_label:
      bad.append((labels.row_lengths() > 1, SEVERAL_LABELS))
    ids = None
    if self.classes is not None:
      ids = tf.ragged.map_flat_values(self.classes.ids, labels)
      bad.append((tf.reduce_any(ids < 0, axis=1), UNKNOWN_LABEL))
    codes = tf.zeros_like(count, tf.int32)
    for condition, code in reversed(bad):  # The first that applies.
      codes = tf.where(condition, code, codes)
    return codes, instance, labels, ids

  def reason(self, code: int, record: bytes, error: str = "") -> str:
    """The one-line reason why the record is bad (`examine`'s `code`)."""
    layout = self.layout
    try:
      features = tf.train.Example.FromString(record).features.feature
    except message.DecodeError:
      return "not a tf.train.Example."
    listed = f"features: {', '.join(sorted(features)) or 'none'}"
    expected = {layout.instance: "bytes_list",
                layout.label: ("int64_list" if layout.label_dtype == tf.int64
                               else "bytes_list")}
    if code == UNPARSED:
      for name, kind in expected.items():
        held = features[name].WhichOneof("kind") if name in features else None
        if held is not None and held != kind:
          return (f"feature {name!r} holds {_kind_name(held)} values, not "
                  f"{_kind_name(kind)} as in {self.train}'s first record.")
      return f"cannot be parsed ({error})."
    name = layout.label if code >= NO_LABEL else layout.instance
    if code in (NO_INSTANCE, NO_LABEL):
      if name not in features:
        return f"no feature {name!r} ({listed})."
      return f"feature {name!r} is empty."
    feature = features[name]
    values = list(getattr(feature, feature.WhichOneof("kind")).value)
    if code == SEVERAL_INSTANCES:
      return (f"feature {name!r} holds {len(values)} values; one "
              f"{layout.kind} is expected.")
    if code == EMPTY_TEXT:
      return f"feature {name!r}: empty text."
    if code == NOT_UTF8:
      return f"feature {name!r}: not valid UTF-8 text."
    if code == NOT_IMAGE:
      return f"feature {name!r}: not a JPEG, PNG, GIF or BMP image."
    if code == EMPTY_LABEL:
      return f"feature {name!r}: an empty class name."
    if code == LABEL_NOT_UTF8:
      return f"feature {name!r}: a class name that is not valid UTF-8."
    if code == SEVERAL_LABELS:
      return (f"feature {name!r} holds {len(values)} labels, but "
              f"{self.train} is single-label.")
    unknown = next((v for v in values if self.classes.id_of(v) is None),
                   values[0])
    if isinstance(unknown, bytes):
      unknown = unknown.decode("utf-8", "backslashreplace")
    return (f"feature {name!r}: label {unknown!r} is not a class "
            f"({len(self.classes.names)} classes, {self.classes.source}).")


# ---------------------------------------------------------------------------
# Reading and the checking pass.


def parts(files: Sequence[RecordFile], split_seed: int, cut: int,
          file_ids: tf.Tensor, numbers: tf.Tensor) -> tf.Tensor:
  """The part of the train files each record is in: 0 train, 1 and 2 the
  first and second missing split cut from them (see the module doc).

  Args:
    files: the train files.
    split_seed: salts the hash.
    cut: how many missing splits are cut (0: every record is in part 0).
    file_ids: each record's file, an index into `files` [n].
    numbers: each record's number in its file, from 0 [n].

  Returns:
    int32 [n].
  """
  if not cut:
    return tf.zeros_like(file_ids, tf.int32)
  prefixes = tf.constant([f"{split_seed}:{os.path.basename(file.path)}:"
                          for file in files])
  bucket = tf.strings.to_hash_bucket_fast(
      tf.gather(prefixes, file_ids) + tf.strings.as_string(numbers),
      _HASH_BUCKETS)
  share = int(round(HELD_OUT_FRACTION * _HASH_BUCKETS))
  part = tf.zeros_like(file_ids, tf.int32)
  for k in range(cut):
    part = tf.where((bucket >= k * share) & (bucket < (k + 1) * share),
                    k + 1, part)
  return part


def read_records(files: Sequence[RecordFile], shuffle_files: bool = False,
                 seed: int = 0) -> tf.data.Dataset:
  """(file index, record number from 0, serialized record) of every record
  of `files`: in order, or (`shuffle_files`) in a seeded file order
  reshuffled every pass, `PARALLEL_FILES` files interleaved.

  Args:
    files: the split's files.
    shuffle_files: read the files in a random order.
    seed: its seed.
  """
  ds = tf.data.Dataset.from_tensor_slices((
      np.arange(len(files), dtype=np.int32),
      [file.path for file in files],
      [file.compression for file in files]))
  if shuffle_files:
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)

  def records(index, path, compression):  # No function call per record.
    return tf.data.Dataset.zip((
        tf.data.Dataset.from_tensors(index).repeat(),
        tf.data.Dataset.range(np.iinfo(np.int64).max),
        tf.data.TFRecordDataset(path, compression)))

  if shuffle_files and len(files) > 1:
    return ds.interleave(records, cycle_length=min(len(files),
                                                   PARALLEL_FILES),
                         num_parallel_calls=tf.data.AUTOTUNE,
                         deterministic=True)
  return ds.flat_map(records)


@dataclasses.dataclass
class Tally:
  """What the checking pass of one split's files found.

  Attributes:
    sizes: good records per part (`parts`: 0 the split, then the missing
      splits cut from it).
    counts: per part, raw label value -> good records holding it.
    multi_label: a good record holds several labels.
    skipped: bad records (`skip_bad_records`).
    first_bad: the first bad record's `FILE: record N: reason`.
  """
  sizes: List[int]
  counts: List[collections.Counter]
  multi_label: bool = False
  skipped: int = 0
  first_bad: str = ""


def tally(files: Sequence[RecordFile], checker: RecordChecker,
          options: user_files.Options, cut: int = 0) -> Tally:
  """One streaming pass over `files` (see the module doc): counts the good
  records and their labels per part, and checks every record.

  Raises:
    ValueError: `FILE: record N: reason` for the first bad record (unless
      `options.skip_bad_records`), or naming a file that cannot be read.
  """
  result = Tally([0] * (cut + 1),
                 [collections.Counter() for _ in range(cut + 1)])

  def examine(records):  # Eager: a few dozen ops per `CHECK_BATCH` records.
    codes, _, labels, _ = checker.examine(records)
    return codes, labels.flat_values, labels.row_lengths()

  def account(file_ids, numbers, where, records, codes, values, lengths,
              errors=None):
    for i in np.flatnonzero(codes != GOOD):
      reason = checker.reason(int(codes[i]), records[i].numpy(),
                              errors[i] if errors else "")
      line = f"{files[file_ids[i]].path}: record {numbers[i] + 1}: {reason}"
      if not options.skip_bad_records:
        raise ValueError(line)
      result.skipped += 1
      result.first_bad = result.first_bad or line
    good = codes == GOOD
    value_good = np.repeat(good, lengths)
    value_parts = np.repeat(where, lengths)
    result.multi_label |= bool(np.any(lengths[good] > 1))
    for part in range(cut + 1):
      result.sizes[part] += int(np.sum(good & (where == part)))
      mine = values[value_good & (value_parts == part)]
      if len(mine):
        result.counts[part].update(dict(zip(*np.unique(mine,
                                                       return_counts=True))))

  string_labels = checker.layout.label_dtype == tf.string
  batches = read_records(files).batch(CHECK_BATCH).prefetch(2)
  iterator = iter(batches)
  while True:
    try:
      file_ids, numbers, records = next(iterator)
    except StopIteration:
      break
    except tf.errors.OpError as e:
      raise ValueError(_first_unreadable(files, e)) from None
    where = parts(files, options.split_seed, cut, file_ids, numbers).numpy()
    file_ids, numbers = file_ids.numpy(), numbers.numpy()
    try:
      codes, values, lengths = (t.numpy() for t in examine(records))
      account(file_ids, numbers, where, records, codes, values, lengths)
    except tf.errors.InvalidArgumentError:
      for i in range(len(numbers)):  # Which records do not parse, and why.
        one = records[i:i + 1]
        try:
          codes, values, lengths = (t.numpy() for t in examine(one))
          error = ""
        except tf.errors.InvalidArgumentError as e:
          error = e.message.splitlines()[0]
          codes = np.array([UNPARSED], np.int32)
          values = np.zeros([0], object if string_labels else np.int64)
          lengths = np.zeros([1], np.int64)
        account(file_ids[i:i + 1], numbers[i:i + 1], where[i:i + 1], one,
                codes, values, lengths, [error])
  return result


def _first_unreadable(files: Sequence[RecordFile],
                      error: tf.errors.OpError) -> str:
  """The message for the first of `files` that cannot be read (`error`
  came from reading them)."""
  for file in files:
    try:
      tf.data.TFRecordDataset(file.path, file.compression).reduce(
          np.int64(0), lambda count, _: count + 1)
    except tf.errors.OpError as e:
      return _unreadable(file, e)
  return f"{describe(files)}: cannot be read ({error.message.splitlines()[0]})."


def _finish(pairs: tf.data.Dataset, kind: str, size: int, training: bool,
            seed: int, skipped=None) -> tf.data.Dataset:
  """Encoded (instance, label) pairs -> the stream: shuffled before
  decoding in training, the exact size asserted, images decoded.

  With `skipped` (a `user_datasets.skipped_table`, `skip_bad_records`) the
  pairs are (instance, label, place) triples, and an image that does not
  decode is left out (`user_datasets.decoded_or_skipped`)."""
  if training:
    pairs = pairs.shuffle(RECORD_SHUFFLE_BUFFER[kind], seed=seed,
                          reshuffle_each_iteration=True)
  pairs = pairs.apply(tf.data.experimental.assert_cardinality(size))
  if kind == "image" and skipped is not None:
    return user_datasets.decoded_or_skipped(pairs, user_datasets.decode,
                                            skipped, "tfrecord")
  if skipped is not None:
    pairs = pairs.map(lambda x, label, place: (x, label))
  if kind == "image":
    pairs = pairs.map(lambda image, label: (user_datasets.decode(image),
                                            label),
                      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return pairs


def first_unreadable(files: Sequence[RecordFile], checker: RecordChecker,
                     options: user_files.Options) -> Optional[str]:
  """The first record of `files` that cannot be read now, `FILE: record
  N: reason` (or the file that cannot be read), or None: the stream's
  `unreadable` (a file deleted, truncated or rewritten since the data was
  loaded, or an image whose first bytes are right but whose body is not,
  which the load's pass does not decode)."""
  try:
    tally(files, checker, options)  # Records bad as the load's pass says.
  except ValueError as e:
    return str(e)
  if checker.layout.kind != "image" or options.skip_bad_records:
    return None  # With `skip_bad_records` an undecodable image is skipped.
  for file_ids, numbers, records in read_records(files).batch(CHECK_BATCH):
    _, instances, _, _ = checker.examine(records)
    index = np.arange(len(numbers))
    decoded = set(tf.data.Dataset.from_tensor_slices((index, instances)).map(
        lambda k, image: (k, tf.size(user_datasets.decode(image)))
    ).ignore_errors().map(lambda k, _: k).as_numpy_iterator())
    for k in index:
      if k not in decoded:
        problem = user_datasets.decode_problem(instances[k])
        if problem:
          return (f"{files[int(file_ids[k])].path}: record "
                  f"{int(numbers[k]) + 1}: feature "
                  f"{checker.layout.instance!r} {problem}")
  return None


def record_stream(files: Sequence[RecordFile], checker: RecordChecker,
                  options: user_files.Options, size: int, multi_label: bool,
                  cut: int = 0, part: int = 0) -> Stream:
  """The `Stream` of the good records of `files` (of their `part` when
  `cut` splits are cut from them): (text or uint8 image, label) pairs."""
  num_classes = len(checker.classes.names)
  skip = options.skip_bad_records
  skipped = user_datasets.skipped_table() if skip else None
  paths = tf.constant([file.path for file in files])

  @tf.autograph.experimental.do_not_convert
  def pairs(file_ids, numbers, records):
    """Records [k] -> the (code, instance, label) of those of `part`, and
    with `skip_bad_records` their places (`FILE: record N`)."""
    if cut:
      mine = parts(files, options.split_seed, cut, file_ids, numbers) == part
      records = tf.boolean_mask(records, mine)
      file_ids = tf.boolean_mask(file_ids, mine)
      numbers = tf.boolean_mask(numbers, mine)
    codes, instances, _, ids = checker.examine(records)
    if multi_label:  # -1 (no class) only in bad records.
      labels = tf.minimum(tf.reduce_sum(tf.one_hot(
          ids.to_tensor(-1), num_classes, dtype=tf.float32), axis=1), 1.0)
    else:
      labels = ids.to_tensor(-1, shape=[None, 1])[:, 0]
    if not skip:
      return codes, instances, labels
    places = (tf.gather(paths, file_ids) + ": record " +
              tf.strings.as_string(numbers + 1))
    return codes, instances, labels, places

  def read(shuffle_files: bool = False, seed: int = 0) -> tf.data.Dataset:
    ds = read_records(files, shuffle_files, seed)
    if skip:
      # One record at a time: one that does not parse raises, and is left
      # out; the others `examine` finds bad are filtered out.
      ds = ds.map(lambda i, n, record: pairs(i[None], n[None], record[None]),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
      ds = ds.ignore_errors().unbatch().filter(
          lambda code, x, y, place: code == GOOD)
      ds = ds.map(lambda code, x, y, place: (x, y, place))
    else:  # The pass found every record good.
      ds = ds.batch(CHECK_BATCH).map(pairs,
                                     num_parallel_calls=tf.data.AUTOTUNE,
                                     deterministic=True).unbatch()
      ds = ds.map(lambda code, x, y: (x, y))
    return _finish(ds, checker.layout.kind, size, shuffle_files, seed,
                   skipped)

  return Stream(read=read, size=size, multi_label=multi_label,
                unreadable=lambda: first_unreadable(files, checker, options),
                skipped_reads=(None if skipped is None else
                               lambda: user_datasets.table_places(skipped)))


def _preview(names: Sequence[str], most: int = 20) -> str:
  shown = ", ".join(names[:most])
  return shown + (f", ... ({len(names)} in all)" if len(names) > most
                  else "")


def _classes(layout: RecordLayout, counts: collections.Counter,
             options: user_files.Options, train: str) -> Classes:
  """The class list: `class_names_file`, else the train labels sorted."""
  if options.class_names_file:
    names = datasets.read_class_names(options.class_names_file)
    source = f"`class_names_file`={options.class_names_file}"
    if layout.label_dtype == tf.int64:
      return Classes(names, None, source)
    return Classes(names, [n.encode("utf-8") for n in names], source,
                   tf.string)
  keys = sorted(counts)
  if layout.label_dtype == tf.int64:
    keys = [int(k) for k in keys]
    names = [str(k) for k in keys]
  else:
    keys = [bytes(k) for k in keys]
    names = [k.decode("utf-8") for k in keys]
  logging.info("tfrecord: %d classes named by the train labels, sorted: "
               "%s.", len(names), _preview(names))
  return Classes(names, keys, "named by the train labels",
                 layout.label_dtype)


def _report(tallies: Dict[str, Tally]) -> None:
  for split, found in tallies.items():
    if found.skipped:
      logging.warning("tfrecord %s: skipped %d bad record(s) "
                      "(`skip_bad_records`); the first: %s", split,
                      found.skipped, found.first_bad)


def load_tfrecord(data_dir: Optional[str], options: user_files.Options,
                  image_size: Optional[int] = None) -> ClassificationData:
  """A user's TFRecord files (see the module doc), streamed.

  Args:
    data_dir: the folder of the files.
    options: the features, class names file, split seed, bad records.
    image_size: side of the preprocessed images (None: 224).

  Raises:
    ValueError: one line naming the file and record, or the file(s).
  """
  files = record_files(data_dir)
  train_files = files["train"]
  train = describe(train_files)
  layout = first_layout(train_files, options)
  logging.info("tfrecord: the instances are %s (feature %r), the labels "
               "%s (feature %r), as in %s's first record.", layout.kind,
               layout.instance, "int64 class ids"
               if layout.label_dtype == tf.int64 else "bytes class names",
               layout.label, train)
  if image_size is not None and layout.kind == "text":
    raise ValueError(f"`image_size`={image_size}: {train} holds text, not "
                     "images.")
  fixed = None
  if options.class_names_file:
    fixed = _classes(layout, collections.Counter(), options, train)
  missing = [split for split in SPLITS if split not in files]
  tallies = {"train": tally(train_files,
                            RecordChecker(layout, fixed, None, train),
                            options, cut=len(missing))}
  found = tallies["train"]
  if not sum(found.sizes):
    raise ValueError(f"{train}: no records ({found.skipped} bad, skipped).")
  every = sum(found.counts, collections.Counter())
  classes = fixed or _classes(layout, every, options, train)
  multi = found.multi_label
  if fixed:
    present = {fixed.id_of(k) for k in every}
    absent = [name for i, name in enumerate(fixed.names) if i not in present]
    if absent:
      raise ValueError(f"{train}: no train record has the class(es) "
                       f"{_preview(absent)} of `class_names_file`="
                       f"{options.class_names_file}.")
  checker = RecordChecker(layout, classes, not multi, train)
  sizes, streams = {}, {}
  for part, split in enumerate(["train"] + missing):
    sizes[split] = found.sizes[part]
    if not sizes[split]:  # A part of the cut is empty.
      raise ValueError(f"{train}: {sum(found.sizes)} good record(s) are too "
                       f"few to cut {' and '.join(missing)} from; give "
                       f"{' and '.join(missing)} files.")
    streams[split] = record_stream(train_files, checker, options,
                                   sizes[split], multi, len(missing), part)
  if missing:
    logging.info("tfrecord: %s cut from %s by a hash of `split_seed`=%d "
                 "and the record's place (%d%% each, not stratified): "
                 "%s records.", " and ".join(missing), train,
                 options.split_seed, round(100 * HELD_OUT_FRACTION),
                 " / ".join(f"{split} {sizes[split]}"
                            for split in ["train"] + missing))
    kept = {classes.id_of(k) for k in found.counts[0]}
    lost = [name for i, name in enumerate(classes.names) if i not in kept]
    if lost:
      logging.warning("tfrecord: no record of the class(es) %s is left in "
                      "train after the cut (give validation and test files "
                      "or another `split_seed`).", _preview(lost))
  for split in SPLITS:
    if split in missing or split == "train":
      continue
    tallies[split] = tally(files[split], checker, options)
    sizes[split] = tallies[split].sizes[0]
    if not sizes[split]:
      raise ValueError(f"{describe(files[split])}: no records" +
                       (f" ({tallies[split].skipped} bad, skipped)."
                        if tallies[split].skipped else "."))
    streams[split] = record_stream(files[split], checker, options,
                                   sizes[split], multi)
  _report(tallies)
  return _classification_data("tfrecord", classes.names, layout.kind,
                              streams, image_size)


def _classification_data(name: str, class_names: Sequence[str], kind: str,
                         streams: Dict[str, Stream],
                         image_size: Optional[int]) -> ClassificationData:
  """The data of text or image streams."""
  streams = {split: streams[split] for split in SPLITS}
  if kind == "text":
    return ClassificationData(
        name=name, class_names=tuple(class_names), instance_key="text",
        instance_shape=(), instance_dtype=tf.string, streams=streams,
        shuffle_buffer=DECODED_SHUFFLE_BUFFER)
  preprocessing = images.MultiLabelImagePreprocessing(
      image_size or user_datasets.DEFAULT_IMAGE_SIZE)
  return ClassificationData(
      name=name, class_names=tuple(class_names), instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams=streams, preprocessing=preprocessing,
      shuffle_buffer=DECODED_SHUFFLE_BUFFER)


# ---------------------------------------------------------------------------
# TFDS.


def tfds_split_map(entries: Sequence[str], tfds_splits: Sequence[str],
                   name: str) -> Dict[str, str]:
  """Our split -> TFDS split expression (see the module doc).

  Args:
    entries: `tfds_splits`, `split=expression` strings (may be empty).
    tfds_splits: the TFDS data set's split names.
    name: `tfds:<name>`, for messages.

  Raises:
    ValueError: a malformed or repeated entry, one that leaves a split out,
      or (without entries) no TFDS train split.
  """
  if entries:
    mapping = {}
    for entry in entries:
      split, sep, expression = entry.partition("=")
      split, expression = split.strip(), expression.strip()
      if not sep or split not in SPLITS or not expression:
        raise ValueError(f"`tfds_splits`: {entry!r} is not split=expression "
                         f"with a split of {', '.join(SPLITS)}.")
      if split in mapping:
        raise ValueError(f"`tfds_splits` maps {split} twice.")
      mapping[split] = expression
    absent = [split for split in SPLITS if split not in mapping]
    if absent:
      raise ValueError(f"`tfds_splits` must map {', '.join(absent)} too "
                       "(train, validation and test).")
    return mapping
  if "train" not in tfds_splits:
    raise ValueError(f"{name} has no train split (splits: "
                     f"{', '.join(sorted(tfds_splits))}); map ours with "
                     "`tfds_splits`.")
  missing = [split for split in SPLITS[1:] if split not in tfds_splits]
  mapping = {split: split for split in SPLITS if split not in missing}
  if missing:
    share = round(100 * HELD_OUT_FRACTION)
    keep = 100 - share * len(missing)
    mapping["train"] = f"train[:{keep}%]"
    for k, split in enumerate(missing):
      end = keep + (k + 1) * share
      mapping[split] = (f"train[{keep + k * share}%:{end}%]" if end < 100
                        else f"train[{keep + k * share}%:]")
    mapping = {split: mapping[split] for split in SPLITS}
    logging.info("%s: %s cut from the end of train: %s.", name,
                 " and ".join(missing),
                 ", ".join(f"{s}={e}" for s, e in mapping.items()))
  return mapping


def _feature(features, key: str, kinds: tuple, role: str, argument: str,
             default: str, name: str) -> str:
  """The top-level feature of `role` (`label`, `text or image`): `key`
  when named (or the `default` key when there is one), else the one
  feature of `kinds`.

  Raises:
    ValueError: a named feature missing or of another kind; none or several
      candidates.
  """
  listed = f"features: {', '.join(sorted(features.keys()))}"
  if key and (key != default or key in features.keys()):
    if key not in features.keys():
      raise ValueError(f"{name}: no feature {key!r} ({listed}); name the "
                       f"{role} with `{argument}`.")
    feature = features[key]
    if not isinstance(feature, kinds):
      raise ValueError(f"{name}: feature {key!r} is a "
                       f"{type(feature).__name__}, not a "
                       f"{' or '.join(k.__name__ for k in kinds)}.")
    return key
  candidates = [k for k in sorted(features.keys())
                if isinstance(features[k], kinds)]
  if len(candidates) == 1:
    return candidates[0]
  what = " or ".join(k.__name__ for k in kinds)
  if candidates:
    raise ValueError(f"{name}: {len(candidates)} {what} features "
                     f"({', '.join(candidates)}): name the {role} with "
                     f"`{argument}`.")
  raise ValueError(f"{name}: no {what} feature ({listed}); tfds:<name> "
                   "reads classification data sets.")


def load_tfds(name: str, data_dir: Optional[str], options: user_files.Options,
              image_size: Optional[int] = None,
              download: bool = False) -> ClassificationData:
  """Any TFDS classification data set, `tfds:<name>` (see the module doc).

  Args:
    name: `tfds:<name>`, `<name>` a TFDS name (`name/config` too).
    data_dir: TFDS data directory (None: TFDS's default).
    options: `instance_feature`, `label`, `tfds_splits`.
    image_size: side of the preprocessed images (None: 224).
    download: download and prepare the data first when it is missing.

  Raises:
    ValueError: one line: an unknown data set or version, one not
      prepared in the directory (as `datasets.tfds_streams`), a download
      that cannot be made (`tfds_download`), features or splits that do not
      fit.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  tfds_name = name[len(catalog.TFDS_PREFIX):] if catalog.is_tfds(name) else name
  if download:
    tfds_download.check_network(tfds_name, name)
  try:
    builder = tfds.builder(tfds_name, data_dir=data_dir)
  except ValueError as e:
    raise ValueError(f"{name}: not a TFDS data set "
                     f"({str(e).strip().splitlines()[0].rstrip('.')})."
                    ) from None
  except AssertionError as e:  # TFDS's word for a version it lacks.
    reason = re.sub(r'^Failed to construct dataset "[^"]*", builder_kwargs '
                    r'"[^"]*": ', "", str(e).strip().splitlines()[0])
    raise ValueError(f"{name}: {reason.rstrip('.')}.") from None
  if download:
    tfds_download.download_and_prepare(builder, name)
  not_prepared = ValueError(
      f"{tfds_name} is not prepared in {data_dir or builder.data_dir}: "
      f"prepare it there with TFDS (`tfds build {tfds_name} --data_dir=DIR`) "
      "and pass `data_dir`=DIR, or pass `download`.")
  if not builder.is_prepared():
    raise not_prepared
  features = builder.info.features
  label = _feature(features, options.label, (tfds.features.ClassLabel,),
                   "label", "label_column", "label", name)
  if options.instance_feature == label:
    raise ValueError(f"`instance_feature`={label!r} is the label feature "
                     "too.")
  instance = _feature(
      {k: f for k, f in features.items() if k != label},
      options.instance_feature, (tfds.features.Text, tfds.features.Image),
      "text or image", "instance_feature", "", name)
  kind = ("image" if isinstance(features[instance], tfds.features.Image)
          else "text")
  if image_size is not None and kind == "text":
    raise ValueError(f"`image_size`={image_size}: {name} holds text, not "
                     "images.")
  class_names = tuple(features[label].names)
  mapping = tfds_split_map(options.tfds_splits, builder.info.splits.keys(),
                           name)
  logging.info("%s: the instances are %s (feature %r), %d classes from the "
               "ClassLabel %r; splits %s.", name, kind, instance,
               len(class_names), label,
               ", ".join(f"{s}={e}" for s, e in mapping.items()))
  decoders = {instance: tfds.decode.SkipDecoding()} if kind == "image" else None

  def examples(expression: str, shuffle_files: bool = False,
               seed: int = 0) -> tf.data.Dataset:
    return builder.as_dataset(split=expression, shuffle_files=shuffle_files,
                              decoders=decoders,
                              read_config=tfds.ReadConfig(shuffle_seed=seed))

  def reader(split: str, size: int) -> Callable[[bool, int],
                                                 tf.data.Dataset]:
    def read(shuffle_files: bool = False, seed: int = 0) -> tf.data.Dataset:
      pairs = examples(mapping[split], shuffle_files, seed).map(
          lambda ex: (ex[instance], tf.cast(ex[label], tf.int64)))
      return _finish(pairs, kind, size, shuffle_files, seed)
    return read

  streams = {}
  for split, expression in mapping.items():
    try:
      size = int(examples(expression).cardinality())
    except AssertionError:
      raise not_prepared from None
    except ValueError as e:
      raise ValueError(f"{name}: {split}={expression}: "
                       f"{str(e).strip().splitlines()[0]}") from None
    if size <= 0:
      raise ValueError(f"{name}: {split}={expression} holds no example.")
    streams[split] = Stream(read=reader(split, size), size=size)
  return _classification_data(name, class_names, kind, streams, image_size)


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """The user's data set `name` (`catalog.USER_DATASETS`, `tfds:<name>`).

  Raises:
    ValueError: one line, as each format's loader; naming the train data
      when it holds fewer than two classes (a ranking of one class is no
      classifier: its loss is 0 and its accuracy 1 whatever it learns).
  """
  if name == "text_files":
    data = user_datasets.load_text_files(data_dir, options)
  elif name == "tabular_files":
    data = user_datasets.load_tabular_files(data_dir, options)
  elif name == "image_folder":
    data = user_datasets.load_image_folder(data_dir, options, image_size)
  elif name == "tfrecord":
    data = load_tfrecord(data_dir, options, image_size)
  else:
    data = load_tfds(name, data_dir, options, image_size, download)
  if data.num_classes < 2:
    raise ValueError(
        f"{_train_place(name, data_dir)}: {data.num_classes} class "
        f"({', '.join(data.class_names)}) in train; a classifier needs two "
        "or more: give train instances of another class.")
  return data


def _train_place(name: str, data_dir: Optional[str]) -> str:
  """Where the train split of a user's data set `name` is, for messages."""
  if name in ("text_files", "tabular_files"):
    return user_files.split_files(data_dir)["train"]
  if name == "image_folder":
    return os.path.join(data_dir, "train")
  if name == "tfrecord":
    return describe(record_files(data_dir)["train"])
  return name
