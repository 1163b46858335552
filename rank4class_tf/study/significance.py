"""Significance: paired bootstrap tests and intervals over test instances, the
seed-level t-test, Holm, power (pure numpy; was `stats.py`; the study's
effects built on them are `effects.py`).

The study compares models evaluated on the same test instances, so each
comparison is paired: for instance i, d_i = m_A(i) - m_B(i), the difference of
a per-instance metric (Top-1 hit, reciprocal rank, NDCG@5...) between two
models. With several seeds per model the seeds are pooled by averaging each
instance's value over the seeds the two models share (seed s of A paired with
seed s of B), which keeps the test instances as the unit that is resampled.

The bootstrap draws `num_samples` resamples of the n instances with
replacement (Efron & Tibshirani 1993) from a `numpy.random.default_rng(seed)`
stream, so the same call always gives the same answer, and every comparison
in one call sees the same resamples.

* `paired_bootstrap`: the two-sided p-value of "mean d = 0" by the shifted
  bootstrap: p = (1 + #{b : |mean d*_b - mean d| >= |mean d|}) / (B + 1).
  Identical models give p = 1; a model right on every instance the other
  misses gives the smallest p, 1 / (B + 1).
* `bootstrap_interval`: the percentile interval of a mean.

Pooling seeds treats the seeds' average as fixed, so its intervals cover
test sampling only: a cell whose seeds disagree widely still shows narrow
bars. The hierarchical functions include training noise. Seeds and test
instances are crossed (every seed of every model is scored on the same
instances), so each resample draws the seeds with replacement and, from an
independent stream, the instances with replacement, and scores the mean of
d[s, i] over both draws (the "pigeonhole" bootstrap of crossed random
effects, Owen 2007; a two-stage resampling as in Davison & Hinkley 1997,
Sec. 3.8). Every comparison in one call sees the same seed and instance
draws, so cells stay paired by seed and by instance.

* `hierarchical_means`: those resampled means; with one seed, or seeds whose
  values are identical, they equal `resampled_means` exactly (the instance
  draws come from the same stream).
* `hierarchical_bootstrap` / `hierarchical_interval`: the p-value and the
  percentile interval from them; `hierarchical_bootstrap_se` adds the
  standard error from the same draws.
* `holm`: Holm's step-down adjustment of a family of p-values (Holm 1979),
  which keeps the family-wise error rate at alpha without Bonferroni's loss
  of power.

Example:

>>> a = np.ones(100)              # right on every instance
>>> b = np.tile([0., 1.], 50)     # right on every other one
>>> paired_bootstrap(np.stack([a - b, a - a]), num_samples=999)
array([0.001, 1.   ])
>>> holm([0.01, 0.04, 0.03])
array([0.03, 0.06, 0.06])
"""

from typing import Sequence, Tuple

import numpy as np

DEFAULT_SAMPLES = 10_000
DEFAULT_SEED = 20221221
_CHUNK = 1_000  # Resamples drawn at once: memory ~ _CHUNK * n counts.


def resampled_means(values: np.ndarray, num_samples: int = DEFAULT_SAMPLES,
                    seed: int = DEFAULT_SEED) -> np.ndarray:
  """Means of `values` over bootstrap resamples of its instances.

  Args:
    values: [k, n] float: k series over the same n instances.
    num_samples: number of resamples B.
    seed: seed of the resampling stream.

  Returns:
    [B, k] float64: row b holds the k means over resample b (the same
    resampled instances for every series).
  """
  values = np.asarray(values, np.float64)
  if values.ndim != 2 or values.shape[1] == 0:
    raise ValueError(f"values must be [k, n] with n > 0, got {values.shape}.")
  k, n = values.shape
  rng = np.random.default_rng(seed)
  means = np.empty((num_samples, k))
  for start in range(0, num_samples, _CHUNK):
    m = min(_CHUNK, num_samples - start)
    picks = rng.integers(0, n, size=(m, n))
    # counts[b, i]: how often resample b drew instance i.
    offsets = (picks + n * np.arange(m)[:, None]).ravel()
    counts = np.bincount(offsets, minlength=m * n).reshape(m, n)
    means[start:start + m] = counts @ values.T / n
  return means


