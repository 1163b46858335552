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
  (`image_files.decoded_or_skipped`).

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

Every format's train data must hold two classes or more (`sources.get`).

Images of both are decoded with `image_files.decode` (grey and RGBA
become RGB) and preprocessed as `image_folder`'s
(`images.MultiLabelImagePreprocessing` to `image_size`, 224 by default).

This module holds the TFRecord files, their layout and the record checks;
`record_streams` the cut, the counting pass and the streams; the sources
`sources.tfrecords` and `sources.tfds` turn them into a `ClassificationData`.
"""

import collections
import dataclasses
import logging
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from google.protobuf import message
import numpy as np
import tensorflow as tf

from rank4class_tf.data import image_files
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import SPLITS, ClassificationData, Stream

# <split>.tfrecord, <split>-00000-of-00004.tfrecord,
# <split>.tfrecord-00000-of-00004; .tfrecords too; .gz: GZIP.
_RECORD_FILE = re.compile(r"^(train|validation|test)(-[^.]*)?\.tfrecords?"
                          r"(-[^.]*)?(\.gz)?$")
# The share of the train records cut for each missing split, and the hash
# range it is a share of.
HELD_OUT_FRACTION = user_files.HELD_OUT_FRACTION
# Records parsed per call in the checking pass.
CHECK_BATCH = 512
# Training: encoded records shuffled before decoding (a decoded image takes
# ten times more memory), then decoded examples in `ranking_dataset`.
RECORD_SHUFFLE_BUFFER = {"text": 10_000, "image": 1_000}
DECODED_SHUFFLE_BUFFER = image_files.IMAGE_SHUFFLE_BUFFER
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
      image_files.decode(tf.constant(values[0]))
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
    self.keys = None if keys is None else tuple(keys)
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


# ---------------------------------------------------------------------------
# TFDS.


