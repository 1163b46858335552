"""The shipped text sets: GoEmotions and MIND news, files of fixed columns.

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

import os
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.data import user_files
from rank4class_tf.data.classes import read_class_names, read_lines
from rank4class_tf.data.contract import SPLIT_SEED, SPLITS, ClassificationData
from rank4class_tf.data.splits import stratified_split

# The shipped data files: rank4class_tf/data/shipped/ in an installed package
# (setup.py installs the repository's data/ there), else data/ beside the
# package in a checkout or an editable install.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


REPO_DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "shipped")
if not os.path.isdir(REPO_DATA_DIR):
  REPO_DATA_DIR = os.path.join(os.path.dirname(_PACKAGE_DIR), "data")


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """`goemotions`, `goemotions_multilabel` or `mind` from `data_dir`."""
  del options, image_size, download  # Files of fixed columns.
  if name == "mind":
    return load_mind(data_dir)
  if name == "goemotions":
    return load_goemotions(data_dir)
  return load_goemotions_multilabel(data_dir)


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
