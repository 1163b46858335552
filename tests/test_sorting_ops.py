"""Tests of rank4class_tf.sorting.ops against independent numpy references."""

from absl.testing import parameterized
import numpy as np
from scipy import stats
import tensorflow as tf

from rank4class_tf.sorting import ops


def numpy_rank(y):
  """(1 + #{j: y_j > y_i}) / d, row by row, by explicit counting."""
  y = np.asarray(y, np.float64)
  d = y.shape[-1]
  return np.array([[(1 + np.sum(row > v)) / d for v in row] for row in y])


def numpy_handcrafted(y, lam):
  y = np.asarray(y, np.float64)
  d = y.shape[-1]
  out = np.zeros_like(y)
  for b, row in enumerate(y):
    for i in range(d):
      s = sum(1. / (1. + np.exp(-lam * (row[j] - row[i])))
              for j in range(d) if j != i)
      out[b, i] = (1. + s) / d
  return out


def numpy_sodeep_exact(y):
  """The SoDeep reference code's handcrafted sorter, `sorter_exact` of
  technicolor-research/sodeep's model.py, in numpy: one vector at a time,
  upper-triangle difference matrices with their zeros, torch.std's
  unbiased std (ddof=1), lambda = 6.8 / std."""
  out = []
  for v in np.asarray(y, np.float64):
    d = len(v)
    repeated = np.tile(v, (d, 1))
    in_mat1 = np.triu(repeated, 1)
    in_mat2 = np.triu(repeated.T, 1)
    comp_first = in_mat1 - in_mat2
    comp_second = in_mat2 - in_mat1
    std1, std2 = comp_first.std(ddof=1), comp_second.std(ddof=1)
    comp_first = np.triu(1. / (1. + np.exp(-comp_first * 6.8 / std1)), 1)
    comp_second = np.triu(1. / (1. + np.exp(-comp_second * 6.8 / std2)), 1)
    out.append((comp_first.sum(1) + comp_second.sum(0) + 1) / d)
  return np.array(out)


class ExactRankTest(parameterized.TestCase):

  def test_hand_computed(self):
    np.testing.assert_allclose(
        ops.exact_rank([[0.3, -1., 2.]]).numpy(), [[2 / 3, 1., 1 / 3]],
        rtol=1e-6)

  @parameterized.parameters((1, 5), (4, 10), (3, 100))
  def test_matches_counting(self, batch, d):
    y = np.random.RandomState(d).randn(batch, d).astype(np.float32)
    np.testing.assert_allclose(ops.exact_rank(y).numpy(), numpy_rank(y),
                               rtol=1e-6)

  def test_largest_is_one_over_d_smallest_is_one(self):
    y = np.random.RandomState(0).uniform(-1, 1, (8, 28)).astype(np.float32)
    r = ops.exact_rank(y).numpy()
    np.testing.assert_allclose(r[np.arange(8), y.argmax(1)], 1 / 28, rtol=1e-6)
    np.testing.assert_allclose(r[np.arange(8), y.argmin(1)], 1., rtol=1e-6)

  def test_average_rank_shares_ties(self):
    y = np.array([[3., 1., 3., 0., 1.]], np.float32)
    expected = stats.rankdata(-y[0], method="average") / 5
    np.testing.assert_allclose(ops.average_rank(y).numpy()[0], expected,
                               rtol=1e-6)

  def test_average_rank_equals_exact_without_ties(self):
    y = np.random.RandomState(1).randn(4, 30).astype(np.float32)
    np.testing.assert_allclose(ops.average_rank(y).numpy(),
                               ops.exact_rank(y).numpy(), rtol=1e-6)


class HandcraftedRankTest(parameterized.TestCase):

  @parameterized.parameters((10.,), (1.,), (100.,))
  def test_matches_numpy(self, lam):
    y = np.random.RandomState(2).uniform(-1, 1, (3, 12)).astype(np.float32)
    np.testing.assert_allclose(ops.handcrafted_rank(y, lam).numpy(),
                               numpy_handcrafted(y, lam), rtol=1e-5)

  def test_sharp_limit_is_exact(self):
    y = np.array([[0.3, -1., 2., 0.5]], np.float32)
    np.testing.assert_allclose(ops.handcrafted_rank(y, 1e4).numpy(),
                               numpy_rank(y), atol=1e-6)

  def test_gradient_is_finite_and_nonzero(self):
    y = tf.constant(np.random.RandomState(3).randn(2, 7), tf.float32)
    with tf.GradientTape() as tape:
      tape.watch(y)
      out = tf.reduce_sum(ops.handcrafted_rank(y) * tf.range(7.))
    g = tape.gradient(out, y).numpy()
    self.assertTrue(np.all(np.isfinite(g)))
    self.assertGreater(np.abs(g).sum(), 0.)


