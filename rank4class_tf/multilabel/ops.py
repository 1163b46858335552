r"""Pure TensorFlow maths of the multi-label losses: the Two-way loss here,
MulCon's label-level contrastive loss in `mulcon`.

With several relevant classes per instance the labels are multi-hot
[batch_size, num_classes] (1 = relevant, 0 = not, negative = padding, the
TF-Ranking convention). Both losses compare the relevant classes of a
*class* across the instances of a batch, so their value is the batch's, not a
sum of per-instance values.

Two-way loss (Kobayashi, CVPR 2023). For a set of logits with positives P and
negatives N,

```
  l(P, N) = softplus( T_N * logsumexp_{n in N}(x_n / T_N)
                    + T_P * logsumexp_{p in P}(-x_p / T_P) ),
```

a smooth version of "the hardest negative must score below the hardest
positive". The *sample-wise* term applies it to each instance (its classes),
the *class-wise* term to each class (its instances in the batch); the loss is
the mean of the first over instances plus the mean of the second over
classes. Defaults T_P = 4, T_N = 1. A list without positives is left out of
its mean; a list without negatives has l = softplus(-inf) = 0 and counts in
the mean (the authors' implementation). The margin-bias variant fixes
T_P = T_N = 1 and adds a margin epsilon inside the softplus.

Every function runs eagerly, inside `tf.function` and under XLA (masks, not
gathers, so shapes stay static), and gives finite values and gradients
whatever the logits of padded or unselected entries.
"""

from typing import Tuple

import tensorflow as tf



def masked_logsumexp(x: tf.Tensor, mask: tf.Tensor, axis: int
                     ) -> Tuple[tf.Tensor, tf.Tensor]:
  """logsumexp of the entries of x where mask is True, along `axis`.

  ```
  value = log sum_{j: mask_j} exp(x_j)
  ```

  computed around the largest selected entry. No gradient flows through the
  unselected entries, however large they are (no 0 * inf = NaN).

  Args:
    x: [m, n] values (any rank; `mask` has the same shape).
    mask: bool, shape of `x`.
    axis: the axis reduced.

  Returns:
    (value, non_empty), both of the shape of `x` without `axis`: value is 0
    where no entry is selected (the caller decides what an empty set means),
    non_empty (bool) whether one is.

  Example:

  >>> value, non_empty = masked_logsumexp(
  ...     tf.constant([[0., 0., 1e30], [1., 2., 3.]]),
  ...     tf.constant([[True, True, False], [False, False, False]]), axis=1)
  >>> value.numpy(), non_empty.numpy()  # log 2; the empty row gives 0
  (array([0.6931472, 0.       ], dtype=float32), array([ True, False]))
  """
  x = tf.convert_to_tensor(x)
  non_empty = tf.reduce_any(mask, axis=axis)
  lowest = tf.fill(tf.shape(x), x.dtype.min)
  peak = tf.reduce_max(tf.where(mask, x, lowest), axis=axis, keepdims=True)
  peak = tf.stop_gradient(tf.where(
      tf.expand_dims(non_empty, axis), peak, tf.zeros_like(peak)))
  shifted = tf.where(mask, x - peak, tf.zeros_like(x))
  total = tf.reduce_sum(tf.where(mask, tf.exp(shifted), tf.zeros_like(x)),
                        axis=axis)
  total = tf.where(non_empty, total, tf.ones_like(total))
  return tf.math.log(total) + tf.squeeze(peak, axis), non_empty


def two_way_terms(labels: tf.Tensor, logits: tf.Tensor, axis: int,
                  positive_temperature: float = 4.0,
                  negative_temperature: float = 1.0,
                  margin: float = 0.0) -> Tuple[tf.Tensor, tf.Tensor]:
  """Per-list Two-way terms along `axis` (1: per instance, 0: per class).

  ```
  l(P, N) = softplus(T_N * logsumexp_N(x / T_N) + T_P * logsumexp_P(-x / T_P)
                     + margin)
  ```

  for the positives P (label > 0) and negatives N (label = 0) of each list.

  Args:
    labels: [batch_size, num_classes] multi-hot; negative entries are padding.
    logits: [batch_size, num_classes] scores x.
    axis: the axis the lists run along.
    positive_temperature: T_P.
    negative_temperature: T_N.
    margin: epsilon added inside the softplus.

  Returns:
    (losses, has_positive), [batch_size] for axis 1, [num_classes] for axis
    0: the softplus term of every list (0 for a list without negatives or
    without positives) and whether it has a positive.

  Example:

  >>> losses, has_positive = two_way_terms(
  ...     [[1., 0., 0.]], [[2., 0., -1.]], axis=1)
  >>> losses.numpy()  # softplus(log(1 + e^-1) - 2)
  array([0.16984601], dtype=float32)
  """
  logits = tf.convert_to_tensor(logits)
  labels = tf.cast(labels, logits.dtype)
  positive = labels > 0
  negative = tf.equal(labels, 0)
  pos_lse, has_positive = masked_logsumexp(
      -logits / positive_temperature, positive, axis)
  neg_lse, has_negative = masked_logsumexp(
      logits / negative_temperature, negative, axis)
  z = (negative_temperature * neg_lse + positive_temperature * pos_lse +
       margin)
  both = tf.logical_and(has_positive, has_negative)
  # softplus(-inf) = 0 for a list without negatives; the where keeps the
  # gradient of the unused branch at 0.
  losses = tf.where(both, tf.nn.softplus(tf.where(both, z, tf.zeros_like(z))),
                    tf.zeros_like(z))
  return losses, has_positive


def mean_over(values: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
  """Mean of `values` where `keep`; 0 when nothing is kept."""
  keep = tf.cast(keep, values.dtype)
  return tf.math.divide_no_nan(tf.reduce_sum(values * keep),
                               tf.reduce_sum(keep))


def two_way_loss(labels: tf.Tensor, logits: tf.Tensor,
                 positive_temperature: float = 4.0,
                 negative_temperature: float = 1.0,
                 margin: float = 0.0) -> tf.Tensor:
  """The Two-way loss of a batch: sample-wise mean + class-wise mean.

  ```
  loss = mean_{b: P_b != {}} l(P_b, N_b) + mean_{c: P_c != {}} l(P_c, N_c)
  ```

  with `l` of `two_way_terms`, (P_b, N_b) the positives and negatives among
  the classes of instance b and (P_c, N_c) among the instances of class c.

  Args:
    labels: [batch_size, num_classes] multi-hot; negative entries are padding.
    logits: [batch_size, num_classes].
    positive_temperature: T_P (paper: 4).
    negative_temperature: T_N (paper: 1).
    margin: epsilon inside the softplus (the margin-bias variant).

  Returns:
    A float32 scalar: mean over instances with a positive of the sample-wise
    term plus mean over classes with a positive in the batch of the
    class-wise term (0 for a batch without any positive).

  Example:

  >>> # Sample term 0.1698; class 0 has no negative (0), 1 and 2 no positive.
  >>> two_way_loss([[1., 0., 0.]], [[2., 0., -1.]]).numpy()
  0.16984601
  """
  logits = tf.cast(logits, tf.float32)
  labels = tf.convert_to_tensor(labels, tf.float32)
  kwargs = dict(positive_temperature=positive_temperature,
                negative_temperature=negative_temperature, margin=margin)
  per_sample, sample_kept = two_way_terms(labels, logits, axis=1, **kwargs)
  per_class, class_kept = two_way_terms(labels, logits, axis=0, **kwargs)
  return mean_over(per_sample, sample_kept) + mean_over(per_class,
                                                          class_kept)
