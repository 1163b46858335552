"""Pure TensorFlow maths of rank4class_tf.

The formulas live here as plain `tf` functions; the Keras layers, losses and
metrics in the sibling modules wrap them. Everything runs inside `tf.function`,
under a distribution strategy and in a SavedModel.

Shapes are written `[batch_size, num_classes]` etc. A *list* is the set of
classes ranked for one instance; entries whose label is negative are padding
(the TF-Ranking convention) and are ignored.
"""

from typing import Optional

import tensorflow as tf


def append_one(h: tf.Tensor) -> tf.Tensor:
  """Returns h' = [h, 1], the instance vector with the bias coordinate.

  Rank4Class writes the classical classifier's logit of class i as
  s_i = c_i^T [h, 1], where c_i = W^T e_i stacks the kernel column and the bias
  of class i. Appending the constant 1 makes the bias part of the class
  embedding.

  Args:
    h: [batch_size, dim] instance encodings.

  Returns:
    [batch_size, dim + 1] tensor.
  """
  ones = tf.ones_like(h[:, :1])
  return tf.concat([h, ones], axis=-1)


def gather_class_scores(all_scores: tf.Tensor, class_ids: tf.Tensor) -> tf.Tensor:
  """Picks the scores of the listed classes.

  Args:
    all_scores: [batch_size, num_classes_in_table] scores of every class of the
      class table.
    class_ids: [batch_size, list_size] integer ids of the classes in each
      instance's list (the TF-Ranking example feature). Ids must be valid
      indices into the table.

  Returns:
    [batch_size, list_size] scores in list order.
  """
  return tf.gather(all_scores, tf.cast(class_ids, tf.int32), batch_dims=1)


def valid_mask(labels: tf.Tensor) -> tf.Tensor:
  """Boolean [batch_size, list_size] mask of non-padding entries (label >= 0)."""
  return tf.greater_equal(labels, 0.)


def rescaled_mse(labels: tf.Tensor,
                 scores: tf.Tensor,
                 k: float = 1.0,
                 m: float = 1.0) -> tf.Tensor:
  r"""Per-list rescaled square loss of Hui & Belkin (ICLR 2021).

  For a list with one-hot labels y (true class c) and scores s over C valid
  classes:

  ```
  loss(y, s) = 1/C * [ k * (s_c - M)^2 + sum_{i != c} s_i^2 ]
  ```

  Graded or multi-hot labels generalise it: every class with label > 0 gets the
  weight k and the target M * label, the others target 0 with weight 1. With
  k = M = 1 this is the plain mean squared error against the labels.

  Args:
    labels: [batch_size, num_classes] float labels; negative marks padding.
    scores: [batch_size, num_classes] float scores.
    k: weight of the squared error on relevant classes.
    m: target score of a relevant class.

  Returns:
    [batch_size] per-list losses (0 for a list with no valid entry).
  """
  labels = tf.convert_to_tensor(labels, tf.float32)
  scores = tf.cast(scores, tf.float32)
  mask = tf.cast(valid_mask(labels), tf.float32)
  relevant = tf.cast(tf.greater(labels, 0.), tf.float32) * mask
  target = m * labels * relevant
  weight = (1. + (k - 1.) * relevant) * mask
  per_entry = weight * tf.square(scores - target)
  num_valid = tf.reduce_sum(mask, axis=-1)
  return tf.math.divide_no_nan(tf.reduce_sum(per_entry, axis=-1), num_valid)


def one_hot_labels(labels: tf.Tensor, num_classes: int) -> tf.Tensor:
  """Turns integer labels [batch_size] into float one-hot [batch_size, n].

  Float labels that already have a class axis are returned as float32.
  """
  labels = tf.convert_to_tensor(labels)
  if labels.shape.rank == 1:
    return tf.one_hot(tf.cast(labels, tf.int32), num_classes, dtype=tf.float32)
  return tf.cast(labels, tf.float32)


def top_k_classes(scores: tf.Tensor, k: int,
                  class_names: Optional[tf.Tensor] = None):
  """Ranks the classes of each instance.

  Args:
    scores: [batch_size, num_classes] scores.
    k: number of classes to return; clipped to num_classes.
    class_names: optional [num_classes] string tensor.

  Returns:
    (top_scores [batch_size, k], top_ids [batch_size, k] int32,
     top_names [batch_size, k] string or None), best class first. Ties keep the
    lower class id first (`tf.math.top_k` order).
  """
  k = min(k, scores.shape[-1]) if scores.shape[-1] is not None else k
  top_scores, top_ids = tf.math.top_k(scores, k=k)
  names = None
  if class_names is not None:
    names = tf.gather(class_names, top_ids)
  return top_scores, top_ids, names


