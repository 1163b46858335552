"""Pure TensorFlow maths of SoDeep (Engilberge et al., CVPR 2019).

A *sorter* maps scores y [batch_size, d] to ranks [batch_size, d]. Ranks are
normalised as in the SoDeep reference code: the largest score of a row has rank
1/d, the smallest rank 1, so

  rk(y)_i = (1 + #{j : y_j > y_i}) / d.

The exact rank is piecewise constant (zero gradient almost everywhere); the
functions here give the exact ground truth, the handcrafted differentiable
approximation of the paper (eq. 11-12) and the rank-based losses (eq. 4, 7,
9-10) that take any sorter's output. The Keras wrappers live in `sorters.py`
and `losses.py` of this package.

Ties. `exact_rank` breaks them by index (stable sort) and `average_rank` gives
tied entries their mean rank; the SoDeep reference code's ground truth
(`utils.get_rank`, two `torch.argsort`) orders them as its unstable argsort
happens to. The handcrafted sorter counts a tie as half a score above, here
as in the reference (sigmoid(0) = 1/2).
"""

from typing import Union

import tensorflow as tf

# The SoDeep reference code's handcrafted sorter (`model.py`,
# `sorter_exact.comp`): lambda = ADAPTIVE_SCALE / std of the vector's
# pairwise differences (`adaptive_regularization`).
ADAPTIVE_SCALE = 6.8


def exact_rank(y: tf.Tensor) -> tf.Tensor:
  """Normalised descending ranks by an exact sort (the training ground truth).

  rk(y)_i = (position of y_i in y sorted in decreasing order) / d, positions
  counted from 1. Ties are broken by index (stable sort); use `average_rank`
  for targets with ties.

  Args:
    y: [batch_size, d] scores.

  Returns:
    [batch_size, d] float32 ranks in {1/d, 2/d, ..., 1}; no gradient.

  Example:

  >>> exact_rank([[0.3, -1., 2.]]).numpy()  # ranks 2, 3, 1 over d = 3
  array([[0.6666667 , 1.        , 0.33333334]], dtype=float32)
  """
  y = tf.convert_to_tensor(y, tf.float32)
  d = tf.cast(tf.shape(y)[-1], tf.float32)
  order = tf.argsort(y, axis=-1, direction="DESCENDING", stable=True)
  positions = tf.argsort(order, axis=-1, stable=True)
  return tf.stop_gradient(tf.cast(positions + 1, tf.float32) / d)


def average_rank(y: tf.Tensor) -> tf.Tensor:
  """Normalised descending ranks where tied entries share their mean rank.

  rk(y)_i = (#{j : y_j > y_i} + (#{j : y_j = y_i} + 1) / 2) / d, the
  "fractional ranking" Spearman's correlation uses. Equals `exact_rank` when y
  has no ties. Costs O(d^2) per row.

  Args:
    y: [batch_size, d] scores or labels.

  Returns:
    [batch_size, d] float32 ranks in [1/d, 1]; no gradient.
  """
  y = tf.convert_to_tensor(y, tf.float32)
  d = tf.cast(tf.shape(y)[-1], tf.float32)
  yi = y[:, :, None]
  yj = y[:, None, :]
  greater = tf.reduce_sum(tf.cast(yj > yi, tf.float32), axis=-1)
  equal = tf.reduce_sum(tf.cast(tf.equal(yj, yi), tf.float32), axis=-1)
  return tf.stop_gradient((greater + (equal + 1.) / 2.) / d)


def adaptive_regularization(y: tf.Tensor) -> tf.Tensor:
  r"""The SoDeep reference code's lambda of each vector: 6.8 / std(D).

  ```
  D_ij = y_j - y_i  for j > i,   0 for j <= i      [d, d] per vector
  lambda = 6.8 / std(D),  std over all d^2 entries, with d^2 - 1 degrees
           of freedom (torch.std's default)
  ```

  so the d (d + 1) / 2 zeros of the diagonal and lower triangle count, as in
  `sorter_exact.comp` of technicolor-research/sodeep (its `model.py`), which
  computes it for each vector separately and takes it out of the gradient
  (`.item()`); so does this function (`tf.stop_gradient`). Scaling y by c
  divides lambda by c, so the handcrafted ranks do not depend on the scale.
  A vector of equal scores (std 0; the reference divides by 0 there) or of
  one score gets lambda = 0: every pair is a tie, whatever lambda.

  Args:
    y: [batch_size, d] scores.

  Returns:
    [batch_size] float32 lambdas; no gradient.

  Example:

  >>> # D holds -1, -2, -1 above the diagonal and 6 zeros: std = 0.7265.
  >>> adaptive_regularization([[3., 2., 1.], [6., 4., 2.]]).numpy()
  array([9.360..., 4.680...], dtype=float32)
  """
  y = tf.cast(tf.convert_to_tensor(y), tf.float32)
  d = tf.shape(y)[-1]
  upper = tf.linalg.band_part(y[:, None, :] - y[:, :, None], 0, -1)
  n = tf.cast(d * d, tf.float32)
  mean = tf.reduce_sum(upper, axis=[1, 2], keepdims=True) / n
  variance = tf.math.divide_no_nan(
      tf.reduce_sum(tf.square(upper - mean), axis=[1, 2]), n - 1.)
  return tf.stop_gradient(
      tf.math.divide_no_nan(ADAPTIVE_SCALE, tf.sqrt(variance)))