def two_sided_p(means: np.ndarray, observed: np.ndarray) -> np.ndarray:
  """Two-sided bootstrap p-values from [B, k] resampled means: the share of
  resamples at least as far from the observed mean as it is from 0 (the
  resampled means centred on the observed one are the null distribution),
  with the +1 of an exact test."""
  extreme = np.abs(means - observed) >= np.abs(observed) - 1e-12
  return (1. + extreme.sum(axis=0)) / (means.shape[0] + 1.)


def paired_bootstrap(differences: np.ndarray,
                     num_samples: int = DEFAULT_SAMPLES,
                     seed: int = DEFAULT_SEED) -> np.ndarray:
  """Two-sided paired bootstrap p-values of mean differences being 0.

  Args:
    differences: [k, n] per-instance differences d_i of k comparisons over
      the same n instances (or [n] for one comparison).
    num_samples: resamples B (the smallest p-value is 1 / (B + 1)).
    seed: seed of the resampling stream.

  Returns:
    [k] p-values (a scalar for a [n] input).
  """
  differences = np.asarray(differences, np.float64)
  single = differences.ndim == 1
  differences = np.atleast_2d(differences)
  observed = differences.mean(axis=1)
  p = two_sided_p(resampled_means(differences, num_samples, seed),
                   observed)
  return p[0] if single else p


def bootstrap_interval(values: np.ndarray, level: float = 0.95,
                       num_samples: int = DEFAULT_SAMPLES,
                       seed: int = DEFAULT_SEED) -> np.ndarray:
  """Percentile bootstrap intervals of means.

  Args:
    values: [k, n] per-instance values of k series (or [n]).
    level: coverage of the interval.
    num_samples: resamples B.
    seed: seed of the resampling stream.

  Returns:
    [k, 2] (low, high) bounds ([2] for a [n] input).
  """
  values = np.asarray(values, np.float64)
  single = values.ndim == 1
  means = resampled_means(np.atleast_2d(values), num_samples, seed)
  alpha = (1. - level) / 2.
  bounds = np.quantile(means, [alpha, 1. - alpha], axis=0).T
  return bounds[0] if single else bounds


def pool_seeds(a: dict, b: dict) -> Tuple[np.ndarray, np.ndarray,
                                          Sequence[int]]:
  """Per-instance values of two models averaged over their common seeds.

  Args:
    a: {seed: [n] per-instance values} of model A.
    b: the same for model B.

  Returns:
    (a_mean [n], b_mean [n], the common seeds, sorted).

  Raises:
    ValueError: if the models share no seed or differ in n.
  """
  seeds = sorted(set(a) & set(b))
  if not seeds:
    raise ValueError("the two models share no seed to pair.")
  a_mean = np.mean([a[s] for s in seeds], axis=0)
  b_mean = np.mean([b[s] for s in seeds], axis=0)
  if a_mean.shape != b_mean.shape:
    raise ValueError(f"the models were tested on {a_mean.shape[0]} and "
                     f"{b_mean.shape[0]} instances.")
  return a_mean, b_mean, seeds


def _seed_stream(seed: int) -> np.random.Generator:
  """The seeds' draws: a stream independent of the instances' one."""
  return np.random.default_rng([seed, 1])


