"""Tests of rank4class_tf.multilabel.metric_ops on hand-computed cases.

The whole-split metrics are checked against scikit-learn in
test_multilabel_metrics.py; here each step (AP, predictions, counts,
statistics) is checked on its own, with values worked out by hand.
"""

import math

import numpy as np
import tensorflow as tf

from rank4class_tf.multilabel import metric_ops as ops


class AveragePrecisionTest(tf.test.TestCase):

  def test_hand_values_with_ties_and_padding(self):
    labels = np.array([[1., 0., 1., 0., -1.],
                       [0., 1., 0., 0., 0.],
                       [0., 0., 0., 0., -1.]], np.float32)
    scores = np.array([[2., 1., 1., -1., 9.],  # Padding scores highest.
                       [3., 2., 1., 0., -1.],
                       [1., 2., 3., 4., 5.]], np.float32)
    ap, has_positive = ops.average_precision(labels, scores)
    # Row 0: positive at 2 (1/1), positive tied with a negative at 1 (2/3).
    # Row 1: the one positive ranked second (1/2). Row 2: no positive.
    self.assertAllClose(ap, [5. / 6., 0.5, 0.], rtol=1e-6)
    self.assertAllEqual(has_positive, [True, True, False])
    self.assertAllClose(ops.map_sample(labels, scores), (5. / 6. + .5) / 2.,
                        rtol=1e-6)
    # Per class: the transpose; classes 0, 1 and 2 have a positive.
    ap, has_positive = ops.average_precision_per_class(labels.T, scores.T)
    self.assertAllClose(ap, [5. / 6., 0.5, 0.], rtol=1e-6)
    self.assertAllClose(ops.map_class(labels.T, scores.T),
                        (5. / 6. + .5) / 2., rtol=1e-6)

  def test_relevance_and_mask(self):
    positive, valid = ops.relevance_and_mask([[2., 1., 0.5, 0., -1.]])
    self.assertAllEqual(positive, [[1., 1., 0., 0., 0.]])
    self.assertAllEqual(valid, [[1., 1., 1., 1., 0.]])


class PredictionsTest(tf.test.TestCase):

  def test_threshold_logit(self):
    self.assertEqual(ops.threshold_logit(0.5), 0.)
    self.assertAllClose(ops.threshold_logit(0.8), math.log(4.))
    self.assertEqual(ops.threshold_logit(0.), -math.inf)
    self.assertEqual(ops.threshold_logit(1.), math.inf)
    with self.assertRaisesRegex(ValueError, r"threshold must be in \[0, 1\]"):
      ops.threshold_logit(1.5)

  def test_threshold_predictions(self):
    scores = np.array([[-1., 0., np.log(4.), 1.3, 2.]], np.float32)
    self.assertAllEqual(ops.threshold_predictions(scores),
                        [[False, True, True, True, True]])
    self.assertAllEqual(ops.threshold_predictions(scores, 0.8),
                        [[False, False, True, False, True]])
    self.assertAllEqual(ops.threshold_predictions(scores, 1.),
                        [[False] * 5])

  def test_top_k_ties_padding_and_dynamic_shape(self):
    scores = np.array([[1., 3., 1., 0.], [5., 1., 0., 5.]], np.float32)
    self.assertAllEqual(ops.top_k_predictions(scores, 2),
                        [[True, True, False, False],
                         [True, False, False, True]])
    self.assertAllEqual(ops.top_k_predictions(scores, 9), np.ones((2, 4)))
    labels = np.array([[0., 1., 0., 0.], [-1., 1., 0., -1.]], np.float32)
    self.assertAllEqual(ops.predictions(labels, scores, top_k=2),
                        [[True, True, False, False],
                         [False, True, True, False]])
    dynamic = tf.function(
        lambda s: ops.top_k_predictions(s, 2),
        input_signature=[tf.TensorSpec([None, None], tf.float32)])
    self.assertAllEqual(dynamic(scores), ops.top_k_predictions(scores, 2))
    with self.assertRaisesRegex(ValueError, "top_k must be >= 1"):
      ops.top_k_predictions(scores, 0)

  def test_top_rule_also_needs_the_threshold(self):
    # ML-GCN's overall_topk: the k best classes, then score >= 0 (logits).
    labels = np.array([[0., 0., 1., 0., 0.], [1., 0., -1., 0., 0.]],
                      np.float32)
    scores = np.array([[0., 2., 0., 0., -1.],  # Tie of 0, 2, 3 at 0.
                       [-1., -2., 7., 0.5, -3.]], np.float32)
    best = [[True, True, True, False, False],  # Class 3: tied, higher id.
            [True, True, False, True, False]]  # Class 2 is padding.
    top = [[True, True, True, False, False],  # 0 >= 0: on the threshold.
           [False, False, False, True, False]]  # Only 0.5 passes.
    self.assertAllEqual(
        ops.predictions(labels, scores, top_k=3, top_k_rule="best"), best)
    self.assertAllEqual(ops.predictions(labels, scores, top_k=3), top)
    self.assertAllEqual(
        ops.predictions(labels, scores, threshold=0.1, top_k=3),
        best)  # logit(0.1) = -2.2: every class of the 3 best passes.
    # Fewer than k valid classes: all of them are candidates.
    self.assertAllEqual(ops.predictions([[0., 0.]], [[-1., 1.]], top_k=3),
                        [[False, True]])
    with self.assertRaisesRegex(ValueError, "`top_k_rule`='any' is not valid; "
                                "choose one of: top, best"):
      ops.predictions(labels, scores, top_k=3, top_k_rule="any")


