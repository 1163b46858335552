"""The one contract every data source gives: `ClassificationData`.

A source (`data/sources/`) turns its options into a `ClassificationData`:
class names, the raw instance's key, shape and dtype, and per split either
(instances, labels) numpy arrays held in memory or a `Stream` that tf.data
reads from files. Everything downstream (`datasets.ranking_dataset`, the
inspection, the data record) reads this contract only, never a source.

Labels are integer class ids [num_examples], or multi-hot float32
[num_examples, num_classes] for multi-label data.
"""

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

SPLITS = ("train", "validation", "test")


SPLIT_SEED = 20220128


@dataclasses.dataclass(frozen=True)
class Stream:
  """A split read from files by tf.data instead of held in memory.

  Attributes:
    read: `read(shuffle_files, seed)` -> unbatched (raw instance, label)
      pairs, the label an int64 class id or, when `multi_label`, a float32
      multi-hot [num_classes]; `shuffle_files` shuffles the order of the
      files.
    size: number of examples; when `exact_size` is False, the number before
      `read` filtered some out (an upper bound), and `read`'s length is
      unknown to tf.data.
    multi_label: the labels are multi-hot vectors, not class ids.
    exact_size: whether `size` counts exactly the examples `read` yields.
    unreadable: for a stream of a user's files, `unreadable()` -> the first
      instance that cannot be read now, `FILE: reason` or `FILE: record N:
      reason`, or None: asked when reading failed during a run (a file
      deleted or damaged since it was loaded), to name what broke
      (`first_unreadable`).
    skipped_reads: with `skip_bad_records`, `skipped_reads()` -> the places
      of the instances `read` left out because they could not be read when
      read (after the load's checks passed them); None: nothing is skipped
      so.
  """
  read: Callable[[bool, int], tf.data.Dataset]
  size: int
  multi_label: bool = False
  exact_size: bool = True
  unreadable: Optional[Callable[[], Optional[str]]] = None
  skipped_reads: Optional[Callable[[], List[str]]] = None


@dataclasses.dataclass(frozen=True)
class ClassificationData:
  """A classification dataset: its classes, instance feature and splits.

  Attributes:
    name: dataset name.
    class_names: one name per class, index = class id.
    instance_key: name of the raw instance feature (`image`, `text`).
    instance_shape: shape of one instance as the model reads it (without the
      batch axis): the raw instance, or the preprocessed image.
    instance_dtype: its dtype (tf.string for text).
    splits: split name -> (instances, labels) numpy arrays held in memory;
      labels are integer ids [num_examples] or multi-hot floats
      [num_examples, num_classes].
    streams: split name -> `Stream`, for splits read from files (TFDS).
    preprocessing: for images, `preprocessing(raw, training)` maps one raw
      uint8 image to the model's float32 image (see `images`); None when the
      raw instance is the model's input.
    shuffle_buffer: training shuffle buffer; None shuffles the whole split
      and caches every split in memory, an int streams without caching.
    feature_statistics: for numeric feature vectors (a user's table), the
      train split's (mean, std) per feature [num_features]: the model's
      input standardises them (`inputs.RawInputs`); None leaves instances
      as they are.
    feature_names: the names of those features, in order.
  """
  name: str
  class_names: Tuple[str, ...]
  instance_key: str
  instance_shape: Tuple[int, ...]
  instance_dtype: tf.DType
  splits: Dict[str, Tuple[np.ndarray, np.ndarray]] = dataclasses.field(
      default_factory=dict)
  streams: Dict[str, Stream] = dataclasses.field(default_factory=dict)
  preprocessing: Optional[Callable[[tf.Tensor, bool], tf.Tensor]] = None
  shuffle_buffer: Optional[int] = None
  feature_statistics: Optional[Tuple[np.ndarray, np.ndarray]] = None
  feature_names: Tuple[str, ...] = ()

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  @property
  def is_text(self) -> bool:
    return self.instance_dtype == tf.string

  @property
  def multi_label(self) -> bool:
    """Whether labels are multi-hot: 2-D in-memory labels, or streams that
    say so (`Stream.multi_label`)."""
    if self.splits:
      return next(iter(self.splits.values()))[1].ndim == 2
    return any(stream.multi_label for stream in self.streams.values())

  @property
  def split_names(self) -> Tuple[str, ...]:
    return tuple(self.splits) + tuple(self.streams)

  def size(self, split: str) -> int:
    """Number of examples of `split`; for a stream whose `exact_size` is
    False (the `train` split of multi-label TFDS images), TFDS's count before
    images without an object were dropped, an upper bound."""
    if split in self.streams:
      return self.streams[split].size
    return len(self.splits[split][1])

  def dataset(self, split: str, shuffle_files: bool = False,
              seed: int = 0) -> tf.data.Dataset:
    """Unbatched (raw instance, label) pairs of `split`.

    Args:
      split: split name.
      shuffle_files: for streamed splits, read the files in a seeded random
        order (in-memory splits ignore it).
      seed: the file-order seed.
    """
    if split in self.streams:
      return self.streams[split].read(shuffle_files, seed)
    if split not in self.splits:
      raise ValueError(f"Unknown split {split!r}; valid splits: "
                       f"{', '.join(self.split_names)}.")
    x, y = self.splits[split]
    y = y.astype(np.float32) if y.ndim == 2 else y.astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((x, y))


def first_unreadable(data: ClassificationData,
                     splits: Sequence[str] = SPLITS) -> Optional[str]:
  """The first instance of `splits` that cannot be read now
  (`Stream.unreadable`), or None: every one reads, or no split can say."""
  for split in splits:
    stream = data.streams.get(split)
    if stream is not None and stream.unreadable is not None:
      found = stream.unreadable()
      if found:
        return found
  return None


def skipped_reads(data: ClassificationData) -> Dict[str, List[str]]:
  """{split: the places its stream left out when read}
  (`Stream.skipped_reads`), for the splits that left any out."""
  out = {}
  for split, stream in data.streams.items():
    places = stream.skipped_reads() if stream.skipped_reads else []
    if places:
      out[split] = places
  return out


def streamed(data: ClassificationData) -> ClassificationData:
  """`data` with its in-memory splits read as streams: what the same
  examples in large files give (text tokenized in tf.data). For tests and
  benchmarks that compare the two paths."""
  def reader(split: str) -> Callable[[bool, int], tf.data.Dataset]:
    return lambda shuffle_files, seed: data.dataset(split)
  return dataclasses.replace(data, splits={}, streams={
      split: Stream(read=reader(split), size=data.size(split),
                    multi_label=data.multi_label)
      for split in data.splits})
