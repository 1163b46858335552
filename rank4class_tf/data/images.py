"""Image preprocessing as the original recipes do it, and image inputs.

A preprocessing object maps one raw uint8 image [height, width, 3] to the
float32 image the encoder reads, [size, size, 3]:

* `preprocessing(image, training=True)`: the training-time augmentation plus
  normalisation. The tf.data pipeline applies it per example, before
  batching, to the train split only.
* `preprocessing(image, training=False)`: the evaluation preprocessing, for
  the validation and test splits.
* `preprocessing.serve(images)`: the same evaluation preprocessing on a batch
  of raw uint8 images [batch_size, height, width, 3], inside the serving
  signature, so that a SavedModel takes raw images.

Recipes:

* `ImageNetPreprocessing`: the Model Garden ResNet recipe
  (`official.vision.dataloaders.classification_input`, whose ops it calls).
  Training: a random crop covering 8% to 100% of the area with aspect ratio
  in [3/4, 4/3] (10 attempts, else a center crop), a random horizontal flip,
  a bilinear resize to [size, size]. Evaluation: a center crop of 0.875 of
  the shorter side (224 / 256), a bilinear resize to [size, size]. Both then
  subtract the ImageNet mean and divide by its standard deviation, per
  channel (the values of `preprocess_ops.MEAN_RGB`, `STDDEV_RGB`).
* `MultiLabelImagePreprocessing`: for multi-label images (COCO, VOC), the
  whole image is resized (bilinear) to [size, size], aspect ratio not kept,
  as ML-GCN's `Warp`: a crop could cut an object away and its label would
  then lie. Training adds a random horizontal flip only (ML-GCN's
  multi-scale crop is left out for the same reason). Both then apply the
  ImageNet mean / standard deviation normalisation above. ML-GCN and MulCon
  use size 448; the default here is 224.
* `CifarVGGPreprocessing`: geifmany/cifar-vgg. (x - mean) / (std + 1e-7),
  where mean and std are one scalar each over every pixel and channel of the
  training set (their `normalize`). Training adds Keras
  `ImageDataGenerator(rotation_range=15, width_shift_range=0.1,
  height_shift_range=0.1, horizontal_flip=True)`: one random rotation and
  shift, bilinear sampling, edge pixels repeated (`nearest` fill).
"""

import math
from typing import Any, Dict, Tuple

import numpy as np
import tensorflow as tf

# The Model Garden's ImageNet statistics, in [0, 255] pixel units:
# `preprocess_ops.MEAN_RGB` and `STDDEV_RGB` (tests/test_images.py checks).
IMAGENET_MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STDDEV_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)
CENTER_CROP_FRACTION = 0.875


def _preprocess_ops():
  """`official.vision.ops.preprocess_ops`, imported when an image is first
  preprocessed: any official.vision import runs that package's __init__,
  which imports every Model Garden vision task (Mask R-CNN's plotting,
  matplotlib), 0.9 s of every binary's start (`python -X importtime`)."""
  from official.vision.ops import preprocess_ops  # pylint: disable=g-import-not-at-top
  return preprocess_ops


class ImageNetPreprocessing:
  """The Model Garden ResNet preprocessing (see module doc).

  Args:
    size: output side (224 for ResNet50 on ImageNet).
  """

  raw_shape = (None, None, 3)

  def __init__(self, size: int = 224):
    self.size = int(size)
    self.output_shape = (self.size, self.size, 3)

  def __call__(self, image: tf.Tensor, training: bool) -> tf.Tensor:
    """uint8 [height, width, 3] -> float32 [size, size, 3]."""
    image.shape.assert_has_rank(3)
    preprocess_ops = _preprocess_ops()
    if training:
      cropped = preprocess_ops.random_crop_image(image)
      image = tf.cond(
          tf.reduce_all(tf.equal(tf.shape(cropped), tf.shape(image))),
          lambda: preprocess_ops.center_crop_image(image),
          lambda: cropped)
      image = tf.image.random_flip_left_right(image)
    else:
      image = preprocess_ops.center_crop_image(image, CENTER_CROP_FRACTION)
    image = tf.image.resize(image, [self.size, self.size],
                            method=tf.image.ResizeMethod.BILINEAR)
    image.set_shape(self.output_shape)
    return preprocess_ops.normalize_image(
        image, offset=IMAGENET_MEAN_RGB, scale=IMAGENET_STDDEV_RGB)

  def serve(self, images: tf.Tensor) -> tf.Tensor:
    """uint8 [batch_size, height, width, 3] -> float32 [batch_size, size, size, 3]."""
    return tf.map_fn(lambda image: self(image, training=False), images,
                     fn_output_signature=tf.float32)


class MultiLabelImagePreprocessing(ImageNetPreprocessing):
  """Whole-image resize for multi-label images (see module doc).

  Args:
    size: output side (224; ML-GCN / MulCon use 448).

  Example:
    pre = MultiLabelImagePreprocessing(224)
    pre(tf.zeros([480, 640, 3], tf.uint8), training=True).shape  # [224, 224, 3]
  """

  def __call__(self, image: tf.Tensor, training: bool) -> tf.Tensor:
    """uint8 [height, width, 3] -> float32 [size, size, 3]."""
    image.shape.assert_has_rank(3)
    if training:
      image = tf.image.random_flip_left_right(image)
    image = tf.image.resize(image, [self.size, self.size],
                            method=tf.image.ResizeMethod.BILINEAR)
    image.set_shape(self.output_shape)
    return _preprocess_ops().normalize_image(
        image, offset=IMAGENET_MEAN_RGB, scale=IMAGENET_STDDEV_RGB)