def check_regularization(regularization: Union[float, str]) -> None:
  """Raises ValueError unless `regularization` is a number > 0 or
  "adaptive"."""
  valid = (regularization == "adaptive" if isinstance(regularization, str)
           else regularization > 0)
  if not valid:
    raise ValueError(f"regularization={regularization!r} is not valid; "
                     "choose a number > 0 or 'adaptive'.")


def handcrafted_rank(y: tf.Tensor,
                     regularization: Union[float, str] = 10.0) -> tf.Tensor:
  r"""The paper's handcrafted differentiable rank (eq. 11-12), normalised.

  ```
  rk_i = (1 + sum_{j != i} sigmoid(lambda * (y_j - y_i))) / d
  ```

  Each sigmoid softly counts one score above y_i; lambda -> infinity gives
  the exact rank (without ties; a tie counts 1/2). O(d^2) per row.

  Args:
    y: [batch_size, d] scores.
    regularization: lambda, the sharpness of the soft comparisons: a number
      (the `handcrafted` sorter's 10), or "adaptive" for the SoDeep reference
      code's lambda = 6.8 / std of each vector's pairwise differences
      (`adaptive_regularization`; the `handcrafted_adaptive` sorter).

  Returns:
    [batch_size, d] approximate ranks, differentiable in y.

  Raises:
    ValueError: for a regularization that is neither > 0 nor "adaptive".

  Example:

  >>> handcrafted_rank([[0.3, -1., 2.]]).numpy()  # exact: 2/3, 1, 1/3
  array([[0.6666..., 0.9999..., 0.3333...]], dtype=float32)
  >>> handcrafted_rank([[0.3, -1., 2.]], "adaptive").numpy()  # lambda 5.49
  array([[0.6669..., 0.9997..., 0.3333...]], dtype=float32)
  """
  check_regularization(regularization)
  y = tf.convert_to_tensor(y)
  y = tf.cast(y, tf.float32)
  d = tf.cast(tf.shape(y)[-1], tf.float32)
  if regularization == "adaptive":
    lam = adaptive_regularization(y)[:, None, None]
  else:
    lam = float(regularization)
  diff = y[:, None, :] - y[:, :, None]  # [batch, i, j] = y_j - y_i
  soft_greater = tf.sigmoid(lam * diff)
  # The diagonal term is sigmoid(0) = 1/2; drop it.
  count = tf.reduce_sum(soft_greater, axis=-1) - 0.5
  return (1. + count) / d


def pairwise_soft_rank(logits: tf.Tensor) -> tf.Tensor:
  r"""Normalised ranks from soft pairwise comparisons ("j beats i" logits).

  ```
  rk_i = (1 + sum_{j != i} sigmoid(logits_ij)) / d
  ```

  The handcrafted sorter is logits_ij = lambda (y_j - y_i); the `pairwise`
  sorter learns them. The diagonal is left out whatever it holds.

  Args:
    logits: [batch_size, d, d]; logits[b, i, j] > 0 says y_j is above y_i.

  Returns:
    [batch_size, d] approximate ranks.

  Example:

  >>> y = tf.constant([[0.3, -1., 2.]])
  >>> pairwise_soft_rank(100. * (y[:, None, :] - y[:, :, None])).numpy()
  array([[0.6666..., 1. , 0.3333...]], dtype=float32)
  """
  logits = tf.cast(tf.convert_to_tensor(logits), tf.float32)
  d = tf.cast(tf.shape(logits)[-1], tf.float32)
  soft_greater = tf.sigmoid(logits)
  count = (tf.reduce_sum(soft_greater, axis=-1) -
           tf.linalg.diag_part(soft_greater))
  return (1. + count) / d


