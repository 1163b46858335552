"""Classification datasets and their tf.data pipelines in TF-Ranking's terms.

A dataset yields (instance, label) pairs per split: an integer class id for
multiclass data, a multi-hot float vector for multi-label data.
`ranking_dataset` turns batches of those into what the ranking model reads,
the feature contract of `features` (context features, `class_id`,
`example_list_mask`, one-hot or multi-hot labels).

Names:

* `digits`: scikit-learn's bundled real digits (1,797 8x8 grey images, 10
  classes), pixels scaled to [0, 1], a fixed stratified 70/15/15
  train/validation/test split (1,257 / 270 / 270) drawn with `SPLIT_SEED`,
  independent of the training seed.
* `goemotions`: GoEmotions (Demszky et al. 2020), shipped in
  `data/goemotions/`; the single-label view keeps the rows with exactly one
  label: 36,308 / 4,548 / 4,590 Reddit comments, 28 classes (27 emotions +
  neutral) named by `emotions.txt`.
* `goemotions_multilabel`: every row (43,410 / 5,426 / 5,427) with multi-hot
  labels over the 28 classes.
* `mind`: MIND news (Wu et al. 2020) read from `--data_dir`'s `news.tsv`; the
  instance is (title, abstract), packed as [CLS] title [SEP] abstract [SEP];
  the label is the category; a seeded stratified 60/20/20 split.
* A user's own data (`catalog.USER_DATASETS`: `text_files`,
  `image_folder`, `tabular_files`, `tfrecord`) and any TFDS classification
  data set (`tfds:<name>`): `user_datasets` and `user_records`.
* `cifar10`: CIFAR-10 (50,000 / 10,000 32x32 colour images, 10 classes)
  read with TFDS's own builder from `--data_dir`; `validation` and `test`
  are both TFDS's test split (the paper picks the best checkpoint on it).
  cifar-vgg preprocessing (`images.CifarVGGPreprocessing`), with the
  training split's pixel mean and standard deviation.
* `imagenet2012`: ImageNet ILSVRC 2012 (1,281,167 / 50,000 images, 1,000
  classes named by their WordNet ids) from TFDS's builder; `validation` and
  `test` are both TFDS's validation split. Model Garden ResNet preprocessing
  (`images.ImageNetPreprocessing`) to `image_size` (224).
* `coco2017`: MS-COCO 2017 as multi-label classification (TFDS
  `coco/2017`, 118,287 / 5,000 images, 80 classes named by TFDS's
  `objects/label` feature): the label of an image is the set of the
  categories of its annotated objects, crowd regions included. `validation`
  and `test` are both TFDS's validation split (COCO's test split has no
  public labels; multi-label papers report on val). The 1,021 train and 48
  validation images without any object are dropped (see below).
* `voc2007`: PASCAL VOC 2007 as multi-label classification (TFDS
  `voc/2007`, 20 classes from `objects/label`, `difficult` objects
  included): `train` is TFDS's `train+validation` (VOC's trainval, 5,011
  images, the standard multi-label protocol); `validation` and `test` are
  both VOC's test split (4,952 images): as for `cifar10`, the best
  checkpoint is picked on test. Every VOC image has an object.
  Both multi-label datasets are resized whole to `image_size` (224; ML-GCN
  and MulCon use 448) by `images.MultiLabelImagePreprocessing`, and
  stream through a shuffle buffer (`MULTI_LABEL_SHUFFLE_BUFFER`) instead of
  being cached.
* `digits32`: the `digits` split upscaled to 32x32x3 uint8 images (bilinear,
  grey copied to 3 channels), a real image dataset that ships offline, with
  the cifar-vgg preprocessing without flips (a mirrored digit is another
  symbol).

TFDS datasets are never downloaded unless `download=True`: a missing
prepared copy stops with a one-line ValueError naming the dataset and the
directory. Image datasets yield raw uint8 images; their `preprocessing` runs
per example in `ranking_dataset` (augmentation on the train split only).

Multi-label TFDS images (`coco2017`, `voc2007`) without any annotated object
are dropped, in every split: an all-zero label has no relevant class to
rank, so ranking metrics (MRR, NDCG) and listwise losses are undefined on
it, and the usual protocol (ML-GCN) keeps the labelled images only. The
`validation` and `test` splits are counted when the dataset is loaded (one
pass parsing their labels only), so their `size` is exact and their tf.data
length known, as Keras's validation needs. The `train` split is not counted
(all of COCO's train set would be read): its `size` is TFDS's count before
the filter, an upper bound (`Stream.exact_size` is False); the fixed shuffle
buffer does not depend on it.

Malformed files stop with a ValueError naming the file and line.

One module holds every dataset (about 800 lines): `get` and the names
above stay beside the loaders they describe, and each loader is short;
splitting the TFDS loaders off would make them import this module while
`get` imports them (a cycle).
"""