def affine_transform(rotation: tf.Tensor, shift: tf.Tensor,
                     height: int, width: int) -> tf.Tensor:
  """The projective transform of a rotation about the center then a shift.

  Args:
    rotation: angle in radians, scalar.
    shift: [2] (rows, columns) shift in pixels.
    height: image height.
    width: image width.

  Returns:
    [8] float32, the `ImageProjectiveTransformV3` vector that maps an output
    pixel (x, y) to the input pixel it samples.
  """
  cos, sin = tf.cos(rotation), tf.sin(rotation)
  cy, cx = (height - 1) / 2.0, (width - 1) / 2.0
  return tf.stack([
      cos, -sin, cx - cos * cx + sin * cy - shift[1],
      sin, cos, cy - sin * cx - cos * cy - shift[0],
      0.0, 0.0])


class CifarVGGPreprocessing:
  """The geifmany/cifar-vgg preprocessing (see module doc).

  Args:
    mean: mean of every training pixel and channel, in [0, 255] units.
    std: their standard deviation.
    size: image side (32 for CIFAR-10).
    rotation_range: largest rotation in degrees (cifar-vgg: 15).
    shift_range: largest shift as a fraction of the side (cifar-vgg: 0.1).
    flip: random horizontal flips (cifar-vgg: True; False for digits).
  """

  def __init__(self, mean: float, std: float, size: int = 32,
               rotation_range: float = 15.0, shift_range: float = 0.1,
               flip: bool = True):
    self.mean = float(mean)
    self.std = float(std)
    self.size = int(size)
    self.rotation_range = float(rotation_range)
    self.shift_range = float(shift_range)
    self.flip = bool(flip)
    self.raw_shape = (self.size, self.size, 3)
    self.output_shape = self.raw_shape

  def normalize(self, images: tf.Tensor) -> tf.Tensor:
    """(x - mean) / (std + 1e-7) on any batch shape, as float32."""
    return (tf.cast(images, tf.float32) - self.mean) / (self.std + 1e-7)

  def augment(self, image: tf.Tensor) -> tf.Tensor:
    """One random rotation + shift (+ flip) of a float [size, size, 3] image."""
    angle = tf.random.uniform([], -1.0, 1.0) * self.rotation_range
    shift = tf.random.uniform([2], -1.0, 1.0) * self.shift_range * self.size
    transform = affine_transform(angle * math.pi / 180.0, shift, self.size,
                                 self.size)
    image = tf.raw_ops.ImageProjectiveTransformV3(
        images=image[tf.newaxis], transforms=transform[tf.newaxis],
        output_shape=[self.size, self.size], fill_value=0.0,
        interpolation="BILINEAR", fill_mode="NEAREST")[0]
    if self.flip:
      image = tf.image.random_flip_left_right(image)
    return image

  def __call__(self, image: tf.Tensor, training: bool) -> tf.Tensor:
    """uint8 [size, size, 3] -> float32 [size, size, 3]."""
    image = tf.ensure_shape(tf.cast(image, tf.float32), self.raw_shape)
    if training:
      image = self.augment(image)
    return self.normalize(image)

  def serve(self, images: tf.Tensor) -> tf.Tensor:
    return self.normalize(images)


def pixel_statistics(dataset: tf.data.Dataset,
                     batch_size: int = 1024) -> Tuple[float, float]:
  """Mean and standard deviation of every pixel and channel of the images.

  Args:
    dataset: unbatched (uint8 image, label) pairs.
    batch_size: images summed per step.

  Returns:
    (mean, std) in pixel units, one scalar each (cifar-vgg's statistics).
  """
  total = total_sq = count = 0.0
  for images, _ in dataset.batch(batch_size).as_numpy_iterator():
    x = images.astype(np.float64)
    total += x.sum()
    total_sq += np.square(x).sum()
    count += x.size
  if not count:
    raise ValueError("No training images to compute the pixel statistics.")
  mean = total / count
  return mean, math.sqrt(max(total_sq / count - mean * mean, 0.0))


class ImageInputs:
  """Preprocessed images as the model's context feature; raw images served.

  In the tf.data pipeline the images arrive already preprocessed (float32
  [batch_size, size, size, 3]) and are their own feature. The serving
  signature takes raw uint8 images [batch_size, height, width, 3] (height and
  width free for ImageNet, COCO and VOC, fixed for CIFAR-10) and applies the
  evaluation preprocessing in the graph (`serving_features`).

  Args:
    key: feature name (`image`).
    preprocessing: an `ImageNetPreprocessing`,
      `MultiLabelImagePreprocessing` or `CifarVGGPreprocessing`.
  """

  def __init__(self, key: str, preprocessing):
    self.key = key
    self.preprocessing = preprocessing
    self.shape = tuple(preprocessing.output_shape)
    self.dtype = tf.float32

  def __call__(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """[batch_size, size, size, 3] preprocessed images -> context features."""
    return {self.key: instance}

  def serving_features(self, images: tf.Tensor) -> Dict[str, tf.Tensor]:
    """Raw uint8 images -> context features (evaluation preprocessing)."""
    return {self.key: self.preprocessing.serve(images)}

  def serving_assets(self) -> Dict[str, Any]:
    return {}

  def context_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    return {self.key: tf.io.FixedLenFeature(self.shape, tf.float32)}

  def serving_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None, *self.preprocessing.raw_shape], tf.uint8,
                         name=self.key)

  def encoder_input(self, context: Dict[str, tf.Tensor]) -> tf.Tensor:
    return context[self.key]
