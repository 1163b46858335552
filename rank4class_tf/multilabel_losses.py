r"""Multi-label losses: the Two-way loss and MulCon's label-level contrastive loss.

With several relevant classes per instance the labels are multi-hot
[batch_size, num_classes] (1 = relevant, 0 = not, negative = padding, the
TF-Ranking convention). TF-Ranking has no loss that compares the relevant
classes of a *class* across the instances of a batch, which both losses here
need, so they are ours.

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
num_classes, dim], the anchors are the embeddings z_{b,c} of relevant labels
(y_{b,c} = 1); the positives of an anchor are the embeddings of the same class
in the other instances where it is relevant; the contrast set is every other
anchor of the batch:

```
  LLCL = mean_{anchors a with P(a) != {}}  -1/|P(a)| sum_{p in P(a)}
         log( exp(z_a . z_p / tau) / sum_{q in A \ {a}} exp(z_a . z_q / tau) ),
```

tau = 0.2 (MulCon's value). MulCon trains with BCE + gamma * LLCL.
"""

from typing import Any, Dict, Tuple

import tensorflow as tf


def _masked_logsumexp(x: tf.Tensor, mask: tf.Tensor, axis: int
                     ) -> Tuple[tf.Tensor, tf.Tensor]:
  """logsumexp of the entries of x where mask is True, along `axis`.

  Returns (value, non_empty): value is 0 where no entry is selected (the
  caller decides what an empty set means), and no gradient flows through
  the unselected entries, however large they are (no 0 * inf = NaN).
  """
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

  Args:
    labels: [batch_size, num_classes] multi-hot; negative entries are padding.
    logits: [batch_size, num_classes] scores x.
    axis: the axis the lists run along.
    positive_temperature: T_P.
    negative_temperature: T_N.
    margin: epsilon added inside the softplus.

  Returns:
    (losses, has_positive): the softplus term of every list (0 for a list
    without negatives or without positives) and whether it has a positive.
  """
  labels = tf.cast(labels, logits.dtype)
  positive = labels > 0
  negative = tf.equal(labels, 0)
  pos_lse, has_positive = _masked_logsumexp(
      -logits / positive_temperature, positive, axis)
  neg_lse, has_negative = _masked_logsumexp(
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
  keep = tf.cast(keep, values.dtype)
  return tf.math.divide_no_nan(tf.reduce_sum(values * keep),
                               tf.reduce_sum(keep))


def two_way_loss(labels: tf.Tensor, logits: tf.Tensor,
                 positive_temperature: float = 4.0,
                 negative_temperature: float = 1.0,
                 margin: float = 0.0) -> tf.Tensor:
  """The Two-way loss of a batch: sample-wise mean + class-wise mean.

  Args:
    labels: [batch_size, num_classes] multi-hot; negative entries are padding.
    logits: [batch_size, num_classes].
    positive_temperature: T_P (paper: 4).
    negative_temperature: T_N (paper: 1).
    margin: epsilon inside the softplus (the margin-bias variant).

  Returns:
    A scalar: mean over instances with a positive of the sample-wise term
    plus mean over classes with a positive in the batch of the class-wise
    term (0 for a batch without any positive).
  """
  logits = tf.cast(logits, tf.float32)
  labels = tf.convert_to_tensor(labels, tf.float32)
  kwargs = dict(positive_temperature=positive_temperature,
                negative_temperature=negative_temperature, margin=margin)
  per_sample, sample_kept = two_way_terms(labels, logits, axis=1, **kwargs)
  per_class, class_kept = two_way_terms(labels, logits, axis=0, **kwargs)
  return _mean_over(per_sample, sample_kept) + _mean_over(per_class,
                                                          class_kept)


def label_contrastive_loss(labels: tf.Tensor, projections: tf.Tensor,
                           temperature: float = 0.2) -> tf.Tensor:
  """MulCon's label-level contrastive loss (eq. 8), see the module doc.

  Args:
    labels: [batch_size, num_classes] multi-hot (> 0: relevant); negative
      entries are padding.
    projections: [batch_size, num_classes, dim] L2-normalised label-level
      projections z.
    temperature: tau.

  Returns:
    A scalar: the mean over anchors that have a positive (0 when none has).

  The work is O((batch_size * num_classes)^2 * dim): every pair of label
  embeddings of the batch, as in the paper; the entries of irrelevant labels
  are masked out rather than gathered, so shapes stay static under XLA.
  """
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
  log_norm, _ = _masked_logsumexp(logits, contrast, axis=1)  # [n]
  log_prob = logits - log_norm[:, tf.newaxis]
  positive_f = tf.cast(positive, tf.float32)
  num_positive = tf.reduce_sum(positive_f, axis=1)
  per_anchor = -tf.math.divide_no_nan(
      tf.reduce_sum(tf.where(positive, log_prob, tf.zeros_like(log_prob)),
                    axis=1), num_positive)
  return _mean_over(per_anchor, num_positive > 0)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class TwoWayLoss(tf.keras.losses.Loss):
  """Two-way multi-label loss (Kobayashi, CVPR 2023); see the module doc.

  `y_true` [batch_size, num_classes] multi-hot, `y_pred` the logits. The
  value is already the batch's (a class-wise term spans the instances), so
  the Keras reduction sees one scalar; under a distribution strategy each
  replica's batch gives its own class-wise term.

  Example:

  >>> loss = TwoWayLoss()
  >>> loss([[1., 0., 0.]], [[2., 0., -1.]])  # sample term + class terms

  Args:
    positive_temperature: T_P.
    negative_temperature: T_N.
    margin: epsilon inside the softplus.
  """

  def __init__(self,
               positive_temperature: float = 4.0,
               negative_temperature: float = 1.0,
               margin: float = 0.0,
               reduction: str = tf.keras.losses.Reduction.AUTO,
               name: str = "two_way"):
    super().__init__(reduction=reduction, name=name)
    self.positive_temperature = float(positive_temperature)
    self.negative_temperature = float(negative_temperature)
    self.margin = float(margin)
    for key in ("positive_temperature", "negative_temperature"):
      if not getattr(self, key) > 0:
        raise ValueError(f"{key} must be > 0, got {getattr(self, key)}.")

  def call(self, y_true, y_pred):
    return two_way_loss(y_true, y_pred, self.positive_temperature,
                        self.negative_temperature, self.margin)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"positive_temperature": self.positive_temperature,
                   "negative_temperature": self.negative_temperature,
                   "margin": self.margin})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class TwoWayMarginLoss(tf.keras.losses.Loss):
  """The margin-bias variant: T_P = T_N = 1 and a margin epsilon (default 1).

  softplus(logsumexp_N(x) + logsumexp_P(-x) + epsilon), sample-wise and
  class-wise as `TwoWayLoss`: the comparison point for its temperatures.

  Args:
    epsilon: the margin inside the softplus.
  """

  def __init__(self, epsilon: float = 1.0,
               reduction: str = tf.keras.losses.Reduction.AUTO,
               name: str = "two_way_margin"):
    super().__init__(reduction=reduction, name=name)
    self.epsilon = float(epsilon)

  def call(self, y_true, y_pred):
    return two_way_loss(y_true, y_pred, 1.0, 1.0, self.epsilon)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"epsilon": self.epsilon})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class LabelContrastiveLoss(tf.keras.losses.Loss):
  """MulCon's label-level contrastive loss; `y_pred` are the projections.

  `y_true` [batch_size, num_classes] multi-hot, `y_pred` [batch_size,
  num_classes, dim] L2-normalised projections.

  Args:
    temperature: tau (MulCon: 0.2).
  """

  def __init__(self, temperature: float = 0.2,
               reduction: str = tf.keras.losses.Reduction.AUTO,
               name: str = "label_contrastive"):
    super().__init__(reduction=reduction, name=name)
    if not temperature > 0:
      raise ValueError(f"temperature must be > 0, got {temperature}.")
    self.temperature = float(temperature)

  def call(self, y_true, y_pred):
    return label_contrastive_loss(y_true, y_pred, self.temperature)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"temperature": self.temperature})
    return config
