"""Tests of rank4class_tf.multilabel.ops: the pieces of the Two-way loss.

The whole losses are checked against loop-by-loop numpy references in
test_multilabel_losses.py; here the per-list building blocks are checked one
list at a time.
"""

import numpy as np
import tensorflow as tf

from rank4class_tf.multilabel import ops

from rank4class_tf.multilabel import mulcon


def np_logsumexp(v):
  v = np.asarray(v, np.float64)
  return v.max() + np.log(np.exp(v - v.max()).sum())


def np_two_way_term(y, x, tp, tn, margin):
  """softplus(T_N lse(x_N / T_N) + T_P lse(-x_P / T_P) + margin), one list."""
  pos, neg = x[y > 0], x[y == 0]
  if not len(pos) or not len(neg):
    return 0.
  z = tn * np_logsumexp(neg / tn) + tp * np_logsumexp(-pos / tp) + margin
  return np.logaddexp(0., z)


class MaskedLogsumexpTest(tf.test.TestCase):

  def test_values_and_empty_rows(self):
    rng = np.random.default_rng(0)
    x = rng.normal(scale=3., size=(4, 6)).astype(np.float32)
    mask = rng.random((4, 6)) < 0.5
    mask[0] = True
    mask[1] = False
    mask[2] = [True] + [False] * 5
    value, non_empty = ops.masked_logsumexp(x, tf.constant(mask), axis=1)
    self.assertAllEqual(non_empty, mask.any(1))
    want = [np_logsumexp(row[m]) if m.any() else 0.
            for row, m in zip(x, mask)]
    self.assertAllClose(value, want, rtol=1e-6)
    # Along axis 0: the columns.
    value, _ = ops.masked_logsumexp(x, tf.constant(mask), axis=0)
    self.assertAllClose(value[0], np_logsumexp(x[mask[:, 0], 0]), rtol=1e-6)

  def test_unselected_entries_get_no_gradient(self):
    x = tf.Variable([[1., 2., 3e38], [1e30, -1e30, 0.]])
    mask = tf.constant([[True, True, False], [False, False, False]])
    with tf.GradientTape() as tape:
      value, _ = ops.masked_logsumexp(x, mask, axis=1)
    grad = tape.gradient(value, x).numpy()
    softmax = np.exp([1., 2.]) / np.exp([1., 2.]).sum()
    self.assertAllClose(grad, [[softmax[0], softmax[1], 0.], [0., 0., 0.]])


class TwoWayTermsTest(tf.test.TestCase):

  def test_per_instance_and_per_class_terms(self):
    rng = np.random.default_rng(1)
    labels = (rng.random((5, 4)) < 0.4).astype(np.float32)
    labels[0] = 0.      # Instance without positive.
    labels[1] = 1.      # Instance without negative.
    labels[2, 3] = -1.  # Padding.
    logits = rng.normal(scale=2., size=(5, 4)).astype(np.float32)
    logits[2, 3] = 1e4  # Ignored: padded.
    for tp, tn, margin in ((4., 1., 0.), (1., 1., 0.5)):
      for axis, (ys, xs) in ((1, (labels, logits)), (0, (labels.T, logits.T))):
        losses, has_positive = ops.two_way_terms(
            labels, logits, axis=axis, positive_temperature=tp,
            negative_temperature=tn, margin=margin)
        self.assertAllEqual(has_positive, (ys > 0).any(1))
        want = [np_two_way_term(y, x.astype(np.float64), tp, tn, margin)
                for y, x in zip(ys, xs)]
        self.assertAllClose(losses, want, rtol=1e-5,
                            msg=f"axis={axis} T_P={tp}")

  def test_loss_is_the_mean_of_kept_terms(self):
    labels = np.array([[1., 0., 0.], [0., 1., 1.], [0., 0., 0.]], np.float32)
    logits = np.array([[2., 0., -1.], [0.5, 1., -2.], [3., 3., 3.]],
                      np.float32)
    sample = [np_two_way_term(y, x, 4., 1., 0.) for y, x in
              zip(labels[:2], logits[:2].astype(np.float64))]
    klass = [np_two_way_term(y, x, 4., 1., 0.) for y, x in
             zip(labels.T, logits.T.astype(np.float64))]
    # Instance 2 has no positive (left out); every class has one.
    self.assertAllClose(ops.two_way_loss(labels, logits),
                        np.mean(sample) + np.mean(klass), rtol=1e-6)


class LabelContrastiveLossTest(tf.test.TestCase):

  def test_padding_is_not_an_anchor(self):
    rng = np.random.default_rng(2)
    z = rng.normal(size=(3, 4, 2)).astype(np.float32)
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    labels = np.array([[1., 0., 1., 0.], [1., 1., 0., 0.], [0., 1., 1., 0.]],
                      np.float32)
    padded = labels.copy()
    padded[:, 3] = -1.
    self.assertAllClose(mulcon.label_contrastive_loss(padded, z),
                        mulcon.label_contrastive_loss(labels, z), rtol=1e-6)
    self.assertGreater(float(mulcon.label_contrastive_loss(labels, z)), 0.)


if __name__ == "__main__":
  tf.test.main()
