"""`image_folder`: a user's `<split>/<class>/*.{jpg,jpeg,png,bmp,gif}` images,
each decoded once when loaded, then streamed from disk (`image_files`).
See `sources`.
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
  """The user's image folder `data_dir` (`user_files.Options`)."""
  del name, download  # Local files.
  return load_image_folder(data_dir, options, image_size)

def image_rows(folder: str, options: user_files.Options) -> user_files.Rows:
  """The image files of one split folder (`<class>/*.jpg` ...), each decoded
  once here to check it: the rows' `texts` are the files' paths.

  Raises:
    ValueError: naming the folder when it has no class folder or image;
      naming the file when an image cannot be decoded (unless
      `options.skip_bad_records`: then left out and counted).
  """
  if not os.path.isdir(folder):
    raise ValueError(f"{folder}: not a folder (image_folder reads "
                     "<split>/<class>/*.jpg|png).")
  paths, labels, skipped = [], [], []
  for name, files in user_files.class_folders(folder, "*.jpg"):
    for path in files:
      file = os.path.basename(path)
      if not file.lower().endswith(IMAGE_EXTENSIONS) or os.path.isdir(path):
        continue
      problem = undecodable(path)
      if problem:
        if not options.skip_bad_records:
          raise ValueError(f"{path}: {problem}")
        skipped.append(f"{path}: {problem}")
        continue
      paths.append(path)
      labels.append(name)
  if not paths:
    raise ValueError(f"{folder}: no images ({', '.join(IMAGE_EXTENSIONS)}) "
                     "in its class folders" +
                     (f"; {len(skipped)} undecodable, skipped." if skipped
                      else "."))
  return user_files.Rows(folder, paths, labels, list(paths), skipped)


def load_image_folder(data_dir: Optional[str],
                      options: Optional[user_files.Options] = None,
                      image_size: Optional[int] = None) -> ClassificationData:
  """A user's image folders (see the module doc)."""
  options = options or user_files.Options()
  if not data_dir:
    raise ValueError("`data_dir` must name the folder holding train/ (and "
                     "validation/, test/) for `dataset`=image_folder.")
  if not os.path.isdir(data_dir):
    raise ValueError(f"`data_dir`={data_dir}: not a folder.")
  rows = {split: image_rows(os.path.join(data_dir, split), options)
          for split in SPLITS
          if os.path.exists(os.path.join(data_dir, split))}
  if "train" not in rows:
    raise ValueError(f"`data_dir`={data_dir} holds no train/ folder "
                     "(train/<class>/*.jpg|png).")
  names, parts = labelled_splits(rows, options, "image_folder")
  preprocessing = images.MultiLabelImagePreprocessing(
      image_size or DEFAULT_IMAGE_SIZE)
  return ClassificationData(
      name="image_folder", class_names=names, instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams={split: image_stream(parts[split][0], label_array(
          parts[split][1], len(names), False), options.skip_bad_records)
               for split in SPLITS},
      preprocessing=preprocessing, shuffle_buffer=IMAGE_SHUFFLE_BUFFER)
