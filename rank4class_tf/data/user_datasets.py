"""A user's own classification data as a `ClassificationData`.

`--dataset=<name> --data_dir=DIR` (docs/data.md, "Your own data"):

* `text_files`: train / validation / test files as CSV, TSV or JSONL
  (optionally gzipped), or Keras' `text_dataset_from_directory` layout
  `<split>/<class>/*.txt`; read and checked by `user_files`.
* `image_folder`: Keras' `image_dataset_from_directory` layout,
  `<split>/<class>/*.{jpg,jpeg,png,bmp,gif}`, images of any size and colour
  mode (grey and RGBA become RGB). Every image is decoded once when loaded,
  so an undecodable one stops the run before anything is written (or, with
  `skip_bad_records`, is left out and counted); training then streams the
  files from disk (only their paths are held), reshuffled every epoch. A
  file deleted or damaged after the load stops the read (the stream's
  `unreadable` names it for the one-line message), or with
  `skip_bad_records` is left out where it is read and counted
  (`decoded_or_skipped`). The
  whole image is resized to `image_size` (224 by default), aspect ratio not
  kept, as Keras' loader does; training adds a random horizontal flip, and
  both normalise with the ImageNet mean and deviation
  (`images.MultiLabelImagePreprocessing`), which ResNet-50's pretrained
  weights expect.
* `tabular_files`: CSV or TSV files with numeric feature columns
  (`feature_columns`, by default every column but the label), for the `mlp`
  encoder. Features are standardised, (x - mean) / std per column with the
  train split's statistics (std 0 taken as 1), inside the model's input
  (`inputs.RawInputs`), so the served model takes raw feature vectors.
* `tfrecord` and `tfds:<name>`: `user_records`.

Labels are class names, or integer ids into `class_names_file`
(`user_files.label_reading`: one reading for the whole data set when the
names are numbers); without that file the classes are the train labels'
names, sorted (logged). Names are stripped of surrounding whitespace and
may hold no control character (`user_files.clean_labels`). A class no train
row has, a label in validation or test that train never has, and single
labels mixed with lists are refused with one line naming the file and
line; train data of fewer than two classes is refused by
`user_records.load`, for every format. Hidden entries of the folder layouts
(a name starting with `.`) are skipped and counted
(`user_files.class_folders`). A split without a file is cut from train by a
seeded stratified
split (`split_seed`, 10% each), which is logged.
"""

import logging
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.data import images
from rank4class_tf.data import streamed_files
from rank4class_tf.data import user_files
from rank4class_tf.data.datasets import (  # pylint: disable=g-multiple-import
    SPLITS, ClassificationData, Stream, read_class_names, stratified_split)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
DEFAULT_IMAGE_SIZE = 224
# Image files are reshuffled whole every epoch (`read`); this buffer only
# mixes decoded images a little more, and bounds the memory they take.
IMAGE_SHUFFLE_BUFFER = 256


