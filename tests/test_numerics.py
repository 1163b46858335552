"""Every loss and metric stays finite on hostile numbers.

Ties (all-equal scores), logits of +-1e4, a single-class list and lists with
no relevant class (all-zero labels) must give finite values and gradients.
"""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class_tf
from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics

CASES = {
    "ties": ([[0., 1., 0., 0.], [1., 0., 0., 0.]], [[2., 2., 2., 2.]] * 2),
    "huge_logits": ([[0., 1., 0., 0.], [0., 0., 0., 1.]],
                    [[1e4, -1e4, 1e4, -1e4], [-1e4, 1e4, 0., -1e4]]),
    "single_class": ([[1.], [1.]], [[3.], [-1e4]]),
    "all_zero_labels": ([[0., 0., 0.], [0., 1., 0.]], [[1., 2., 3.]] * 2),
    "padding": ([[0., 1., -1.], [-1., -1., -1.]], [[1., 2., 3.]] * 2),
}


class NumericsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(loss=losses.LOSS_NAMES, case=list(CASES))
  def test_losses_and_gradients_are_finite(self, loss, case):
    labels, scores = CASES[case]
    scores = tf.Variable(scores)
    kwargs = {"seed": 1} if loss == "gumbel_approx_ndcg" else {}
    if loss.startswith("sodeep_"):  # Lists of the sorter's length d.
      kwargs = {"sorter": "handcrafted", "d": len(labels[0])}
    fn = losses.get(loss, **kwargs)
    with tf.GradientTape() as tape:
      value = fn(tf.constant(labels), scores)
    grad = tape.gradient(value, scores)
    self.assertTrue(np.isfinite(value.numpy()), f"{loss} on {case}: {value}")
    self.assertTrue(np.all(np.isfinite(grad.numpy())),
                    f"{loss} gradient on {case}: {grad}")

  @parameterized.parameters(*CASES)
  def test_metrics_are_finite(self, case):
    labels, scores = CASES[case]
    names = ("top1_accuracy", "top5_accuracy", "ndcg@5", "ndcg", "mrr")
    values = rank4class_tf.evaluate_scores(labels, scores, names)
    for name, value in values.items():
      self.assertTrue(np.isfinite(value), f"{name} on {case}: {value}")
      self.assertBetween(value, 0., 1.)

  def test_lists_without_relevant_class_score_zero(self):
    # TF-Ranking's convention: a list with no relevant class counts, with
    # reciprocal rank 0. The second list's true class is ranked 2nd.
    labels, scores = CASES["all_zero_labels"]
    values = rank4class_tf.evaluate_scores(labels, scores, ("mrr",))
    self.assertAllClose(values["mrr"], (0. + 1. / 2.) / 2.)

  def test_keras_metrics_under_tf_function(self):
    metric = metrics.get("ndcg@5")
    labels, scores = CASES["huge_logits"]

    @tf.function
    def update(y, s):
      metric.update_state(y, s)

    update(tf.constant(labels), tf.constant(scores))
    self.assertTrue(np.isfinite(metric.result().numpy()))


if __name__ == "__main__":
  tf.test.main()