import codecs
import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.data import features as features_lib
from rank4class_tf.data import images
from rank4class_tf.data import inputs as inputs_lib
from rank4class_tf.data import text
from rank4class_tf.data import tfds_download
from rank4class_tf.data import user_files
# The dataset names and their properties (no TensorFlow), used here by name.
from rank4class_tf.catalog import (  # pylint: disable=g-multiple-import
    DATASET_NAMES, IMAGE_DATASETS, MULTI_LABEL_DATASETS, RESIZED_DATASETS,
    TEXT_DATASETS, TFDS_DATASETS, TFDS_SPLITS, USER_DATASETS,
    VALIDATION_IS_TEST, is_tfds)

SPLITS = ("train", "validation", "test")
SPLIT_SEED = 20220128
# The shipped data files: rank4class_tf/data/shipped/ in an installed package
# (setup.py installs the repository's data/ there), else data/ beside the
# package in a checkout or an editable install.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "shipped")
if not os.path.isdir(REPO_DATA_DIR):
  REPO_DATA_DIR = os.path.join(os.path.dirname(_PACKAGE_DIR), "data")


@dataclasses.dataclass(frozen=True)
class Stream:
  """A split read from files by tf.data instead of held in memory.

  Attributes:
    read: `read(shuffle_files, seed)` -> unbatched (raw instance, label)
      pairs, the label an int64 class id or, when `multi_label`, a float32
      multi-hot [num_classes]; `shuffle_files` shuffles the order of the
      files.
    size: number of examples; when `exact_size` is False, the number before
      `read` filtered some out (an upper bound), and `read`'s length is
      unknown to tf.data.
    multi_label: the labels are multi-hot vectors, not class ids.
    exact_size: whether `size` counts exactly the examples `read` yields.
    unreadable: for a stream of a user's files, `unreadable()` -> the first
      instance that cannot be read now, `FILE: reason` or `FILE: record N:
      reason`, or None: asked when reading failed during a run (a file
      deleted or damaged since it was loaded), to name what broke
      (`first_unreadable`).
    skipped_reads: with `skip_bad_records`, `skipped_reads()` -> the places
      of the instances `read` left out because they could not be read when
      read (after the load's checks passed them); None: nothing is skipped
      so.
  """
  read: Callable[[bool, int], tf.data.Dataset]
  size: int
  multi_label: bool = False
  exact_size: bool = True
  unreadable: Optional[Callable[[], Optional[str]]] = None
  skipped_reads: Optional[Callable[[], List[str]]] = None


@dataclasses.dataclass(frozen=True)
class ClassificationData:
  """A classification dataset: its classes, instance feature and splits.

  Attributes:
    name: dataset name.
    class_names: one name per class, index = class id.
    instance_key: name of the raw instance feature (`image`, `text`).
    instance_shape: shape of one instance as the model reads it (without the
      batch axis): the raw instance, or the preprocessed image.
    instance_dtype: its dtype (tf.string for text).
    splits: split name -> (instances, labels) numpy arrays held in memory;
      labels are integer ids [num_examples] or multi-hot floats
      [num_examples, num_classes].
    streams: split name -> `Stream`, for splits read from files (TFDS).
    preprocessing: for images, `preprocessing(raw, training)` maps one raw
      uint8 image to the model's float32 image (see `images`); None when the
      raw instance is the model's input.
    shuffle_buffer: training shuffle buffer; None shuffles the whole split
      and caches every split in memory, an int streams without caching.
    feature_statistics: for numeric feature vectors (a user's table), the
      train split's (mean, std) per feature [num_features]: the model's
      input standardises them (`inputs.RawInputs`); None leaves instances
      as they are.
    feature_names: the names of those features, in order.
  """
  name: str
  class_names: Tuple[str, ...]
  instance_key: str
  instance_shape: Tuple[int, ...]
  instance_dtype: tf.DType
  splits: Dict[str, Tuple[np.ndarray, np.ndarray]] = dataclasses.field(
      default_factory=dict)
  streams: Dict[str, Stream] = dataclasses.field(default_factory=dict)
  preprocessing: Optional[Callable[[tf.Tensor, bool], tf.Tensor]] = None
  shuffle_buffer: Optional[int] = None
  feature_statistics: Optional[Tuple[np.ndarray, np.ndarray]] = None
  feature_names: Tuple[str, ...] = ()

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  @property
  def is_text(self) -> bool:
    return self.instance_dtype == tf.string

  @property
  def multi_label(self) -> bool:
    """Whether labels are multi-hot: 2-D in-memory labels, or streams that
    say so (`Stream.multi_label`)."""
    if self.splits:
      return next(iter(self.splits.values()))[1].ndim == 2
    return any(stream.multi_label for stream in self.streams.values())

  @property
  def split_names(self) -> Tuple[str, ...]:
    return tuple(self.splits) + tuple(self.streams)

  def size(self, split: str) -> int:
    """Number of examples of `split`; for a stream whose `exact_size` is
    False (the `train` split of multi-label TFDS images), TFDS's count before
    images without an object were dropped, an upper bound."""
    if split in self.streams:
      return self.streams[split].size
    return len(self.splits[split][1])

  def dataset(self, split: str, shuffle_files: bool = False,
              seed: int = 0) -> tf.data.Dataset:
    """Unbatched (raw instance, label) pairs of `split`.

    Args:
      split: split name.
      shuffle_files: for streamed splits, read the files in a seeded random
        order (in-memory splits ignore it).
      seed: the file-order seed.
    """
    if split in self.streams:
      return self.streams[split].read(shuffle_files, seed)
    if split not in self.splits:
      raise ValueError(f"Unknown split {split!r}; valid splits: "
                       f"{', '.join(self.split_names)}.")
    x, y = self.splits[split]
    y = y.astype(np.float32) if y.ndim == 2 else y.astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((x, y))


