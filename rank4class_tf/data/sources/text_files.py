"""`text_files`: a user's text as CSV / TSV / JSONL files (optionally gzipped)
or Keras' `<split>/<class>/*.txt` layout, held in memory, or streamed when
large (`streaming`). See `sources` for the rules every format keeps.

`read_splits` (the rows of given files, labelled) and `in_memory` (their
`ClassificationData`) also read the shipped GoEmotions files, with fixed
options (`shipped_text`).
"""

import logging
import os
from typing import Dict, List, Optional, Sequence, Tuple

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

# One split's texts and each one's class ids.
Parts = Tuple[List[str], List[Tuple[int, ...]]]


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
    if options.columns or not options.quoted:
      raise ValueError(f"`data_dir`={data_dir}: files larger than "
                       f"{streaming.STREAM_BYTES} bytes stream, read with a "
                       "header row and CSV quoting only.")
    names, streams = streaming.load(files, options, read_class_names)
    return ClassificationData(
        name="text_files", class_names=names, instance_key="text",
        instance_shape=(), instance_dtype=tf.string, streams=streams,
        shuffle_buffer=streaming.SHUFFLE_BUFFER)
  names, parts, multi = read_splits(files, options, "text_files")
  return in_memory("text_files", names, parts, multi)


def read_splits(files: Dict[str, str], options: user_files.Options,
                name: str
               ) -> Tuple[Tuple[str, ...], Dict[str, Parts], bool]:
  """(class names, {split: (texts, class id tuples)}, whether multi-label:
  the labels are lists) of the text files
  `files` ({split: file}; train, the others cut from it when missing), read
  in memory by `user_files.read_rows` and labelled by
  `splits.labelled_splits` (`name`: the data set, for messages)."""
  rows = {split: user_files.read_rows(path, options)
          for split, path in files.items()}
  multi = isinstance(rows["train"].labels[0], tuple)
  names, parts = labelled_splits(rows, options, name)
  return names, parts, multi


def in_memory(name: str, class_names: Sequence[str],
              parts: Dict[str, Parts], multi: bool) -> ClassificationData:
  """The `ClassificationData` called `name` of `read_splits`' parts: class
  ids, or with `multi` multi-hot rows."""
  return ClassificationData(
      name=name, class_names=tuple(class_names), instance_key="text",
      instance_shape=(), instance_dtype=tf.string,
      splits={split: (np.array(parts[split][0], dtype=object),
                      label_array(parts[split][1], len(class_names), multi))
              for split in SPLITS})
