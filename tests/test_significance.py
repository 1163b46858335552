"""Tests of rank4class_tf.study.significance: known answers and an independent
bootstrap; the seed-level t-test, the power and the Holm floor worked by
hand (issue 59)."""

import math


import numpy as np
import tensorflow as tf

from rank4class_tf.study import significance


class PairedBootstrapTest(tf.test.TestCase):

  def test_identical_models_give_p_one(self):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, size=300).astype(float)
    self.assertEqual(significance.paired_bootstrap(a - a), 1.0)

  def test_right_where_the_other_misses_gives_the_smallest_p(self):
    # A is right on every instance; B on every other one.
    a = np.ones(200)
    b = np.tile([0., 1.], 100)
    p = significance.paired_bootstrap(a - b, num_samples=10_000)
    self.assertEqual(p, 1. / 10_001)

  def test_matches_a_plain_loop_with_the_same_resamples(self):
    rng = np.random.default_rng(3)
    d = rng.normal(0.1, 1., size=(2, 57))
    got = significance.paired_bootstrap(d, num_samples=2_500, seed=11)
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
    p = significance.paired_bootstrap(d, num_samples=2_000)
    self.assertBetween(np.mean(p < 0.05), 0.02, 0.10)

  def test_same_call_same_answer_and_the_seed_matters(self):
    d = np.random.default_rng(7).normal(0.05, 1., size=120)
    self.assertEqual(significance.paired_bootstrap(d, seed=1),
                     significance.paired_bootstrap(d, seed=1))
    self.assertNotEqual(significance.paired_bootstrap(d, seed=1),
                        significance.paired_bootstrap(d, seed=2))


class IntervalTest(tf.test.TestCase):

  def test_interval_of_a_constant_is_the_constant(self):
    self.assertAllClose(significance.bootstrap_interval(np.full(30, 0.7)),
                        [0.7, 0.7], atol=1e-12)

  def test_interval_covers_the_normal_approximation(self):
    values = np.random.default_rng(1).integers(0, 2, size=2000).astype(float)
    low, high = significance.bootstrap_interval(values)
    half = 1.96 * values.std() / np.sqrt(len(values))
    self.assertAllClose([low, high], [values.mean() - half,
                                      values.mean() + half], atol=0.004)


class PoolSeedsTest(tf.test.TestCase):

  def test_common_seeds_are_averaged(self):
    a = {0: np.array([1., 0.]), 1: np.array([0., 0.]), 2: np.array([5., 5.])}
    b = {0: np.array([0., 1.]), 1: np.array([1., 1.])}
    x, y, seeds = significance.pool_seeds(a, b)
    self.assertEqual(seeds, [0, 1])
    self.assertAllEqual(x, [0.5, 0.])
    self.assertAllEqual(y, [0.5, 1.])

  def test_no_common_seed(self):
    with self.assertRaisesRegex(ValueError, "share no seed"):
      significance.pool_seeds({0: np.zeros(2)}, {1: np.zeros(2)})