def hierarchical_means(values: np.ndarray,
                       num_samples: int = DEFAULT_SAMPLES,
                       seed: int = DEFAULT_SEED) -> np.ndarray:
  """Means of `values` over resamples of both its seeds and its instances.

  Args:
    values: [k, S, n] float: k series, each S seeds (training runs) scored
      on the same n instances; the seeds of every series are paired (row s
      of each series is the same seed).
    num_samples: number of resamples B.
    seed: seed of the resampling streams.

  Returns:
    [B, k] float64: row b holds the k means of values[:, s, i] over the
    seeds and instances resample b drew (the same draws for every series).
  """
  values = np.asarray(values, np.float64)
  if values.ndim != 3 or values.shape[1] == 0 or values.shape[2] == 0:
    raise ValueError("values must be [k, S, n] with S > 0 and n > 0, got "
                     f"{values.shape}.")
  k, num_seeds, n = values.shape
  rng, seed_rng = np.random.default_rng(seed), _seed_stream(seed)
  flat = values.reshape(k * num_seeds, n)
  means = np.empty((num_samples, k))
  for start in range(0, num_samples, _CHUNK):
    m = min(_CHUNK, num_samples - start)
    # The instance draws exactly as `resampled_means` makes them.
    picks = rng.integers(0, n, size=(m, n))
    offsets = (picks + n * np.arange(m)[:, None]).ravel()
    counts = np.bincount(offsets, minlength=m * n).reshape(m, n)
    # per_seed[b, k, s]: the mean over resample b's instances of seed s.
    per_seed = (counts @ flat.T / n).reshape(m, k, num_seeds)
    if num_seeds == 1:
      means[start:start + m] = per_seed[:, :, 0]
      continue
    seed_picks = seed_rng.integers(0, num_seeds, size=(m, num_seeds))
    seed_offsets = (seed_picks + num_seeds * np.arange(m)[:, None]).ravel()
    seed_counts = np.bincount(seed_offsets, minlength=m * num_seeds).reshape(
        m, num_seeds)
    means[start:start + m] = np.einsum("bks,bs->bk", per_seed,
                                       seed_counts) / num_seeds
  return means


def hierarchical_bootstrap(differences: np.ndarray,
                           num_samples: int = DEFAULT_SAMPLES,
                           seed: int = DEFAULT_SEED) -> np.ndarray:
  """Two-sided p-values of mean differences being 0, seeds and instances
  resampled (`hierarchical_means`; the shifted bootstrap of
  `paired_bootstrap`).

  Args:
    differences: [k, S, n] per-seed, per-instance differences d[s, i] of k
      comparisons (or [S, n] for one).
    num_samples: resamples B (the smallest p-value is 1 / (B + 1)).
    seed: seed of the resampling streams.

  Returns:
    [k] p-values (a scalar for a [S, n] input).
  """
  return hierarchical_bootstrap_se(differences, num_samples, seed)[0]


def hierarchical_bootstrap_se(differences: np.ndarray,
                              num_samples: int = DEFAULT_SAMPLES,
                              seed: int = DEFAULT_SEED
                              ) -> Tuple[np.ndarray, np.ndarray]:
  """`hierarchical_bootstrap`'s p-values and, from the same draws, each
  mean difference's standard error (the resampled means' standard
  deviation: the input of `detectable_effect`).

  Args:
    differences: [k, S, n] (or [S, n]), as `hierarchical_bootstrap`'s.
    num_samples: resamples B.
    seed: seed of the resampling streams.

  Returns:
    ([k] p-values, [k] standard errors); scalars for a [S, n] input.
  """
  differences = np.asarray(differences, np.float64)
  single = differences.ndim == 2
  if single:
    differences = differences[None]
  means = hierarchical_means(differences, num_samples, seed)
  p = two_sided_p(means, differences.mean(axis=(1, 2)))
  se = means.std(axis=0)
  return (p[0], se[0]) if single else (p, se)


