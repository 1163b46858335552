"""Tests of rank4class_tf.modeling.interactions against numpy maths with the same weights."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf.modeling import interactions


def np_mlp(x, layers):
  """Two ReLU layers then a linear unit; layers = [(W, b), (W, b), (W, b)]."""
  for w, b in layers[:-1]:
    x = np.maximum(x @ w + b, 0.)
  w, b = layers[-1]
  return (x @ w + b)[..., 0]


def mlp_weights(layer):
  """[(kernel, bias)] of hidden_1, hidden_2 and score of an MLP interaction."""
  tail = layer.tail.layers
  return [(l.kernel.numpy(), l.bias.numpy()) for l in tail]


class InteractionsTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.RandomState(0)
    self.h = rng.normal(size=(4, 5)).astype(np.float32)
    self.classes = rng.normal(size=(7, 5)).astype(np.float32)

  def test_dot(self):
    got = interactions.get("dot")([self.h, self.classes])
    self.assertAllClose(got, self.h @ self.classes.T)

  def test_lc_mlp(self):
    layer = interactions.get("lc_mlp", units=8)
    got = layer([self.h, self.classes]).numpy()
    first = (layer.hidden_1.kernel.numpy(), layer.hidden_1.bias.numpy())
    crossed = (1. + self.classes[None]) * self.h[:, None]  # [4, 7, 5]
    want = np_mlp(crossed, [first] + mlp_weights(layer))
    self.assertEqual(got.shape, (4, 7))
    self.assertAllClose(got, want, rtol=1e-5, atol=1e-5)

  def test_concat_mlp_equals_concatenation(self):
    layer = interactions.get("concat_mlp", units=8)
    got = layer([self.h, self.classes]).numpy()
    kernel = np.concatenate([layer.instance_part.kernel.numpy(),
                             layer.class_part.kernel.numpy()], axis=0)
    first = (kernel, layer.instance_part.bias.numpy())
    concat = np.concatenate([
        np.repeat(self.h[:, None], 7, axis=1),
        np.repeat(self.classes[None], 4, axis=0)], axis=-1)  # [4, 7, 10]
    want = np_mlp(concat, [first] + mlp_weights(layer))
    self.assertAllClose(got, want, rtol=1e-5, atol=1e-5)

  def test_concat_mlp_accepts_other_class_size(self):
    layer = interactions.get("concat_mlp", units=4)
    out = layer([self.h, np.ones((3, 9), np.float32)])
    self.assertEqual(out.shape, (4, 3))

  @parameterized.parameters("lc_mlp", "concat_mlp")
  def test_gradients_reach_both_sides(self, name):
    layer = interactions.get(name, units=8)
    h = tf.Variable(self.h)
    classes = tf.Variable(self.classes)
    with tf.GradientTape() as tape:
      out = tf.reduce_sum(layer([h, classes]))
    gh, gc = tape.gradient(out, [h, classes])
    self.assertGreater(np.abs(gh.numpy()).sum(), 0.)
    self.assertGreater(np.abs(gc.numpy()).sum(), 0.)

  @parameterized.parameters(*interactions.INTERACTION_NAMES)
  def test_serialization_round_trip(self, name):
    layer = interactions.get(name, units=6)
    want = layer([self.h, self.classes])
    config = tf.keras.layers.serialize(layer)
    restored = tf.keras.layers.deserialize(config)
    self.assertIsInstance(restored, type(layer))
    restored([self.h, self.classes])
    restored.set_weights(layer.get_weights())
    self.assertAllClose(restored([self.h, self.classes]), want)
    if name not in ("dot", "cosine"):
      self.assertEqual(restored.units, 6)

  def test_cosine(self):
    layer = interactions.get("cosine")
    got = layer([self.h, self.classes]).numpy()
    h = self.h / np.linalg.norm(self.h, axis=1, keepdims=True)
    c = self.classes / np.linalg.norm(self.classes, axis=1, keepdims=True)
    self.assertAllClose(got, 10. * h @ c.T, rtol=1e-5, atol=1e-5)
    self.assertLen(layer.trainable_weights, 1)  # The temperature.

  def test_unknown_name(self):
    with self.assertRaisesRegex(ValueError,
                                "valid names: dot, lc_mlp, concat_mlp"):
      interactions.get("bilinear")

  def test_non_positive_units(self):
    with self.assertRaisesRegex(ValueError, "units must be positive"):
      interactions.get("lc_mlp", units=0)


if __name__ == "__main__":
  tf.test.main()
