"""The datasets by name, and what each one is: no TensorFlow, no loading.

`datasets` loads them; the config checks (`checks.validate`) and the study
read these facts without importing the loaders. See `datasets` for what each
dataset holds.

>>> "digits" in DATASET_NAMES, "goemotions" in TEXT_DATASETS
(True, True)
>>> VALIDATION_IS_TEST
('cifar10', 'imagenet2012', 'coco2017', 'voc2007')
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
DATASET_NAMES = ("digits", "goemotions", "goemotions_multilabel", "mind",
                 "digits32", "cifar10", "imagenet2012", "coco2017",
                 "voc2007", "text_files")
TEXT_DATASETS = ("goemotions", "goemotions_multilabel", "mind", "text_files")
# Read through TFDS (`datasets.TFDS_SOURCES`): they take `download` and
# `image_size`.
TFDS_DATASETS = ("cifar10", "imagenet2012", "coco2017", "voc2007")
# Raw uint8 colour images with a preprocessing.
IMAGE_DATASETS = ("digits32",) + TFDS_DATASETS
# Images of any size resized to `image_size` (the others' size is fixed).
RESIZED_DATASETS = ("imagenet2012", "coco2017", "voc2007")
# Multi-hot labels.
MULTI_LABEL_DATASETS = ("goemotions_multilabel", "coco2017", "voc2007")
# Datasets whose `validation` and `test` splits are the same data, so the
# best checkpoint and the hyper-parameters are chosen on the test split.
VALIDATION_IS_TEST = tuple(name for name, splits in TFDS_SPLITS.items()
                           if splits["validation"] == splits["test"])