def standardize(y: tf.Tensor, epsilon: float = 1e-6) -> tf.Tensor:
  """Per-row (y - mean) / (std + epsilon): changes the scale, keeps the ranks.

  Learned sorters apply it first so that logits of any scale look like the
  unit-scale synthetic vectors they were trained on.

  Args:
    y: [batch_size, d] scores.
    epsilon: guards rows of equal scores.

  Returns:
    [batch_size, d] tensor with the same order in every row.
  """
  mean, variance = tf.nn.moments(y, axes=[-1], keepdims=True)
  return (y - mean) / (tf.sqrt(variance) + epsilon)


def l1_rank_error(rank_true: tf.Tensor, rank_pred: tf.Tensor) -> tf.Tensor:
  """Mean absolute error between normalised ranks, per row: [batch_size].

  The sorters' training loss and the "L1" of the paper's Table 1.
  """
  return tf.reduce_mean(tf.abs(tf.cast(rank_pred, tf.float32) -
                               tf.cast(rank_true, tf.float32)), axis=-1)


def spearman_loss(rank_pred: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
  r"""Spearman loss (paper eq. 4), averaged over the group: [batch_size].

  ```
  loss(y, y*) = 1/d * || f(y) - rk(y*) ||^2
  ```

  where f(y) = `rank_pred` are the sorter's ranks of the predictions and
  rk(y*) the average ranks of the targets (ties share a rank). The paper
  writes the sum; dividing by d makes the value independent of the group size:
  with normalised ranks and no ties, 1 - Spearman's rho ~= 6 * loss.

  Args:
    rank_pred: [batch_size, d] ranks of the predicted scores (a sorter's
      output).
    labels: [batch_size, d] target values (graded labels, regression targets).

  Returns:
    [batch_size] per-group losses.
  """
  rank_true = average_rank(labels)
  return tf.reduce_mean(tf.square(tf.cast(rank_pred, tf.float32) - rank_true),
                        axis=-1)


def map_loss(rank_pred: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
  r"""mAP surrogate (paper eq. 7): mean rank of the relevant items: [batch_size].

  ```
  loss(y, y*) = <f(y), y*> / <1, y*>
  ```

  with f(y) the sorter's normalised ranks of a group's scores and y* its
  multi-hot relevance. Minimising it moves every relevant item towards rank
  1/d, which raises the average precision. A group without a relevant item
  contributes 0.

  Args:
    rank_pred: [batch_size, d] sorter ranks.
    labels: [batch_size, d] multi-hot relevance (values > 0 are relevant;
      negative entries are padding and count as not relevant).

  Returns:
    [batch_size] per-group losses in [1/d, 1].
  """
  relevant = tf.cast(tf.greater(labels, 0.), tf.float32)
  rank_pred = tf.cast(rank_pred, tf.float32)
  return tf.math.divide_no_nan(tf.reduce_sum(rank_pred * relevant, axis=-1),
                               tf.reduce_sum(relevant, axis=-1))


def recall_loss(rank_pred: tf.Tensor, labels: tf.Tensor,
                margin: float = 0.1) -> tf.Tensor:
  r"""Recall@K surrogate (paper eq. 9-10): hard-negative triplet on ranks.

  For each relevant item p of a group, against the best-ranked (hardest)
  irrelevant item n* = argmin_{n irrelevant} f(y)_n:

  ```
  loss(y, y*) = mean_{p relevant} max(0, margin + f(y)_p - f(y)_{n*})
  ```

  Ranks are normalised (1/d is one position), so the loss is 0 once every
  relevant item is ranked `margin * d` positions ahead of all irrelevant ones,
  which puts them in the top K for any K >= #relevant.

  Args:
    rank_pred: [batch_size, d] sorter ranks.
    labels: [batch_size, d] multi-hot relevance (> 0 relevant).
    margin: required rank gap, in normalised rank units.

  Returns:
    [batch_size] per-group losses (0 for a group with no relevant or no
    irrelevant item).
  """
  rank_pred = tf.cast(rank_pred, tf.float32)
  relevant = tf.cast(tf.greater(labels, 0.), tf.float32)
  irrelevant = 1. - relevant
  big = tf.reduce_max(rank_pred) + 1.
  hardest = tf.reduce_min(rank_pred + big * relevant, axis=-1, keepdims=True)
  has_negative = tf.reduce_max(irrelevant, axis=-1, keepdims=True)
  hinge = tf.nn.relu(margin + rank_pred - hardest) * relevant * has_negative
  return tf.math.divide_no_nan(tf.reduce_sum(hinge, axis=-1),
                               tf.reduce_sum(relevant, axis=-1))
