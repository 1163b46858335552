"""The image sets named in the catalog, read with TFDS's own builders.

* `cifar10`: CIFAR-10 (50,000 / 10,000 32x32 colour images, 10 classes)
  read with TFDS's own builder from `--data_dir`; `validation` and `test`
  are both TFDS's test split (the paper picks the best checkpoint on it).
  cifar-vgg preprocessing (`images.CifarVGGPreprocessing`), with the
  training split's pixel mean and standard deviation.
* `imagenet2012`: ImageNet ILSVRC 2012 (1,281,167 / 50,000 images, 1,000
  classes named by their WordNet ids) from TFDS's builder; `validation` and
  `test` are both TFDS's validation split. Model Garden ResNet preprocessing
  (`images.ImageNetPreprocessing`) to `image_size` (224).
* `coco2017`: MS-COCO 2017 as multi-label classification (TFDS
  `coco/2017`, 118,287 / 5,000 images, 80 classes named by TFDS's
  `objects/label` feature): the label of an image is the set of the
  categories of its annotated objects, crowd regions included. `validation`
  and `test` are both TFDS's validation split (COCO's test split has no
  public labels; multi-label papers report on val). The 1,021 train and 48
  validation images without any object are dropped (see below).
* `voc2007`: PASCAL VOC 2007 as multi-label classification (TFDS
  `voc/2007`, 20 classes from `objects/label`, `difficult` objects
  included): `train` is TFDS's `train+validation` (VOC's trainval, 5,011
  images, the standard multi-label protocol); `validation` and `test` are
  both VOC's test split (4,952 images): as for `cifar10`, the best
  checkpoint is picked on test. Every VOC image has an object.
  Both multi-label datasets are resized whole to `image_size` (224; ML-GCN
  and MulCon use 448) by `images.MultiLabelImagePreprocessing`, and
  stream through a shuffle buffer (`MULTI_LABEL_SHUFFLE_BUFFER`) instead of
  being cached.
* `digits32`: the `digits` split upscaled to 32x32x3 uint8 images (bilinear,
  grey copied to 3 channels), a real image dataset that ships offline, with
  the cifar-vgg preprocessing without flips (a mirrored digit is another
  symbol).

TFDS datasets are never downloaded unless `download=True`: a missing
prepared copy stops with a one-line ValueError naming the dataset and the
directory. Image datasets yield raw uint8 images; their `preprocessing` runs
per example in `ranking_dataset` (augmentation on the train split only).

Multi-label TFDS images (`coco2017`, `voc2007`) without any annotated object
are dropped, in every split: an all-zero label has no relevant class to
rank, so ranking metrics (MRR, NDCG) and listwise losses are undefined on
it, and the usual protocol (ML-GCN) keeps the labelled images only. The
`validation` and `test` splits are counted when the dataset is loaded (one
pass parsing their labels only), so their `size` is exact and their tf.data
length known, as Keras's validation needs. The `train` split is not counted
(all of COCO's train set would be read): its `size` is TFDS's count before
the filter, an upper bound (`Stream.exact_size` is False); the fixed shuffle
buffer does not depend on it.
"""

from typing import Callable, Dict, Optional, Tuple
import dataclasses

import numpy as np
import tensorflow as tf

from rank4class_tf.catalog import (  # pylint: disable=g-multiple-import
    MULTI_LABEL_DATASETS, RESIZED_DATASETS, TFDS_SPLITS, VALIDATION_IS_TEST)
from rank4class_tf.data import images
from rank4class_tf.data import tfds_download
from rank4class_tf.data import user_files
from rank4class_tf.data.contract import SPLITS, ClassificationData, Stream


def load(name: str, data_dir: Optional[str], options: user_files.Options,
         image_size: Optional[int] = None,
         download: bool = False) -> ClassificationData:
  """The TFDS image set `name` (`catalog.TFDS_DATASETS`)."""
  del options  # Their TFDS features are fixed.
  return _LOADERS[name](data_dir, download=download, image_size=image_size)


IMAGENET_SHUFFLE_BUFFER = 10_000  # The Model Garden's ImageNet buffer.


# As ImageNet's: the whole of VOC's trainval, 8% of COCO's train split.
MULTI_LABEL_SHUFFLE_BUFFER = 10_000


@dataclasses.dataclass(frozen=True)
class TfdsSource:
  """Where a dataset lives in TFDS and how its examples become pairs.

  Attributes:
    tfds_name: TFDS name, `name` or `name/config` (`coco/2017`).
    label_feature: `/`-path of the ClassLabel feature that names the classes
      and labels the image: `label` (one class id per image) or
      `objects/label` (one per annotated object).
    multi_label: False: the feature is the image's class id, the label an
      int64. True: the set of the image's object labels becomes a multi-hot
      float32 [num_classes] label (`multi_hot`), and images without any
      object are dropped (see the module doc).
  """
  tfds_name: str
  label_feature: str = "label"
  multi_label: bool = False


