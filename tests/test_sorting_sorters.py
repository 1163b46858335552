"""Tests of rank4class_tf.sorting.sorters: shapes, gradients, lookup,
serialization and the shipped sorters' recorded L1."""

import os
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from rank4class_tf.sorting import ops
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import synthetic
from rank4class_tf.sorting import training

SMALL = {"handcrafted": {}, "handcrafted_adaptive": {},
         "lstm": {"units": 4, "num_layers": 1}, "cnn": {"width": 8},
         "cnn_reference": {}, "pairwise": {"units": 4, "num_layers": 1}}


def list_length(name, d):
  """d, or d + 36 for cnn_reference (its convolutions need d >= 37)."""
  return d + sorters.REFERENCE_CNN_SHRINK if name == "cnn_reference" else d


def numpy_handcrafted(y, lam=10.):
  d = y.shape[1]
  diff = y[:, None, :] - y[:, :, None]
  s = 1. / (1. + np.exp(-lam * diff))
  return (1. + s.sum(-1) - 0.5) / d


def numpy_pairwise(y, kernels, biases, max_sharpness):
  """The pairwise sorter in numpy: an MLP on (x_i, x_j - x_i) gives m_ij,
  s_ij = max_sharpness * sigmoid(m_ij) (or exp(m_ij) without a bound) and
  rk_i = (1 + sum_{j != i} sigmoid(s_ij (x_j - x_i))) / d."""
  y = y.astype(np.float64)
  d = y.shape[1]
  x = (y - y.mean(1, keepdims=True)) / (y.std(1, keepdims=True) + 1e-6)
  delta = x[:, None, :] - x[:, :, None]
  h = np.stack([np.broadcast_to(x[:, :, None], delta.shape), delta], -1)
  for w, b in zip(kernels[:-1], biases[:-1]):
    h = np.maximum(h @ w + b, 0.)
  m = (h @ kernels[-1] + biases[-1])[..., 0]
  sharpness = (max_sharpness / (1. + np.exp(-m)) if max_sharpness
               else np.exp(m))
  soft = 1. / (1. + np.exp(-sharpness * delta))
  soft[:, np.arange(d), np.arange(d)] = 0.
  return (1. + soft.sum(-1)) / d


class SorterLayerTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.product(name=sorters.SORTER_NAMES, d=(3, 10, 28))
  def test_shape_and_gradient(self, name, d):
    d = list_length(name, d)
    tf.keras.utils.set_random_seed(d)
    sorter = sorters.get(name, d, **SMALL[name])
    y = tf.constant(np.random.RandomState(d).randn(5, d), tf.float32)
    with tf.GradientTape() as tape:
      tape.watch(y)
      ranks = sorter(y, training=False)
      out = tf.reduce_sum(ranks * tf.range(d, dtype=tf.float32))
    self.assertEqual(ranks.shape, (5, d))
    grad = tape.gradient(out, y).numpy()
    self.assertTrue(np.all(np.isfinite(grad)))
    self.assertGreater(np.abs(grad).sum(), 0.)

  def test_lstm_full_projection_shape(self):
    sorter = sorters.get("lstm", 6, units=3, num_layers=1, projection="full")
    self.assertEqual(sorter(tf.zeros([2, 6])).shape, (2, 6))
    self.assertLen(sorter.projection.get_weights()[0], 6 * 2 * 3)

  def test_handcrafted_matches_numpy(self):
    y = np.random.RandomState(0).uniform(-1, 1, (4, 9)).astype(np.float32)
    np.testing.assert_allclose(
        sorters.get("handcrafted", 9)(y).numpy(), numpy_handcrafted(y),
        rtol=1e-5)
    # handcrafted_adaptive: lambda = 6.8 / the sample std (ddof 1) of the
    # d x d matrix of y_j - y_i above the diagonal, zeros elsewhere.
    lams = [6.8 / np.triu(v[None, :] - v[:, None], 1).std(ddof=1)
            for v in y.astype(np.float64)]
    want = np.stack([numpy_handcrafted(v[None], lam)[0]
                     for v, lam in zip(y, lams)])
    adaptive = sorters.get("handcrafted_adaptive", 9)
    np.testing.assert_allclose(adaptive(y).numpy(), want, rtol=1e-5)
    self.assertEqual(adaptive.get_config()["regularization"], "adaptive")
    np.testing.assert_allclose(
        sorters.get("handcrafted", 9, regularization="adaptive")(y).numpy(),
        want, rtol=1e-5)
    self.assertEqual(sorters.get("handcrafted", 9, regularization=4.)
                     .regularization, 4.)

  @parameterized.parameters(0., 60.)
  def test_pairwise_matches_numpy(self, max_sharpness):
    rng = np.random.RandomState(4)
    sorter = sorters.get("pairwise", 7, units=5, num_layers=2,
                         max_sharpness=max_sharpness)
    sorter(tf.zeros([1, 7]))
    shapes = [(2, 5), (5,), (5, 5), (5,), (5, 1), (1,)]
    weights = [rng.normal(0., 0.5, shape) for shape in shapes]
    sorter.set_weights(weights)
    y = rng.randn(3, 7).astype(np.float32)
    np.testing.assert_allclose(
        sorter(y).numpy(),
        numpy_pairwise(y, weights[0::2], weights[1::2], max_sharpness),
        rtol=1e-5)

  @parameterized.parameters(0., 60.)
  def test_untrained_pairwise_is_handcrafted_on_standardized_scores(
      self, max_sharpness):
    y = np.random.RandomState(5).randn(4, 9).astype(np.float32)
    x = ops.standardize(y).numpy()
    sorter = sorters.get("pairwise", 9, initial_sharpness=7.,
                         max_sharpness=max_sharpness)
    np.testing.assert_allclose(sorter(y).numpy(), numpy_handcrafted(x, 7.),
                               rtol=1e-5)
    self.assertEqual(sorter.get_config()["initial_sharpness"], 7.)
    self.assertEqual(sorter.get_config()["max_sharpness"], max_sharpness)

  def test_pairwise_checks_its_sharpness(self):
    with self.assertRaisesRegex(ValueError, "initial_sharpness=0.0 must be"):
      sorters.get("pairwise", 9, initial_sharpness=0.)
    with self.assertRaisesRegex(ValueError, "max_sharpness=5.0 must be 0 "
                                r"\(no bound\) or > initial_sharpness=7.0"):
      sorters.get("pairwise", 9, max_sharpness=5.)

  @parameterized.parameters(5, 12)
  def test_pairwise_is_permutation_equivariant(self, d):
    tf.keras.utils.set_random_seed(d)
    sorter = sorters.get("pairwise", d, units=6, num_layers=2)
    sorter(tf.zeros([1, d]))
    rng = np.random.RandomState(d)
    sorter.set_weights([rng.normal(0., 0.5, w.shape)
                        for w in sorter.get_weights()])
    y = rng.randn(3, d).astype(np.float32)
    perm = rng.permutation(d)
    self.assertAllClose(sorter(y[:, perm]), tf.gather(sorter(y), perm,
                                                      axis=1), atol=1e-6)

  def test_cnn_kernels_collapse_the_sequence(self):
    for d in (2, 10, 28, 100):
      self.assertEqual(sum(k - 1 for k in sorters.cnn_kernel_sizes(d)), d - 1)
    sorter = sorters.get("cnn", 28, width=2)
    sorter(tf.zeros([1, 28]))
    self.assertEqual(sorter.blocks[-1][0].filters, 28)

  @parameterized.parameters("lstm", "pairwise")
  def test_standardize_makes_learned_sorters_scale_free(self, name):
    sorter = sorters.get(name, 7, units=3, num_layers=1)
    y = np.random.RandomState(1).randn(2, 7).astype(np.float32)
    self.assertAllClose(sorter(y), sorter(10. * y + 3.), atol=1e-4)

  def test_get_lists_valid_names(self):
    with self.assertRaisesRegex(ValueError, "handcrafted, "
                                "handcrafted_adaptive, lstm, cnn, cnn_reference, "
                                "pairwise"):
      sorters.get("bitonic", 4)
    with self.assertRaisesRegex(ValueError, "no hyper-parameter"):
      sorters.get("cnn", 4, units=3)
    with self.assertRaisesRegex(ValueError, "no hyper-parameter.*"
                                "regularization; it accepts: none"):
      sorters.get("handcrafted_adaptive", 4, regularization=3.)
    with self.assertRaisesRegex(ValueError, "regularization='sharp' is not "
                                "valid; choose a number > 0 or 'adaptive'"):
      sorters.get("handcrafted", 4, regularization="sharp")

  @parameterized.parameters(*sorters.SORTER_NAMES)
  def test_config_and_saved_model_round_trip(self, name):
    d = list_length(name, 8)
    sorter = sorters.get(name, d, **SMALL[name])
    inputs = tf.keras.Input([d])
    model = tf.keras.Model(inputs, sorter(inputs))
    y = np.random.RandomState(2).randn(3, d).astype(np.float32)
    clone = type(sorter).from_config(sorter.get_config())
    clone(tf.zeros([1, d]))
    clone.set_weights(sorter.get_weights())
    self.assertAllClose(clone(y), sorter(y))
    with tempfile.TemporaryDirectory() as tmp:
      model.save(tmp)
      loaded = tf.keras.models.load_model(tmp)
      self.assertAllClose(loaded(y), model(y), atol=1e-6)

  def test_npz_weights_round_trip(self):
    sorter = sorters.get("cnn", 10, width=2)
    sorter(tf.zeros([1, 10]))
    y = np.random.RandomState(3).randn(4, 10).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "w.npz")
      sorters.save_weights(sorter, path)
      other = sorters.get("cnn", 10, width=2)
      sorters.load_weights(other, path)
    self.assertAllClose(other(y, training=False), sorter(y, training=False))


