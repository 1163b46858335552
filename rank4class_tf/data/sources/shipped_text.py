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

GoEmotions' files are what a user's TSV is, so the text-file source reads
them (`text_files.read_splits`, the checks and messages of `user_files`)
with fixed options (`goemotions_options`): no header row, the columns
`text`, `labels` (comma-separated ids into `emotions.txt`) and `id`, fields
unquoted (texts keep their quotes as written), and the repository's file
names (`dev.tsv` is validation). The single-label view's one step the
text-file source has no option for, keeping the rows of one label (in file
order), is done here, between the read and `text_files.in_memory`.

MIND keeps its own reader (`read_mind_news`): its instance is two columns,
the abstract possibly empty, and its one file is cut 60/20/20, none of which
a user's text files express. Malformed files stop with a ValueError naming
the file and line.
"""

import os
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.data import user_files
from rank4class_tf.data.classes import read_lines
from rank4class_tf.data.contract import SPLIT_SEED, ClassificationData
from rank4class_tf.data.sources import text_files
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


# GoEmotions' files: {split: file}, and its class names file.
GOEMOTIONS_FILES = {"train": "train.tsv", "validation": "dev.tsv",
                    "test": "test.tsv"}
GOEMOTIONS_CLASSES = "emotions.txt"


def goemotions_options(data_dir: str) -> user_files.Options:
  """How the text-file source reads GoEmotions' TSV files in `data_dir`:
  lines of `text<TAB>label ids<TAB>comment id`, no header row, no quoting
  (texts keep their quotes as written), the ids comma-separated, indices
  into `emotions.txt`."""
  return user_files.Options(
      columns=("text", "labels", "id"), text="text", label="labels",
      label_separator=",", quoted=False,
      class_names_file=os.path.join(data_dir, GOEMOTIONS_CLASSES))


def _goemotions(data_dir: Optional[str], multi_label: bool
               ) -> ClassificationData:
  data_dir = data_dir or os.path.join(REPO_DATA_DIR, "goemotions")
  files = {split: os.path.join(data_dir, file)
           for split, file in GOEMOTIONS_FILES.items()}
  for path in files.values():  # Not a split folder (`user_files`).
    if not os.path.isfile(path):
      raise ValueError(f"{path}: " + ("is a directory, expected a file."
                                      if os.path.isdir(path) else
                                      "file not found."))
  name = "goemotions_multilabel" if multi_label else "goemotions"
  class_names, parts, _ = text_files.read_splits(
      files, goemotions_options(data_dir), name)
  if not multi_label:  # The rows of one label, in file order.
    for split, (texts, ids) in parts.items():
      keep = [row for row, classes in enumerate(ids) if len(classes) == 1]
      parts[split] = ([texts[row] for row in keep], [ids[row] for row in keep])
  return text_files.in_memory(name, class_names, parts, multi=multi_label)


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
