r"""Ranking losses in O(batch_size x num_classes) for classification labels.

TF-Ranking writes its pairwise and ApproxNDCG losses for short lists with
graded labels: they build [batch_size, list_size, list_size] tensors. In
classification the list is the whole class set, so one step at 1,000 classes
costs seconds and 10,000 classes do not fit in memory. With few relevant
classes per list only a few rows of those tensors matter:

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

  where the scores are already divided by the temperature;

* Gumbel-ApproxNDCG is ApproxNDCG on `sample_size` Gumbel-perturbed copies of
  every list; the copies are drawn by TF-Ranking's own `GumbelSampler`, so the
  same seed gives the same noise and the same value as TF-Ranking.

The pure functions below compute these closed forms; the Keras classes at the
end subclass TF-Ranking's Keras losses and only replace `call`, so weight
normalisation (`normalize_weights`), temperature (`get_logits`) and the Keras
reduction are TF-Ranking's own code, and values and gradients equal
TF-Ranking's to float32 rounding (see tests/test_fast_losses.py).

There is no branch between a one-hot path and a TF-Ranking fallback: one exact
formula serves every label type and adapts its cost inside the graph. `call`
counts the relevant classes of each list, `k = max over lists of #{j valid:
y_j > 0}` (a tensor), takes the k largest labels with `tf.math.top_k(labels,
k)` and builds [batch_size, k, n] pair / rank tensors:

* one-hot labels (k = 1): O(batch_size * n), the closed forms above;
* binary multi-hot or graded labels: O(batch_size * n * k), still exact (the
  k-th slot of a list with fewer relevant classes is masked); with k = n it
  costs what TF-Ranking costs.

So no Python branching on tensor values, and one trace serves one-hot and
multi-hot batches. A `tf.cond(k <= 1, one_hot_path, tfr_path)` was measured
and dropped: on CPU (batch 64) the cond made a loss + gradient step 7% slower
at n = 1,000 and 53% slower at n = 10,000 than this single path, and under XLA
it kept TF-Ranking's O(n^2) buffers (103 ms per step at n = 1,000, out of
memory at 10,000).

XLA (`jit_compile=True`, TPUs) needs k known when compiling. With the
default `max_relevant_classes=None`, k is read from the labels, so XLA
specialises on the label values and recompiles for every new batch (0.4-0.7 s
each at n = 1,000). Pass `max_relevant_classes=K` (1 for multiclass labels)
to fix k = K when building: shapes are then static and XLA compiles once.
Lists must then have at most K relevant classes; relevant classes beyond a
list's K largest labels are ignored, unchecked. Keras and this package's
pipeline do not use XLA on CPU/GPU by default.
Lambda weights and ragged inputs are not covered: the constructors refuse them
(use TF-Ranking's classes for those).

Shapes: `labels` / `y_true` and `logits` / `y_pred` are [batch_size,
list_size] (list_size = num_classes); negative labels mark padding and are
ignored, as in TF-Ranking.
"""

from typing import Any, Callable, Dict, Optional

import tensorflow as tf
import tensorflow_ranking as tfr

PairLossFn = Callable[[tf.Tensor], tf.Tensor]

# TF-Ranking pushes padded entries this far below the list's minimum logit in
# ApproxNDCG (losses_impl.ApproxNDCGLoss); sigmoid(-1e3) is 0 in float32.
_PADDING_LOGIT_OFFSET = 1e3


# ---------------------------------------------------------------------------
# Pairwise losses l(d) of a pair with y_i > y_j and d = s_i - s_j, written as
# TF-Ranking's losses_impl writes them (same ops, so same rounding).
# ---------------------------------------------------------------------------


def pairwise_logistic(d: tf.Tensor) -> tf.Tensor:
  """l(d) = log(1 + exp(-d)), computed as relu(-d) + log1p(exp(-|d|))."""
  return tf.nn.relu(-d) + tf.math.log1p(tf.exp(-tf.abs(d)))


def pairwise_hinge(d: tf.Tensor) -> tf.Tensor:
  """l(d) = max(0, 1 - d)."""
  return tf.nn.relu(1. - d)


def pairwise_soft_zero_one(d: tf.Tensor) -> tf.Tensor:
  """l(d) = sigmoid(-d), computed as TF-Ranking does on each side of 0."""
  return tf.where(tf.greater(d, 0.), 1. - tf.sigmoid(d), tf.sigmoid(-d))


