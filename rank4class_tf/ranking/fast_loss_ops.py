r"""Pure TensorFlow maths of the O(n * k) ranking losses of `fast_losses`.

TF-Ranking writes its pairwise and ApproxNDCG losses for short lists with
graded labels: they build [batch_size, list_size, list_size] tensors. In
classification the list is the whole class set (list_size = num_classes = n)
and few classes of a list are relevant, so only a few rows of those tensors
matter:

* pairwise losses sum `l(s_i - s_j)` over pairs with `y_i > y_j`; every such
  pair has a relevant `i` (label > 0), so with `k` relevant classes the pairs
  are `k` rows of n entries, and with one-hot labels the single row of the
  true class c:

  ```
  loss_c = sum_{j valid, j != c} l(s_c - s_j)
  ```

* ApproxNDCG only needs the approximate ranks of the relevant classes (the
  gain of a label-0 class is exactly 0); with one-hot labels

  ```
  rank_c = 1/2 + sum_j sigmoid(s_j - s_c)   (the j = c term is 1/2)
  loss   = -ln(2) / ln(1 + rank_c)           (= -1 / log2(1 + rank_c))
  ```

One exact formula serves every label type: with `k = max over lists of
#{j valid: y_j > 0}` (`max_relevant`), `tf.math.top_k(labels, k)` picks the
k largest labels of each list and the functions build [batch_size, k,
list_size] pair / rank tensors. That is O(batch_size * n) for one-hot labels
(k = 1) and O(batch_size * n * k) for multi-hot or graded labels, exact in
both cases (the k-th slot of a list with fewer relevant classes is masked).
k is a tensor read from the labels by default, so one graph serves every label
kind; a Python int k fixes the shapes when building (what XLA needs), and then
relevant classes beyond a list's k largest labels are ignored, unchecked.

The ops are written as TF-Ranking's `losses_impl` writes them (same ops, so
the same float32 rounding); `fast_losses` wraps them in TF-Ranking's Keras
classes, which add temperature, weights and reduction.

Shapes: `labels` and `logits` are [batch_size, list_size] (list_size =
num_classes); negative labels mark padding and are ignored, as in TF-Ranking.
Logits are already divided by the temperature.
"""

from typing import Callable, Optional, Tuple, Union

import tensorflow as tf

PairLossFn = Callable[[tf.Tensor], tf.Tensor]
# A number of relevant classes: a Python int (static shapes) or an int32
# scalar tensor.
RelevantCount = Union[int, tf.Tensor]

# TF-Ranking pushes padded entries this far below the list's minimum logit in
# ApproxNDCG (losses_impl.ApproxNDCGLoss); sigmoid(-1e3) is 0 in float32.
_PADDING_LOGIT_OFFSET = 1e3


# ---------------------------------------------------------------------------
# Pairwise losses l(d) of a pair with y_i > y_j and d = s_i - s_j.
# ---------------------------------------------------------------------------


def pairwise_logistic(d: tf.Tensor) -> tf.Tensor:
  """Logistic pair loss `l(d) = log(1 + exp(-d))`.

  Computed as `relu(-d) + log1p(exp(-|d|))`, finite for any d.

  Args:
    d: score differences `s_i - s_j` of pairs with y_i > y_j, any shape.

  Returns:
    The losses, shape of `d`.

  Example:

  >>> pairwise_logistic(tf.constant([0., 2.])).numpy()  # log 2, log(1 + e^-2)
  array([0.6931472, 0.126928 ], dtype=float32)
  """
  return tf.nn.relu(-d) + tf.math.log1p(tf.exp(-tf.abs(d)))


def pairwise_hinge(d: tf.Tensor) -> tf.Tensor:
  """Hinge pair loss `l(d) = max(0, 1 - d)`.

  Args:
    d: score differences `s_i - s_j` of pairs with y_i > y_j, any shape.

  Returns:
    The losses, shape of `d`.

  Example:

  >>> pairwise_hinge(tf.constant([-0.5, 0.25, 2.])).numpy()
  array([1.5 , 0.75, 0.  ], dtype=float32)
  """
  return tf.nn.relu(1. - d)


