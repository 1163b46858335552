"""Tests of rank4class_tf.sorting.losses on hand-computed cases."""

import tempfile

from absl.testing import parameterized
import numpy as np
from scipy import stats
import tensorflow as tf

from rank4class_tf.sorting import losses
from rank4class_tf.sorting import ops


def sharp(name, **kwargs):
  """A loss on the handcrafted sorter with lambda large: ~exact ranks."""
  loss = losses.get(name, sorter="handcrafted", d=4, **kwargs)
  loss.sorter.regularization = 1e4
  return loss


class SoDeepLossTest(parameterized.TestCase, tf.test.TestCase):

  def test_spearman_hand_computed(self):
    # scores rank [1, 3, 2, 4]/4, targets rank [1, 2, 3, 4]/4:
    # squared errors 0, 1/16, 1/16, 0 -> mean 1/32.
    loss = sharp("sodeep_spearman")
    self.assertAllClose(loss([[4., 3., 2., 1.]], [[9., 1., 5., 0.]]),
                        1. / 32., atol=1e-5)

  def test_spearman_zero_for_same_order(self):
    loss = sharp("sodeep_spearman")
    self.assertAllClose(loss([[1., 2., 3., 4.]], [[-3., 0., .5, 7.]]), 0.,
                        atol=1e-6)

  def test_spearman_handcrafted_matches_numpy(self):
    rng = np.random.RandomState(0)
    y_pred = rng.uniform(-1, 1, (3, 6)).astype(np.float32)
    y_true = rng.randn(3, 6).astype(np.float32)
    diff = y_pred[:, None, :] - y_pred[:, :, None]
    soft = ((1. + (1. / (1. + np.exp(-10. * diff))).sum(-1) - 0.5) / 6)
    target = np.stack([stats.rankdata(-r) for r in y_true]) / 6
    expected = np.mean(np.mean((soft - target) ** 2, -1))
    loss = losses.get("sodeep_spearman", sorter="handcrafted", d=6)
    self.assertAllClose(loss(y_true, y_pred), expected, rtol=1e-5)

  def test_map_hand_computed(self):
    # ranks of the scores: [2, 4, 1, 3]/4; relevant items 0 and 2.
    loss = sharp("sodeep_map")
    self.assertAllClose(loss([[1., 0., 1., 0.]], [[.5, -1., 2., 0.]]),
                        (0.5 + 0.25) / 2, atol=1e-5)

  def test_recall_hand_computed(self):
    # ranks [2, 4, 1, 3]/4; relevant item 1 (rank 1), hardest negative
    # item 2 (rank .25): relu(.1 + 1 - .25) = .85.
    loss = sharp("sodeep_recall", margin=0.1)
    self.assertAllClose(loss([[0., 1., 0., 0.]], [[.5, -1., 2., 0.]]), 0.85,
                        atol=1e-5)

  def test_parallel_loss_is_added_with_its_weight(self):
    y_true = np.array([[4., 3., 2., 1.]], np.float32)
    y_pred = np.array([[9., 1., 5., 0.]], np.float32)
    loss = sharp("sodeep_spearman", parallel_loss="mae", parallel_weight=0.5)
    mae = np.mean(np.abs(y_true - y_pred))
    self.assertAllClose(loss(y_true, y_pred), 1. / 32. + 0.5 * mae,
                        atol=1e-5)

  def test_rank_over_batch_ranks_columns(self):
    loss = sharp("sodeep_spearman", rank_over_batch=True)
    y_true = np.array([[4.], [3.], [2.], [1.]], np.float32)
    y_pred = np.array([[9.], [1.], [5.], [0.]], np.float32)
    self.assertAllClose(loss(y_true, y_pred), 1. / 32., atol=1e-5)

  def test_rank_over_batch_multilabel_map(self):
    # two classes ranking a batch of 4: per-class mean rank of positives.
    loss = sharp("sodeep_map", rank_over_batch=True)
    y_true = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], np.float32)
    y_pred = np.array([[.5, 3.], [-1., 2.], [2., 1.], [0., 0.]], np.float32)
    # class 0 ranks [2, 4, 1, 3]/4 -> (2 + 1)/8; class 1 ranks [1, 2, 3, 4]/4
    # -> (2 + 3)/8; mean over classes.
    self.assertAllClose(loss(y_true, y_pred), (3 / 8 + 5 / 8) / 2, atol=1e-5)

  @parameterized.parameters("lstm", "pairwise")
  def test_gradient_reaches_scores_through_trained_sorter(self, sorter):
    loss = losses.get("sodeep_spearman", sorter=sorter, d=10)
    self.assertFalse(loss.sorter.trainable)
    y_pred = tf.Variable(np.random.RandomState(1).randn(4, 10), dtype=tf.float32)
    y_true = np.tile(np.arange(10, dtype=np.float32), [4, 1])
    with tf.GradientTape() as tape:
      value = loss(y_true, y_pred)
    grad = tape.gradient(value, y_pred).numpy()
    self.assertTrue(np.all(np.isfinite(grad)))
    self.assertGreater(np.abs(grad).sum(), 0.)

  def test_trainable_sorter_exposes_weights(self):
    frozen = losses.get("sodeep_map", sorter="lstm", d=10)
    tuned = losses.get("sodeep_map", sorter="lstm", d=10, trainable=True)
    self.assertEmpty(frozen.sorter.trainable_weights)
    self.assertNotEmpty(tuned.sorter.trainable_weights)

  @parameterized.parameters(("lstm", 0.01), ("pairwise", 0.001))
  def test_trained_sorter_loss_tracks_exact_spearman(self, sorter, atol):
    rng = np.random.RandomState(2)
    y_pred = rng.randn(64, 10).astype(np.float32)
    y_true = rng.randn(64, 10).astype(np.float32)
    exact = np.mean(ops.spearman_loss(ops.exact_rank(y_pred), y_true))
    loss = losses.get("sodeep_spearman", sorter=sorter, d=10)
    self.assertAllClose(loss(y_true, y_pred), exact, atol=atol)

  def test_get_lists_valid_names(self):
    with self.assertRaisesRegex(ValueError, "sodeep_spearman, sodeep_map, "
                                "sodeep_recall"):
      losses.get("sodeep_ndcg")
    with self.assertRaisesRegex(ValueError, "no hyper-parameter.*margin"):
      losses.get("sodeep_map", sorter="handcrafted", d=4, margin=0.2)

  @parameterized.parameters(*losses.LOSS_NAMES)
  def test_config_round_trip(self, name):
    loss = losses.get(name, sorter="handcrafted", d=4, parallel_loss="mae",
                      parallel_weight=0.3)
    clone = type(loss).from_config(loss.get_config())
    self.assertEqual(clone.get_config(), loss.get_config())
    y_true = [[1., 0., 0., 1.]]
    y_pred = [[.3, .1, -.2, .9]]
    self.assertAllClose(clone(y_true, y_pred), loss(y_true, y_pred))

  def test_saved_model_with_compiled_loss(self):
    inputs = tf.keras.Input([4])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(4)(inputs))
    model.compile("adam", loss=losses.get("sodeep_spearman",
                                          sorter="handcrafted", d=4))
    x = np.random.RandomState(3).randn(8, 4).astype(np.float32)
    y = np.random.RandomState(4).randn(8, 4).astype(np.float32)
    model.fit(x, y, epochs=1, verbose=0)
    with tempfile.TemporaryDirectory() as tmp:
      model.save(tmp)
      loaded = tf.keras.models.load_model(tmp)
      self.assertAllClose(loaded(x), model(x), atol=1e-6)
      self.assertAllClose(loaded.evaluate(x, y, verbose=0),
                          model.evaluate(x, y, verbose=0), atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