def first_unreadable(data: ClassificationData,
                     splits: Sequence[str] = SPLITS) -> Optional[str]:
  """The first instance of `splits` that cannot be read now
  (`Stream.unreadable`), or None: every one reads, or no split can say."""
  for split in splits:
    stream = data.streams.get(split)
    if stream is not None and stream.unreadable is not None:
      found = stream.unreadable()
      if found:
        return found
  return None


def skipped_reads(data: ClassificationData) -> Dict[str, List[str]]:
  """{split: the places its stream left out when read}
  (`Stream.skipped_reads`), for the splits that left any out."""
  out = {}
  for split, stream in data.streams.items():
    places = stream.skipped_reads() if stream.skipped_reads else []
    if places:
      out[split] = places
  return out


def ranking_features(instance_inputs: Callable,
                     num_classes: int) -> Callable:
  """Returns a map fn: batched (instance, label) -> (features, labels),
  the context features being `instance_inputs(instance)`."""

  def to_ranking(instance, label):
    features = features_lib.class_list_features(instance_inputs(instance),
                                                 num_classes)
    if label.shape.rank == 2:
      return features, label
    return features, tf.one_hot(label, num_classes, dtype=tf.float32)

  return to_ranking


def ranking_dataset(data: ClassificationData,
                    split: str,
                    batch_size: int,
                    training: bool,
                    seed: int = 0,
                    instance_inputs: Optional[features_lib.InstanceInputs] = None,
                    length_sorted: bool = False
                   ) -> tf.data.Dataset:
  """Batched ranking examples of `split`.

  Training datasets are cached (unless `data.shuffle_buffer` is set: then
  streamed through a buffer of that size), shuffled with `seed` (reshuffled
  each pass) and repeated forever; evaluation datasets are read once in
  order. Images go through `data.preprocessing` per example, before
  batching, with `training` choosing augmentation or evaluation
  preprocessing.

  Text held in memory is tokenized once per split
  (`inputs.TextInputs.token_ids`) and tf.data reads the token ids; a
  streamed split (or one too large for its ids to be kept) is tokenized in
  tf.data, after batching, in parallel. Both give the same batches: the
  shuffle's order depends on the seed and the number of examples only.

  Text with length bucketing (`inputs.TextInputs(length_bucketing=True)`):
  every batch is cut to its longest member rounded up to
  `text.LENGTH_QUANTUM` tokens. In training, each example of the shuffled
  stream waits in the queue of its length bucket (`text.bucket_key`) until
  `batch_size` examples of that bucket have come: batches hold examples of
  similar length, each epoch still visits every example once in the
  shuffle's order of arrival, and the stream is a fixed function of
  `seed`, so a resumed run skips to the same batch. Evaluation keeps the
  split's order, unless `length_sorted` (for metrics alone, where order
  does not matter: Keras' validation) reads it sorted by token count,
  which pads least.
  """
  instance_inputs = instance_inputs or inputs_lib.default_inputs(data)
  bucketed = getattr(instance_inputs, "length_bucketing", False)
  ids = None
  if split in data.splits and hasattr(instance_inputs, "token_ids"):
    ids = instance_inputs.token_ids(data.splits[split][0])
  if ids is not None:
    return _token_id_batches(data, split, ids, batch_size, training, seed,
                             instance_inputs, length_sorted and bucketed)
  if bucketed and length_sorted and not training and split in data.splits:
    x, y = data.splits[split]
    order = np.argsort(instance_inputs.token_lengths(x), kind="stable")
    data = dataclasses.replace(data, splits=dict(
        data.splits, **{split: (x[order], y[order])}))
  ds = data.dataset(split, shuffle_files=training, seed=seed)
  if data.shuffle_buffer is None:
    ds = ds.cache()
  if training:
    ds = ds.shuffle(data.shuffle_buffer or data.size(split), seed=seed,
                    reshuffle_each_iteration=True).repeat()
  if bucketed and training:
    return _bucketed_batches(ds, batch_size, instance_inputs,
                             data.num_classes)
  if data.preprocessing is not None:
    preprocess = data.preprocessing
    ds = ds.map(lambda x, y: (preprocess(x, training=training), y),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  ds = ds.batch(batch_size, drop_remainder=training)
  ds = ds.map(ranking_features(instance_inputs, data.num_classes),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)


def _token_id_batches(data: ClassificationData, split: str,
                      ids: Dict[str, np.ndarray], batch_size: int,
                      training: bool, seed: int, instance_inputs,
                      length_sorted: bool) -> tf.data.Dataset:
  """`ranking_dataset` of an in-memory text split from its token ids."""
  labels = data.splits[split][1]
  labels = (labels.astype(np.float32) if labels.ndim == 2
            else labels.astype(np.int64))
  if length_sorted:
    order = np.argsort(ids[text.LENGTH], kind="stable")
    ids = {name: value[order] for name, value in ids.items()}
    labels = labels[order]
  ds = tf.data.Dataset.from_tensor_slices((ids, labels))
  to_ranking = ranking_features(instance_inputs.from_token_ids,
                                data.num_classes)
  if training:
    ds = ds.shuffle(data.shuffle_buffer or len(labels), seed=seed,
                    reshuffle_each_iteration=True).repeat()
    if instance_inputs.length_bucketing:
      ds = ds.group_by_window(
          key_func=lambda x, y: text.length_bucket(x[text.LENGTH]),
          reduce_func=lambda key, window: window.batch(batch_size,
                                                       drop_remainder=True),
          window_size=batch_size)
    else:
      ds = ds.batch(batch_size, drop_remainder=True)
  else:
    ds = ds.batch(batch_size)
  ds = ds.map(to_ranking, num_parallel_calls=tf.data.AUTOTUNE,
              deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)


# Raw texts tokenized per call before bucketing (order is kept).
TOKENIZE_CHUNK = 256


def _bucketed_batches(ds: tf.data.Dataset, batch_size: int,
                      instance_inputs, num_classes: int) -> tf.data.Dataset:
  """The shuffled training stream of `ranking_dataset`, tokenized in order,
  grouped by length bucket and each batch cut to its bucket."""
  ds = ds.batch(TOKENIZE_CHUNK).map(
      lambda x, y: (instance_inputs.packed(x), y),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
  ds = ds.group_by_window(
      key_func=lambda x, y: text.bucket_key(x),
      reduce_func=lambda key, window: window.batch(batch_size,
                                                   drop_remainder=True),
      window_size=batch_size)
  ds = ds.map(ranking_features(text.trim, num_classes),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)


def streamed(data: ClassificationData) -> ClassificationData:
  """`data` with its in-memory splits read as streams: what the same
  examples in large files give (text tokenized in tf.data). For tests and
  benchmarks that compare the two paths."""
  def reader(split: str) -> Callable[[bool, int], tf.data.Dataset]:
    return lambda shuffle_files, seed: data.dataset(split)
  return dataclasses.replace(data, splits={}, streams={
      split: Stream(read=reader(split), size=data.size(split),
                    multi_label=data.multi_label)
      for split in data.splits})


def load_digits(data_dir: Optional[str] = None) -> ClassificationData:
  """scikit-learn's digits with the fixed stratified split (see module doc)."""
  del data_dir  # Bundled with scikit-learn.
  from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
  from sklearn import model_selection  # pylint: disable=g-import-not-at-top
  digits = sk_datasets.load_digits()
  images = (digits.images / 16.0).astype(np.float32)[..., np.newaxis]
  labels = digits.target.astype(np.int64)
  x_train, x_rest, y_train, y_rest = model_selection.train_test_split(
      images, labels, test_size=0.3, stratify=labels, random_state=SPLIT_SEED)
  x_val, x_test, y_val, y_test = model_selection.train_test_split(
      x_rest, y_rest, test_size=0.5, stratify=y_rest,
      random_state=SPLIT_SEED)
  return ClassificationData(
      name="digits",
      class_names=tuple(str(i) for i in range(10)),
      instance_key="image",
      instance_shape=(8, 8, 1),
      instance_dtype=tf.float32,
      splits={
          "train": (x_train, y_train),
          "validation": (x_val, y_val),
          "test": (x_test, y_test),
      })


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


def read_goemotions_tsv(path: str, num_classes: int
                       ) -> Tuple[List[str], List[List[int]]]:
  """Parses a GoEmotions TSV: text <TAB> comma-separated label ids <TAB> id.

  The text is kept as it is (about 2.5% carry CSV-style quoting).

  Raises:
    ValueError: `path:line: ...` for a wrong field count, an empty text, or a
      label that is not an integer in [0, num_classes).
  """
  texts, labels = [], []
  for number, line in enumerate(read_lines(path), start=1):
    fields = line.split("\t")
    if len(fields) != 3:
      raise ValueError(f"{path}:{number}: expected 3 tab-separated fields "
                       f"(text, labels, id), got {len(fields)}.")
    instance, label_field, _ = fields
    if not instance.strip():
      raise ValueError(f"{path}:{number}: empty text.")
    ids = []
    for token in label_field.split(","):
      try:
        label = int(token)
      except ValueError:
        raise ValueError(f"{path}:{number}: label {token!r} is not an "
                         "integer class id.") from None
      if not 0 <= label < num_classes:
        raise ValueError(f"{path}:{number}: label {label} is outside the "
                         f"class list (0..{num_classes - 1}).")
      ids.append(label)
    texts.append(instance)
    labels.append(ids)
  if not texts:
    raise ValueError(f"{path}: no examples.")
  return texts, labels


def _goemotions(data_dir: Optional[str], multi_label: bool
               ) -> ClassificationData:
  data_dir = data_dir or os.path.join(REPO_DATA_DIR, "goemotions")
  class_names = read_class_names(os.path.join(data_dir, "emotions.txt"))
  splits = {}
  for split, filename in (("train", "train.tsv"), ("validation", "dev.tsv"),
                          ("test", "test.tsv")):
    texts, labels = read_goemotions_tsv(os.path.join(data_dir, filename),
                                        len(class_names))
    if multi_label:
      y = np.zeros([len(labels), len(class_names)], np.float32)
      for row, ids in enumerate(labels):
        y[row, ids] = 1.0
      splits[split] = (np.array(texts, dtype=object), y)
    else:
      keep = [i for i, ids in enumerate(labels) if len(ids) == 1]
      splits[split] = (np.array([texts[i] for i in keep], dtype=object),
                       np.array([labels[i][0] for i in keep], np.int64))
  return ClassificationData(
      name="goemotions_multilabel" if multi_label else "goemotions",
      class_names=class_names, instance_key="text", instance_shape=(),
      instance_dtype=tf.string, splits=splits)


def load_goemotions(data_dir: Optional[str] = None) -> ClassificationData:
  """GoEmotions, single-label view (see module doc)."""
  return _goemotions(data_dir, multi_label=False)


def load_goemotions_multilabel(data_dir: Optional[str] = None
                              ) -> ClassificationData:
  """GoEmotions, every row with multi-hot labels (see module doc)."""
  return _goemotions(data_dir, multi_label=True)


MIND_FIELDS = ("news_id", "category", "subcategory", "title", "abstract",
               "url", "title_entities", "abstract_entities")


def read_mind_news(path: str) -> Tuple[List[Tuple[str, str]], List[str]]:
  """Parses MIND's news.tsv: 8 tab-separated fields per line (MIND_FIELDS).

  Returns:
    ([(title, abstract)], [category]) in file order. Abstracts may be empty.

  Raises:
    ValueError: `path:line: ...` for a wrong field count or an empty title or
      category.
  """
  instances, categories = [], []
  for number, line in enumerate(read_lines(path), start=1):
    fields = line.split("\t")
    if len(fields) != len(MIND_FIELDS):
      raise ValueError(f"{path}:{number}: expected {len(MIND_FIELDS)} "
                       f"tab-separated fields ({', '.join(MIND_FIELDS)}), "
                       f"got {len(fields)}.")
    if not fields[1].strip():
      raise ValueError(f"{path}:{number}: empty category.")
    if not fields[3].strip():
      raise ValueError(f"{path}:{number}: empty title.")
    instances.append((fields[3], fields[4]))
    categories.append(fields[1])
  if not instances:
    raise ValueError(f"{path}: no examples.")
  return instances, categories


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


def load_mind(data_dir: Optional[str] = None) -> ClassificationData:
  """MIND news categories from `data_dir/news.tsv` (see module doc)."""
  if not data_dir:
    raise ValueError("`data_dir` must name the folder holding MIND's "
                     "news.tsv for `dataset`=mind.")
  path = data_dir
  if os.path.isdir(data_dir):
    path = os.path.join(data_dir, "news.tsv")
  instances, categories = read_mind_news(path)
  class_names = tuple(sorted(set(categories)))
  index = {name: i for i, name in enumerate(class_names)}
  labels = np.array([index[c] for c in categories], np.int64)
  x = np.empty([len(instances), 2], dtype=object)
  x[:] = instances
  train, validation, test = stratified_split(labels, (0.6, 0.2, 0.2),
                                             SPLIT_SEED)
  return ClassificationData(
      name="mind", class_names=class_names, instance_key="text",
      instance_shape=(2,), instance_dtype=tf.string,
      splits={"train": (x[train], labels[train]),
              "validation": (x[validation], labels[validation]),
              "test": (x[test], labels[test])})


def load_digits32(data_dir: Optional[str] = None) -> ClassificationData:
  """`digits` upscaled to 32x32x3 uint8 images (see module doc)."""
  digits = load_digits(data_dir)
  splits = {}
  for split, (x, y) in digits.splits.items():
    big = tf.image.resize(x, [32, 32], method="bilinear").numpy()
    big = np.clip(np.round(big * 255.0), 0, 255).astype(np.uint8)
    splits[split] = (np.repeat(big, 3, axis=-1), y)
  mean, std = images.pixel_statistics(
      tf.data.Dataset.from_tensor_slices(splits["train"]))
  return ClassificationData(
      name="digits32", class_names=digits.class_names, instance_key="image",
      instance_shape=(32, 32, 3), instance_dtype=tf.float32, splits=splits,
      preprocessing=images.CifarVGGPreprocessing(mean, std, flip=False))


IMAGENET_SHUFFLE_BUFFER = 10_000  # The Model Garden's ImageNet buffer.
# As ImageNet's: the whole of VOC's trainval, 8% of COCO's train split.
MULTI_LABEL_SHUFFLE_BUFFER = 10_000


@dataclasses.dataclass(frozen=True)
class TfdsSource:
  """Where a dataset lives in TFDS and how its examples become pairs.

  Attributes:
    tfds_name: TFDS name, `name` or `name/config` (`coco/2017`).
    label_feature: `/`-path of the ClassLabel feature that names the classes
      and labels the image: `label` (one class id per image) or
      `objects/label` (one per annotated object).
    multi_label: False: the feature is the image's class id, the label an
      int64. True: the set of the image's object labels becomes a multi-hot
      float32 [num_classes] label (`multi_hot`), and images without any
      object are dropped (see the module doc).
  """
  tfds_name: str
  label_feature: str = "label"
  multi_label: bool = False


TFDS_SOURCES = {
    "cifar10": TfdsSource("cifar10"),
    "imagenet2012": TfdsSource("imagenet2012"),
    "coco2017": TfdsSource("coco/2017", "objects/label", multi_label=True),
    "voc2007": TfdsSource("voc/2007", "objects/label", multi_label=True),
}


def multi_hot(class_ids: tf.Tensor, num_classes: int, name: str) -> tf.Tensor:
  """The multi-hot vector of a set of class ids.

  y_c = 1 if c is in `class_ids` else 0: duplicates (two objects of one
  class) collapse to 1, no id gives all zeros.

  Example: multi_hot([2, 0, 2], 4, "voc/2007") -> [1., 0., 1., 0.].

  Args:
    class_ids: [num_objects] integer class ids.
    num_classes: length of the class list.
    name: dataset name for the error message.

  Returns:
    float32 [num_classes].

  Raises:
    tf.errors.InvalidArgumentError: `<name>: object label outside the class
      list (0..<num_classes - 1>)` when an id is negative or too large (when
      the op runs, inside tf.data).
  """
  class_ids = tf.cast(class_ids, tf.int64)
  message = (f"{name}: object label outside the class list "
             f"(0..{num_classes - 1})")
  checks = [
      tf.debugging.assert_non_negative(class_ids, message=message),
      tf.debugging.assert_less(class_ids, tf.constant(num_classes, tf.int64),
                               message=message),
  ]
  with tf.control_dependencies(checks):
    counts = tf.reduce_sum(
        tf.one_hot(class_ids, num_classes, dtype=tf.float32), axis=0)
  return tf.minimum(counts, 1.0)


def at_path(tree, path: str):
  """`tree["a"]["b"]` for the path `a/b` (TFDS features, an example)."""
  for key in path.split("/"):
    tree = tree[key]
  return tree


def tfds_pair(source: TfdsSource, num_classes: int
             ) -> Callable[[Dict[str, tf.Tensor]], Tuple[tf.Tensor, tf.Tensor]]:
  """The map fn turning one TFDS example into an (image, label) pair.

  Args:
    source: the dataset's `TfdsSource`.
    num_classes: number of classes of its label feature.

  Returns:
    `to_pair(features)`: TFDS features dict -> (uint8 image [height, width,
    3], label), the label an int64 class id, or for `source.multi_label` the
    float32 [num_classes] `multi_hot` of the object labels.
  """
  def to_pair(features):
    label = at_path(features, source.label_feature)
    if source.multi_label:
      return features["image"], multi_hot(label, num_classes,
                                          source.tfds_name)
    return features["image"], tf.cast(label, tf.int64)

  return to_pair


def has_object(image: tf.Tensor, label: tf.Tensor) -> tf.Tensor:
  """Filter predicate: the multi-hot `label` holds at least one class."""
  del image  # Unused.
  return tf.reduce_any(label > 0)


def tfds_streams(name: str, data_dir: Optional[str], download: bool = False
                ) -> Tuple[Tuple[str, ...], Dict[str, Stream]]:
  """Class names and split streams of a TFDS dataset, read with TFDS's builder.

  Args:
    name: dataset name, a key of `TFDS_SOURCES` (`cifar10`, `imagenet2012`,
      `coco2017`, `voc2007`).
    data_dir: TFDS data directory (None: TFDS's default).
    download: download and prepare the data first when it is missing.

  Returns:
    (class names from the label feature, {split: Stream}) for our splits
    (`TFDS_SPLITS`), yielding (uint8 image, label) pairs (`tfds_pair`).
    Multi-label streams drop images without an object: the `train` stream's
    `size` is TFDS's count before that filter (`exact_size` False); the
    evaluation splits are counted here, one pass over their labels, and
    their streams carry that cardinality (Keras needs it to validate).

  Raises:
    ValueError: one line naming the dataset and directory when the data is
      not prepared there and `download` is False; one line when `download`
      cannot download it (`tfds_download`: offline, fast, nothing left).
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  source = TFDS_SOURCES[name]
  if download:
    tfds_download.check_network(source.tfds_name, name)
  builder = tfds.builder(source.tfds_name, data_dir=data_dir)
  if download:
    tfds_download.download_and_prepare(builder, name)
  class_names = tuple(
      at_path(builder.info.features, source.label_feature).names)
  to_pair = tfds_pair(source, len(class_names))

  def read_examples(tfds_split: str, shuffle_files: bool = False,
                    seed: int = 0, decoders=None) -> tf.data.Dataset:
    return builder.as_dataset(
        split=tfds_split, shuffle_files=shuffle_files, decoders=decoders,
        read_config=tfds.ReadConfig(shuffle_seed=seed))

  def count_kept(tfds_split: str) -> int:
    """Images of `tfds_split` with an object: one pass over the labels."""
    labels_only = True
    for key in reversed(source.label_feature.split("/")):
      labels_only = {key: labels_only}
    examples = read_examples(  # Parses the labels only, no image.
        tfds_split, decoders=tfds.decode.PartialDecoding(labels_only))
    kept = examples.map(lambda features: tf.cast(
        tf.size(at_path(features, source.label_feature)) > 0, tf.int64))
    return int(kept.reduce(np.int64(0), tf.add))

  def reader(tfds_split: str, kept: Optional[int]
            ) -> Callable[[bool, int], tf.data.Dataset]:
    def read(shuffle_files: bool = False, seed: int = 0) -> tf.data.Dataset:
      ds = read_examples(tfds_split, shuffle_files, seed).map(to_pair)
      if source.multi_label:
        ds = ds.filter(has_object)
      if kept is not None:  # Keras reads the validation data's length.
        ds = ds.apply(tf.data.experimental.assert_cardinality(kept))
      return ds
    return read

  streams, counted = {}, {}
  for split, tfds_split in TFDS_SPLITS[name].items():
    try:
      size = int(read_examples(tfds_split).cardinality())  # TFDS's count.
    except AssertionError:
      raise ValueError(
          f"{name} is not prepared in {data_dir or builder.data_dir}: "
          f"prepare it there with TFDS (`tfds build {source.tfds_name} "
          f"--data_dir=DIR`) and pass `data_dir`=DIR, or pass `download`."
      ) from None
    kept = None  # Multi-label evaluation splits: the count after the filter.
    if source.multi_label and split != "train":
      if tfds_split not in counted:
        counted[tfds_split] = count_kept(tfds_split)
      kept = size = counted[tfds_split]
    streams[split] = Stream(
        read=reader(tfds_split, kept), size=size,
        multi_label=source.multi_label,
        exact_size=not source.multi_label or kept is not None)
  return class_names, streams


def load_cifar10(data_dir: Optional[str] = None, download: bool = False,
                 image_size: Optional[int] = None) -> ClassificationData:
  """CIFAR-10 through TFDS (see module doc)."""
  if image_size not in (None, 32):
    raise ValueError(f"`image_size`={image_size!r}: cifar10 images are 32.")
  class_names, streams = tfds_streams("cifar10", data_dir, download)
  mean, std = images.pixel_statistics(streams["train"].read(False, 0))
  return ClassificationData(
      name="cifar10", class_names=class_names, instance_key="image",
      instance_shape=(32, 32, 3), instance_dtype=tf.float32,
      streams=streams, preprocessing=images.CifarVGGPreprocessing(mean, std))


def load_imagenet2012(data_dir: Optional[str] = None, download: bool = False,
                      image_size: Optional[int] = None) -> ClassificationData:
  """ImageNet 2012 through TFDS (see module doc)."""
  preprocessing = images.ImageNetPreprocessing(image_size or 224)
  class_names, streams = tfds_streams("imagenet2012", data_dir, download)
  return ClassificationData(
      name="imagenet2012", class_names=class_names, instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams=streams, preprocessing=preprocessing,
      shuffle_buffer=IMAGENET_SHUFFLE_BUFFER)


def _multi_label_images(name: str, data_dir: Optional[str], download: bool,
                        image_size: Optional[int]) -> ClassificationData:
  preprocessing = images.MultiLabelImagePreprocessing(image_size or 224)
  class_names, streams = tfds_streams(name, data_dir, download)
  return ClassificationData(
      name=name, class_names=class_names, instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams=streams, preprocessing=preprocessing,
      shuffle_buffer=MULTI_LABEL_SHUFFLE_BUFFER)


def load_coco2017(data_dir: Optional[str] = None, download: bool = False,
                  image_size: Optional[int] = None) -> ClassificationData:
  """MS-COCO 2017 object categories as multi-label data (see module doc)."""
  return _multi_label_images("coco2017", data_dir, download, image_size)


def load_voc2007(data_dir: Optional[str] = None, download: bool = False,
                 image_size: Optional[int] = None) -> ClassificationData:
  """PASCAL VOC 2007 object classes as multi-label data (see module doc)."""
  return _multi_label_images("voc2007", data_dir, download, image_size)


_DATASETS: Dict[str, Callable[[Optional[str]], ClassificationData]] = {
    "digits": load_digits,
    "goemotions": load_goemotions,
    "goemotions_multilabel": load_goemotions_multilabel,
    "mind": load_mind,
    "digits32": load_digits32,
    "cifar10": load_cifar10,
    "imagenet2012": load_imagenet2012,
    "coco2017": load_coco2017,
    "voc2007": load_voc2007,
}

if set(_DATASETS) | set(USER_DATASETS) != set(DATASET_NAMES):
  raise ImportError("datasets._DATASETS and catalog.DATASET_NAMES differ.")


def get(name: str, data_dir: Optional[str] = None, download: bool = False,
        image_size: Optional[int] = None,
        options: Optional[user_files.Options] = None) -> ClassificationData:
  """Loads the dataset called `name`.

  Args:
    name: dataset name (`DATASET_NAMES`, or `tfds:<name>`): `coco2017` and
      `voc2007` are multi-label images (multi-hot float32 labels
      [num_classes]).
    data_dir: the dataset's files (TFDS data directory for TFDS datasets).
    download: TFDS datasets only: download and prepare missing data.
    image_size: `RESIZED_DATASETS` and a user's images only: side of the
      preprocessed images (None: 224; CIFAR-10 is always 32).
    options: a user's data only: its columns, class names, split seed
      (`user_files.Options`).

  Raises:
    ValueError: for an unknown name or missing/malformed data (the message
      names the file and line, or the dataset and directory).
  """
  if name in USER_DATASETS or is_tfds(name):
    # Imported here: the user loaders build on this module's types.
    from rank4class_tf.data import user_records  # pylint: disable=g-import-not-at-top
    data = user_records.load(name, data_dir, options or user_files.Options(),
                             image_size=image_size, download=download)
    # Each reader names the file and line of a bad name; this catches any
    # other way one could come in (predict prints one line per class).
    for i, class_name in enumerate(data.class_names):
      problem = user_files.class_name_problem(class_name)
      if problem:
        raise ValueError(f"{name} `data_dir`={data_dir}: class {i} "
                         f"{class_name!r} {problem}")
    return data
  if name not in _DATASETS:
    raise ValueError(f"Unknown dataset {name!r}; valid names: "
                     f"{', '.join(DATASET_NAMES)}, tfds:<name>.")
  if name in TFDS_DATASETS:
    return _DATASETS[name](data_dir, download=download, image_size=image_size)
  return _DATASETS[name](data_dir)


def from_config(config) -> ClassificationData:
  """The dataset of a `config.DataConfig` (name, data_dir, download,
  image_size, and how to read a user's data)."""
  return get(config.dataset, config.data_dir, download=config.download,
             image_size=config.image_size,
             options=user_files.Options(
                 text=config.text_column, label=config.label_column,
                 label_separator=config.label_separator,
                 class_names_file=config.class_names_file,
                 split_seed=config.split_seed,
                 feature_columns=tuple(config.feature_columns),
                 instance_feature=config.instance_feature,
                 tfds_splits=tuple(config.tfds_splits),
                 skip_bad_records=config.skip_bad_records))