def labelled_splits(rows: Dict[str, user_files.Rows],
                    options: user_files.Options, dataset: str
                   ) -> Tuple[Tuple[str, ...], Dict[str, Tuple[list, list]]]:
  """Class names, and every split's (instances, class id tuples).

  `rows` holds train and the splits that have a file; the others are cut
  from train (seeded, stratified on each row's first class).

  Raises:
    ValueError: one line naming the file and line, or the file.
  """
  rows = user_files.clean_labels(rows)
  names, from_labels = user_files.class_names(rows, options,
                                              read_class_names)
  names_file = "" if from_labels else options.class_names_file
  if from_labels:
    logging.info("%s: %d classes named by the train labels, sorted: %s.",
                 dataset, len(names), ", ".join(names))
  reading = user_files.label_reading(rows, names, names_file)
  skip = options.skip_bad_records
  rows["train"], train_ids = user_files.label_ids(
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
    rows[split], ids = user_files.label_ids(rows[split], names, names_file,
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


def load_text_files(data_dir: Optional[str],
                    options: Optional[user_files.Options] = None
                   ) -> ClassificationData:
  """A user's own text files (`user_files`: formats, columns, checks), held
  in memory, or streamed when a split's file is larger than
  `streamed_files.STREAM_BYTES`."""
  options = options or user_files.Options()
  files = user_files.split_files(data_dir)
  if streamed_files.should_stream(files):
    names, streams = streamed_files.load(files, options, read_class_names)
    return ClassificationData(
        name="text_files", class_names=names, instance_key="text",
        instance_shape=(), instance_dtype=tf.string, streams=streams,
        shuffle_buffer=streamed_files.SHUFFLE_BUFFER)
  rows = {split: user_files.read_rows(path, options)
          for split, path in files.items()}
  names, parts = labelled_splits(rows, options, "text_files")
  multi = isinstance(rows["train"].labels[0], tuple)
  splits = {split: (np.array(texts, dtype=object),
                    label_array(ids, len(names), multi))
            for split, (texts, ids) in parts.items()}
  return ClassificationData(
      name="text_files", class_names=names, instance_key="text",
      instance_shape=(), instance_dtype=tf.string,
      splits={split: splits[split] for split in SPLITS})


def load_tabular_files(data_dir: Optional[str],
                       options: Optional[user_files.Options] = None
                      ) -> ClassificationData:
  """A user's numeric CSV / TSV files (see the module doc).

  Raises:
    ValueError: as `user_files.read_table`; when two splits' files have
      other feature columns.
  """
  options = options or user_files.Options()
  rows, columns = {}, None
  for split, path in user_files.split_files(data_dir).items():
    names, rows[split] = user_files.read_table(path, options)
    if columns is None:
      columns = names
      options = user_files.Options(**dict(
          vars(options), feature_columns=names))  # The same in every split.
  class_names, parts = labelled_splits(rows, options, "tabular_files")
  multi = isinstance(rows["train"].labels[0], tuple)
  splits = {split: (np.array(vectors, np.float32).reshape([-1, len(columns)]),
                    label_array(ids, len(class_names), multi))
            for split, (vectors, ids) in parts.items()}
  x_train = splits["train"][0]
  std = x_train.std(axis=0)
  logging.info("tabular_files: %d feature columns (%s), standardised with "
               "the train split's mean and deviation.", len(columns),
               ", ".join(columns))
  return ClassificationData(
      name="tabular_files", class_names=class_names, instance_key="features",
      instance_shape=(len(columns),), instance_dtype=tf.float32,
      splits={split: splits[split] for split in SPLITS},
      feature_statistics=(x_train.mean(axis=0), np.where(std > 0, std, 1.0)),
      feature_names=columns)


def image_rows(folder: str, options: user_files.Options) -> user_files.Rows:
  """The image files of one split folder (`<class>/*.jpg` ...), each decoded
  once here to check it: the rows' `texts` are the files' paths.

  Raises:
    ValueError: naming the folder when it has no class folder or image;
      naming the file when an image cannot be decoded (unless
      `options.skip_bad_records`: then left out and counted).
  """
  if not os.path.isdir(folder):
    raise ValueError(f"{folder}: not a folder (image_folder reads "
                     "<split>/<class>/*.jpg|png).")
  paths, labels, skipped = [], [], []
  for name, files in user_files.class_folders(folder, "*.jpg"):
    for path in files:
      file = os.path.basename(path)
      if not file.lower().endswith(IMAGE_EXTENSIONS) or os.path.isdir(path):
        continue
      problem = undecodable(path)
      if problem:
        if not options.skip_bad_records:
          raise ValueError(f"{path}: {problem}")
        skipped.append(f"{path}: {problem}")
        continue
      paths.append(path)
      labels.append(name)
  if not paths:
    raise ValueError(f"{folder}: no images ({', '.join(IMAGE_EXTENSIONS)}) "
                     "in its class folders" +
                     (f"; {len(skipped)} undecodable, skipped." if skipped
                      else "."))
  return user_files.Rows(folder, paths, labels, list(paths), skipped)


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


def load_image_folder(data_dir: Optional[str],
                      options: Optional[user_files.Options] = None,
                      image_size: Optional[int] = None) -> ClassificationData:
  """A user's image folders (see the module doc)."""
  options = options or user_files.Options()
  if not data_dir:
    raise ValueError("`data_dir` must name the folder holding train/ (and "
                     "validation/, test/) for `dataset`=image_folder.")
  if not os.path.isdir(data_dir):
    raise ValueError(f"`data_dir`={data_dir}: not a folder.")
  rows = {split: image_rows(os.path.join(data_dir, split), options)
          for split in SPLITS
          if os.path.exists(os.path.join(data_dir, split))}
  if "train" not in rows:
    raise ValueError(f"`data_dir`={data_dir} holds no train/ folder "
                     "(train/<class>/*.jpg|png).")
  names, parts = labelled_splits(rows, options, "image_folder")
  preprocessing = images.MultiLabelImagePreprocessing(
      image_size or DEFAULT_IMAGE_SIZE)
  return ClassificationData(
      name="image_folder", class_names=names, instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams={split: image_stream(parts[split][0], label_array(
          parts[split][1], len(names), False), options.skip_bad_records)
               for split in SPLITS},
      preprocessing=preprocessing, shuffle_buffer=IMAGE_SHUFFLE_BUFFER)
