"""The registry of data sources: one small module per kind of source, each
turning its options into the one `contract.ClassificationData`.

  digits          scikit-learn's digits, and `digits32` (upscaled images)
  shipped_text    GoEmotions (shipped in data/goemotions/) and MIND news
  image_catalog   the TFDS image sets by name: CIFAR-10, ImageNet, COCO, VOC
  text_files      a user's CSV / TSV / JSONL files or `<split>/<class>/*.txt`
  tables          a user's CSV / TSV numeric tables
  image_folder    a user's `<split>/<class>/*.png` images
  tfrecords       a user's TFRecord files of `tf.train.Example`s
  tfds            any TFDS classification data set, `tfds:<name>`

`get(name, ...)` looks the source up by name (`SOURCES`; the error lists
the names) and calls its `load(name, data_dir, options, image_size,
download)`. Every user source's train data must hold two classes or more,
and every class name must be printable on one line (checked here, once for
all of them).

A user's own data (docs/data.md, "Your own data"):

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
* `tfrecord` and `tfds:<name>`: `records`.

Labels are class names, or integer ids into `class_names_file`
(`labels.label_reading`: one reading for the whole data set when the
names are numbers); without that file the classes are the train labels'
names, sorted (logged). Names are stripped of surrounding whitespace and
may hold no control character (`labels.clean_labels`). A class no train
row has, a label in validation or test that train never has, and single
labels mixed with lists are refused with one line naming the file and
line; train data of fewer than two classes is refused by
`records.load`, for every format. Hidden entries of the folder layouts
(a name starting with `.`) are skipped and counted
(`user_files.class_folders`). A split without a file is cut from train by a
seeded stratified
split (`split_seed`, 10% each), which is logged.
"""

import os
from typing import Optional

from rank4class_tf.catalog import DATASET_NAMES, USER_DATASETS, is_tfds
from rank4class_tf.data import records
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import ClassificationData
from rank4class_tf.data.sources import digits
from rank4class_tf.data.sources import image_catalog
from rank4class_tf.data.sources import image_folder
from rank4class_tf.data.sources import shipped_text
from rank4class_tf.data.sources import tables
from rank4class_tf.data.sources import text_files
from rank4class_tf.data.sources import tfds
from rank4class_tf.data.sources import tfrecords

# Name -> the module whose `load` reads it (`tfds:<name>`: `tfds`).
SOURCES = {
    "digits": digits,
    "digits32": digits,
    "goemotions": shipped_text,
    "goemotions_multilabel": shipped_text,
    "mind": shipped_text,
    "cifar10": image_catalog,
    "imagenet2012": image_catalog,
    "coco2017": image_catalog,
    "voc2007": image_catalog,
    "text_files": text_files,
    "tabular_files": tables,
    "image_folder": image_folder,
    "tfrecord": tfrecords,
}

if set(SOURCES) != set(DATASET_NAMES):
  raise ImportError("sources.SOURCES and catalog.DATASET_NAMES differ.")


def get(name: str, data_dir: Optional[str] = None, download: bool = False,
        image_size: Optional[int] = None,
        options: Optional[user_files.Options] = None) -> ClassificationData:
  """Loads the data set called `name` (see `datasets.get`).

  Raises:
    ValueError: for an unknown name (listing the valid ones), or one line
      from the source; for a user's data, naming the train data when it
      holds fewer than two classes (a ranking of one class is no
      classifier: its loss is 0 and its accuracy 1 whatever it learns).
  """
  if is_tfds(name):
    source = tfds
  elif name in SOURCES:
    source = SOURCES[name]
  else:
    raise ValueError(f"Unknown dataset {name!r}; valid names: "
                     f"{', '.join(DATASET_NAMES)}, tfds:<name>.")
  options = options or user_files.Options()
  data = source.load(name, data_dir, options, image_size=image_size,
                     download=download)
  if name in USER_DATASETS or is_tfds(name):
    if data.num_classes < 2:
      raise ValueError(
          f"{_train_place(name, data_dir)}: {data.num_classes} class "
          f"({', '.join(data.class_names)}) in train; a classifier needs two "
          "or more: give train instances of another class.")
    # Each reader names the file and line of a bad name; this catches any
    # other way one could come in (predict prints one line per class).
    for i, class_name in enumerate(data.class_names):
      problem = user_files.class_name_problem(class_name)
      if problem:
        raise ValueError(f"{name} `data_dir`={data_dir}: class {i} "
                         f"{class_name!r} {problem}")
  return data


def _train_place(name: str, data_dir: Optional[str]) -> str:
  """Where the train split of a user's data set `name` is, for messages."""
  if name in ("text_files", "tabular_files"):
    return user_files.split_files(data_dir)["train"]
  if name == "image_folder":
    return os.path.join(data_dir, "train")
  if name == "tfrecord":
    return records.describe(records.record_files(data_dir)["train"])
  return name
