"""The many-class regime: 1,000 classes (ImageNet's count).

* the factorised latent-cross first layer equals the naive one, values and
  gradients, at 1,000 classes;
* `mse` and `rescaled_mse` (k = 15, M = 30) train the real model on the
  1,000-class ImageNet mock data without NaN.
"""

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
from absl.testing import parameterized

from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.modeling import interactions
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.ranking import losses


class LatentCrossTest(tf.test.TestCase):

  def test_factorised_first_layer_equals_naive(self):
    rng = np.random.RandomState(0)
    h = tf.Variable(rng.normal(size=(3, 65)).astype(np.float32))
    classes = tf.Variable(rng.normal(size=(1000, 65)).astype(np.float32))
    kernel = tf.Variable(rng.normal(size=(65, 16)).astype(np.float32) / 8)
    bias = tf.Variable(rng.normal(size=(16,)).astype(np.float32))
    upstream = rng.normal(size=(3, 1000, 16)).astype(np.float32)
    variables = [h, classes, kernel, bias]
    with tf.GradientTape(persistent=True) as tape:
      crossed = (1. + classes[None]) * h[:, None]  # [3, 1000, 65]
      naive = tf.einsum("bnk,ku->bnu", crossed, kernel) + bias
      fast = interactions.latent_cross_first_layer(h, classes, kernel, bias)
      naive_sum = tf.reduce_sum(naive * upstream)
      fast_sum = tf.reduce_sum(fast * upstream)
    self.assertAllClose(fast, naive, rtol=1e-4, atol=1e-4)
    for a, b in zip(tape.gradient(fast_sum, variables),
                    tape.gradient(naive_sum, variables)):
      self.assertAllClose(a, b, rtol=1e-4, atol=1e-3)


  def test_layer_takes_the_factorised_path_past_units_classes(self):
    rng = np.random.RandomState(1)
    h = rng.normal(size=(2, 9)).astype(np.float32)
    classes = rng.normal(size=(300, 9)).astype(np.float32)
    layer = interactions.get("lc_mlp", units=4)  # 300 classes > 4 units.
    got = layer([h, classes]).numpy()
    w = [(l.kernel.numpy(), l.bias.numpy())
         for l in [layer.hidden_1] + layer.tail.layers]
    x = (1. + classes[None]) * h[:, None]
    for kernel, bias in w[:-1]:
      x = np.maximum(x @ kernel + bias, 0.)
    want = (x @ w[-1][0] + w[-1][1])[..., 0]
    self.assertEqual(got.shape, (2, 300))
    self.assertAllClose(got, want, rtol=1e-4, atol=1e-4)


class ManyClassLossTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("mse", "mse", {}),
      ("rescaled_mse", "rescaled_mse", {"k": 15., "m": 30.}),
  )
  def test_trains_on_1000_classes_without_nan(self, name, kwargs):
    tf.keras.utils.set_random_seed(0)
    with tfds.testing.mock_data(num_examples=16):
      data = datasets.get("imagenet2012", "/unused", image_size=32)
      train = datasets.ranking_dataset(data, "train", 8, training=True)
      model = model_lib.build_model_builder(data, config_lib.ModelConfig(
          encoder="small_cnn", encoder_dim=16, interaction="lc_mlp",
          mlp_units=8, dropout=0.)).build()  # 8 steps: no mask noise.
      model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                    loss=losses.get(name, **kwargs))
      history = model.fit(train, steps_per_epoch=4, epochs=2, verbose=0)
      features, _ = next(iter(train))
    self.assertEqual(data.num_classes, 1000)
    self.assertTrue(np.all(np.isfinite(history.history["loss"])))
    self.assertLess(history.history["loss"][-1], history.history["loss"][0])
    scores = model(features, training=False)
    self.assertEqual(scores.shape, (8, 1000))
    self.assertTrue(np.all(np.isfinite(scores)))


if __name__ == "__main__":
  tf.test.main()
