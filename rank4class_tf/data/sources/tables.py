"""`tabular_files`: a user's CSV / TSV numeric tables, for the `mlp` encoder;
features standardised inside the model's input with the train split's
statistics (`inputs.RawInputs`). See `sources`.
"""

import logging
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from rank4class_tf.data import image_files
from rank4class_tf.data import images
from rank4class_tf.data import splits
from rank4class_tf.data import streaming
from rank4class_tf.data import user_files
from rank4class_tf.data.classes import read_class_names
from rank4class_tf.data.contract import SPLITS, ClassificationData, Stream
from rank4class_tf.data.image_files import (  # pylint: disable=g-multiple-import
    DEFAULT_IMAGE_SIZE, IMAGE_EXTENSIONS, IMAGE_SHUFFLE_BUFFER, image_stream,
    undecodable)
from rank4class_tf.data.splits import label_array, labelled_splits


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """The user's tables in `data_dir` (`user_files.Options`)."""
  del name, image_size, download  # Numbers.
  return load_tabular_files(data_dir, options)

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
