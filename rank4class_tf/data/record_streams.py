"""A user's TFRecords as streams: the parts cut from train, the counting
pass (`tally`), and the tf.data streams of checked records (see `records`'
module doc).
"""

import collections
import dataclasses
import os
import logging
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf.data import classes as classes_lib
from rank4class_tf.data import images
from rank4class_tf.data import image_files
from rank4class_tf.data import file_hashes
from rank4class_tf.data import splits
from rank4class_tf.data import streaming
from rank4class_tf.data import tfds_download
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import SPLITS, ClassificationData, Stream
from rank4class_tf.data.records import (  # pylint: disable=g-multiple-import
    DECODED_SHUFFLE_BUFFER, HELD_OUT_FRACTION, PARALLEL_FILES,
    RECORD_SHUFFLE_BUFFER, CHECK_BATCH, GOOD, UNPARSED,
    RecordChecker, RecordFile, RecordLayout, _unreadable, describe)


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
  return splits.cut_parts(
      tf.gather(prefixes, file_ids) + tf.strings.as_string(numbers), cut)


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


def _json_value(value) -> list:
  """A raw label value (bytes or int) as JSON: ["b", hex] or ["i", int]."""
  if isinstance(value, bytes):
    return ["b", value.hex()]
  return ["i", int(value)]


def _label_value(pair: list):
  return bytes.fromhex(pair[1]) if pair[0] == "b" else np.int64(pair[1])


def cached_tally(files: Sequence[RecordFile], checker: RecordChecker,
                 options: user_files.Options, cut: int = 0) -> Tally:
  """`tally`, cached as the text files' count is (`streaming.cached`): by
  the files' SHA-256 (`file_hashes`), the layout and classes it checks
  against, and the options it depends on."""
  layout, classes = checker.layout, checker.classes
  fields = {
      "files": [[f.path, f.compression, file_hashes.sha256(f.path)]
                for f in files],
      "layout": [layout.instance, layout.label, layout.label_dtype.name,
                 layout.kind],
      "classes": None if classes is None else [
          list(classes.names), classes.source,
          None if classes.keys is None else [_json_value(k)
                                             for k in classes.keys]],
      "single_label": checker.single_label, "train": checker.train,
      "skip": options.skip_bad_records, "split_seed": options.split_seed,
      "cut": cut, "version": 1}

  def encode(found: Tally) -> dict:
    return {"sizes": found.sizes,
            "counts": [[[_json_value(k), int(n)] for k, n in c.items()]
                       for c in found.counts],
            "multi_label": found.multi_label, "skipped": found.skipped,
            "first_bad": found.first_bad}

  def decode(value: dict) -> Tally:
    return Tally(value["sizes"],
                 [collections.Counter({_label_value(k): n for k, n in c})
                  for c in value["counts"]],
                 value["multi_label"], value["skipped"], value["first_bad"])

  return streaming.cached(fields, lambda: tally(files, checker, options, cut),
                          "tfrecord", describe(files), encode, decode)


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


def finish(pairs: tf.data.Dataset, kind: str, size: int, training: bool,
            seed: int, skipped=None) -> tf.data.Dataset:
  """Encoded (instance, label) pairs -> the stream: shuffled before
  decoding in training, the exact size asserted, images decoded.

  With `skipped` (a `image_files.skipped_table`, `skip_bad_records`) the
  pairs are (instance, label, place) triples, and an image that does not
  decode is left out (`image_files.decoded_or_skipped`)."""
  if training:
    pairs = pairs.shuffle(RECORD_SHUFFLE_BUFFER[kind], seed=seed,
                          reshuffle_each_iteration=True)
  pairs = pairs.apply(tf.data.experimental.assert_cardinality(size))
  if kind == "image" and skipped is not None:
    return image_files.decoded_or_skipped(pairs, image_files.decode,
                                            skipped, "tfrecord")
  if skipped is not None:
    pairs = pairs.map(lambda x, label, place: (x, label))
  if kind == "image":
    pairs = pairs.map(lambda image, label: (image_files.decode(image),
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
        lambda k, image: (k, tf.size(image_files.decode(image)))
    ).ignore_errors().map(lambda k, _: k).as_numpy_iterator())
    for k in index:
      if k not in decoded:
        problem = image_files.decode_problem(instances[k])
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
  skipped = image_files.skipped_table() if skip else None
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
    return finish(ds, checker.layout.kind, size, shuffle_files, seed,
                   skipped)

  return Stream(read=read, size=size, multi_label=multi_label,
                unreadable=lambda: first_unreadable(files, checker, options),
                skipped_reads=(None if skipped is None else
                               lambda: image_files.table_places(skipped)))


def classification_data(name: str, class_names: Sequence[str], kind: str,
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
      image_size or image_files.DEFAULT_IMAGE_SIZE)
  return ClassificationData(
      name=name, class_names=tuple(class_names), instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams=streams, preprocessing=preprocessing,
      shuffle_buffer=DECODED_SHUFFLE_BUFFER)
