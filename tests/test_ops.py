"""Tests of rank4class_tf.ops against independent numpy maths."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf import ops


def np_rescaled_mse(labels, scores, k, m):
  """Hui & Belkin's loss written directly from the paper, per list."""
  out = []
  for y, s in zip(labels, scores):
    valid = y >= 0
    total = 0.0
    for yi, si in zip(y[valid], s[valid]):
      if yi > 0:
        total += k * (si - m * yi) ** 2
      else:
        total += si ** 2
    out.append(total / max(valid.sum(), 1))
  return np.array(out)


class OpsTest(tf.test.TestCase, parameterized.TestCase):

  def test_append_one(self):
    h = tf.constant([[1., 2.], [3., 4.]])
    self.assertAllEqual(ops.append_one(h), [[1., 2., 1.], [3., 4., 1.]])

  def test_gather_class_scores_follows_list_order(self):
    scores = tf.constant([[0., 1., 2.], [10., 11., 12.]])
    ids = tf.constant([[2, 0], [1, 1]], tf.int64)
    self.assertAllEqual(ops.gather_class_scores(scores, ids),
                        [[2., 0.], [11., 11.]])

  @parameterized.parameters((1., 1.), (15., 30.), (3., 0.5))
  def test_rescaled_mse_matches_numpy(self, k, m):
    rng = np.random.RandomState(0)
    labels = np.eye(7, dtype=np.float32)[rng.randint(0, 7, size=5)]
    labels[1, 6] = -1.  # Padding entry.
    labels[1, 5] = 0.
    scores = rng.normal(size=(5, 7)).astype(np.float32) * 10
    self.assertAllClose(ops.rescaled_mse(labels, scores, k=k, m=m),
                        np_rescaled_mse(labels, scores, k, m), rtol=1e-5)

  def test_rescaled_mse_hand_value(self):
    # (15 * (29 - 30)^2 + 1^2) / 2 = 8.
    self.assertAllClose(
        ops.rescaled_mse([[0., 1.]], [[1., 29.]], k=15., m=30.), [8.])

  def test_rescaled_mse_empty_list_is_zero(self):
    self.assertAllClose(ops.rescaled_mse([[-1., -1.]], [[3., 4.]]), [0.])

  def test_one_hot_labels(self):
    self.assertAllEqual(ops.one_hot_labels(np.array([2, 0]), 3),
                        [[0., 0., 1.], [1., 0., 0.]])
    self.assertEqual(ops.one_hot_labels([[0, 1]], 2).dtype, tf.float32)

  def test_top_k_classes(self):
    scores = tf.constant([[0.1, 0.9, 0.5], [3., 1., 2.]])
    top_scores, top_ids, names = ops.top_k_classes(
        scores, 2, tf.constant(["a", "b", "c"]))
    self.assertAllEqual(top_ids, [[1, 2], [0, 2]])
    self.assertAllClose(top_scores, [[0.9, 0.5], [3., 2.]])
    self.assertAllEqual(names, [[b"b", b"c"], [b"a", b"c"]])

  def test_top_k_clipped_to_num_classes(self):
    _, ids, names = ops.top_k_classes(tf.constant([[1., 2.]]), 5)
    self.assertAllEqual(ids, [[1, 0]])
    self.assertIsNone(names)

  def test_tie_broken_scores_order(self):
    # Classes 0-2 tied at 1.0: the relevant class 1 goes after 0 and 2, and
    # 0 before 2 (lower id); class 3 (score 2) first, class 4 last.
    got = ops.tie_broken_scores([[1., 1., 1., 2., 0.]],
                                [[0., 1., 0., 0., 0.]])
    order = np.argsort(-got.numpy()[0])
    self.assertAllEqual(order, [3, 0, 2, 1, 4])
    self.assertAllEqual(np.sort(got.numpy()[0]), [1., 2., 3., 4., 5.])

  def test_tie_broken_scores_keep_the_order_of_distinct_scores(self):
    scores = np.random.RandomState(0).normal(size=(6, 9)).astype(np.float32)
    labels = np.eye(9, dtype=np.float32)[np.arange(6)]
    got = ops.tie_broken_scores(scores, labels).numpy()
    self.assertAllEqual(np.argsort(-got, axis=1), np.argsort(-scores, axis=1))

  def test_tie_broken_scores_in_tf_function(self):
    fn = tf.function(ops.tie_broken_scores)
    self.assertAllEqual(fn(tf.zeros([2, 3]), tf.zeros([2, 3])),
                        [[3., 2., 1.]] * 2)


if __name__ == "__main__":
  tf.test.main()