def hierarchical_interval(values: np.ndarray, level: float = 0.95,
                          num_samples: int = DEFAULT_SAMPLES,
                          seed: int = DEFAULT_SEED) -> np.ndarray:
  """Percentile intervals of means, seeds and instances resampled.

  Args:
    values: [k, S, n] per-seed, per-instance values (or [S, n]).
    level: coverage of the interval.
    num_samples: resamples B.
    seed: seed of the resampling streams.

  Returns:
    [k, 2] (low, high) bounds ([2] for a [S, n] input).
  """
  values = np.asarray(values, np.float64)
  single = values.ndim == 2
  means = hierarchical_means(values[None] if single else values,
                             num_samples, seed)
  alpha = (1. - level) / 2.
  bounds = np.quantile(means, [alpha, 1. - alpha], axis=0).T
  return bounds[0] if single else bounds


def holm(p_values: Sequence[float]) -> np.ndarray:
  """Holm's step-down adjusted p-values, in the input's order.

  Sorted ascending p_(1) <= ... <= p_(m), the adjusted value of p_(j) is
  max over i <= j of min(1, (m - i + 1) p_(i)): reject every hypothesis
  whose adjusted p is below alpha and the family-wise error rate stays at
  most alpha (Holm 1979).

  Args:
    p_values: the family's raw p-values.

  Returns:
    [m] adjusted p-values.
  """
  p = np.asarray(p_values, np.float64)
  if p.ndim != 1:
    raise ValueError(f"p_values must be one list, got shape {p.shape}.")
  m = len(p)
  if not m:
    return p.copy()
  order = np.argsort(p, kind="stable")
  scaled = np.minimum(1., (m - np.arange(m)) * p[order])
  adjusted = np.empty(m)
  adjusted[order] = np.maximum.accumulate(scaled)
  return adjusted


def seed_matrix(per_seed: dict, seeds: Sequence[int]) -> np.ndarray:
  """[S, n] rows of `per_seed` ({seed: [n] values}) in `seeds`' order.

  Raises:
    ValueError: a seed is missing or the rows differ in length.
  """
  missing = [s for s in seeds if s not in per_seed]
  if missing:
    raise ValueError(f"no values for seed(s) {missing}.")
  rows = [np.asarray(per_seed[s], np.float64) for s in seeds]
  if len({row.shape for row in rows}) > 1:
    raise ValueError("the seeds were tested on different numbers of "
                     "instances.")
  return np.stack(rows)