def pairwise_soft_zero_one(d: tf.Tensor) -> tf.Tensor:
  """Soft zero-one pair loss `l(d) = sigmoid(-d)`.

  Computed as TF-Ranking does: `1 - sigmoid(d)` for d > 0, `sigmoid(-d)`
  otherwise.

  Args:
    d: score differences `s_i - s_j` of pairs with y_i > y_j, any shape.

  Returns:
    The losses, shape of `d`.

  Example:

  >>> pairwise_soft_zero_one(tf.constant([-2., 0., 2.])).numpy()
  array([0.8807971 , 0.5       , 0.11920291], dtype=float32)
  """
  return tf.where(tf.greater(d, 0.), 1. - tf.sigmoid(d), tf.sigmoid(-d))


# ---------------------------------------------------------------------------
# Counting relevant classes.
# ---------------------------------------------------------------------------


def relevant_mask(labels: tf.Tensor) -> tf.Tensor:
  """Which entries are relevant: `labels > 0` (padding, < 0, is not).

  Args:
    labels: [batch_size, list_size] labels.

  Returns:
    [batch_size, list_size] bool.
  """
  return tf.greater(labels, 0.)


def max_relevant(labels: tf.Tensor) -> tf.Tensor:
  """Largest number of relevant classes in a list of the batch.

  `k = max_b #{j : labels[b, j] > 0}`: 1 for one-hot labels, 0 for a batch
  without relevant class.

  Args:
    labels: [batch_size, list_size] labels.

  Returns:
    int32 scalar.

  Example:

  >>> max_relevant([[0., 1., 0.], [2., 1., -1.]]).numpy()
  2
  """
  counts = tf.reduce_sum(tf.cast(relevant_mask(labels), tf.int32), axis=-1)
  return tf.reduce_max(tf.concat([counts, [0]], axis=0))


