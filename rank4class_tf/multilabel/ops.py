r"""Pure TensorFlow maths of the multi-label losses of `multilabel_losses`.

With several relevant classes per instance the labels are multi-hot
[batch_size, num_classes] (1 = relevant, 0 = not, negative = padding, the
TF-Ranking convention). Both losses here compare the relevant classes of a
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

Label-level contrastive loss (MulCon, Dao et al. 2021, eq. 8). With z the
L2-normalised projections of the label-level embeddings [batch_size,
num_classes, dim], the anchors A are the embeddings z_{b,c} of relevant labels
(y_{b,c} = 1); the positives P(a) of an anchor are the embeddings of the same
class in the other instances where it is relevant; the contrast set is every
other anchor of the batch:

```
  l(a) = -1/|P(a)| sum_{p in P(a)}
         log( exp(z_a . z_p / tau) / sum_{q in A \ {a}} exp(z_a . z_q / tau) )
         (0 when P(a) is empty)
  LLCL = (tau / tau_base) * sum_{a in A} l(a) / N
```

with N = |A|, every anchor (`normalization="mulcon"`, the default), or N =
|{a : P(a) != {}}|, the anchors that have a positive
(`normalization="positive_anchors"`). The default is MulCon's code
(`models/networks.py` `SupConLoss.loss_log`, called with `len_pos` = the
number of relevant labels of the batch: an anchor whose class is relevant in
no other instance adds 0 but counts in N), which adapts SupCon's
(Khosla et al. 2020) loss; `tau / tau_base` is SupCon's `temperature /
base_temperature` factor, 1 in MulCon (tau = tau_base = 0.2). MulCon trains
with BCE + gamma * LLCL.

Every function runs eagerly, inside `tf.function` and under XLA (masks, not
gathers, so shapes stay static), and gives finite values and gradients
whatever the logits of padded or unselected entries.
"""

from typing import Tuple

import tensorflow as tf

from rank4class_tf import lookup

# What `label_contrastive_loss` divides its sum over anchors by: every anchor
# (MulCon's code), or the anchors that have a positive.
CONTRASTIVE_NORMALIZATIONS = ("mulcon", "positive_anchors")


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


def _mean_over(values: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
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
  return _mean_over(per_sample, sample_kept) + _mean_over(per_class,
                                                          class_kept)


def check_contrastive_normalization(normalization: str) -> None:
  """Raises ValueError unless `normalization` is one of
  `CONTRASTIVE_NORMALIZATIONS`."""
  lookup.check_choice("normalization", normalization,
                      CONTRASTIVE_NORMALIZATIONS)


def label_contrastive_loss(labels: tf.Tensor, projections: tf.Tensor,
                           temperature: float = 0.2,
                           normalization: str = "mulcon",
                           base_temperature: float = 0.2) -> tf.Tensor:
  r"""MulCon's label-level contrastive loss (eq. 8), see the module doc.

  ```
  l(a) = -1/|P(a)| sum_{p in P(a)}
         log(exp(z_a . z_p / tau) / sum_{q in A \ {a}} exp(z_a . z_q / tau))
  LLCL = (tau / base_temperature) * sum_{a in A} l(a) / N
  ```

  l(a) = 0 for an anchor without positive; N = |A| for "mulcon" (MulCon's
  code), the number of anchors with a positive for "positive_anchors".

  The work is O((batch_size * num_classes)^2 * dim): every pair of label
  embeddings of the batch, as in the paper; the entries of irrelevant labels
  are masked out rather than gathered, so shapes stay static under XLA.

  Args:
    labels: [batch_size, num_classes] multi-hot (> 0: relevant); negative
      entries are padding.
    projections: [batch_size, num_classes, dim] L2-normalised label-level
      projections z.
    temperature: tau.
    normalization: "mulcon" or "positive_anchors" (see above).
    base_temperature: SupCon's base temperature; the loss is scaled by
      tau / base_temperature (MulCon: 0.2 = tau, a factor 1).

  Returns:
    A float32 scalar; 0 when N = 0 (MulCon's code would divide 0 by 0).

  Raises:
    ValueError: for an unknown `normalization`.

  Example:

  >>> # Class 0 relevant in both instances, with equal embeddings; the other
  >>> # anchor (0, 1) is orthogonal: -log(e^5 / (e^5 + e^0)) for each of the
  >>> # anchors of class 0; anchor (0, 1) has no positive.
  >>> z = tf.constant([[[1., 0.], [0., 1.]], [[1., 0.], [0., 1.]]])
  >>> label_contrastive_loss([[1., 1.], [1., 0.]], z).numpy()  # 2 * l / 3
  0.0044768653
  >>> label_contrastive_loss([[1., 1.], [1., 0.]], z,
  ...                        normalization="positive_anchors").numpy()
  0.0067152977
  """
  check_contrastive_normalization(normalization)
  z = tf.cast(projections, tf.float32)
  labels = tf.convert_to_tensor(labels, tf.float32)
  batch_size, num_classes = tf.shape(z)[0], tf.shape(z)[1]
  n = batch_size * num_classes
  flat = tf.reshape(z, [n, tf.shape(z)[2]])
  active = tf.reshape(labels > 0, [n])
  class_of = tf.tile(tf.range(num_classes), [batch_size])
  logits = tf.matmul(flat, flat, transpose_b=True) / temperature  # [n, n]
  not_self = tf.logical_not(tf.eye(n, dtype=tf.bool))
  pair = active[:, tf.newaxis] & active[tf.newaxis, :]
  contrast = pair & not_self
  positive = contrast & tf.equal(class_of[:, tf.newaxis],
                                 class_of[tf.newaxis, :])
  log_norm, _ = masked_logsumexp(logits, contrast, axis=1)  # [n]
  log_prob = logits - log_norm[:, tf.newaxis]
  positive_f = tf.cast(positive, tf.float32)
  num_positive = tf.reduce_sum(positive_f, axis=1)
  per_anchor = -(temperature / base_temperature) * tf.math.divide_no_nan(
      tf.reduce_sum(tf.where(positive, log_prob, tf.zeros_like(log_prob)),
                    axis=1), num_positive)
  if normalization == "mulcon":
    return _mean_over(per_anchor, active)
  return _mean_over(per_anchor, num_positive > 0)
