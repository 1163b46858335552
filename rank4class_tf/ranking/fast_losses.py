r"""Ranking losses in O(batch_size x num_classes) for classification labels.

TF-Ranking writes its pairwise and ApproxNDCG losses for short lists with
graded labels: they build [batch_size, list_size, list_size] tensors. In
classification the list is the whole class set, so one step at 1,000 classes
costs seconds and 10,000 classes do not fit in memory. The classes here
subclass TF-Ranking's Keras losses and only replace `call` by the O(n * k)
closed forms of `fast_loss_ops` (k relevant classes per list; the formulas are
in that module), so weight normalisation (`normalize_weights`), temperature
(`get_logits`) and the Keras reduction are TF-Ranking's own code, and values
and gradients equal TF-Ranking's to float32 rounding (see
tests/test_fast_losses.py):

* `FastPairwiseLogisticLoss`, `FastPairwiseHingeLoss`,
  `FastPairwiseSoftZeroOneLoss`: `fast_loss_ops.pairwise_row_losses`;
* `FastApproxNDCGLoss`: `fast_loss_ops.approx_ndcg`;
* `FastGumbelApproxNDCGLoss`: ApproxNDCG on `sample_size` Gumbel-perturbed
  copies of every list; the copies are drawn by TF-Ranking's own
  `GumbelSampler`, so the same seed gives the same noise and the same value as
  TF-Ranking.

There is no branch between a one-hot path and a TF-Ranking fallback: one exact
formula serves every label type and adapts its cost inside the graph (one-hot
labels cost O(batch_size * n), k relevant classes O(batch_size * n * k); with
k = n it costs what TF-Ranking costs). So no Python branching on tensor
values, and one trace serves one-hot and multi-hot batches. A
`tf.cond(k <= 1, one_hot_path, tfr_path)` was measured and dropped: on CPU
(batch 64) the cond made a loss + gradient step 7% slower at n = 1,000 and 53%
slower at n = 10,000 than this single path, and under XLA it kept
TF-Ranking's O(n^2) buffers (103 ms per step at n = 1,000, out of memory at
10,000).

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

Shapes: `y_true` and `y_pred` are [batch_size, list_size] (list_size =
num_classes); negative labels mark padding and are ignored, as in TF-Ranking.
"""

from typing import Any, Dict, Optional

import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf.ranking import fast_loss_ops


def _check_supported(lambda_weight, ragged) -> None:
  if lambda_weight is not None:
    raise ValueError("Fast ranking losses take no lambda_weight; use "
                     "TF-Ranking's class for lambda-weighted losses.")
  if ragged:
    raise ValueError("Fast ranking losses take dense [batch_size, num_classes] "
                     "tensors; use TF-Ranking's class for ragged=True.")


def _check_max_relevant_classes(value: Optional[int]) -> Optional[int]:
  if value is None:
    return None
  if int(value) != value or value < 1:
    raise ValueError(f"max_relevant_classes={value!r} must be None or an "
                     "integer >= 1.")
  return int(value)


def _logits(loss, y_pred) -> tf.Tensor:
  """Scores / temperature, by the TF-Ranking loss's own `get_logits`."""
  # pylint: disable-next=protected-access
  return loss._loss.get_logits(tf.convert_to_tensor(y_pred))


class _FastPairwiseLoss:
  """Base of the fast pairwise losses: replaces `_PairwiseLoss.call`.

  Mixed in before a TF-Ranking pairwise class, whose `__init__` it calls;
  `_pair_loss`, a `fast_loss_ops` pair loss l(d), is set by each subclass.
  See `FastPairwiseLogisticLoss` for the arguments.
  """

  _pair_loss: fast_loss_ops.PairLossFn

  def __init__(self, reduction=tf.keras.losses.Reduction.AUTO,
               name: Optional[str] = None, lambda_weight=None,
               temperature: float = 1.0, ragged: bool = False,
               max_relevant_classes: Optional[int] = None):
    _check_supported(lambda_weight, ragged)
    super().__init__(reduction=reduction, name=name, temperature=temperature)
    self.max_relevant_classes = _check_max_relevant_classes(
        max_relevant_classes)

  def call(self, y_true, y_pred):
    """Per-class pairwise losses [batch_size, num_classes] (see module doc)."""
    return fast_loss_ops.pairwise_row_losses(
        y_true, _logits(self, y_pred), type(self)._pair_loss,
        k=self.max_relevant_classes)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"max_relevant_classes": self.max_relevant_classes})
    return config


class _FastApproxNDCG:
  """Base of the fast ApproxNDCG losses: replaces `ApproxNDCGLoss.call`.

  Mixed in before TF-Ranking's `ApproxNDCGLoss` or `GumbelApproxNDCGLoss`;
  each subclass's `__init__` sets `max_relevant_classes`.
  """

  max_relevant_classes: Optional[int]

  def call(self, y_true, y_pred):
    """Per-list losses [num_lists, 1] (see module doc).

    num_lists is batch_size, or batch_size * sample_size after the Gumbel
    sampler of `FastGumbelApproxNDCGLoss`.
    """
    return fast_loss_ops.approx_ndcg(y_true, _logits(self, y_pred),
                                     k=self.max_relevant_classes)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"max_relevant_classes": self.max_relevant_classes})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastPairwiseLogisticLoss(_FastPairwiseLoss,
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

  _pair_loss = staticmethod(fast_loss_ops.pairwise_logistic)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastPairwiseHingeLoss(_FastPairwiseLoss,
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

  _pair_loss = staticmethod(fast_loss_ops.pairwise_hinge)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastPairwiseSoftZeroOneLoss(_FastPairwiseLoss,
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

  _pair_loss = staticmethod(fast_loss_ops.pairwise_soft_zero_one)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastApproxNDCGLoss(_FastApproxNDCG, tfr.keras.losses.ApproxNDCGLoss):
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


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class FastGumbelApproxNDCGLoss(_FastApproxNDCG,
                               tfr.keras.losses.GumbelApproxNDCGLoss):
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
