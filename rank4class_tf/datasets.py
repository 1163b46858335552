"""Classification datasets and their tf.data pipelines in TF-Ranking's terms.

A dataset yields (instance, integer label) pairs per split. `ranking_features`
turns a batch of those into what the ranking model reads:

* context feature `<instance_key>`: the raw instance, [batch_size, ...];
* example feature `class_id`: [batch_size, num_classes, 1] int64, the class
  list of each instance (every class, in id order);
* mask `example_list_mask`: [batch_size, num_classes] bool, all True;
* labels: [batch_size, num_classes] float one-hot relevance.

Names:

* `digits`: scikit-learn's bundled real digits (1,797 8x8 grey images, 10
  classes), pixels scaled to [0, 1], a fixed stratified 70/15/15
  train/validation/test split (1,257 / 270 / 270) drawn with `SPLIT_SEED`,
  independent of the training seed.
"""

import dataclasses
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

CLASS_ID = "class_id"
MASK = "example_list_mask"
SPLITS = ("train", "validation", "test")
SPLIT_SEED = 20220128


@dataclasses.dataclass(frozen=True)
class ClassificationData:
  """A multiclass dataset: its classes, instance feature and splits.

  Attributes:
    name: dataset name.
    class_names: one name per class, index = class id.
    instance_key: name of the context feature holding the raw instance.
    instance_shape: shape of one instance (without the batch axis).
    instance_dtype: dtype of the instance feature.
    splits: split name -> (instances, integer labels) numpy arrays.
  """
  name: str
  class_names: Tuple[str, ...]
  instance_key: str
  instance_shape: Tuple[int, ...]
  instance_dtype: tf.DType
  splits: Dict[str, Tuple[np.ndarray, np.ndarray]]

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  def size(self, split: str) -> int:
    return len(self.splits[split][1])

  def dataset(self, split: str) -> tf.data.Dataset:
    """Unbatched (instance, label) pairs of `split`."""
    if split not in self.splits:
      raise ValueError(f"Unknown split {split!r}; valid splits: "
                       f"{', '.join(self.splits)}.")
    x, y = self.splits[split]
    return tf.data.Dataset.from_tensor_slices((x, y.astype(np.int64)))


def class_list_features(instance_key: str, instance: tf.Tensor,
                        num_classes: int) -> Dict[str, tf.Tensor]:
  """Ranking features of a batch of instances, each listing every class.

  Args:
    instance_key: name of the context feature.
    instance: [batch_size, ...] raw instances.
    num_classes: number of classes.

  Returns:
    {instance_key: instance, CLASS_ID: [batch_size, num_classes, 1] int64,
     MASK: [batch_size, num_classes] bool (all True)}.
  """
  batch_size = tf.shape(instance)[0]
  class_ids = tf.range(num_classes, dtype=tf.int64)
  class_ids = tf.tile(class_ids[tf.newaxis, :, tf.newaxis], [batch_size, 1, 1])
  return {
      instance_key: instance,
      CLASS_ID: class_ids,
      MASK: tf.ones([batch_size, num_classes], tf.bool),
  }


def ranking_features(instance_key: str, num_classes: int) -> Callable:
  """Returns a map fn: batched (instance, label) -> (features, labels)."""

  def to_ranking(instance, label):
    features = class_list_features(instance_key, instance, num_classes)
    return features, tf.one_hot(label, num_classes, dtype=tf.float32)

  return to_ranking


def ranking_dataset(data: ClassificationData,
                    split: str,
                    batch_size: int,
                    training: bool,
                    seed: int = 0) -> tf.data.Dataset:
  """Batched ranking examples of `split`.

  Training datasets are cached, shuffled with `seed` (reshuffled each pass)
  and repeated forever; evaluation datasets are cached and read once in order.
  """
  ds = data.dataset(split).cache()
  if training:
    ds = ds.shuffle(data.size(split), seed=seed,
                    reshuffle_each_iteration=True).repeat()
  ds = ds.batch(batch_size, drop_remainder=training)
  ds = ds.map(ranking_features(data.instance_key, data.num_classes),
              num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)


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


_DATASETS: Dict[str, Callable[[Optional[str]], ClassificationData]] = {
    "digits": load_digits,
}

DATASET_NAMES = tuple(_DATASETS)


def get(name: str, data_dir: Optional[str] = None) -> ClassificationData:
  """Loads the dataset called `name`.

  Raises:
    ValueError: for an unknown name or missing/unreadable data (the message
      names the file).
  """
  if name not in _DATASETS:
    raise ValueError(f"Unknown dataset {name!r}; valid names: "
                     f"{', '.join(DATASET_NAMES)}.")
  return _DATASETS[name](data_dir)