TFDS_SOURCES = {
    "cifar10": TfdsSource("cifar10"),
    "imagenet2012": TfdsSource("imagenet2012"),
    "coco2017": TfdsSource("coco/2017", "objects/label", multi_label=True),
    "voc2007": TfdsSource("voc/2007", "objects/label", multi_label=True),
}


def multi_hot(class_ids: tf.Tensor, num_classes: int, name: str) -> tf.Tensor:
  """The multi-hot vector of a set of class ids.

  y_c = 1 if c is in `class_ids` else 0: duplicates (two objects of one
  class) collapse to 1, no id gives all zeros.

  Example: multi_hot([2, 0, 2], 4, "voc/2007") -> [1., 0., 1., 0.].

  Args:
    class_ids: [num_objects] integer class ids.
    num_classes: length of the class list.
    name: dataset name for the error message.

  Returns:
    float32 [num_classes].

  Raises:
    tf.errors.InvalidArgumentError: `<name>: object label outside the class
      list (0..<num_classes - 1>)` when an id is negative or too large (when
      the op runs, inside tf.data).
  """
  class_ids = tf.cast(class_ids, tf.int64)
  message = (f"{name}: object label outside the class list "
             f"(0..{num_classes - 1})")
  checks = [
      tf.debugging.assert_non_negative(class_ids, message=message),
      tf.debugging.assert_less(class_ids, tf.constant(num_classes, tf.int64),
                               message=message),
  ]
  with tf.control_dependencies(checks):
    counts = tf.reduce_sum(
        tf.one_hot(class_ids, num_classes, dtype=tf.float32), axis=0)
  return tf.minimum(counts, 1.0)


def at_path(tree, path: str):
  """`tree["a"]["b"]` for the path `a/b` (TFDS features, an example)."""
  for key in path.split("/"):
    tree = tree[key]
  return tree


def tfds_pair(source: TfdsSource, num_classes: int
             ) -> Callable[[Dict[str, tf.Tensor]], Tuple[tf.Tensor, tf.Tensor]]:
  """The map fn turning one TFDS example into an (image, label) pair.

  Args:
    source: the dataset's `TfdsSource`.
    num_classes: number of classes of its label feature.

  Returns:
    `to_pair(features)`: TFDS features dict -> (uint8 image [height, width,
    3], label), the label an int64 class id, or for `source.multi_label` the
    float32 [num_classes] `multi_hot` of the object labels.
  """
  def to_pair(features):
    label = at_path(features, source.label_feature)
    if source.multi_label:
      return features["image"], multi_hot(label, num_classes,
                                          source.tfds_name)
    return features["image"], tf.cast(label, tf.int64)

  return to_pair


def has_object(image: tf.Tensor, label: tf.Tensor) -> tf.Tensor:
  """Filter predicate: the multi-hot `label` holds at least one class."""
  del image  # Unused.
  return tf.reduce_any(label > 0)