def seed_t_test(differences: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """Two-sided paired t-tests over seeds, beside the hierarchical bootstrap.

  Seed s of one model is paired with seed s of the other; each seed gives
  one number, its mean difference over the test instances,
  m_s = mean_i d[s, i], and t = mean(m) / (sd(m) / sqrt(S)) has S - 1
  degrees of freedom. Its p is exact under normal seed noise, so it has no
  resampling floor; it conditions on the test set (the instances' noise is
  in each m_s, not resampled). With S = 3 seeds the exact sign-flip
  permutation test cannot go below 2 / 2**3 = 0.25, which is why the
  seed-level test here is the t-test.

  Args:
    differences: [k, S, n] per-seed, per-instance differences (or [S, n]).

  Returns:
    ([k] p-values, [k] standard errors sd(m) / sqrt(S)); NaN for S < 2. Seeds
    that all give the same difference have standard error 0: p = 1 for a
    difference of 0, else 0.

  Example (per-seed differences 0.01, 0.02, 0.03: t = 0.02 / (0.01 / √3)
  = √12, and with 2 degrees of freedom p = 1 - t / √(t² + 2) = 1 - √(12/14)):

  >>> p, se = seed_t_test(np.array([[0.01], [0.02], [0.03]]))
  >>> round(float(p), 6), round(float(se), 6)
  (0.07418, 0.005774)
  """
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  differences = np.asarray(differences, np.float64)
  single = differences.ndim == 2
  if single:
    differences = differences[None]
  per_seed = differences.mean(axis=2)  # [k, S]
  num_seeds = per_seed.shape[1]
  if num_seeds < 2:
    nan = np.full(per_seed.shape[0], np.nan)
    return (nan[0], nan[0]) if single else (nan, nan.copy())
  mean = per_seed.mean(axis=1)
  se = per_seed.std(axis=1, ddof=1) / np.sqrt(num_seeds)
  constant = se <= 1e-12 * np.maximum(1., np.abs(mean))
  with np.errstate(divide="ignore", invalid="ignore"):
    t = np.abs(mean) / np.where(constant, 1., se)
  p = 2. * scipy_stats.t.sf(t, num_seeds - 1)
  p = np.where(constant, np.where(np.abs(mean) <= 1e-15, 1., 0.), p)
  se = np.where(constant, 0., se)
  return (p[0], se[0]) if single else (p, se)


def detectable_effect(se: float, family_size: int, alpha: float = 0.05,
                      power: float = 0.8) -> float:
  """The smallest |effect| a two-sided test detects with `power`, normal
  approximation, at the Holm level of the family's smallest p.

  Holm rejects the family's smallest p when p < alpha / m, so an effect
  with standard error `se` is found with probability `power` when
  |effect| >= (z(1 - alpha / (2 m)) + z(power)) * se.

  Example (se 0.01, a family of 5: z(0.995) = 2.5758, z(0.8) = 0.8416):

  >>> round(detectable_effect(0.01, 5), 6)
  0.034175
  """
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  return float((scipy_stats.norm.ppf(1. - alpha / (2. * family_size)) +
                scipy_stats.norm.ppf(power)) * se)


def detectable_effect_t(se: float, df: int, family_size: int,
                        alpha: float = 0.05, power: float = 0.8) -> float:
  """`detectable_effect` for the seed-level t-test (`seed_t_test`), exact:
  the effect whose noncentral t (df degrees of freedom, noncentrality
  effect / se) exceeds the critical t(1 - alpha / (2 m)) with probability
  `power`. NaN for se NaN or df < 1.

  >>> round(detectable_effect_t(1., 1000, 1), 3)  # ~ 1.96 + 0.84
  2.804
  """
  from scipy import optimize  # pylint: disable=g-import-not-at-top
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  if df < 1 or not np.isfinite(se):
    return float("nan")
  critical = scipy_stats.t.ppf(1. - alpha / (2. * family_size), df)
  shortfall = lambda nc: scipy_stats.nct.sf(critical, df, nc) - power
  high = 1.
  while shortfall(high) < 0:
    high *= 2.
  return float(optimize.brentq(shortfall, 0., high, xtol=1e-10) * se)


def samples_for_family(family_size: int, requested: int = DEFAULT_SAMPLES,
                       alpha: float = 0.05, margin: float = 10.) -> int:
  """Bootstrap resamples B for a Holm family of `family_size` tests.

  The smallest bootstrap p is 1 / (B + 1), and Holm multiplies the family's
  smallest p by its size m, so with too few resamples a difference that no
  resample reaches still fails (the "Holm floor"). B is `requested` raised,
  in steps of 10,000, until m / (B + 1) <= alpha / margin: at the Holm
  level alpha / m the bootstrap expects at least `margin` exceedances.

  >>> samples_for_family(420)  # 420 / 90,001 = 0.0047 <= 0.005
  90000
  >>> samples_for_family(56)
  20000
  >>> samples_for_family(4)
  10000
  """
  needed = int(np.ceil(margin * family_size / alpha)) - 1
  if needed <= requested:
    return requested
  return requested + int(np.ceil((needed - requested) / 10_000)) * 10_000


def sign_test(wins: int, losses: int) -> float:
  """Exact two-sided sign (binomial) test of wins against losses, ties
  dropped: p of a split at least this uneven when each is equally likely.

  >>> round(sign_test(7, 2), 4)
  0.1797
  >>> sign_test(0, 0)
  1.0
  """
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  if wins + losses == 0:
    return 1.
  return float(scipy_stats.binomtest(wins, wins + losses, 0.5).pvalue)
