"""Classification datasets and their tf.data pipelines in TF-Ranking's terms.

A dataset yields (instance, label) pairs per split: an integer class id for
multiclass data, a multi-hot float vector for multi-label data.
`ranking_dataset` turns batches of those into what the ranking model reads,
the feature contract of `features` (context features, `class_id`,
`example_list_mask`, one-hot or multi-hot labels).

Each name's data is described where it is read: `sources.digits`
(`digits`, `digits32`), `sources.shipped_text` (GoEmotions, MIND),
`sources.image_catalog` (`cifar10`, `imagenet2012`, `coco2017`, `voc2007`:
TFDS's own builders, never downloaded unless `download=True`), and the
user's formats in `sources/` (`sources.__init__` lists them).

Malformed files stop with a ValueError naming the file and line.

This module is the way in (`get`, `from_config`: a name looked up in the
registry of sources, `sources.get`) and the way out (`ranking_dataset`: the
contract's splits as batches of ranking features). The sources are in
`sources/`, the contract in `contract`, splitting in `splits`, class names in
`classes`, streaming in `streaming`.
"""

import dataclasses
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf

from rank4class_tf.data import features as features_lib
from rank4class_tf.data import inputs as inputs_lib
from rank4class_tf.data import sources
from rank4class_tf.data import text
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import ClassificationData


def ranking_features(instance_inputs: Callable,
                     num_classes: int) -> Callable:
  """Returns a map fn: batched (instance, label) -> (features, labels),
  the context features being `instance_inputs(instance)`."""

  def to_ranking(instance, label):
    features = features_lib.class_list_features(instance_inputs(instance),
                                                 num_classes)
    if label.shape.rank == 2:
      return features, label
    return features, tf.one_hot(label, num_classes, dtype=tf.float32)

  return to_ranking


