"""End-to-end image runs of the train binary.

CIFAR-10 and ImageNet run on `tfds.testing.mock_data` (TFDS's real builders,
random examples): the binary's `main` is run by `runpy` inside the mock, as
`python -m pipelines.train` would run it. ResNet-50 reads 32x32 images here
to stay cheap on a CPU.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rank4class_tf.data import datasets
from rank4class_tf.data import features as features_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
import helpers

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

REPO = helpers.REPO

# `python -m pipelines.train FLAGS` with TFDS mocked (argv[1]: examples).
MOCKED_TRAIN = textwrap.dedent("""
    import runpy, sys
    import tensorflow_datasets as tfds
    with tfds.testing.mock_data(num_examples=int(sys.argv[1])):
      sys.argv = ["pipelines.train"] + sys.argv[2:]
      runpy.run_module("pipelines.train", run_name="__main__", alter_sys=True)
""")


def run_train(*flags, mock_examples=None, check=True):
  """Runs the train binary (under TFDS mock data when mock_examples)."""
  if mock_examples:
    command = [sys.executable, "-c", MOCKED_TRAIN, str(mock_examples)]
  else:
    command = [sys.executable, "-m", "pipelines.train"]
  return helpers.run_command(command + list(flags), check=check)


def load_serving(model_dir):
  return tf.saved_model.load(os.path.join(
      model_dir, "export", "best_model_by_metric")).signatures[
          "serving_default"]


class Cifar10VGG16Test(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), "cifar10_vgg16")
    run_train("--dataset=cifar10", "--data_dir=/unused", "--encoder=vgg16",
              "--dropout=0.5", "--batch_size=4", "--train_steps=2",
              "--eval_every=1", f"--model_dir={cls.model_dir}",
              mock_examples=8)

  def test_serving_takes_raw_uint8_and_equals_the_model(self):
    config = exported_ranker.load_config(self.model_dir)
    self.assertEqual((config.data.dataset, config.model.encoder), ("cifar10", "vgg16"))
    with tfds.testing.mock_data(num_examples=8):
      data = builders.load_data(config)  # Same fake examples, same stats.
      raw = np.stack([x for x, _ in data.dataset("test").as_numpy_iterator()])
    serve = load_serving(self.model_dir)
    with open(os.path.join(self.model_dir, run_dir_lib.SERVING_FILE)) as f:
      self.assertEqual(json.load(f), {"name": "image", "dtype": "uint8",
                                      "shape": [None, 32, 32, 3]})
    with self.assertRaises(tf.errors.InvalidArgumentError):  # Checked shape.
      serve(image=tf.zeros([1, 31, 32, 3], tf.uint8))
    served = serve(image=tf.constant(raw))["scores"]

    model = builders.build_pipeline(config, data).model_builder.build()
    model.load_weights(tf.train.latest_checkpoint(
        os.path.join(self.model_dir, "best_checkpoint"))).expect_partial()
    images = data.preprocessing.serve(tf.constant(raw))
    scores = model(features_lib.class_list_features({"image": images}, 10),
                   training=False)
    self.assertEqual(served.shape, (8, 10))
    self.assertAllClose(served, scores, rtol=1e-4, atol=1e-4)

  def test_evaluate_reads_tfds(self):
    with tfds.testing.mock_data(num_examples=8):
      results = helpers.evaluate(self.model_dir, "test")
    self.assertEqual(results["num_examples"], 8)
    self.assertBetween(results["top1_accuracy"], 0., 1.)


class ImageNetMockTest(tf.test.TestCase):
  """1,000 classes through the real imagenet2012 builder, lc_mlp, rescaled MSE.

  The binary runs a small CNN here to keep the suite fast; ResNet-50 itself
  (building, checkpoint restore of every variable) is tested in
  test_images.py.
  """

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), "imagenet")
    run_train("--dataset=imagenet2012", "--data_dir=/unused",
              "--image_size=32", "--encoder=small_cnn", "--encoder_dim=16",
              "--interaction=lc_mlp", "--mlp_units=8",
              "--loss=rescaled_mse", "--rescaled_mse_k=15",
              "--rescaled_mse_m=30", "--batch_size=2", "--train_steps=1",
              "--eval_every=1", f"--model_dir={cls.model_dir}",
              mock_examples=4)

  def test_serving_takes_raw_images_of_any_size(self):
    serve = load_serving(self.model_dir)
    with open(os.path.join(self.model_dir, run_dir_lib.SERVING_FILE)) as f:
      self.assertEqual(json.load(f)["shape"], [None, None, None, 3])
    for shape in ((2, 45, 40, 3), (1, 32, 80, 3)):
      out = serve(image=tf.zeros(shape, tf.uint8))
      self.assertEqual(out["scores"].shape, (shape[0], 1000))
      self.assertTrue(np.all(np.isfinite(out["scores"])))
    self.assertEqual(out["top_k_names"].shape, (1, 5))

  def test_evaluate_scores_each_image(self):
    with tfds.testing.mock_data(num_examples=4):
      results = helpers.evaluate(self.model_dir, "validation")
    self.assertEqual(results["num_examples"], 4)


class PrecisionAndXLATest(tf.test.TestCase):

  def test_mixed_precision_and_jit_compile_run_on_cpu(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "digits32_mixed_xla")
    run_train("--dataset=digits32", "--encoder=small_cnn", "--encoder_dim=8",
              "--interaction=concat_mlp", "--mlp_units=8", "--batch_size=16",
              "--train_steps=2", "--eval_every=1", "--mixed_precision=float16",
              "--jit_compile", f"--model_dir={model_dir}")
    config = exported_ranker.load_config(model_dir)
    self.assertEqual(config.trainer.mixed_precision, "float16")
    self.assertTrue(config.trainer.jit_compile)
    data = datasets.get("digits32")
    out = load_serving(model_dir)(image=tf.constant(
        data.splits["test"][0][:4]))
    self.assertEqual(out["scores"].dtype, tf.float32)
    self.assertTrue(np.all(np.isfinite(out["scores"])))


class MissingDataTest(tf.test.TestCase):

  def test_one_line_and_nothing_written(self):
    data_dir = tempfile.mkdtemp()
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    proc = run_train("--dataset=cifar10", f"--data_dir={data_dir}",
                     "--encoder=vgg16", f"--model_dir={model_dir}",
                     check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        f"train: cifar10 is not prepared in {data_dir}: prepare it there "
        "with TFDS (`tfds build cifar10 --data_dir=DIR`) and pass "
        "--data_dir=DIR, or pass --download.")
    self.assertFalse(os.path.exists(model_dir))
    self.assertEqual(os.listdir(data_dir), [])


if __name__ == "__main__":
  tf.test.main()