# ---------------------------------------------------------------------------
# Counting relevant classes.
# ---------------------------------------------------------------------------


def relevant_mask(labels: tf.Tensor) -> tf.Tensor:
  """Boolean [batch_size, list_size]: valid entries with label > 0."""
  return tf.greater(labels, 0.)


def max_relevant(labels: tf.Tensor) -> tf.Tensor:
  """Largest number of relevant classes in a list of the batch (int32 scalar).

  1 for one-hot labels; 0 for a batch without relevant classes.
  """
  counts = tf.reduce_sum(tf.cast(relevant_mask(labels), tf.int32), axis=-1)
  return tf.reduce_max(tf.concat([counts, [0]], axis=0))


def _top_relevant(labels: tf.Tensor, k: tf.Tensor):
  """The k largest labels of each list, best first, and their positions.

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


# ---------------------------------------------------------------------------
# Pairwise losses.
# ---------------------------------------------------------------------------


def pairwise_row_losses(labels: tf.Tensor, logits: tf.Tensor,
                        pair_loss: PairLossFn = pairwise_logistic,
                        k: Optional[tf.Tensor] = None) -> tf.Tensor:
  r"""Pairwise loss rows for any labels in O(n * k), k relevant classes.

  ```
  rows[i] = sum_{j valid} I[y_i > y_j] l(s_i - s_j)
  ```

  Only relevant i (y_i > 0) have pairs, so the rows are computed for the k
  largest labels of each list ([batch_size, k, list_size] pairs) and scattered
  back. With one-hot labels (k = 1, true class c) this is O(n):
  `rows[c] = sum_{j valid, j != c} l(s_c - s_j)`. Exact for binary multi-hot
  and graded labels too.

  Args:
    labels: [batch_size, list_size] labels; negative marks padding.
    logits: [batch_size, list_size] scores, already divided by the temperature.
    pair_loss: l(d), e.g. `pairwise_logistic`.
    k: int (static) or int32 scalar tensor >= the number of relevant classes
      of every list (default `max_relevant(labels)`).

  Returns:
    [batch_size, list_size] per-class losses, non-zero only at relevant
    classes.
  """
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
                k: Optional[tf.Tensor] = None) -> tf.Tensor:
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
  class has loss 0 (TF-Ranking gives it loss weight 0).

  Args:
    labels: [batch_size, list_size] labels; negative marks padding.
    logits: [batch_size, list_size] scores, already divided by the temperature.
    k: int (static) or int32 scalar tensor >= the number of relevant classes
      of every list (default `max_relevant(labels)`).

  Returns:
    [batch_size, 1] losses, as TF-Ranking's `ApproxNDCGLoss.call` returns
    them.
  """
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


# ---------------------------------------------------------------------------
# Keras losses: TF-Ranking's classes with `call` replaced.
# ---------------------------------------------------------------------------


def _check_supported(lambda_weight, ragged) -> None:
  if lambda_weight is not None:
    raise ValueError("Fast ranking losses take no lambda_weight; use "
                     "TF-Ranking's class for lambda-weighted losses.")
  if ragged:
    raise ValueError("Fast ranking losses take dense [batch_size, num_classes] "
                     "tensors; use TF-Ranking's class for ragged=True.")


def pairwise_call(labels: tf.Tensor, logits: tf.Tensor, pair_loss: PairLossFn,
                  max_relevant_classes: Optional[int] = None) -> tf.Tensor:
  """TF-Ranking's `_PairwiseLoss.call` output, [batch_size, list_size].

  `max_relevant_classes` fixes k (static shapes, for XLA); None reads it from
  the labels.
  """
  return pairwise_row_losses(tf.cast(labels, logits.dtype), logits, pair_loss,
                             k=max_relevant_classes)


def approx_ndcg_call(labels: tf.Tensor, logits: tf.Tensor,
                     max_relevant_classes: Optional[int] = None) -> tf.Tensor:
  """TF-Ranking's `ApproxNDCGLoss.call` output, [batch_size, 1].

  `max_relevant_classes` fixes k (static shapes, for XLA); None reads it from
  the labels.
  """
  return approx_ndcg(tf.cast(labels, logits.dtype), logits,
                     k=max_relevant_classes)


def _check_max_relevant_classes(value: Optional[int]) -> Optional[int]:
  if value is None:
    return None
  if int(value) != value or value < 1:
    raise ValueError(f"max_relevant_classes={value!r} must be None or an "
                     "integer >= 1.")
  return int(value)