class HierarchicalBootstrapTest(tf.test.TestCase):

  def test_identical_seeds_equal_the_instance_only_bootstrap(self):
    rng = np.random.default_rng(5)
    d = rng.normal(0.05, 1., size=(2, 300))
    same = np.repeat(d[:, None, :], 3, axis=1)  # Three identical seeds.
    self.assertAllClose(significance.hierarchical_interval(same, num_samples=3000),
                        significance.bootstrap_interval(d, num_samples=3000),
                        atol=1e-12)
    self.assertAllEqual(significance.hierarchical_bootstrap(same, num_samples=3000),
                        significance.paired_bootstrap(d, num_samples=3000))

  def test_one_seed_is_the_instance_only_bootstrap(self):
    d = np.random.default_rng(6).normal(0.1, 1., size=(1, 1, 120))
    self.assertAllClose(significance.hierarchical_interval(d, num_samples=2000),
                        significance.bootstrap_interval(d[:, 0], num_samples=2000),
                        atol=1e-12)

  def test_disagreeing_seeds_widen_the_interval(self):
    # Seed means 0.02, 0.30, 0.55 (a run that collapsed and two that did
    # not): pooled, the instances hide the spread; resampled, it shows.
    rng = np.random.default_rng(7)
    seeds = np.stack([rng.binomial(1, p, size=2000).astype(float)
                      for p in (0.02, 0.30, 0.55)])
    pooled = significance.bootstrap_interval(seeds.mean(axis=0), num_samples=2000)
    wide = significance.hierarchical_interval(seeds, num_samples=2000)
    self.assertLess(pooled[1] - pooled[0], 0.03)
    self.assertGreater(wide[1] - wide[0], 0.25)
    # The seeds' own mean is inside both.
    self.assertBetween(seeds.mean(), *wide)

  def test_matches_a_plain_loop_with_the_same_draws(self):
    rng = np.random.default_rng(8)
    values = rng.normal(size=(2, 3, 41))
    got = significance.hierarchical_means(values, num_samples=1500, seed=4)
    # Independent reference: the same two streams, one resample at a time,
    # written as the double sum over the drawn seeds and instances.
    instances = np.random.default_rng(4)
    picks = np.concatenate([instances.integers(0, 41, size=(1000, 41)),
                            instances.integers(0, 41, size=(500, 41))])
    seed_draws = np.random.default_rng([4, 1])
    seed_picks = np.concatenate([seed_draws.integers(0, 3, size=(1000, 3)),
                                 seed_draws.integers(0, 3, size=(500, 3))])
    want = np.array([[values[k][np.ix_(seed_picks[b], picks[b])].mean()
                      for k in range(2)] for b in range(1500)])
    self.assertAllClose(got, want, atol=1e-12)

  def test_p_value_counts_seed_disagreement(self):
    # Every seed's difference is +0.1 on every instance: certain.
    sure = np.full((3, 100), 0.1)
    self.assertEqual(significance.hierarchical_bootstrap(sure, num_samples=999),
                     1. / 1000)
    # One seed +0.3, two -0.05: the pooled mean is +0.0667 and the
    # instances agree, but resampling the seeds often flips the sign.
    split = np.stack([np.full(100, 0.3), np.full(100, -0.05),
                      np.full(100, -0.05)])
    self.assertEqual(significance.paired_bootstrap(split.mean(axis=0),
                                            num_samples=999), 1. / 1000)
    self.assertGreater(significance.hierarchical_bootstrap(split, num_samples=999),
                       0.2)

  def test_standard_error_is_the_resampled_means_spread(self):
    # Constant instances, seed means +0.3, -0.05, -0.05: a resample's mean
    # is the mean of 3 seeds drawn with replacement, whose standard
    # deviation is sqrt(population variance / 3) = sqrt(0.0816667 / 3 / 3).
    split = np.stack([np.full(100, 0.3), np.full(100, -0.05),
                      np.full(100, -0.05)])
    p, se = significance.hierarchical_bootstrap_se(split, num_samples=20_000)
    self.assertEqual(p, significance.hierarchical_bootstrap(
        split, num_samples=20_000))
    self.assertAllClose(se, np.sqrt(0.245 / 3 / 3 / 3), rtol=0.03)
    # One seed: the plain bootstrap's standard error of a mean,
    # sigma / sqrt(n) (population sigma), for each of two series at once.
    d = np.random.default_rng(9).normal(0., [[1.], [3.]], size=(2, 400))
    p, se = significance.hierarchical_bootstrap_se(d[:, None, :],
                                                   num_samples=20_000)
    self.assertAllEqual(p, significance.hierarchical_bootstrap(
        d[:, None, :], num_samples=20_000))
    self.assertAllClose(se, d.std(axis=1) / np.sqrt(400), rtol=0.03)

  def test_bad_shape(self):
    with self.assertRaisesRegex(ValueError, r"\[k, S, n\]"):
      significance.hierarchical_means(np.zeros((2, 3)))


class HolmTest(tf.test.TestCase):

  def test_known_vector(self):
    # m = 5, sorted p: 0.01 0.02 0.03 0.04 0.05; (m - i + 1) p: 0.05 0.08
    # 0.09 0.08 0.05; running maximum: 0.05 0.08 0.09 0.09 0.09.
    self.assertAllClose(significance.holm([0.03, 0.01, 0.05, 0.02, 0.04]),
                        [0.09, 0.05, 0.09, 0.08, 0.09])

  def test_capped_at_one_and_order_kept(self):
    self.assertAllClose(significance.holm([0.9, 0.001, 0.5]), [1., 0.003, 1.])

  def test_single_and_empty(self):
    self.assertAllClose(significance.holm([0.04]), [0.04])
    self.assertEmpty(significance.holm([]))


class SeedMatrixTest(tf.test.TestCase):

  def test_rows_in_seed_order_and_errors(self):
    per = {2: np.array([1., 2.]), 0: np.array([3., 4.])}
    self.assertAllEqual(significance.seed_matrix(per, [0, 2]), [[3., 4.], [1., 2.]])
    with self.assertRaisesRegex(ValueError, r"seed\(s\) \[1\]"):
      significance.seed_matrix(per, [0, 1])