def _top_relevant(labels: tf.Tensor, k: RelevantCount
                  ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """The k largest labels of each list, best first, and their positions.

  Args:
    labels: [batch_size, list_size] labels.
    k: labels kept per list (a Python int above list_size keeps them all).

  Returns:
    (top_labels [batch_size, k], top_ids [batch_size, k] int32,
     is_relevant [batch_size, k] bool). With k = `max_relevant(labels)` every
    relevant class of every list is among them; slots beyond a list's own
    relevant classes have `is_relevant` False.
  """
  if isinstance(k, int) and labels.shape[-1] is not None:
    k = min(k, labels.shape[-1])
  top_labels, top_ids = tf.math.top_k(labels, k=k)
  return top_labels, top_ids, relevant_mask(top_labels)


def _labels_and_logits(labels, logits) -> Tuple[tf.Tensor, tf.Tensor]:
  """Tensors of logits and of labels cast to the logits' dtype."""
  logits = tf.convert_to_tensor(logits)
  return tf.cast(labels, logits.dtype), logits


# ---------------------------------------------------------------------------
# Pairwise losses.
# ---------------------------------------------------------------------------


def pairwise_row_losses(labels: tf.Tensor, logits: tf.Tensor,
                        pair_loss: PairLossFn = pairwise_logistic,
                        k: Optional[RelevantCount] = None) -> tf.Tensor:
  r"""Pairwise loss rows for any labels in O(n * k), k relevant classes.

  ```
  rows[b, i] = sum_{j valid} I[y_bi > y_bj] l(s_bi - s_bj)
  ```

  Only relevant i (y_i > 0) have pairs, so the rows are computed for the k
  largest labels of each list ([batch_size, k, list_size] pairs) and scattered
  back. With one-hot labels (k = 1, true class c) this is O(n):
  `rows[c] = sum_{j valid, j != c} l(s_c - s_j)`. Exact for binary multi-hot
  and graded labels too. This is TF-Ranking's `_PairwiseLoss.call` output:
  the Keras loss weighs and reduces these per-class values.

  Args:
    labels: [batch_size, list_size] labels; negative marks padding.
    logits: [batch_size, list_size] scores, already divided by the temperature.
    pair_loss: l(d), e.g. `pairwise_logistic`.
    k: int (static) or int32 scalar tensor >= the number of relevant classes
      of every list (default `max_relevant(labels)`).

  Returns:
    [batch_size, list_size] per-class losses, in the logits' dtype, non-zero
    only at relevant classes.

  Example:

  >>> pairwise_row_losses([[1., 0., 0.]], [[1., 1., 0.]],
  ...                     pair_loss=pairwise_hinge).numpy()  # (1 - 0) + (1 - 1)
  array([[1., 0., 0.]], dtype=float32)
  """
  labels, logits = _labels_and_logits(labels, logits)
  if k is None:
    k = max_relevant(labels)
  valid = tf.greater_equal(labels, 0.)
  top_labels, top_ids, _ = _top_relevant(labels, k)
  top_logits = tf.gather(logits, top_ids, batch_dims=1)
  # [batch_size, k, list_size]: pair (i = k-th largest label, j) counts when
  # 0 <= y_j < y_i, which also rules out slots with y_i <= 0.
  is_pair = tf.logical_and(
      tf.greater(top_labels[:, :, tf.newaxis], labels[:, tf.newaxis, :]),
      valid[:, tf.newaxis, :])
  pair_losses = pair_loss(top_logits[:, :, tf.newaxis] -
                          logits[:, tf.newaxis, :])
  top_rows = tf.reduce_sum(pair_losses * tf.cast(is_pair, logits.dtype),
                           axis=-1)
  batch_ids = tf.broadcast_to(
      tf.range(tf.shape(labels)[0])[:, tf.newaxis], tf.shape(top_ids))
  indices = tf.stack([batch_ids, top_ids], axis=-1)
  return tf.scatter_nd(indices, top_rows, tf.shape(logits))


# ---------------------------------------------------------------------------
# ApproxNDCG.
# ---------------------------------------------------------------------------


def _mask_padding_logits(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
  """Moves padded entries 1e3 below the list minimum, as TF-Ranking does."""
  floor = tf.reduce_min(logits, axis=-1, keepdims=True) - _PADDING_LOGIT_OFFSET
  return tf.where(tf.greater_equal(labels, 0.), logits,
                  floor * tf.ones_like(logits))


def approx_ndcg(labels: tf.Tensor, logits: tf.Tensor,
                k: Optional[RelevantCount] = None) -> tf.Tensor:
  r"""ApproxNDCG loss for any labels in O(n * k), k relevant classes.

  TF-Ranking's formula restricted to relevant classes (the gain
  `g(y) = 2^{y - max y} - 2^{-max y}` of a label-0 class is exactly 0):

  ```
  rank_i = 1/2 + sum_j sigmoid(s_j - s_i)                for relevant i
  DCG    = sum_{i relevant} g(y_i) / ln(1 + rank_i)
  IDCG   = sum_{r=1..k} g(y_(r)) / ln(1 + r)   (labels sorted, best first)
  loss   = -DCG / IDCG
  ```

  With one-hot labels (k = 1, true class c), whatever its grade, the gains
  cancel and `loss = -ln(2) / ln(1 + rank_c)`, O(n). A list without relevant
  class has loss 0 (TF-Ranking gives it loss weight 0). Padded entries are
  moved 1e3 below the list's minimum logit first, as TF-Ranking does.

  Args:
    labels: [batch_size, list_size] labels; negative marks padding.
    logits: [batch_size, list_size] scores, already divided by the temperature.
    k: int (static) or int32 scalar tensor >= the number of relevant classes
      of every list (default `max_relevant(labels)`).

  Returns:
    [batch_size, 1] losses in the logits' dtype, as TF-Ranking's
    `ApproxNDCGLoss.call` returns them.

  Example:

  >>> approx_ndcg([[1., 0.]], [[0., 0.]]).numpy()  # rank 1.5: -1 / log2(2.5)
  array([[-0.7564708]], dtype=float32)
  >>> approx_ndcg([[1., 0., -1.]], [[0., -100., 50.]]).numpy()  # 50: padding
  array([[-1.]], dtype=float32)
  """
  labels, logits = _labels_and_logits(labels, logits)
  if k is None:
    k = max_relevant(labels)
  logits = _mask_padding_logits(labels, logits)
  top_labels, top_ids, top_relevant = _top_relevant(labels, k)
  top_logits = tf.gather(logits, top_ids, batch_dims=1)
  ranks = tf.reduce_sum(
      tf.sigmoid(logits[:, tf.newaxis, :] - top_logits[:, :, tf.newaxis]),
      axis=-1) + .5
  max_label = tf.reduce_max(tf.maximum(labels, 0.), axis=-1, keepdims=True)
  gains = tf.pow(2., top_labels - max_label) - tf.pow(2., -max_label)
  gains = tf.where(top_relevant, gains, tf.zeros_like(gains))
  dcg = tf.reduce_sum(gains / tf.math.log1p(ranks), axis=-1, keepdims=True)
  ideal_ranks = tf.cast(tf.range(1, tf.shape(top_labels)[1] + 1),
                        logits.dtype)
  ideal_dcg = tf.reduce_sum(gains / tf.math.log1p(ideal_ranks), axis=-1,
                            keepdims=True)
  return -tf.math.divide_no_nan(dcg, ideal_dcg)