def tie_broken_scores(scores: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
  """Scores without ties that rank the classes as `scores` do.

  TF-Ranking's metrics break score ties at random, each metric on its own, so
  tied scores give numbers that change from call to call and metrics that
  disagree (Top-1 accuracy and NDCG@1 of one model). Ranking once with a fixed
  tie rule and handing every metric the result makes them repeat exactly and
  agree.

  The rule is pessimistic: among classes with equal scores the less relevant
  class (lower label) is ranked first, then the lower class id. A model
  therefore never gains from a tie: a constant score ranks the true class
  last among its ties, and Top-1 accuracy of a constant model is 0. This is
  also the rank `r` for which Bruch et al.'s bound -log softmax(s)_y >= log r
  holds, since sum_j exp(s_j - s_y) counts every class tied with y.

  Args:
    scores: [batch_size, num_classes] float scores.
    labels: [batch_size, num_classes] float labels (negative: padding).

  Returns:
    [batch_size, num_classes] float32 scores `num_classes - rank`, with rank
    0 for the first class: all distinct, and in the order described above.

  Example:

  >>> tie_broken_scores([[1., 1., 0.]], [[1., 0., 0.]]).numpy()
  array([[2., 3., 1.]], dtype=float32)
  """
  scores = tf.convert_to_tensor(scores, tf.float32)
  labels = tf.convert_to_tensor(labels, tf.float32)
  # Two stable sorts: by label ascending (class id breaks its ties), then by
  # score descending, which keeps the first order among equal scores.
  by_label = tf.argsort(labels, axis=-1, stable=True)
  by_score = tf.argsort(tf.gather(scores, by_label, batch_dims=1), axis=-1,
                        direction="DESCENDING", stable=True)
  order = tf.gather(by_label, by_score, batch_dims=1)  # Class ids, best first.
  rank = tf.argsort(order, axis=-1)  # The inverse permutation.
  num_classes = tf.shape(scores)[-1]
  return tf.cast(num_classes - rank, tf.float32)


# The counter-based generator of the dropout masks, named rather than left to
# "auto_select" (which picks by device kind) so that a mask is the same
# function of its key on every device.
DROPOUT_RNG = "philox"


def dropout_key(seed, salt, step, replica=0) -> tf.Tensor:
  """The key of one dropout mask: (seed, salt) folded with step and replica.

  key = fold_in(fold_in([seed, salt], step), replica), with
  `tf.random.fold_in`'s Philox hash. A mask is a pure function of its key, so
  a run restarted at step t draws the masks of step t again: the key holds
  no generator state that a checkpoint would have to carry.

  Args:
    seed: the run's seed, an int in [0, 2**63).
    salt: the layer's salt, an int in [0, 2**63) (two layers of one model
      with different salts draw independent masks).
    step: int scalar (or tensor): the training call the mask is for.
    replica: int scalar (or tensor): the replica of a distribution strategy
      (`replica_id_in_sync_group`), so that replicas drop different units.

  Returns:
    [2] int64, a seed of the `tf.random.stateless_*` ops.
  """
  key = tf.cast(tf.stack([seed, salt]), tf.int64)
  key = tf.random.fold_in(key, tf.cast(step, tf.int64), alg=DROPOUT_RNG)
  return tf.random.fold_in(key, tf.cast(replica, tf.int64), alg=DROPOUT_RNG)


def stateless_dropout(inputs: tf.Tensor, rate: float,
                      key: tf.Tensor) -> tf.Tensor:
  """Inverted dropout whose mask is a function of `key` alone.

  y = x / (1 - rate) where u >= rate, else 0, with u ~ U[0, 1) drawn
  element-wise by `tf.random.stateless_uniform(shape(x), key)`: each entry
  is kept with probability 1 - rate and E[y] = x (Keras' `Dropout`
  scaling). The same key gives the same mask, whatever ran before.

  Args:
    inputs: float tensor of any shape.
    rate: the probability of dropping an entry, in [0, 1).
    key: [2] int seed (`dropout_key`).

  Returns:
    A tensor of inputs' shape and dtype.

  Example:

  >>> y = stateless_dropout(tf.ones([8]), 0.5, dropout_key(42, 7, step=0))
  >>> sorted(set(y.numpy().tolist())), bool(tf.reduce_all(
  ...     y == stateless_dropout(tf.ones([8]), 0.5, dropout_key(42, 7, 0))))
  ([0.0, 2.0], True)
  """
  inputs = tf.convert_to_tensor(inputs)
  if not 0.0 <= rate < 1.0:
    raise ValueError(f"`rate`={rate!r} must be in [0, 1).")
  if rate == 0.0:
    return tf.identity(inputs)
  uniform = tf.random.stateless_uniform(tf.shape(inputs), seed=key,
                                        alg=DROPOUT_RNG)
  kept = inputs * tf.cast(1.0 / (1.0 - rate), inputs.dtype)
  return tf.where(uniform >= rate, kept, tf.zeros_like(inputs))
