"""scikit-learn's digits (`digits`) and their 32x32x3 images (`digits32`).

* `digits`: scikit-learn's bundled real digits (1,797 8x8 grey images, 10
  classes), pixels scaled to [0, 1], a fixed stratified 70/15/15
  train/validation/test split (1,257 / 270 / 270) drawn with `SPLIT_SEED`,
  independent of the training seed.
* `digits32`: the `digits` split upscaled to 32x32x3 uint8 images (bilinear,
  grey copied to 3 channels), a real image dataset that ships offline, with
  the cifar-vgg preprocessing without flips (a mirrored digit is another
  symbol).
"""

from typing import Optional

import numpy as np
import tensorflow as tf

from rank4class_tf.data import images
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import SPLIT_SEED, ClassificationData


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """`digits` or `digits32` (nothing but the name is read)."""
  del options, image_size, download  # Bundled with scikit-learn.
  return load_digits(data_dir) if name == "digits" else load_digits32(
      data_dir)


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