class CountsTest(tf.test.TestCase):

  def test_counts_and_statistics(self):
    labels = np.array([[1., 0., 1.], [0., 1., -1.], [1., 0., 0.]], np.float32)
    predicted = np.array([[True, True, False], [True, True, True],
                          [False, False, True]])
    nc, npred, ng = ops.class_counts(labels, predicted)
    # The padded (1, 2) prediction counts nowhere.
    self.assertAllEqual(nc, [1., 1., 0.])
    self.assertAllEqual(npred, [2., 2., 1.])
    self.assertAllEqual(ng, [2., 1., 1.])
    self.assertEqual(nc.dtype, tf.float64)
    stats = ops.statistics_from_counts(nc, npred, ng)
    self.assertEqual(tuple(stats), ops.COUNT_STATISTICS)
    cp, cr = (.5 + .5 + 0.) / 3., (.5 + 1. + 0.) / 3.
    op, orr = 2. / 5., 2. / 4.
    want = {"cp": cp, "cr": cr, "cf1": 2. * cp * cr / (cp + cr),
            "op": op, "or": orr, "of1": 2. * op * orr / (op + orr),
            "macro_f1": (2. / 4. + 2. / 3. + 0.) / 3.}
    for name, value in want.items():
      self.assertAllClose(stats[name], value, rtol=1e-12, msg=name)

  def test_empty_denominators_give_zero(self):
    zeros = tf.zeros([3], tf.float64)
    for value in ops.statistics_from_counts(zeros, zeros, zeros).values():
      self.assertEqual(float(value), 0.)

  def test_count_statistics(self):
    labels = np.array([[1., 0., 1.], [0., 1., 0.]], np.float32)
    scores = np.array([[2., -1., -3.], [0.5, 1., -2.]], np.float32)
    stats = ops.count_statistics(labels, scores, top_k=1)
    self.assertEqual(tuple(stats), ops.COUNT_STATISTICS)
    self.assertEqual(stats["op"].dtype, tf.float32)
    # Top-1 predicts classes 0 and 1: 2 true positives of 3 label positives.
    self.assertAllClose([stats["op"], stats["or"]], [1., 2. / 3.])
    # Top-2 adds class 1 of row 0 to best-2 (score -1 < 0: not in top-2).
    top2 = ops.count_statistics(labels, scores, top_k=2)
    best2 = ops.count_statistics(labels, scores, top_k=2, top_k_rule="best")
    self.assertAllClose([top2["op"], top2["or"]], [2. / 3., 2. / 3.])
    self.assertAllClose([best2["op"], best2["or"]], [2. / 4., 2. / 3.])


if __name__ == "__main__":
  tf.test.main()