class AdaptiveHandcraftedRankTest(parameterized.TestCase, tf.test.TestCase):

  def test_hand_computed_lambda(self):
    # y = [3, 2, 1]: D holds -1, -2, -1 above the diagonal and 6 zeros, so
    # mean -4/9, sum of squared deviations 6 - 9 (4/9)^2 = 38/9, variance
    # (38/9) / 8 = 19/36: lambda = 6.8 * 6 / sqrt(19). Per vector: 2y halves it.
    self.assertAllClose(
        ops.adaptive_regularization([[3., 2., 1.], [6., 4., 2.]]),
        [40.8 / np.sqrt(19.), 20.4 / np.sqrt(19.)], rtol=1e-6)

  @parameterized.parameters((4, 5), (3, 28), (2, 100))
  def test_matches_the_reference_code(self, batch, d):
    rng = np.random.RandomState(d)
    y = rng.uniform(-1, 1, (batch, d)).astype(np.float32)
    y[0] *= 20.  # Each vector gets its own lambda.
    np.testing.assert_allclose(ops.handcrafted_rank(y, "adaptive").numpy(),
                               numpy_sodeep_exact(y), rtol=1e-5, atol=1e-7)
    upper = [np.triu(np.tile(v, (d, 1)) - np.tile(v, (d, 1)).T, 1)
             for v in y.astype(np.float64)]
    np.testing.assert_allclose(ops.adaptive_regularization(y).numpy(),
                               [6.8 / m.std(ddof=1) for m in upper],
                               rtol=1e-5)

  def test_ties_count_half_as_in_the_reference(self):
    y = np.array([[0.5, 2., 0.5, -1.]], np.float32)
    np.testing.assert_allclose(ops.handcrafted_rank(y, "adaptive").numpy(),
                               numpy_sodeep_exact(y), rtol=1e-6)

  def test_scale_free_and_constant_vectors(self):
    y = np.random.RandomState(5).randn(3, 12).astype(np.float32)
    self.assertAllClose(ops.handcrafted_rank(y, "adaptive"),
                        ops.handcrafted_rank(7. * y - 3., "adaptive"),
                        atol=1e-5)
    # Equal scores (the reference divides by a zero std): all tied.
    z = tf.Variable(tf.fill([2, 4], 1.5))
    with tf.GradientTape() as tape:
      ranks = ops.handcrafted_rank(z, "adaptive")
    self.assertAllClose(ranks, np.full([2, 4], (1. + 1.5) / 4.))
    self.assertTrue(np.all(np.isfinite(tape.gradient(ranks, z).numpy())))
    self.assertAllClose(ops.handcrafted_rank([[2.]], "adaptive"), [[1.]])

  def test_lambda_carries_no_gradient(self):
    # As the reference's `.item()`: the gradient is that of a fixed lambda.
    y = tf.constant(np.random.RandomState(6).randn(1, 9), tf.float32)
    lam = float(ops.adaptive_regularization(y)[0])
    grads = []
    for regularization in ("adaptive", lam):
      with tf.GradientTape() as tape:
        tape.watch(y)
        out = tf.reduce_sum(ops.handcrafted_rank(y, regularization) *
                            tf.range(9.))
      grads.append(tape.gradient(out, y))
    self.assertAllClose(grads[0], grads[1], rtol=1e-5, atol=1e-7)

  @parameterized.parameters("auto", 0., -1.)
  def test_bad_regularization(self, regularization):
    with self.assertRaisesRegex(ValueError, "choose a number > 0 or "
                                "'adaptive'"):
      ops.handcrafted_rank([[1., 2.]], regularization)


class LossMathsTest(tf.test.TestCase):

  def test_spearman_hand_computed(self):
    # d = 4, targets [4, 3, 2, 1] -> ranks [.25, .5, .75, 1].
    rank_pred = [[0.25, 0.75, 0.5, 1.0]]
    labels = [[4., 3., 2., 1.]]
    # squared errors 0, .0625, .0625, 0 -> mean 0.03125
    self.assertAllClose(ops.spearman_loss(rank_pred, labels), [0.03125])

  def test_spearman_relates_to_rho(self):
    rng = np.random.RandomState(4)
    y, t = rng.randn(1, 50), rng.randn(1, 50)
    loss = ops.spearman_loss(ops.exact_rank(y), t).numpy()[0]
    rho = stats.spearmanr(y[0], t[0]).correlation
    d = 50
    self.assertAllClose(1. - rho, 6. * d**3 * loss / (d * (d**2 - 1)),
                        atol=1e-5)

  def test_map_hand_computed(self):
    rank_pred = [[0.25, 0.5, 0.75, 1.0], [0.5, 0.25, 1.0, 0.75]]
    labels = [[1., 0., 1., 0.], [0., 0., 0., 0.]]
    # row 1: (0.25 + 0.75) / 2; row 2: no relevant item -> 0.
    self.assertAllClose(ops.map_loss(rank_pred, labels), [0.5, 0.])

  def test_recall_hand_computed(self):
    rank_pred = [[0.5, 0.25, 1.0, 0.75], [0.25, 0.5, 0.75, 1.0]]
    labels = [[1., 0., 0., 1.], [1., 0., 0., 0.]]
    # row 1: hardest negative rank .25; relu(.1 + .5 - .25) = .35,
    #        relu(.1 + .75 - .25) = .6; mean .475.
    # row 2: relu(.1 + .25 - .5) = 0.
    self.assertAllClose(ops.recall_loss(rank_pred, labels, margin=0.1),
                        [0.475, 0.])

  def test_recall_no_negative_is_zero(self):
    self.assertAllClose(ops.recall_loss([[0.5, 1.0]], [[1., 1.]]), [0.])

  def test_l1_rank_error(self):
    self.assertAllClose(ops.l1_rank_error([[0.5, 1.0]], [[0.75, 0.5]]),
                        [0.375])

  def test_standardize_keeps_order(self):
    y = np.random.RandomState(5).uniform(-3, 9, (3, 11)).astype(np.float32)
    z = ops.standardize(y).numpy()
    np.testing.assert_array_equal(np.argsort(z, 1), np.argsort(y, 1))
    self.assertAllClose(z.mean(1), np.zeros(3), atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