class SeedTTestTest(tf.test.TestCase):

  def test_hand_computed_t(self):
    # Per-seed mean differences 0.01, 0.02, 0.03 (each seed's instances
    # all equal): mean 0.02, sd 0.01, se 0.01 / √3, t = √12, df = 2. The
    # t distribution with 2 degrees of freedom has P(|T| > t) = 1 - t /
    # √(t² + 2) = 1 - √(12 / 14).
    d = np.stack([np.full(40, 0.01), np.full(40, 0.02), np.full(40, 0.03)])
    p, se = significance.seed_t_test(d)
    self.assertAllClose(p, 1. - math.sqrt(12. / 14.), atol=1e-12)
    self.assertAllClose(se, 0.01 / math.sqrt(3.), atol=1e-12)

  def test_instances_enter_through_each_seeds_mean(self):
    # The same per-seed means from varied instances: the same p.
    rng = np.random.default_rng(0)
    noise = rng.normal(size=(3, 50))
    noise -= noise.mean(axis=1, keepdims=True)
    d = noise + np.array([[0.01], [0.02], [0.03]])
    self.assertAllClose(significance.seed_t_test(d[None])[0],
                        [1. - math.sqrt(12. / 14.)], atol=1e-12)

  def test_constant_seeds_and_one_seed(self):
    same = np.full((3, 10), 0.5)
    self.assertEqual(significance.seed_t_test(same), (0., 0.))
    self.assertEqual(significance.seed_t_test(same * 0.), (1., 0.))
    p, se = significance.seed_t_test(np.ones((1, 10)))
    self.assertTrue(math.isnan(p) and math.isnan(se))


class PowerTest(tf.test.TestCase):

  def test_normal_approximation_by_hand(self):
    # se 0.01, a Holm family of 5: the smallest p is tested at 0.05 / 5,
    # two-sided, so z(1 - 0.005) = 2.5758293; 80% power adds z(0.8) =
    # 0.8416212: 3.4174505 × 0.01.
    self.assertAllClose(significance.detectable_effect(0.01, 5), 0.034174505,
                        atol=1e-9)
    # One test at 5%: 1.959964 + 0.8416212.
    self.assertAllClose(significance.detectable_effect(1., 1), 2.8015852, atol=1e-7)

  def test_t_power_is_eighty_percent_and_grows_with_few_seeds(self):
    from scipy import stats as scipy_stats
    effect = significance.detectable_effect_t(0.01, 2, 56)
    critical = scipy_stats.t.ppf(1. - 0.05 / 112, 2)
    self.assertAllClose(scipy_stats.nct.sf(critical, 2, effect / 0.01), 0.8,
                        atol=1e-8)
    # 2 degrees of freedom need far more than the normal approximation.
    self.assertGreater(effect, 10 * significance.detectable_effect(0.01, 56))
    # Many degrees of freedom: the normal approximation.
    self.assertAllClose(significance.detectable_effect_t(1., 100_000, 1),
                        significance.detectable_effect(1., 1), atol=1e-3)
    self.assertTrue(math.isnan(significance.detectable_effect_t(math.nan, 2, 4)))


class HolmFloorTest(tf.test.TestCase):

  def test_enough_resamples_for_the_family(self):
    for family in (1, 4, 56, 88, 144, 420, 1000):
      b = significance.samples_for_family(family)
      # At the Holm level 0.05 / m the bootstrap expects >= 10 exceedances.
      self.assertLessEqual(family / (b + 1), 0.005, family)
      self.assertEqual(b % 10_000, 0)
      self.assertGreaterEqual(b, significance.DEFAULT_SAMPLES)
    self.assertEqual(significance.samples_for_family(420), 90_000)
    self.assertEqual(significance.samples_for_family(144), 30_000)
    self.assertEqual(significance.samples_for_family(56), 20_000)
    self.assertEqual(significance.samples_for_family(4), 10_000)
    self.assertEqual(significance.samples_for_family(4, requested=50_000), 50_000)

  def test_the_floor_survives_holm(self):
    # 420 comparisons each at the bootstrap's smallest p: all survive Holm.
    b = significance.samples_for_family(420)
    self.assertTrue(np.all(significance.holm(np.full(420, 1. / (b + 1))) < 0.05))
    # With B = 10,000, a p of 2 / (B + 1) at rank 31 does not.
    p = np.concatenate([np.full(30, 1. / 10_001), [2. / 10_001]])
    self.assertGreater(significance.holm(np.concatenate([p, np.ones(389)]))[30],
                       0.05)


class SignTestTest(tf.test.TestCase):

  def test_by_hand(self):
    # 7 wins, 2 losses: P(X <= 2 or X >= 7), X ~ Bin(9, 1/2) =
    # 2 (1 + 9 + 36) / 512.
    self.assertAllClose(significance.sign_test(7, 2), 92. / 512., atol=1e-12)
    self.assertEqual(significance.sign_test(3, 3), 1.)
    self.assertEqual(significance.sign_test(0, 0), 1.)


if __name__ == "__main__":
  tf.test.main()