def ranking_dataset(data: ClassificationData,
                    split: str,
                    batch_size: int,
                    training: bool,
                    seed: int = 0,
                    instance_inputs: Optional[features_lib.InstanceInputs] = None,
                    length_sorted: bool = False
                   ) -> tf.data.Dataset:
  """Batched ranking examples of `split`.

  Training datasets are cached (unless `data.shuffle_buffer` is set: then
  streamed through a buffer of that size), shuffled with `seed` (reshuffled
  each pass) and repeated forever; evaluation datasets are read once in
  order. Images go through `data.preprocessing` per example, before
  batching, with `training` choosing augmentation or evaluation
  preprocessing.

  Text held in memory is tokenized once per split
  (`inputs.TextInputs.token_ids`) and tf.data reads the token ids; a
  streamed split (or one too large for its ids to be kept) is tokenized in
  tf.data, after batching, in parallel. Both give the same batches: the
  shuffle's order depends on the seed and the number of examples only.

  Text with length bucketing (`inputs.TextInputs(length_bucketing=True)`):
  every batch is cut to its longest member rounded up to
  `text.LENGTH_QUANTUM` tokens. In training, each example of the shuffled
  stream waits in the queue of its length bucket (`text.bucket_key`) until
  `batch_size` examples of that bucket have come: batches hold examples of
  similar length, each epoch still visits every example once in the
  shuffle's order of arrival, and the stream is a fixed function of
  `seed`, so a resumed run skips to the same batch. Evaluation keeps the
  split's order, unless `length_sorted` (for metrics alone, where order
  does not matter: Keras' validation) reads it sorted by token count,
  which pads least.
  """
  instance_inputs = instance_inputs or inputs_lib.default_inputs(data)
  bucketed = getattr(instance_inputs, "length_bucketing", False)
  ids = None
  if split in data.splits and hasattr(instance_inputs, "token_ids"):
    ids = instance_inputs.token_ids(data.splits[split][0])
  if ids is not None:
    return _token_id_batches(data, split, ids, batch_size, training, seed,
                             instance_inputs, length_sorted and bucketed)
  if bucketed and length_sorted and not training and split in data.splits:
    x, y = data.splits[split]
    order = np.argsort(instance_inputs.token_lengths(x), kind="stable")
    data = dataclasses.replace(data, splits=dict(
        data.splits, **{split: (x[order], y[order])}))
  ds = data.dataset(split, shuffle_files=training, seed=seed)
  if data.shuffle_buffer is None:
    ds = ds.cache()
  if training:
    ds = ds.shuffle(data.shuffle_buffer or data.size(split), seed=seed,
                    reshuffle_each_iteration=True).repeat()
  if bucketed and training:
    return _bucketed_batches(ds, batch_size, instance_inputs,
                             data.num_classes)
  if data.preprocessing is not None:
    preprocess = data.preprocessing
    ds = ds.map(lambda x, y: (preprocess(x, training=training), y),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  ds = ds.batch(batch_size, drop_remainder=training)
  ds = ds.map(ranking_features(instance_inputs, data.num_classes),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)


def _token_id_batches(data: ClassificationData, split: str,
                      ids: Dict[str, np.ndarray], batch_size: int,
                      training: bool, seed: int, instance_inputs,
                      length_sorted: bool) -> tf.data.Dataset:
  """`ranking_dataset` of an in-memory text split from its token ids."""
  labels = data.splits[split][1]
  labels = (labels.astype(np.float32) if labels.ndim == 2
            else labels.astype(np.int64))
  if length_sorted:
    order = np.argsort(ids[text.LENGTH], kind="stable")
    ids = {name: value[order] for name, value in ids.items()}
    labels = labels[order]
  ds = tf.data.Dataset.from_tensor_slices((ids, labels))
  to_ranking = ranking_features(instance_inputs.from_token_ids,
                                data.num_classes)
  if training:
    ds = ds.shuffle(data.shuffle_buffer or len(labels), seed=seed,
                    reshuffle_each_iteration=True).repeat()
    if instance_inputs.length_bucketing:
      ds = ds.group_by_window(
          key_func=lambda x, y: text.length_bucket(x[text.LENGTH]),
          reduce_func=lambda key, window: window.batch(batch_size,
                                                       drop_remainder=True),
          window_size=batch_size)
    else:
      ds = ds.batch(batch_size, drop_remainder=True)
  else:
    ds = ds.batch(batch_size)
  ds = ds.map(to_ranking, num_parallel_calls=tf.data.AUTOTUNE,
              deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)


# Raw texts tokenized per call before bucketing (order is kept).
TOKENIZE_CHUNK = 256


def _bucketed_batches(ds: tf.data.Dataset, batch_size: int,
                      instance_inputs, num_classes: int) -> tf.data.Dataset:
  """The shuffled training stream of `ranking_dataset`, tokenized in order,
  grouped by length bucket and each batch cut to its bucket."""
  ds = ds.batch(TOKENIZE_CHUNK).map(
      lambda x, y: (instance_inputs.packed(x), y),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
  ds = ds.group_by_window(
      key_func=lambda x, y: text.bucket_key(x),
      reduce_func=lambda key, window: window.batch(batch_size,
                                                   drop_remainder=True),
      window_size=batch_size)
  ds = ds.map(ranking_features(text.trim, num_classes),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)


def get(name: str, data_dir: Optional[str] = None, download: bool = False,
        image_size: Optional[int] = None,
        options: Optional[user_files.Options] = None) -> ClassificationData:
  """Loads the dataset called `name`.

  Args:
    name: dataset name (`DATASET_NAMES`, or `tfds:<name>`): `coco2017` and
      `voc2007` are multi-label images (multi-hot float32 labels
      [num_classes]).
    data_dir: the dataset's files (TFDS data directory for TFDS datasets).
    download: TFDS datasets only: download and prepare missing data.
    image_size: `RESIZED_DATASETS` and a user's images only: side of the
      preprocessed images (None: 224; CIFAR-10 is always 32).
    options: a user's data only: its columns, class names, split seed
      (`user_files.Options`).

  Raises:
    ValueError: for an unknown name or missing/malformed data (the message
      names the file and line, or the dataset and directory).
  """
  return sources.get(name, data_dir, download=download,
                     image_size=image_size, options=options)


def from_config(config) -> ClassificationData:
  """The dataset of a `config.DataConfig` (name, data_dir, download,
  image_size, and how to read a user's data)."""
  return get(config.dataset, config.data_dir, download=config.download,
             image_size=config.image_size,
             options=user_files.Options(
                 text=config.text_column, label=config.label_column,
                 label_separator=config.label_separator,
                 class_names_file=config.class_names_file,
                 split_seed=config.split_seed,
                 feature_columns=tuple(config.feature_columns),
                 instance_feature=config.instance_feature,
                 tfds_splits=tuple(config.tfds_splits),
                 skip_bad_records=config.skip_bad_records,
                 split_rule=config.split_rule))
