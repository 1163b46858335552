"""A user's image files: decoding, what cannot be decoded, and the stream
of an image folder's files (`sources.image_folder`, `sources.tfrecords`).

Grey and RGBA images become RGB; an image that cannot be decoded stops the
load (or with `skip_bad_records` is left out, counted and named:
`decoded_or_skipped`).
"""

import logging
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.data import images
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import SPLITS, ClassificationData, Stream

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
DEFAULT_IMAGE_SIZE = 224
# Image files are reshuffled whole every epoch (`read`); this buffer only
# mixes decoded images a little more, and bounds the memory they take.
IMAGE_SHUFFLE_BUFFER = 256


def decode(contents: tf.Tensor) -> tf.Tensor:
  """Encoded JPEG / PNG / BMP / GIF bytes -> uint8 [height, width, 3] (grey
  and RGBA images become RGB; a GIF's first frame)."""
  image = tf.io.decode_image(contents, channels=3, expand_animations=False)
  image.set_shape([None, None, 3])
  return image


def undecodable(path: str) -> Optional[str]:
  """Why the image file cannot be read and decoded, or None when it can."""
  if not os.path.exists(path):
    return "no such file."
  try:
    contents = tf.io.read_file(path)
  except tf.errors.OpError as e:
    return f"cannot be read ({op_message(e)})."
  return decode_problem(contents)


def op_message(error: tf.errors.OpError) -> str:
  """The first line of a TensorFlow op's error, without the function and
  op names eager execution wraps it in (`{{function_node ...}} Input is
  empty. [Op:DecodeImage] name: ` -> `Input is empty.`)."""
  first = (error.message or str(error)).strip().splitlines()[0]
  first = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", first)
  return re.sub(r"\s*\[Op:[^\]]*\](\s*name:.*)?$", "", first)


def decode_problem(contents) -> Optional[str]:
  """Why encoded image bytes cannot be decoded, or None when they can."""
  try:
    image = decode(contents)
  except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError,
          tf.errors.UnknownError) as e:
    return f"cannot be decoded as an image ({op_message(e)})."
  if 0 in image.shape:
    return "an empty image."
  return None


def skipped_table() -> tf.lookup.experimental.MutableHashTable:
  """The places a stream left out when read (`decoded_or_skipped`)."""
  return tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, 0)


def decoded_or_skipped(ds: tf.data.Dataset, decode_fn, skipped,
                       what: str) -> tf.data.Dataset:
  """(raw, label, place) -> (decode_fn(raw), label), leaving out the
  elements `decode_fn` fails on (`skip_bad_records`: a file deleted or
  damaged after the load's checks): each is added to `skipped` (a
  `skipped_table`), and the first skip of a place prints one line to
  standard error, `<what>: skipped <place> ...; <n> skipped so far`.

  Each element is decoded in a dataset of its own, whose error
  `ignore_errors` drops, so a failure is known per element and the order
  stays that of `ds`; no Python runs per element. It costs a little, so only
  `skip_bad_records` streams read so: 2,000 PNGs of 32x32 took 3.8-4.5 s
  against 2.6-3.0 s read plainly (`image_stream`, 2 cores at load 9).
  """
  empty = tf.zeros([0, 0, 3], tf.uint8)

  def one(raw, label, place):
    decoded = tf.data.Dataset.from_tensors(raw).map(
        lambda r: (decode_fn(r), True)).ignore_errors()
    return decoded.concatenate(tf.data.Dataset.from_tensors(
        (empty, False))).take(1).map(lambda x, ok: (x, label, ok, place))

  def keep(x, label, ok, place):
    del x, label  # Unused.

    def first_skip():
      with tf.control_dependencies([skipped.insert(place, 1)]):
        tf.print(tf.strings.join([
            what, ": skipped ", place, " (it cannot be read now; "
            "`skip_bad_records`); ", tf.strings.as_string(skipped.size()),
            " skipped so far."]), output_stream=sys.stderr)
        return tf.constant(False)

    return tf.cond(ok, lambda: tf.constant(True),
                   lambda: tf.cond(skipped.lookup(place) == 0, first_skip,
                                   lambda: tf.constant(False)))

  ds = ds.interleave(one, cycle_length=16, block_length=1,
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.filter(keep).map(lambda x, label, ok, place: (x, label))


def table_places(skipped) -> List[str]:
  """The places in a `skipped_table`, sorted."""
  return sorted(p.decode("utf-8", "backslashreplace")
                for p in skipped.export()[0].numpy())


def image_stream(paths: List[str], labels: np.ndarray,
                 skip_bad_records: bool = False) -> Stream:
  """The files as a `Stream` of (uint8 image, label) pairs, decoded as they
  are read; `read(shuffle_files=True, seed)` reshuffles the files every
  pass. A file that cannot be read any more stops the read (its
  `unreadable` names it), or with `skip_bad_records` is left out
  (`decoded_or_skipped`)."""
  y = labels.astype(np.float32) if labels.ndim == 2 else labels
  skipped = skipped_table() if skip_bad_records else None

  def read(shuffle_files: bool = False, seed: int = 0) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices((np.array(paths), y))
    if shuffle_files:
      ds = ds.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    if skipped is not None:
      return decoded_or_skipped(
          ds.map(lambda path, label: (path, label, path)),
          lambda path: decode(tf.io.read_file(path)), skipped,
          "image_folder")
    return ds.map(lambda path, label: (decode(tf.io.read_file(path)), label),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def unreadable() -> Optional[str]:
    for path in paths:
      problem = undecodable(path)
      if problem:
        return f"{path}: {problem}"
    return None

  return Stream(read=read, size=len(paths), multi_label=labels.ndim == 2,
                unreadable=unreadable,
                skipped_reads=(None if skipped is None else
                               lambda: table_places(skipped)))


