"""Synthetic score vectors and their exact ranks, for training sorters.

SoDeep (paper §3.1.2) pretrains a sorter on vectors drawn from simple
distributions, each row of a batch from one of four families (equally likely):

* `uniform`: i.i.d. uniform on [-1, 1];
* `normal`: i.i.d. normal(0, 1);
* `linspace`: d evenly spaced numbers in a random sub-range [a, b] of [-1, 1],
  shuffled (many near-equal scores: the hard case for a sorter);
* `mixture`: every entry drawn from one of the three families above with
  row-specific mixing proportions (Dirichlet(1, 1, 1)).

Batches are made with stateless random ops from (seed, batch index), so a
dataset is reproducible and a fixed test set is the same on every machine and
run, whatever the number of threads (a test checks 1 against 2). Ground truth is `ops.exact_rank` (an exact sort).
"""

from typing import Tuple

import tensorflow as tf

from rank4class_tf.sorting import ops

FAMILIES = ("uniform", "normal", "linspace", "mixture")
TEST_SEED = 20190616  # the fixed test set of `evaluate_sorter`
TEST_SIZE = 10000
VALIDATION_SEED = 7


def sample_scores(batch_size: int, d: int, seed) -> tf.Tensor:
  """One batch of synthetic score vectors.

  Args:
    batch_size: number of vectors.
    d: vector length.
    seed: int32 tensor of shape [2] for the stateless random ops.

  Returns:
    [batch_size, d] float32 scores.
  """
  seed = tf.convert_to_tensor(seed, tf.int32)
  seeds = tf.random.experimental.stateless_split(seed, num=8)
  shape = [batch_size, d]
  uniform = tf.random.stateless_uniform(shape, seeds[0], -1., 1.)
  normal = tf.random.stateless_normal(shape, seeds[1])
  ends = tf.random.stateless_uniform([batch_size, 2], seeds[2], -1., 1.)
  low = tf.reduce_min(ends, axis=-1, keepdims=True)
  high = tf.reduce_max(ends, axis=-1, keepdims=True)
  steps = tf.range(d, dtype=tf.float32) / tf.cast(tf.maximum(d - 1, 1),
                                                  tf.float32)
  linspace = low + (high - low) * steps[None, :]
  shuffle = tf.argsort(tf.random.stateless_uniform(shape, seeds[3]), axis=-1)
  linspace = tf.gather(linspace, shuffle, batch_dims=1)
  # Mixture: per-row Dirichlet(1, 1, 1) proportions, per-entry family drawn
  # by inverting their cumulative sum (tf.random.stateless_categorical
  # draws differently with another number of CPU threads).
  gamma = -tf.math.log(tf.random.stateless_uniform(
      [batch_size, 3], seeds[4], 1e-6, 1.))
  cumulative = tf.cumsum(gamma, axis=-1) / tf.reduce_sum(
      gamma, axis=-1, keepdims=True)
  draw = tf.random.stateless_uniform(shape, seeds[5])
  pick = tf.reduce_sum(tf.cast(draw[:, :, None] > cumulative[:, None, :2],
                               tf.int32), axis=-1)  # [batch, d] in {0, 1, 2}
  stacked = tf.stack([uniform, normal, linspace], axis=-1)  # [batch, d, 3]
  mixture = tf.gather(stacked, pick, batch_dims=2)
  family = tf.random.stateless_uniform([batch_size], seeds[6], 0, 4,
                                       dtype=tf.int32)
  candidates = tf.stack([uniform, normal, linspace, mixture], axis=1)
  return tf.gather(candidates, family, batch_dims=1)


def sample_batch(batch_size: int, d: int, seed) -> Tuple[tf.Tensor, tf.Tensor]:
  """(scores [batch_size, d], exact ranks [batch_size, d]) for `seed` [2]."""
  scores = sample_scores(batch_size, d, seed)
  return scores, ops.exact_rank(scores)


def dataset(batch_size: int, d: int, seed: int = 0) -> tf.data.Dataset:
  """Endless on-the-fly dataset of (scores, ranks) batches.

  Batch n is drawn from the stateless seed (seed, n), so the stream is the
  same on every run.

  Args:
    batch_size: vectors per batch (512 in the paper).
    d: vector length (the sorter's d).
    seed: stream seed.

  Returns:
    A `tf.data.Dataset` of ([batch_size, d], [batch_size, d]) float32 pairs.
  """
  def make(n):
    return sample_batch(batch_size, d, tf.stack(
        [tf.constant(seed, tf.int32), tf.cast(n, tf.int32)]))
  return (tf.data.Dataset.counter()
          .map(make, num_parallel_calls=1)
          .prefetch(2))


def fixed_set(size: int, d: int, seed: int) -> Tuple[tf.Tensor, tf.Tensor]:
  """A fixed (scores, ranks) set of `size` vectors: [size, d] each."""
  return sample_batch(size, d, tf.constant([seed, 0], tf.int32))


def test_set(d: int, size: int = TEST_SIZE) -> Tuple[tf.Tensor, tf.Tensor]:
  """The fixed, seeded 10,000-vector test set of `evaluate_sorter`."""
  return fixed_set(size, d, TEST_SEED)
