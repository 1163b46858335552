"""Classification datasets and their tf.data pipelines in TF-Ranking's terms.

A dataset yields (instance, label) pairs per split: an integer class id for
multiclass data, a multi-hot float vector for multi-label data.
`ranking_dataset` turns batches of those into what the ranking model reads:

* context features: the instance after `inputs.InstanceInputs` (the image
  itself, or BERT token ids of the text);
* example feature `class_id`: [batch_size, num_classes, 1] int64, the class
  list of each instance (every class, in id order);
* mask `example_list_mask`: [batch_size, num_classes] bool, all True;
* labels: [batch_size, num_classes] float one-hot (or multi-hot) relevance.

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

Malformed files stop with a ValueError naming the file and line.
"""

import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import inputs as inputs_lib

CLASS_ID = "class_id"
MASK = "example_list_mask"
SPLITS = ("train", "validation", "test")
SPLIT_SEED = 20220128
REPO_DATA_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


@dataclasses.dataclass(frozen=True)
class ClassificationData:
  """A classification dataset: its classes, instance feature and splits.

  Attributes:
    name: dataset name.
    class_names: one name per class, index = class id.
    instance_key: name of the raw instance feature (`image`, `text`).
    instance_shape: shape of one raw instance (without the batch axis).
    instance_dtype: dtype of the raw instance (tf.string for text).
    splits: split name -> (instances, labels) numpy arrays; labels are
      integer ids [num_examples] or multi-hot floats
      [num_examples, num_classes].
  """
  name: str
  class_names: Tuple[str, ...]
  instance_key: str
  instance_shape: Tuple[int, ...]
  instance_dtype: tf.DType
  splits: Dict[str, Tuple[np.ndarray, np.ndarray]]

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  @property
  def is_text(self) -> bool:
    return self.instance_dtype == tf.string

  @property
  def multi_label(self) -> bool:
    return next(iter(self.splits.values()))[1].ndim == 2

  def size(self, split: str) -> int:
    return len(self.splits[split][1])

  def dataset(self, split: str) -> tf.data.Dataset:
    """Unbatched (raw instance, label) pairs of `split`."""
    if split not in self.splits:
      raise ValueError(f"Unknown split {split!r}; valid splits: "
                       f"{', '.join(self.splits)}.")
    x, y = self.splits[split]
    y = y.astype(np.float32) if y.ndim == 2 else y.astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((x, y))


def class_list_features(context: Dict[str, tf.Tensor],
                        num_classes: int) -> Dict[str, tf.Tensor]:
  """Adds the class list and mask to a batch's context features.

  Args:
    context: context features, each [batch_size, ...].
    num_classes: number of classes.

  Returns:
    `context` plus CLASS_ID [batch_size, num_classes, 1] int64 and MASK
    [batch_size, num_classes] bool (all True).
  """
  batch_size = tf.shape(next(iter(context.values())))[0]
  class_ids = tf.range(num_classes, dtype=tf.int64)
  class_ids = tf.tile(class_ids[tf.newaxis, :, tf.newaxis], [batch_size, 1, 1])
  return dict(context, **{
      CLASS_ID: class_ids,
      MASK: tf.ones([batch_size, num_classes], tf.bool),
  })


def ranking_features(instance_inputs: inputs_lib.InstanceInputs,
                     num_classes: int) -> Callable:
  """Returns a map fn: batched (instance, label) -> (features, labels)."""

  def to_ranking(instance, label):
    features = class_list_features(instance_inputs(instance), num_classes)
    if label.shape.rank == 2:
      return features, label
    return features, tf.one_hot(label, num_classes, dtype=tf.float32)

  return to_ranking


def default_inputs(data: ClassificationData) -> inputs_lib.RawInputs:
  """The inputs of a numeric dataset: the raw instance itself."""
  return inputs_lib.RawInputs(data.instance_key, data.instance_shape,
                              data.instance_dtype)


def ranking_dataset(data: ClassificationData,
                    split: str,
                    batch_size: int,
                    training: bool,
                    seed: int = 0,
                    instance_inputs: Optional[inputs_lib.InstanceInputs] = None
                   ) -> tf.data.Dataset:
  """Batched ranking examples of `split`.

  Training datasets are cached, shuffled with `seed` (reshuffled each pass)
  and repeated forever; evaluation datasets are read once in order. Text is
  tokenized after batching, in parallel.
  """
  instance_inputs = instance_inputs or default_inputs(data)
  ds = data.dataset(split).cache()
  if training:
    ds = ds.shuffle(data.size(split), seed=seed,
                    reshuffle_each_iteration=True).repeat()
  ds = ds.batch(batch_size, drop_remainder=training)
  ds = ds.map(ranking_features(instance_inputs, data.num_classes),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)


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
  """The lines of a UTF-8 text file, without line ends.

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
  out = []
  for number, line in enumerate(lines, start=1):
    try:
      out.append(line.decode("utf-8").rstrip("\r"))
    except UnicodeDecodeError:
      raise ValueError(f"{path}:{number}: not valid UTF-8.") from None
  return out


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
    text, label_field, _ = fields
    if not text.strip():
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
    texts.append(text)
    labels.append(ids)
  if not texts:
    raise ValueError(f"{path}: no examples.")
  return texts, labels


def _goemotions(data_dir: Optional[str], multi_label: bool
               ) -> ClassificationData:
  data_dir = data_dir or os.path.join(REPO_DATA_DIR, "goemotions")
  class_names = tuple(
      n.strip() for n in read_lines(os.path.join(data_dir, "emotions.txt")))
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
    raise ValueError("--data_dir must name the folder holding MIND's "
                     "news.tsv for --dataset=mind.")
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


_DATASETS: Dict[str, Callable[[Optional[str]], ClassificationData]] = {
    "digits": load_digits,
    "goemotions": load_goemotions,
    "goemotions_multilabel": load_goemotions_multilabel,
    "mind": load_mind,
}

DATASET_NAMES = tuple(_DATASETS)
TEXT_DATASETS = ("goemotions", "goemotions_multilabel", "mind")


def get(name: str, data_dir: Optional[str] = None) -> ClassificationData:
  """Loads the dataset called `name`.

  Raises:
    ValueError: for an unknown name or missing/malformed data (the message
      names the file and line).
  """
  if name not in _DATASETS:
    raise ValueError(f"Unknown dataset {name!r}; valid names: "
                     f"{', '.join(DATASET_NAMES)}.")
  return _DATASETS[name](data_dir)
