"""The datasets by name, and what each one is: no TensorFlow, no loading.

`datasets` loads them; the config checks (`checks.validate`) and the study
read these facts without importing the loaders. See `datasets` for what each
dataset holds.

>>> "digits" in DATASET_NAMES, "goemotions" in TEXT_DATASETS
(True, True)
>>> VALIDATION_IS_TEST
('cifar10', 'imagenet2012', 'coco2017', 'voc2007')
>>> is_dataset("tfds:ag_news_subset"), kind("tabular_files"), kind("tfrecord")
(True, 'numeric', None)
"""

# Our split -> TFDS split (a TFDS split expression): cifar10 and voc2007
# select checkpoints on the test set, as the paper does for CIFAR-10.
TFDS_SPLITS = {
    "cifar10": {"train": "train", "validation": "test", "test": "test"},
    "imagenet2012": {"train": "train", "validation": "validation",
                     "test": "validation"},
    "coco2017": {"train": "train", "validation": "validation",
                 "test": "validation"},
    "voc2007": {"train": "train+validation", "validation": "test",
                "test": "test"},
}
# A user's own data (`image_files`), read from `data_dir`; any TFDS
# classification data set is `tfds:<name>` (`TFDS_PREFIX`).
USER_DATASETS = ("text_files", "image_folder", "tabular_files", "tfrecord")
TFDS_PREFIX = "tfds:"
DATASET_NAMES = ("digits", "goemotions", "goemotions_multilabel", "mind",
                 "digits32", "cifar10", "imagenet2012", "coco2017",
                 "voc2007") + USER_DATASETS
TEXT_DATASETS = ("goemotions", "goemotions_multilabel", "mind", "text_files")
# Read through TFDS (`data.sources.image_catalog.TFDS_SOURCES`): they take `download` and
# `image_size`.
TFDS_DATASETS = ("cifar10", "imagenet2012", "coco2017", "voc2007")
# Raw uint8 colour images with a preprocessing.
IMAGE_DATASETS = ("digits32", "image_folder") + TFDS_DATASETS
# Images of any size resized to `image_size` (the others' size is fixed).
RESIZED_DATASETS = ("imagenet2012", "coco2017", "voc2007", "image_folder")
# Numeric feature vectors (the `mlp` encoder); the rest are images or text.
NUMERIC_DATASETS = ("tabular_files",)
# Text or images: which, the data says when it is loaded (a TFRecord's bytes
# feature, a TFDS data set's features).
KIND_WHEN_LOADED = ("tfrecord",)
# Multi-hot labels.
MULTI_LABEL_DATASETS = ("goemotions_multilabel", "coco2017", "voc2007")
# Datasets whose `validation` and `test` splits are the same data, so the
# best checkpoint and the hyper-parameters are chosen on the test split.
VALIDATION_IS_TEST = tuple(name for name, splits in TFDS_SPLITS.items()
                           if splits["validation"] == splits["test"])




def is_tfds(name: str) -> bool:
  """Whether `name` is `tfds:<name>`: any TFDS classification data set."""
  return name.startswith(TFDS_PREFIX) and len(name) > len(TFDS_PREFIX)


def is_dataset(name: str) -> bool:
  """Whether `name` is a dataset: one of `DATASET_NAMES`, or `tfds:<name>`."""
  return name in DATASET_NAMES or is_tfds(name)


def kind(name: str):
  """`text`, `image` or `numeric`: what the dataset's instances are; None
  when only the loaded data says (`KIND_WHEN_LOADED`, `tfds:<name>`)."""
  if name in KIND_WHEN_LOADED or is_tfds(name):
    return None
  if name in TEXT_DATASETS:
    return "text"
  if name in IMAGE_DATASETS:
    return "image"
  return "numeric"
