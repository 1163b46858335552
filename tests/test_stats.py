"""Tests of rank4class_tf.stats: known answers and an independent bootstrap."""

import numpy as np
import tensorflow as tf

from rank4class_tf import stats


class PairedBootstrapTest(tf.test.TestCase):

  def test_identical_models_give_p_one(self):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, size=300).astype(float)
    self.assertEqual(stats.paired_bootstrap(a - a), 1.0)

  def test_right_where_the_other_misses_gives_the_smallest_p(self):
    # A is right on every instance; B on every other one.
    a = np.ones(200)
    b = np.tile([0., 1.], 100)
    p = stats.paired_bootstrap(a - b, num_samples=10_000)
    self.assertEqual(p, 1. / 10_001)

  def test_matches_a_plain_loop_with_the_same_resamples(self):
    rng = np.random.default_rng(3)
    d = rng.normal(0.1, 1., size=(2, 57))
    got = stats.paired_bootstrap(d, num_samples=2_500, seed=11)
    # Independent reference: the same stream, one resample at a time.
    draw = np.random.default_rng(11)
    picks = np.concatenate([draw.integers(0, 57, size=(1000, 57)),
                            draw.integers(0, 57, size=(1000, 57)),
                            draw.integers(0, 57, size=(500, 57))])
    for row, p in zip(d, got):
      means = row[picks].mean(axis=1)
      extreme = np.abs(means - row.mean()) >= abs(row.mean()) - 1e-12
      self.assertAllClose(p, (1 + extreme.sum()) / 2_501)

  def test_no_difference_is_not_significant_on_average(self):
    # Under the null the p-value is roughly uniform: about 5% below 0.05.
    rng = np.random.default_rng(5)
    d = rng.normal(0., 1., size=(400, 80))
    p = stats.paired_bootstrap(d, num_samples=2_000)
    self.assertBetween(np.mean(p < 0.05), 0.02, 0.10)

  def test_same_call_same_answer_and_the_seed_matters(self):
    d = np.random.default_rng(7).normal(0.05, 1., size=120)
    self.assertEqual(stats.paired_bootstrap(d, seed=1),
                     stats.paired_bootstrap(d, seed=1))
    self.assertNotEqual(stats.paired_bootstrap(d, seed=1),
                        stats.paired_bootstrap(d, seed=2))


class IntervalTest(tf.test.TestCase):

  def test_interval_of_a_constant_is_the_constant(self):
    self.assertAllClose(stats.bootstrap_interval(np.full(30, 0.7)),
                        [0.7, 0.7], atol=1e-12)

  def test_interval_covers_the_normal_approximation(self):
    values = np.random.default_rng(1).integers(0, 2, size=2000).astype(float)
    low, high = stats.bootstrap_interval(values)
    half = 1.96 * values.std() / np.sqrt(len(values))
    self.assertAllClose([low, high], [values.mean() - half,
                                      values.mean() + half], atol=0.004)


class PoolSeedsTest(tf.test.TestCase):

  def test_common_seeds_are_averaged(self):
    a = {0: np.array([1., 0.]), 1: np.array([0., 0.]), 2: np.array([5., 5.])}
    b = {0: np.array([0., 1.]), 1: np.array([1., 1.])}
    x, y, seeds = stats.pool_seeds(a, b)
    self.assertEqual(seeds, [0, 1])
    self.assertAllEqual(x, [0.5, 0.])
    self.assertAllEqual(y, [0.5, 1.])

  def test_no_common_seed(self):
    with self.assertRaisesRegex(ValueError, "share no seed"):
      stats.pool_seeds({0: np.zeros(2)}, {1: np.zeros(2)})


if __name__ == "__main__":
  tf.test.main()
