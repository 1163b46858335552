"""A user's TFRecord files and any TFDS classification data set.

* `tfrecord`: TODO (issue 37).
* `tfds:<name>`: TODO (issue 37).

`load` is the one entry for every user data set (`catalog.USER_DATASETS`
and `tfds:<name>`): `datasets.get` calls it.
"""

from typing import Optional

from rank4class_tf.data import user_datasets
from rank4class_tf.data import user_files
from rank4class_tf.data.datasets import ClassificationData


def load_tfrecord(data_dir: Optional[str], options: user_files.Options,
                  image_size: Optional[int] = None) -> ClassificationData:
  raise NotImplementedError


def load_tfds(name: str, data_dir: Optional[str], options: user_files.Options,
              image_size: Optional[int] = None,
              download: bool = False) -> ClassificationData:
  raise NotImplementedError


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """The user's data set `name` (`catalog.USER_DATASETS`, `tfds:<name>`)."""
  if name == "text_files":
    return user_datasets.load_text_files(data_dir, options)
  if name == "tabular_files":
    return user_datasets.load_tabular_files(data_dir, options)
  if name == "image_folder":
    return user_datasets.load_image_folder(data_dir, options, image_size)
  if name == "tfrecord":
    return load_tfrecord(data_dir, options, image_size)
  return load_tfds(name, data_dir, options, image_size, download)
