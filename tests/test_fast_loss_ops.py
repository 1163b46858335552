"""Tests of rank4class_tf.ranking.fast_loss_ops against numpy references.

The references loop over every pair / every class as the formulas are written
(TF-Ranking's, with un-normalised gains 2^y - 1 and log2 discounts), so they
share no shortcut with the O(n * k) ops. The Keras wrappers are compared with
TF-Ranking itself in test_fast_losses.py.
"""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from rank4class_tf.ranking import fast_loss_ops as ops


def _np_sigmoid(x):
  return .5 * (1. + np.tanh(.5 * x))  # No overflow for large |x|.


_PAIR_LOSSES = {
    "logistic": (ops.pairwise_logistic, lambda d: np.logaddexp(0., -d)),
    "hinge": (ops.pairwise_hinge, lambda d: np.maximum(0., 1. - d)),
    "soft_zero_one": (ops.pairwise_soft_zero_one,
                      lambda d: _np_sigmoid(-d)),
}


def np_pairwise_rows(labels, logits, pair_loss):
  """rows[b, i] = sum_j I[y_i > y_j >= 0] l(s_i - s_j), pair by pair."""
  rows = np.zeros(labels.shape)
  for b, i, j in np.ndindex(labels.shape + labels.shape[-1:]):
    if labels[b, i] > labels[b, j] >= 0:
      rows[b, i] += pair_loss(logits[b, i] - logits[b, j])
  return rows


def np_approx_ndcg(labels, logits):
  """-DCG / IDCG with rank_i = 1/2 + sum_j sigmoid(s_j - s_i); [batch, 1]."""
  losses = np.zeros((labels.shape[0], 1))
  for b, (y, s) in enumerate(zip(labels, logits.astype(np.float64))):
    valid = y >= 0
    s = np.where(valid, s, s.min() - 1e3)  # TF-Ranking's padding logits.
    gains = np.where(valid, 2. ** np.maximum(y, 0.) - 1., 0.)
    ranks = .5 + _np_sigmoid(s[None, :] - s[:, None]).sum(-1)
    dcg = (gains / np.log2(1. + ranks)).sum()
    ideal = -np.sort(-gains)
    idcg = (ideal / np.log2(2. + np.arange(len(y)))).sum()
    losses[b, 0] = -dcg / idcg if idcg > 0 else 0.
  return losses


def _labels(kind, rng, batch_size=5, n=7):
  """One-hot, multi-hot or graded labels with padding and an empty list."""
  if kind == "one_hot":
    labels = np.eye(n, dtype=np.float32)[rng.integers(0, n, batch_size)]
  elif kind == "multi_hot":
    labels = (rng.random((batch_size, n)) < 0.4).astype(np.float32)
  else:
    labels = rng.integers(0, 4, (batch_size, n)).astype(np.float32)
  labels[0, n - 2:] = -1.  # Padded tail.
  labels[1] = 0.           # No relevant class.
  return labels


class PairLossTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*_PAIR_LOSSES)
  def test_values(self, name):
    op, reference = _PAIR_LOSSES[name]
    d = np.array([-30., -1., 0., 0.5, 2., 30.], np.float32)
    self.assertAllClose(op(tf.constant(d)), reference(d.astype(np.float64)),
                        rtol=1e-6, atol=1e-7)

  def test_max_relevant(self):
    self.assertEqual(int(ops.max_relevant([[0., 1., 0.], [2., 1., -1.]])), 2)
    self.assertEqual(int(ops.max_relevant(np.eye(4, dtype=np.float32))), 1)
    self.assertEqual(int(ops.max_relevant([[0., -1.], [0., 0.]])), 0)


class PairwiseRowLossesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(kind=("one_hot", "multi_hot", "graded"),
                         pair_loss=tuple(_PAIR_LOSSES))
  def test_matches_numpy(self, kind, pair_loss):
    rng = np.random.default_rng(0)
    labels = _labels(kind, rng)
    logits = rng.normal(size=labels.shape).astype(np.float32)
    logits[2, :3] = 0.5  # Ties.
    op, reference = _PAIR_LOSSES[pair_loss]
    want = np_pairwise_rows(labels, logits.astype(np.float64), reference)
    k = int((labels > 0).sum(-1).max())
    # k read from the labels, fixed to the largest count, and fixed above n.
    for static_k in (None, k, 10):
      self.assertAllClose(
          ops.pairwise_row_losses(labels, logits, op, k=static_k), want,
          rtol=1e-5, atol=1e-6, msg=f"k={static_k}")

  def test_one_hot_closed_form(self):
    # The one-hot row of class c: sum_{j != c} log(1 + exp(s_j - s_c)).
    rng = np.random.default_rng(1)
    n = 1000
    classes = rng.integers(0, n, 2)
    labels = np.eye(n, dtype=np.float32)[classes]
    logits = rng.normal(size=(2, n))
    true = logits[np.arange(2), classes][:, None]
    others = np.arange(n)[None, :] != classes[:, None]
    want = np.where(others, np.logaddexp(0., logits - true), 0.).sum(-1)
    rows = ops.pairwise_row_losses(labels, logits.astype(np.float32), k=1)
    self.assertAllClose(tf.reduce_sum(rows, -1), want, rtol=1e-5)
    self.assertAllClose(rows * (1. - labels), np.zeros_like(labels))


class ApproxNDCGTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("one_hot", "multi_hot", "graded")
  def test_matches_numpy(self, kind):
    rng = np.random.default_rng(2)
    labels = _labels(kind, rng)
    logits = 2. * rng.normal(size=labels.shape).astype(np.float32)
    logits[0, -1] = 50.  # A high score on padding changes nothing.
    want = np_approx_ndcg(labels, logits)
    self.assertEqual(want[1, 0], 0.)
    k = int((labels > 0).sum(-1).max())
    for static_k in (None, k):
      self.assertAllClose(ops.approx_ndcg(labels, logits, k=static_k), want,
                          rtol=1e-5, msg=f"k={static_k}")

  def test_one_hot_closed_form(self):
    # rank_c = 1 + sum_{j != c} sigmoid(s_j - s_c); loss = -1 / log2(1 + rank).
    rng = np.random.default_rng(3)
    n = 1000
    classes = rng.integers(0, n, 2)
    labels = 3. * np.eye(n, dtype=np.float32)[classes]  # Any grade.
    logits = rng.normal(size=(2, n))
    true = logits[np.arange(2), classes][:, None]
    others = np.arange(n)[None, :] != classes[:, None]
    rank = 1. + np.where(others, _np_sigmoid(logits - true), 0.).sum(-1)
    self.assertAllClose(
        ops.approx_ndcg(labels, logits.astype(np.float32))[:, 0],
        -1. / np.log2(1. + rank), rtol=1e-5)


if __name__ == "__main__":
  tf.test.main()
