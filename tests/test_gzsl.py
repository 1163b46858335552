"""Tests of rank4class_tf.ranking.gzsl: GZSL metrics, AUSUC and the choice
of the remedies' constants, against maths written here."""

import numpy as np
import tensorflow as tf

from rank4class_tf.ranking import gzsl


def brute_force_curve(labels, scores, seen, gammas):
  """(acc_U, acc_S) at each margin, by argmax of the shifted scores."""
  points = []
  for gamma in gammas:
    top = (scores - gamma * seen).argmax(axis=1)
    right = top == labels
    points.append((right[~seen[labels]].mean(), right[seen[labels]].mean()))
  return np.array(points)


class GzslTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.RandomState(0)
    self.scores = rng.normal(size=(200, 6))
    self.labels = rng.randint(0, 6, size=200)
    self.seen = np.array([True, True, True, True, False, False])
    # Seen classes a little ahead, as after training on them.
    self.scores[:, :4] += 0.5
    self.scores[np.arange(200), self.labels] += 1.0

  def test_stacking_shifts_exactly_the_seen_scores(self):
    scores = np.array([[1., 2., 3.], [4., 5., 6.]])
    seen = np.array([True, False, True])
    self.assertAllClose(gzsl.stacked(scores, seen, 0.5),
                        [[0.5, 2., 2.5], [3.5, 5., 5.5]])

  def test_fusion_weights_0_and_1(self):
    scores, cosine = self.scores, np.tanh(self.scores[:, ::-1])
    self.assertAllClose(gzsl.fused(scores, cosine, 0.), scores)
    self.assertAllClose(gzsl.fused(scores, cosine, 1.), cosine)

  def test_metrics_against_hand_counts(self):
    values = gzsl.gzsl_metrics(self.labels, self.scores, self.seen)
    rank = (self.scores > self.scores[np.arange(200), self.labels][:, None]
            ).sum(axis=1)
    on_seen = self.seen[self.labels]
    top1, top5 = (rank[on_seen] == 0).mean(), (rank[~on_seen] < 5).mean()
    mrr = (1. / (rank[~on_seen] + 1)).mean()
    self.assertAllClose([values["seen_top1"], values["unseen_top5"],
                         values["unseen_mrr"]], [top1, top5, mrr])
    self.assertAllClose(values["gzsl_h"], 2 * top1 * top5 / (top1 + top5))
    with self.assertRaisesRegex(ValueError, "need instances of seen and"):
      gzsl.gzsl_metrics(np.array([0, 1]), self.scores[:2], self.seen)

  def test_curve_is_the_brute_force_sweep(self):
    acc_unseen, acc_seen = gzsl.seen_unseen_curve(self.labels, self.scores,
                                                  self.seen)
    self.assertEqual((acc_unseen[0], acc_seen[-1]), (0., 0.))
    self.assertTrue(np.all(np.diff(acc_unseen) >= 0))
    self.assertTrue(np.all(np.diff(acc_seen) <= 0))
    # Every point of a fine sweep lies on the curve's plateaus.
    brute = brute_force_curve(self.labels, self.scores, self.seen,
                              np.linspace(-8, 8, 801))
    curve = set(zip(np.round(acc_unseen, 9), np.round(acc_seen, 9)))
    for point in np.round(brute, 9):
      self.assertIn(tuple(point), curve)
    dense = brute_force_curve(self.labels, self.scores, self.seen,
                              np.linspace(-8, 8, 20001))
    dense = np.concatenate([[[0., dense[0, 1]]], dense,
                            [[dense[-1, 0], 0.]]])
    self.assertAllClose(gzsl.ausuc(self.labels, self.scores, self.seen),
                        np.trapz(dense[:, 1], dense[:, 0]), atol=2e-3)

  def test_choose_finds_the_margin_that_undoes_a_bias(self):
    # Scores that rank every class right but the 8 seen ones 3 higher (an
    # unseen class ranks 9th): a margin in (2, 4) gives H = 1.
    labels = np.arange(60) % 10
    scores = np.zeros((60, 10))
    scores[np.arange(60), labels] = 1.
    scores[:, :8] += 3.
    seen = np.arange(10) < 8
    self.assertEqual(gzsl.gzsl_metrics(labels, scores, seen)["gzsl_h"], 0.)
    chosen = gzsl.choose(labels, scores, None, seen, fit_weight=False)
    self.assertEqual(chosen["gzsl_h"], 1.)
    self.assertBetween(chosen["seen_margin"], 2., 4.)
    self.assertEqual(chosen["cosine_fusion"], 0.)
    # With the right classes in the cosine, the fusion alone fixes it.
    cosine = np.zeros((60, 10))
    cosine[np.arange(60), labels] = 1.
    fused = gzsl.choose(labels, scores, cosine, seen, fit_margin=False)
    self.assertEqual(fused["gzsl_h"], 1.)
    self.assertGreater(fused["cosine_fusion"], 2. / 3.)  # 1 > 3 (1 - w).


if __name__ == "__main__":
  tf.test.main()
