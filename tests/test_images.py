"""Tests of rank4class_tf.data.images, the image datasets and the image encoders.

TFDS datasets run on `tfds.testing.mock_data`: TFDS's real builders (specs,
class names) with random examples.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
from absl.testing import parameterized

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data.sources import image_catalog
from rank4class_tf import catalog
from rank4class_tf.data import features as features_lib
from rank4class_tf.data import images
from rank4class_tf.modeling import encoders
import helpers

MEAN = np.array(images.IMAGENET_MEAN_RGB, np.float32)
STD = np.array(images.IMAGENET_STDDEV_RGB, np.float32)


class ImageNetPreprocessingTest(tf.test.TestCase):

  def test_statistics_are_the_model_gardens(self):
    from official.vision.ops import preprocess_ops  # pylint: disable=g-import-not-at-top
    self.assertEqual(images.IMAGENET_MEAN_RGB, preprocess_ops.MEAN_RGB)
    self.assertEqual(images.IMAGENET_STDDEV_RGB, preprocess_ops.STDDEV_RGB)

  def test_binaries_start_without_model_garden_vision(self):
    # Importing official.vision imports all its tasks (0.9 s a process):
    # only the ResNet encoder and the ImageNet recipe import it, when used.
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys, pipelines.study, rank4class_tf.serving.saved_model, "
         "rank4class_tf.serving.exported_ranker; "
         "print([m for m in sys.modules if m.startswith('official.vision')])"],
        cwd=helpers.REPO, capture_output=True, text=True, check=True,
        timeout=300)
    self.assertEqual(out.stdout.strip(), "[]")

  def test_eval_is_center_crop_then_normalisation(self):
    rng = np.random.RandomState(0)
    image = rng.randint(0, 256, size=(64, 48, 3)).astype(np.uint8)
    # Crop side 0.875 * 48 = 42, offsets (64 - 42) / 2 = 11 and 3; resizing
    # to the crop's own size leaves it unchanged.
    got = images.ImageNetPreprocessing(42)(tf.constant(image), training=False)
    want = (image[11:53, 3:45].astype(np.float32) - MEAN) / STD
    self.assertEqual(got.dtype, tf.float32)
    self.assertAllClose(got, want, atol=1e-4)

  def test_train_crops_flips_and_resizes(self):
    pre = images.ImageNetPreprocessing(16)
    image = np.full((40, 30, 3), 200, np.uint8)
    got = pre(tf.constant(image), training=True)
    self.assertEqual(got.shape, (16, 16, 3))
    # A constant image stays constant through any crop, flip and resize.
    self.assertAllClose(got, np.broadcast_to((200. - MEAN) / STD, got.shape),
                        atol=1e-4)
    ramp = np.tile(np.arange(60, dtype=np.uint8)[:, None, None], [1, 60, 3])
    outs = {pre(tf.constant(ramp), training=True).numpy().tobytes()
            for _ in range(5)}
    self.assertGreater(len(outs), 1)  # Random crops differ.

  def test_serve_equals_eval_per_image(self):
    pre = images.ImageNetPreprocessing(24)
    batch = np.random.RandomState(1).randint(
        0, 256, size=(3, 50, 37, 3)).astype(np.uint8)
    served = pre.serve(tf.constant(batch))
    for i in range(3):
      self.assertAllClose(served[i], pre(tf.constant(batch[i]), False))


class CifarVGGPreprocessingTest(tf.test.TestCase):

  def test_eval_and_serve_normalise_with_one_mean_and_std(self):
    pre = images.CifarVGGPreprocessing(mean=120.707, std=64.15)
    image = np.random.RandomState(0).randint(
        0, 256, size=(32, 32, 3)).astype(np.uint8)
    want = (image - 120.707) / (64.15 + 1e-7)
    self.assertAllClose(pre(tf.constant(image), training=False), want)
    self.assertAllClose(pre.serve(tf.constant(image[None]))[0], want)

  def test_shift_repeats_the_edge(self):
    image = np.arange(25, dtype=np.float32).reshape(5, 5, 1)
    transform = images.affine_transform(tf.constant(0.), tf.constant([2., 0.]),
                                        5, 5)
    got = tf.raw_ops.ImageProjectiveTransformV3(
        images=image[None], transforms=transform[None], output_shape=[5, 5],
        fill_value=0., interpolation="BILINEAR", fill_mode="NEAREST")[0]
    want = image[[0, 0, 0, 1, 2]]  # Moved down two rows; top row repeated.
    self.assertAllClose(got, want)

  def test_quarter_turn_about_the_center(self):
    image = np.arange(9, dtype=np.float32).reshape(3, 3, 1)
    transform = images.affine_transform(tf.constant(np.pi / 2),
                                        tf.zeros([2]), 3, 3)
    got = tf.raw_ops.ImageProjectiveTransformV3(
        images=image[None], transforms=transform[None], output_shape=[3, 3],
        fill_value=0., interpolation="BILINEAR", fill_mode="NEAREST")[0]
    self.assertAllClose(got[..., 0], np.rot90(image[..., 0], k=1), atol=1e-4)

  def test_training_augments_within_range(self):
    pre = images.CifarVGGPreprocessing(mean=0., std=1.)
    image = np.full((32, 32, 3), 7, np.uint8)
    self.assertAllClose(pre(tf.constant(image), training=True),
                        np.full((32, 32, 3), 7.), atol=1e-4)
    still = images.CifarVGGPreprocessing(0., 1., rotation_range=0.,
                                         shift_range=0., flip=False)
    ramp = np.random.RandomState(2).randint(0, 256, (32, 32, 3)).astype(
        np.uint8)
    self.assertAllClose(still(tf.constant(ramp), training=True), ramp,
                        atol=1e-3)
    moved = pre(tf.constant(ramp), training=True)
    self.assertEqual(moved.shape, (32, 32, 3))
    self.assertNotAllClose(moved, ramp)

  def test_pixel_statistics(self):
    x = np.random.RandomState(3).randint(0, 256, (20, 4, 4, 3)).astype(
        np.uint8)
    ds = tf.data.Dataset.from_tensor_slices((x, np.zeros(20, np.int64)))
    mean, std = images.pixel_statistics(ds, batch_size=7)
    self.assertAllClose([mean, std], [x.mean(), x.std()], rtol=1e-9)


class ImageDatasetsTest(tf.test.TestCase):

  def test_digits32(self):
    data = datasets.get("digits32")
    digits = datasets.get("digits")
    x, y = data.splits["train"]
    self.assertEqual((x.shape[1:], x.dtype), ((32, 32, 3), np.uint8))
    self.assertAllEqual(y, digits.splits["train"][1])
    self.assertAllEqual(x[..., 0], x[..., 2])
    self.assertFalse(data.preprocessing.flip)
    self.assertAllClose(data.preprocessing.mean, x.mean())
    features, labels = next(iter(datasets.ranking_dataset(
        data, "test", 16, training=False)))
    self.assertEqual(features["image"].dtype, tf.float32)
    self.assertAllClose(features["image"],
                        data.preprocessing.normalize(
                            data.splits["test"][0][:16]))
    self.assertEqual(labels.shape, (16, 10))

  def test_cifar10_from_tfds(self):
    with tfds.testing.mock_data(num_examples=6):
      data = datasets.get("cifar10", "/unused")
      x = np.stack([x for x, _ in data.dataset("train").as_numpy_iterator()])
    self.assertEqual(data.num_classes, 10)
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 6, "validation": 6, "test": 6})
    self.assertEqual(data.instance_shape, (32, 32, 3))
    self.assertIsNone(data.shuffle_buffer)
    self.assertAllClose([data.preprocessing.mean, data.preprocessing.std],
                        [x.mean(), x.std()], rtol=1e-6)

  def test_imagenet2012_from_tfds(self):
    with tfds.testing.mock_data(num_examples=4):
      data = datasets.get("imagenet2012", "/unused", image_size=40)
      self.assertEqual(data.num_classes, 1000)
      self.assertEqual(data.class_names[0], "n01440764")
      self.assertEqual(data.shuffle_buffer, image_catalog.IMAGENET_SHUFFLE_BUFFER)
      for training, split in ((True, "train"), (False, "validation")):
        features, labels = next(iter(datasets.ranking_dataset(
            data, split, 2, training=training)))
        self.assertEqual(features["image"].shape, (2, 40, 40, 3))
        self.assertEqual(labels.shape, (2, 1000))
        self.assertEqual(features[features_lib.CLASS_ID].shape, (2, 1000, 1))

  def test_augmentation_on_the_train_split_only(self):
    data = datasets.get("digits32")
    plain = data.preprocessing.normalize(data.splits["validation"][0]).numpy()
    evaluated = np.concatenate([f["image"] for f, _ in datasets.ranking_dataset(
        data, "validation", 64, training=False)])
    self.assertAllClose(evaluated, plain)
    # Training images are augmented: none equals a plain training image.
    plain = data.preprocessing.normalize(data.splits["train"][0]).numpy()
    augmented = next(iter(datasets.ranking_dataset(
        data, "train", 8, training=True, seed=1)))[0]["image"].numpy()
    distance = np.abs(augmented[:, None] - plain[None]).max(axis=(2, 3, 4))
    self.assertGreater(distance.min(), 0.01)

  def test_missing_tfds_data_is_one_line(self):
    empty = tempfile.mkdtemp()
    for name in catalog.TFDS_DATASETS:
      with self.assertRaises(ValueError) as e:
        datasets.get(name, empty)
      self.assertEqual(len(str(e.exception).splitlines()), 1)
      self.assertStartsWith(str(e.exception),
                            f"{name} is not prepared in {empty}")
      self.assertIn("`download`", str(e.exception))
    self.assertEqual(os.listdir(empty), [])  # Nothing downloaded.


class ImageInputsTest(tf.test.TestCase):

  def test_serving_takes_raw_uint8(self):
    inputs = images.ImageInputs("image", images.ImageNetPreprocessing(32))
    spec = inputs.serving_spec()
    self.assertEqual((spec.dtype, spec.shape.as_list()),
                     (tf.uint8, [None, None, None, 3]))
    self.assertEqual(inputs.context_spec()["image"].shape, (32, 32, 3))
    raw = tf.zeros([2, 50, 60, 3], tf.uint8)
    self.assertEqual(inputs.serving_features(raw)["image"].shape,
                     (2, 32, 32, 3))
    cifar = images.ImageInputs("image", images.CifarVGGPreprocessing(0., 1.))
    self.assertEqual(cifar.serving_spec().shape.as_list(), [None, 32, 32, 3])


class VGG16Test(tf.test.TestCase):

  def test_architecture(self):
    vgg = encoders.get("vgg16")
    h = vgg(tf.zeros([2, 32, 32, 3]), training=True)
    self.assertEqual(h.shape, (2, 512))
    kinds = [type(l).__name__ for l in vgg.body.layers]
    self.assertEqual(kinds.count("Conv2D"), 13)
    self.assertEqual(kinds.count("BatchNormalization"), 14)
    self.assertEqual(kinds.count("MaxPooling2D"), 5)
    self.assertEqual(kinds.count("StatelessDropout"), 10)
    self.assertEqual(kinds[-3:],
                     ["Dense", "BatchNormalization", "StatelessDropout"])
    # Ten salts: ten independent masks per step.
    self.assertLen({l.salt for l in vgg.body.layers if hasattr(l, "salt")},
                   10)
    self.assertLen(vgg.losses, 14)  # L2 on 13 conv kernels + the dense one.
    self.assertEqual([l.filters for l in vgg.body.layers
                      if isinstance(l, tf.keras.layers.Conv2D)],
                     [64, 64, 128, 128, 256, 256, 256] + [512] * 6)

  def test_serialization_round_trip(self):
    vgg = encoders.get("vgg16", dropout=0.25, weight_decay=1e-3)
    x = tf.random.uniform([1, 32, 32, 3])
    want = vgg(x, training=False)
    restored = tf.keras.layers.deserialize(tf.keras.layers.serialize(vgg))
    restored(x)
    restored.set_weights(vgg.get_weights())
    self.assertEqual((restored.dropout, restored.weight_decay), (0.25, 1e-3))
    self.assertAllClose(restored(x, training=False), want)


class ResNet50Test(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    tf.keras.utils.set_random_seed(5)
    cls.encoder = encoders.get("resnet50")
    # Moving statistics differ from a fresh build's after one training call.
    cls.encoder(tf.random.uniform([2, 32, 32, 3]), training=True)
    cls.dir = tempfile.mkdtemp()

  def test_h_is_the_pooled_2048_feature(self):
    x = tf.random.uniform([2, 32, 32, 3])
    h = self.encoder(x, training=False)
    self.assertEqual(h.shape, (2, 2048))
    last = self.encoder.backbone(x, training=False)["5"]
    self.assertAllClose(h, tf.reduce_mean(last, axis=[1, 2]), atol=1e-5)

  @parameterized.parameters("backbone", "model")
  def test_init_checkpoint_restores_every_variable(self, layout):
    if layout == "backbone":
      root = tf.train.Checkpoint(backbone=self.encoder.backbone)
      init_checkpoint = root.write(os.path.join(self.dir, layout, "ckpt"))
    else:  # A Model Garden training directory: model + head, a manager.
      root = tf.train.Checkpoint(model=tf.train.Checkpoint(
          backbone=self.encoder.backbone, head=tf.Variable(1.)))
      init_checkpoint = os.path.join(self.dir, layout)
      tf.train.CheckpointManager(root, init_checkpoint, 1).save()
    restored = encoders.get("resnet50", init_checkpoint=init_checkpoint)
    want = self.encoder.backbone.weights
    got = restored.backbone.weights
    self.assertLen(got, len(want))
    self.assertGreater(len(got), 250)
    for a, b in zip(got, want):
      self.assertAllEqual(a, b, msg=a.name)

  def test_bad_checkpoints_are_one_line(self):
    with self.assertRaisesRegex(ValueError, "not a TensorFlow checkpoint"):
      encoders.get("resnet50", init_checkpoint="/nonexistent/ckpt")
    other = tf.train.Checkpoint(encoder=tf.Variable(1.)).write(
        os.path.join(self.dir, "other", "ckpt"))
    with self.assertRaisesRegex(ValueError, "holds no `backbone`"):
      encoders.get("resnet50", init_checkpoint=other)
    part = tf.train.Checkpoint(backbone=tf.train.Checkpoint(
        x=tf.Variable(1.))).write(os.path.join(self.dir, "part", "ckpt"))
    with self.assertRaisesRegex(ValueError, "does not hold every ResNet"):
      encoders.get("resnet50", init_checkpoint=part)


def good(**kwargs):
  return config_lib.TrainConfig.create(**dict({"model_dir": "/tmp/unused"},
                                              **kwargs))


class ImageConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_valid(self):
    checks.validate(good(dataset="imagenet2012", encoder="resnet50", image_size=64,
         init_checkpoint="/ckpt", download=True, mixed_precision="float16",
         jit_compile=True))
    checks.validate(good(dataset="cifar10", encoder="vgg16"))
    checks.validate(good(dataset="digits32", encoder="small_cnn"))
    self.assertEqual(
        encoders.config_kwargs(good(dataset="imagenet2012",
                                    encoder="resnet50",
                                    init_checkpoint="/c").model),
        {"init_checkpoint": "/c", "dropout": 0.1})
    self.assertEqual(
        encoders.config_kwargs(good(encoder="vgg16", dropout=0.5).model),
        {"dropout": 0.5})

  @parameterized.parameters(
      (dict(encoder="vgg16"), "`encoder`='vgg16' reads colour images; "
       "choose `dataset` from: digits32, image_folder, cifar10, "
       "imagenet2012"),
      (dict(download=True), "`download` reads TFDS datasets only"),
      (dict(dataset="cifar10", encoder="vgg16", image_size=64),
       "`image_size`=64: only imagenet2012"),
      (dict(dataset="imagenet2012", image_size=8), "`image_size`=8 must be"),
      (dict(init_checkpoint="/c"), "`init_checkpoint` is read by bert, "
       "electra, resnet50 only"),
      (dict(dataset="imagenet2012", encoder="resnet50",
            init_checkpoint="minilm"), "`init_checkpoint`='minilm' is a text"),
      (dict(mixed_precision="half"), "`mixed_precision`='half' is not "
       "valid; choose one of: auto, float32, bfloat16, float16"),
      (dict(length_bucketing="no"),
       "`length_bucketing`='no' must be true or false"),
      (dict(jit_compile="yes"), "`jit_compile`='yes' must be true or false"),
      (dict(mixed_precision="float16", strategy="tpu", tpu="x"),
       "`mixed_precision`=float16 is for GPUs"),
  )
  def test_bad_value_names_the_flag(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message) as e:
      checks.validate(good(**kwargs))
    self.assertLen(str(e.exception).splitlines(), 1)


if __name__ == "__main__":
  tf.test.main()
