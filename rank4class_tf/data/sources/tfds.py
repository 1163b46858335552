"""`tfds:<name>`: any TFDS classification data set with one text or image
feature and one ClassLabel (see `records`' module doc).
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
    Tally, finish, record_stream, tally)
from rank4class_tf.data.records import (  # pylint: disable=g-multiple-import
    HELD_OUT_FRACTION, Classes, RecordChecker, RecordLayout, describe,
    first_layout, record_files)


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """The TFDS data set `name` (`tfds:<name>`)."""
  return load_tfds(name, data_dir, options, image_size, download)


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
      return finish(pairs, kind, size, shuffle_files, seed)
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
  return record_streams.classification_data(name, class_names, kind, streams, image_size)
