"""`text_files`: a user's text as CSV / TSV / JSONL files (optionally gzipped)
or Keras' `<split>/<class>/*.txt` layout, held in memory, or streamed when
large (`streaming`). See `sources` for the rules every format keeps.
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
  """The user's text files in `data_dir` (`user_files.Options`)."""
  del name, image_size, download  # Text.
  return load_text_files(data_dir, options)

def load_text_files(data_dir: Optional[str],
                    options: Optional[user_files.Options] = None
                   ) -> ClassificationData:
  """A user's own text files (`user_files`: formats, columns, checks), held
  in memory, or streamed when a split's file is larger than
  `streaming.STREAM_BYTES`."""
  options = options or user_files.Options()
  files = user_files.split_files(data_dir)
  if streaming.should_stream(files):
    names, streams = streaming.load(files, options, read_class_names)
    return ClassificationData(
        name="text_files", class_names=names, instance_key="text",
        instance_shape=(), instance_dtype=tf.string, streams=streams,
        shuffle_buffer=streaming.SHUFFLE_BUFFER)
  rows = {split: user_files.read_rows(path, options)
          for split, path in files.items()}
  names, parts = labelled_splits(rows, options, "text_files")
  multi = isinstance(rows["train"].labels[0], tuple)
  splits = {split: (np.array(texts, dtype=object),
                    label_array(ids, len(names), multi))
            for split, (texts, ids) in parts.items()}
  return ClassificationData(
      name="text_files", class_names=names, instance_key="text",
      instance_shape=(), instance_dtype=tf.string,
      splits={split: splits[split] for split in SPLITS})