def tfds_streams(name: str, data_dir: Optional[str], download: bool = False
                ) -> Tuple[Tuple[str, ...], Dict[str, Stream]]:
  """Class names and split streams of a TFDS dataset, read with TFDS's builder.

  Args:
    name: dataset name, a key of `TFDS_SOURCES` (`cifar10`, `imagenet2012`,
      `coco2017`, `voc2007`).
    data_dir: TFDS data directory (None: TFDS's default).
    download: download and prepare the data first when it is missing.

  Returns:
    (class names from the label feature, {split: Stream}) for our splits
    (`TFDS_SPLITS`), yielding (uint8 image, label) pairs (`tfds_pair`).
    Multi-label streams drop images without an object: the `train` stream's
    `size` is TFDS's count before that filter (`exact_size` False); the
    evaluation splits are counted here, one pass over their labels, and
    their streams carry that cardinality (Keras needs it to validate).

  Raises:
    ValueError: one line naming the dataset and directory when the data is
      not prepared there and `download` is False; one line when `download`
      cannot download it (`tfds_download`: offline, fast, nothing left).
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  source = TFDS_SOURCES[name]
  if download:
    tfds_download.check_network(source.tfds_name, name)
  builder = tfds.builder(source.tfds_name, data_dir=data_dir)
  if download:
    tfds_download.download_and_prepare(builder, name)
  class_names = tuple(
      at_path(builder.info.features, source.label_feature).names)
  to_pair = tfds_pair(source, len(class_names))

  def read_examples(tfds_split: str, shuffle_files: bool = False,
                    seed: int = 0, decoders=None) -> tf.data.Dataset:
    return builder.as_dataset(
        split=tfds_split, shuffle_files=shuffle_files, decoders=decoders,
        read_config=tfds.ReadConfig(shuffle_seed=seed))

  def count_kept(tfds_split: str) -> int:
    """Images of `tfds_split` with an object: one pass over the labels."""
    labels_only = True
    for key in reversed(source.label_feature.split("/")):
      labels_only = {key: labels_only}
    examples = read_examples(  # Parses the labels only, no image.
        tfds_split, decoders=tfds.decode.PartialDecoding(labels_only))
    kept = examples.map(lambda features: tf.cast(
        tf.size(at_path(features, source.label_feature)) > 0, tf.int64))
    return int(kept.reduce(np.int64(0), tf.add))

  def reader(tfds_split: str, kept: Optional[int]
            ) -> Callable[[bool, int], tf.data.Dataset]:
    def read(shuffle_files: bool = False, seed: int = 0) -> tf.data.Dataset:
      ds = read_examples(tfds_split, shuffle_files, seed).map(to_pair)
      if source.multi_label:
        ds = ds.filter(has_object)
      if kept is not None:  # Keras reads the validation data's length.
        ds = ds.apply(tf.data.experimental.assert_cardinality(kept))
      return ds
    return read

  streams, counted = {}, {}
  for split, tfds_split in TFDS_SPLITS[name].items():
    try:
      size = int(read_examples(tfds_split).cardinality())  # TFDS's count.
    except AssertionError:
      raise ValueError(
          f"{name} is not prepared in {data_dir or builder.data_dir}: "
          f"prepare it there with TFDS (`tfds build {source.tfds_name} "
          f"--data_dir=DIR`) and pass `data_dir`=DIR, or pass `download`."
      ) from None
    kept = None  # Multi-label evaluation splits: the count after the filter.
    if source.multi_label and split != "train":
      if tfds_split not in counted:
        counted[tfds_split] = count_kept(tfds_split)
      kept = size = counted[tfds_split]
    streams[split] = Stream(
        read=reader(tfds_split, kept), size=size,
        multi_label=source.multi_label,
        exact_size=not source.multi_label or kept is not None)
  return class_names, streams


def load_cifar10(data_dir: Optional[str] = None, download: bool = False,
                 image_size: Optional[int] = None) -> ClassificationData:
  """CIFAR-10 through TFDS (see module doc)."""
  if image_size not in (None, 32):
    raise ValueError(f"`image_size`={image_size!r}: cifar10 images are 32.")
  class_names, streams = tfds_streams("cifar10", data_dir, download)
  mean, std = images.pixel_statistics(streams["train"].read(False, 0))
  return ClassificationData(
      name="cifar10", class_names=class_names, instance_key="image",
      instance_shape=(32, 32, 3), instance_dtype=tf.float32,
      streams=streams, preprocessing=images.CifarVGGPreprocessing(mean, std))


def load_imagenet2012(data_dir: Optional[str] = None, download: bool = False,
                      image_size: Optional[int] = None) -> ClassificationData:
  """ImageNet 2012 through TFDS (see module doc)."""
  preprocessing = images.ImageNetPreprocessing(image_size or 224)
  class_names, streams = tfds_streams("imagenet2012", data_dir, download)
  return ClassificationData(
      name="imagenet2012", class_names=class_names, instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams=streams, preprocessing=preprocessing,
      shuffle_buffer=IMAGENET_SHUFFLE_BUFFER)


def _multi_label_images(name: str, data_dir: Optional[str], download: bool,
                        image_size: Optional[int]) -> ClassificationData:
  preprocessing = images.MultiLabelImagePreprocessing(image_size or 224)
  class_names, streams = tfds_streams(name, data_dir, download)
  return ClassificationData(
      name=name, class_names=class_names, instance_key="image",
      instance_shape=preprocessing.output_shape, instance_dtype=tf.float32,
      streams=streams, preprocessing=preprocessing,
      shuffle_buffer=MULTI_LABEL_SHUFFLE_BUFFER)


def load_coco2017(data_dir: Optional[str] = None, download: bool = False,
                  image_size: Optional[int] = None) -> ClassificationData:
  """MS-COCO 2017 object categories as multi-label data (see module doc)."""
  return _multi_label_images("coco2017", data_dir, download, image_size)


def load_voc2007(data_dir: Optional[str] = None, download: bool = False,
                 image_size: Optional[int] = None) -> ClassificationData:
  """PASCAL VOC 2007 object classes as multi-label data (see module doc)."""
  return _multi_label_images("voc2007", data_dir, download, image_size)


_LOADERS = {"cifar10": load_cifar10, "imagenet2012": load_imagenet2012,
            "coco2017": load_coco2017, "voc2007": load_voc2007}