class ShippedSortersTest(parameterized.TestCase, tf.test.TestCase):

  def test_ships_d100_10_28(self):
    index = sorters.pretrained_index()
    for key in ("lstm_d100", "cnn_d100", "cnn_reference_d100",
                "lstm_d10", "lstm_d28",
                "pairwise_d100", "pairwise_d10", "pairwise_d28"):
      self.assertIn(key, index)
      self.assertTrue(os.path.exists(os.path.join(
          sorters.PRETRAINED_DIR, index[key]["weights"])))

  def test_recorded_l1_holds_on_fresh_data(self):
    for key, record in sorted(sorters.pretrained_index().items()):
      with self.subTest(key):
        sorter = sorters.load_sorter(record["sorter"], record["seq_len"])
        self.assertFalse(sorter.trainable)
        fresh = training.evaluate_l1(sorter, record["seq_len"], size=3000,
                                     seed=987654)
        self.assertAllClose(fresh, record["l1"], rtol=0.10)

  def test_trained_sorter_beats_handcrafted(self):
    d = 10
    scores, ranks = synthetic.fixed_set(500, d, 11)
    lstm = sorters.load_sorter("lstm", d)
    hand = sorters.load_sorter("handcrafted", d)
    l1_lstm = tf.reduce_mean(ops.l1_rank_error(ranks, lstm(scores)))
    l1_hand = tf.reduce_mean(ops.l1_rank_error(ranks, hand(scores)))
    self.assertLess(float(l1_lstm), float(l1_hand))

  def test_missing_weights_name_the_shipped_ones(self):
    sorters.check_available("lstm", 10)
    sorters.check_available("handcrafted", 7)
    sorters.check_available("handcrafted_adaptive", 7)
    self.assertEqual(sorters.load_sorter("handcrafted_adaptive", 7)
                     .regularization, "adaptive")
    with self.assertRaisesRegex(ValueError, "shipped: .*lstm_d10"):
      sorters.check_available("cnn", 7)
    with self.assertRaisesRegex(ValueError, "No trained 'lstm' sorter for "
                                "d=7; shipped: .*lstm_d100"):
      sorters.load_sorter("lstm", 7)


if __name__ == "__main__":
  tf.test.main()