class _FastPairwiseMixin:
  """Replaces `_PairwiseLoss.call`; `_pair_loss` is set by each subclass."""

  _pair_loss: PairLossFn

  def call(self, y_true, y_pred):
    """Per-class pairwise losses [batch_size, num_classes] (see module doc)."""
    logits = self._loss.get_logits(tf.convert_to_tensor(y_pred))
    return pairwise_call(y_true, logits, type(self)._pair_loss,
                         self.max_relevant_classes)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"max_relevant_classes": self.max_relevant_classes})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastPairwiseLogisticLoss(_FastPairwiseMixin,
                               tfr.keras.losses.PairwiseLogisticLoss):
  r"""TF-Ranking's `PairwiseLogisticLoss` in O(n * k) for k relevant classes.

  ```
  loss = sum_i sum_j I[y_i > y_j] log(1 + exp(-(s_i - s_j) / temperature))
  ```

  With one-hot labels (true class c) only the pairs (c, j) remain:
  `sum_{j != c} log(1 + exp(-(s_c - s_j) / T))`, O(num_classes) per instance
  instead of TF-Ranking's [batch_size, n, n] tensors. Weights, temperature and
  reduction are TF-Ranking's: the Keras value with the default reduction is
  the sum above, weighted per list, divided by batch_size * num_classes.

  Example:

  >>> loss = FastPairwiseLogisticLoss()
  >>> loss([[1., 0.]], [[0.6, 0.8]]).numpy()  # log(1 + e^0.2) / 2
  0.39906943

  Args:
    reduction: Keras reduction.
    name: loss name.
    lambda_weight: must be None (use TF-Ranking's class otherwise).
    temperature: scores are divided by it.
    ragged: must be False.
    max_relevant_classes: None: k read from the labels of each batch; K >= 1:
      k fixed to K when building (static shapes, for XLA; lists must have at
      most K relevant classes).
  """

  _pair_loss = staticmethod(pairwise_logistic)

  def __init__(self, reduction=tf.keras.losses.Reduction.AUTO,
               name: Optional[str] = None, lambda_weight=None,
               temperature: float = 1.0, ragged: bool = False,
               max_relevant_classes: Optional[int] = None):
    _check_supported(lambda_weight, ragged)
    super().__init__(reduction=reduction, name=name, temperature=temperature)
    self.max_relevant_classes = _check_max_relevant_classes(
        max_relevant_classes)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastPairwiseHingeLoss(_FastPairwiseMixin,
                            tfr.keras.losses.PairwiseHingeLoss):
  r"""TF-Ranking's `PairwiseHingeLoss` in O(n * k) for k relevant classes.

  ```
  loss = sum_i sum_j I[y_i > y_j] max(0, 1 - (s_i - s_j) / temperature)
  ```

  See `FastPairwiseLogisticLoss` for the arguments.

  Example:

  >>> FastPairwiseHingeLoss()([[1., 0.]], [[0.6, 0.8]]).numpy()  # 1.2 / 2
  0.6
  """

  _pair_loss = staticmethod(pairwise_hinge)

  def __init__(self, reduction=tf.keras.losses.Reduction.AUTO,
               name: Optional[str] = None, lambda_weight=None,
               temperature: float = 1.0, ragged: bool = False,
               max_relevant_classes: Optional[int] = None):
    _check_supported(lambda_weight, ragged)
    super().__init__(reduction=reduction, name=name, temperature=temperature)
    self.max_relevant_classes = _check_max_relevant_classes(
        max_relevant_classes)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastPairwiseSoftZeroOneLoss(_FastPairwiseMixin,
                                  tfr.keras.losses.PairwiseSoftZeroOneLoss):
  r"""TF-Ranking's `PairwiseSoftZeroOneLoss` in O(n * k), k relevant classes.

  ```
  loss = sum_i sum_j I[y_i > y_j] sigmoid(-(s_i - s_j) / temperature)
  ```

  See `FastPairwiseLogisticLoss` for the arguments.

  Example:

  >>> FastPairwiseSoftZeroOneLoss()([[1., 0.]], [[0.6, 0.8]]).numpy()
  0.274917
  """

  _pair_loss = staticmethod(pairwise_soft_zero_one)

  def __init__(self, reduction=tf.keras.losses.Reduction.AUTO,
               name: Optional[str] = None, lambda_weight=None,
               temperature: float = 1.0, ragged: bool = False,
               max_relevant_classes: Optional[int] = None):
    _check_supported(lambda_weight, ragged)
    super().__init__(reduction=reduction, name=name, temperature=temperature)
    self.max_relevant_classes = _check_max_relevant_classes(
        max_relevant_classes)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastApproxNDCGLoss(tfr.keras.losses.ApproxNDCGLoss):
  r"""TF-Ranking's `ApproxNDCGLoss` in O(n * k) for k relevant classes.

  ```
  loss = -1/IDCG * sum_i (2^y_i - 1) / log2(1 + rank_i)
  rank_i = 1 + sum_{j != i} sigmoid((s_j - s_i) / temperature)
  ```

  With one-hot labels (true class c): `loss = -1 / log2(1 + rank_c)`, one
  [batch_size, num_classes] sigmoid instead of TF-Ranking's [batch_size, n, n]
  one. Weights and reduction are TF-Ranking's (list weight = weight of the
  relevant classes, lists without relevant class weigh 0).

  Example:

  >>> FastApproxNDCGLoss()([[1., 0.]], [[0.6, 0.8]]).numpy()
  -0.655107

  Args:
    reduction: Keras reduction.
    name: loss name.
    lambda_weight: must be None (use TF-Ranking's class otherwise).
    temperature: scores are divided by it (TF-Ranking's default 0.1).
    ragged: must be False.
    max_relevant_classes: see `FastPairwiseLogisticLoss`.
  """

  def __init__(self, reduction=tf.keras.losses.Reduction.AUTO,
               name: Optional[str] = None, lambda_weight=None,
               temperature: float = 0.1, ragged: bool = False,
               max_relevant_classes: Optional[int] = None):
    _check_supported(lambda_weight, ragged)
    super().__init__(reduction=reduction, name=name, temperature=temperature)
    self.max_relevant_classes = _check_max_relevant_classes(
        max_relevant_classes)

  def call(self, y_true, y_pred):
    """Per-list losses [batch_size, 1] (see module doc)."""
    logits = self._loss.get_logits(tf.convert_to_tensor(y_pred))
    return approx_ndcg_call(y_true, logits, self.max_relevant_classes)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"max_relevant_classes": self.max_relevant_classes})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastGumbelApproxNDCGLoss(tfr.keras.losses.GumbelApproxNDCGLoss):
  r"""TF-Ranking's `GumbelApproxNDCGLoss` in O(sample_size * n * k).

  `__call__` is TF-Ranking's: its `GumbelSampler` tiles every list
  `sample_size` times, perturbs the scores with Gumbel noise drawn by
  `tf.random.uniform([batch_size, sample_size, n], seed=seed)` and feeds
  `log softmax(perturbed / gumbel_temperature)` to ApproxNDCG. Only the
  ApproxNDCG step is replaced (by `FastApproxNDCGLoss`'s), so the same global
  and op seeds give TF-Ranking's noise and value.

  Example:

  >>> tf.random.set_seed(42)
  >>> FastGumbelApproxNDCGLoss(seed=42)([[1., 0.]], [[0.6, 0.8]]).numpy()
  -0.8160851

  Args:
    reduction: Keras reduction.
    name: loss name.
    lambda_weight: must be None.
    temperature: ApproxNDCG temperature.
    sample_size: Gumbel samples per list.
    gumbel_temperature: temperature of the perturbed softmax.
    seed: op seed of the Gumbel noise.
    ragged: must be False.
    max_relevant_classes: see `FastPairwiseLogisticLoss`.
  """

  def __init__(self, reduction=tf.keras.losses.Reduction.AUTO,
               name: Optional[str] = None, lambda_weight=None,
               temperature: float = 0.1, sample_size: int = 8,
               gumbel_temperature: float = 1.0, seed: Optional[int] = None,
               ragged: bool = False,
               max_relevant_classes: Optional[int] = None):
    _check_supported(lambda_weight, ragged)
    super().__init__(reduction=reduction, name=name, temperature=temperature,
                     sample_size=sample_size,
                     gumbel_temperature=gumbel_temperature, seed=seed)
    self.max_relevant_classes = _check_max_relevant_classes(
        max_relevant_classes)

  def call(self, y_true, y_pred):
    """Per-list losses [batch_size * sample_size, 1] (see module doc)."""
    logits = self._loss.get_logits(tf.convert_to_tensor(y_pred))
    return approx_ndcg_call(y_true, logits, self.max_relevant_classes)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"max_relevant_classes": self.max_relevant_classes})
    return config

