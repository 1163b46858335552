"""`tfrecord`: a user's TFRecord files of `tf.train.Example`s, streamed
(the files, layouts and checks: `records`; the streams: `record_streams`).
"""

import collections
import logging
import re
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf.data import classes as classes_lib
from rank4class_tf.data import images
from rank4class_tf.data import image_files
from rank4class_tf.data import record_streams
from rank4class_tf.data import records
from rank4class_tf.data import tfds_download
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import SPLITS, ClassificationData, Stream
from rank4class_tf.data.record_streams import (  # pylint: disable=g-multiple-import
    Tally, cached_tally, finish, record_stream)
from rank4class_tf.data.records import (  # pylint: disable=g-multiple-import
    HELD_OUT_FRACTION, Classes, RecordChecker, RecordLayout, describe,
    first_layout, record_files)


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """The user's TFRecord files in `data_dir` (`user_files.Options`)."""
  del name, download  # Local files.
  return load_tfrecord(data_dir, options, image_size)


def _preview(names: Sequence[str], most: int = 20) -> str:
  shown = ", ".join(names[:most])
  return shown + (f", ... ({len(names)} in all)" if len(names) > most
                  else "")


def _classes(layout: RecordLayout, counts: collections.Counter,
             options: user_files.Options, train: str) -> Classes:
  """The class list: `class_names_file`, else the train labels sorted."""
  if options.class_names_file:
    names = classes_lib.read_class_names(options.class_names_file)
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
  tallies = {"train": cached_tally(
      train_files, RecordChecker(layout, fixed, None, train), options,
      cut=len(missing))}
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
    tallies[split] = cached_tally(files[split], checker, options)
    sizes[split] = tallies[split].sizes[0]
    if not sizes[split]:
      raise ValueError(f"{describe(files[split])}: no records" +
                       (f" ({tallies[split].skipped} bad, skipped)."
                        if tallies[split].skipped else "."))
    streams[split] = record_stream(files[split], checker, options,
                                   sizes[split], multi)
  _report(tallies)
  return record_streams.classification_data("tfrecord", classes.names, layout.kind,
                              streams, image_size)
