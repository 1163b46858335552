"""Tests of rank4class_tf.ranking.metrics against independent numpy ranking maths."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class_tf
from rank4class_tf.ranking import metrics


def np_rank_of_true(label, scores):
  """1-based rank of the true class (no ties in these tests)."""
  return 1 + int(np.sum(scores > scores[label]))


def np_metrics(labels, scores):
  ranks = np.array([np_rank_of_true(l, s) for l, s in zip(labels, scores)])
  return {
      "top1_accuracy": np.mean(ranks <= 1),
      "top5_accuracy": np.mean(ranks <= 5),
      "top3_accuracy": np.mean(ranks <= 3),
      "ndcg@5": np.mean(np.where(ranks <= 5, 1. / np.log2(1. + ranks), 0.)),
      "ndcg@2": np.mean(np.where(ranks <= 2, 1. / np.log2(1. + ranks), 0.)),
      "ndcg": np.mean(1. / np.log2(1. + ranks)),
      "mrr": np.mean(1. / ranks),
  }


class MetricsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(2, 10, 28)
  def test_evaluate_scores_matches_numpy(self, num_classes):
    rng = np.random.RandomState(num_classes)
    labels = rng.randint(0, num_classes, size=64)
    scores = rng.normal(size=(64, num_classes)).astype(np.float32)
    names = ("top1_accuracy", "top3_accuracy", "top5_accuracy", "ndcg@2",
             "ndcg@5", "ndcg", "mrr")
    got = rank4class_tf.evaluate_scores(labels, scores, names)
    want = np_metrics(labels, scores)
    self.assertEqual(set(got), set(names))
    for name in names:
      self.assertAllClose(got[name], want[name], rtol=1e-5, msg=name)
      self.assertIsInstance(got[name], float)

  def test_default_keys_and_hand_values(self):
    # Ranks of the true class: 1 and 2.
    got = rank4class_tf.evaluate_scores([1, 0],
                                        [[0.1, 0.9, 0.0], [0.2, 0.5, 0.1]])
    self.assertEqual(list(got), ["top1_accuracy", "top5_accuracy", "ndcg@5",
                                 "mrr"])
    self.assertAllClose(got["top1_accuracy"], 0.5)
    self.assertAllClose(got["top5_accuracy"], 1.0)
    self.assertAllClose(got["ndcg@5"], (1. + 1. / np.log2(3.)) / 2)
    self.assertAllClose(got["mrr"], 0.75)

  def test_one_hot_labels_equal_integer_labels(self):
    rng = np.random.RandomState(1)
    labels = rng.randint(0, 6, size=20)
    scores = rng.normal(size=(20, 6))
    self.assertEqual(
        rank4class_tf.evaluate_scores(labels, scores),
        rank4class_tf.evaluate_scores(np.eye(6)[labels], scores))

  def test_top1_equals_ndcg1(self):
    rng = np.random.RandomState(2)
    labels = rng.randint(0, 5, size=50)
    scores = rng.normal(size=(50, 5))
    got = rank4class_tf.evaluate_scores(labels, scores,
                                        ("top1_accuracy", "ndcg@1"))
    self.assertAllClose(got["top1_accuracy"], got["ndcg@1"])

  def test_tied_scores_give_the_same_numbers_every_call(self):
    rng = np.random.RandomState(4)
    labels = rng.randint(0, 6, size=200)
    scores = rng.randint(0, 3, size=(200, 6)).astype(np.float32)  # Ties.
    names = ("top1_accuracy", "ndcg@1", "precision@1", "top3_accuracy",
             "ndcg@5", "ndcg", "mrr")
    first = rank4class_tf.evaluate_scores(labels, scores, names)
    self.assertEqual(first, rank4class_tf.evaluate_scores(labels, scores,
                                                          names))
    self.assertEqual(first["top1_accuracy"], first["ndcg@1"])
    self.assertEqual(first["top1_accuracy"], first["precision@1"])

  def test_ties_are_ranked_pessimistically(self):
    # Rank of the true class: 1 + classes scored higher + other classes tied
    # with it, whatever their ids.
    rng = np.random.RandomState(6)
    labels = rng.randint(0, 5, size=300)
    scores = rng.randint(0, 3, size=(300, 5)).astype(np.float32)
    true = scores[np.arange(300), labels]
    ranks = 1 + np.sum(scores >= true[:, None], axis=1) - 1
    got = rank4class_tf.evaluate_scores(labels, scores,
                                        ("top1_accuracy", "top2_accuracy",
                                         "ndcg@3", "mrr"))
    self.assertAllClose(got["top1_accuracy"], np.mean(ranks <= 1))
    self.assertAllClose(got["top2_accuracy"], np.mean(ranks <= 2))
    self.assertAllClose(got["ndcg@3"],
                        np.mean(np.where(ranks <= 3, 1 / np.log2(1 + ranks),
                                         0.)))
    self.assertAllClose(got["mrr"], np.mean(1. / ranks))

  def test_constant_scores_score_zero_top1(self):
    got = rank4class_tf.evaluate_scores([0, 1, 2], np.zeros((3, 3)),
                                        ("top1_accuracy", "mrr"))
    self.assertEqual(got["top1_accuracy"], 0.)
    self.assertAllClose(got["mrr"], 1. / 3.)

  def test_per_instance_means_are_evaluate_scores(self):
    rng = np.random.RandomState(8)
    labels = rng.randint(0, 7, size=90)
    scores = rng.normal(size=(90, 7))
    names = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")
    per = metrics.per_instance(labels, scores, names)
    want = rank4class_tf.evaluate_scores(labels, scores, names)
    for name in names:
      self.assertEqual(per[name].shape, (90,))
      self.assertAllClose(per[name].mean(), want[name], msg=name)
    np_ranks = np.array([np_rank_of_true(l, s) for l, s in zip(labels,
                                                                scores)])
    self.assertAllClose(per["mrr"], 1. / np_ranks)

  def test_per_instance_refuses_whole_split_metrics(self):
    with self.assertRaisesRegex(ValueError, "whole-split"):
      metrics.per_instance([0], [[1., 0.]], ["map_class"])

  def test_keras_names_have_no_at_sign(self):
    self.assertEqual(metrics.get("ndcg@5").name, "ndcg_5")
    self.assertEqual(metrics.get("top5_accuracy").name, "top5_accuracy")

  @parameterized.parameters("top0_accuracy", "ndcg@", "ndcg@x", "acc", "")
  def test_unknown_names_list_valid_ones(self, name):
    with self.assertRaisesRegex(ValueError, "valid names: top<k>_accuracy"):
      metrics.get(name)

  def test_shape_mismatch(self):
    with self.assertRaisesRegex(ValueError, "do not match"):
      rank4class_tf.evaluate_scores(np.eye(3), np.zeros((3, 4)))


if __name__ == "__main__":
  tf.test.main()
