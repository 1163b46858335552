"""Rank-based Keras losses on a SoDeep sorter, looked up by name.

Every loss ranks the scores of each group with a sorter f (a shipped trained
`lstm`/`cnn`/`pairwise`, or `handcrafted` / `handcrafted_adaptive`; frozen by
default) and compares the ranks with the labels:

* `sodeep_spearman` (paper eq. 4): 1/d ||f(y) - rk(y*)||^2;
* `sodeep_map` (eq. 7): <f(y), y*> / <1, y*>, the mean rank of the relevant
  items;
* `sodeep_recall` (eq. 9-10): hinge between the ranks of the relevant items
  and the best-ranked irrelevant one (hard-negative triplet on ranks).

A group is a row of `y_pred` [batch_size, d] (TF-Ranking's convention: one
instance, its d classes), or with `rank_over_batch=True` a column (the paper's
setting: the batch is ranked, per class or for a regression target), which
needs d = batch_size. Lists must be full (no padding).

Each loss may add a *parallel* Keras loss with a weight,
`loss = rank_loss + parallel_weight * parallel_loss`, as the paper does for
domain alignment.

Example:

>>> loss = get("sodeep_spearman", sorter="lstm", d=10)
>>> value = loss([[0., 1., 2., 3., 4., 5., 6., 7., 8., 9.]],
...              [[.1, .2, .3, .4, .5, .6, .7, .8, .9, 1.]]).numpy()
>>> bool(value < 1e-6)   # ~0: the predicted order is the true one
True
"""

from typing import Any, Dict, Optional, Tuple, Union

import tensorflow as tf

from rank4class_tf import lookup
from rank4class_tf.sorting import ops
from rank4class_tf.sorting import sorters

LossLike = Union[None, tf.keras.losses.Loss, Dict[str, Any], str]


def _parallel_loss(loss: LossLike) -> Optional[tf.keras.losses.Loss]:
  """A Keras loss object from an object, a serialized config or a class name.

  Keras function aliases ("mae", "mse") are turned into their loss classes
  so that the result takes `sample_weight` and serializes.
  """
  if loss is None:
    return None
  if isinstance(loss, str):
    loss = _ALIASES.get(loss, loss)
  loss = tf.keras.losses.get(loss)
  if not isinstance(loss, tf.keras.losses.Loss):
    raise ValueError(f"parallel_loss={loss!r} is not a Keras loss class; "
                     f"use a loss object, a class name or one of "
                     f"{', '.join(_ALIASES)}.")
  return loss


_ALIASES = {"mae": "MeanAbsoluteError", "l1": "MeanAbsoluteError",
            "mse": "MeanSquaredError"}


class _SoDeepLoss(tf.keras.losses.Loss):
  """Shared plumbing: the sorter, the grouping and the parallel loss.

  Args:
    sorter: sorter name (`sorters.SORTER_NAMES`); lstm/cnn/pairwise load the
      shipped weights for d (`sorters.load_sorter`).
    d: group size the sorter ranks (num_classes, or batch_size with
      `rank_over_batch`).
    trainable: fine-tune the sorter's weights. A Keras loss owns no
      variables, so also attach `loss.sorter` to the model (e.g.
      `model.sodeep_sorter = loss.sorter`) before compiling; by default the
      sorter is frozen.
    rank_over_batch: rank each column of the batch instead of each row.
    parallel_loss: optional Keras loss added to the rank loss: an object, a
      serialized config, a class name ("MeanAbsoluteError") or an alias
      ("mae", "l1", "mse").
    parallel_weight: weight of the parallel loss.
    reduction: Keras reduction of the per-group losses.
    name: loss name.
  """

  def __init__(self, sorter: str = "lstm", d: int = 100,
               trainable: bool = False, rank_over_batch: bool = False,
               parallel_loss: LossLike = None, parallel_weight: float = 1.0,
               reduction: str = tf.keras.losses.Reduction.AUTO,
               name: Optional[str] = None):
    super().__init__(reduction=reduction, name=name)
    self.sorter_name = sorter
    self.d = int(d)
    self.trainable = bool(trainable)
    self.rank_over_batch = bool(rank_over_batch)
    self.parallel_weight = float(parallel_weight)
    self.parallel_loss = _parallel_loss(parallel_loss)
    self.sorter = sorters.load_sorter(sorter, self.d, trainable=trainable)

  def rank_loss(self, rank_pred: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """[groups] losses from sorter ranks and labels, both [groups, d]."""
    raise NotImplementedError

  def call(self, y_true, y_pred):
    y_true = tf.cast(y_true, tf.float32)
    y_pred = tf.cast(y_pred, tf.float32)
    if self.rank_over_batch:
      y_true, y_pred = tf.transpose(y_true), tf.transpose(y_pred)
    return self.rank_loss(self.sorter(y_pred, training=False), y_true)

  def __call__(self, y_true, y_pred, sample_weight=None):
    # Per-group values are per-column with rank_over_batch: no sample weight.
    loss = super().__call__(
        y_true, y_pred, None if self.rank_over_batch else sample_weight)
    if self.parallel_loss is None:
      return loss
    return loss + self.parallel_weight * self.parallel_loss(
        y_true, y_pred, sample_weight)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({
        "sorter": self.sorter_name,
        "d": self.d,
        "trainable": self.trainable,
        "rank_over_batch": self.rank_over_batch,
        "parallel_loss": (None if self.parallel_loss is None else
                          tf.keras.losses.serialize(self.parallel_loss)),
        "parallel_weight": self.parallel_weight,
    })
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class SoDeepSpearmanLoss(_SoDeepLoss):
  r"""Spearman loss through a sorter (paper eq. 4).

  ```
  loss(y*, y) = 1/d || f(y) - rk(y*) ||^2
  ```

  per group, with rk(y*) the average (tie-sharing) normalised ranks of the
  targets; 1 - Spearman's rho ~= 6 * loss. Inputs `y_true`, `y_pred`:
  [batch_size, d] (or [d, num_columns] with `rank_over_batch`, e.g. a
  regression's [batch_size, 1] with d = batch_size).

  Args: see `_SoDeepLoss`.
  """

  def __init__(self, name: str = "sodeep_spearman", **kwargs):
    super().__init__(name=name, **kwargs)

  def rank_loss(self, rank_pred, labels):
    return ops.spearman_loss(rank_pred, labels)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class SoDeepMAPLoss(_SoDeepLoss):
  r"""mAP surrogate through a sorter (paper eq. 7).

  ```
  loss(y*, y) = <f(y), y*> / <1, y*>
  ```

  per group: the mean normalised rank of the relevant items (multi-hot y*).
  For the paper's multi-label setting (every class ranks the batch) use
  `rank_over_batch=True` with d = batch_size; a class absent from the batch
  contributes 0.

  Args: see `_SoDeepLoss`.
  """

  def __init__(self, name: str = "sodeep_map", **kwargs):
    super().__init__(name=name, **kwargs)

  def rank_loss(self, rank_pred, labels):
    return ops.map_loss(rank_pred, labels)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class SoDeepRecallLoss(_SoDeepLoss):
  r"""Recall@K surrogate through a sorter (paper eq. 9-10).

  ```
  loss(y*, y) = mean_{p relevant} max(0, margin + f(y)_p - min_{n irrelevant} f(y)_n)
  ```

  the hard-negative triplet loss on sorter ranks.

  Args:
    margin: rank gap in normalised units (1/d = one position).
    **kwargs: see `_SoDeepLoss`.
  """

  def __init__(self, margin: float = 0.1, name: str = "sodeep_recall",
               **kwargs):
    super().__init__(name=name, **kwargs)
    self.margin = float(margin)

  def rank_loss(self, rank_pred, labels):
    return ops.recall_loss(rank_pred, labels, self.margin)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"margin": self.margin})
    return config


_COMMON = ("sorter", "d", "trainable", "rank_over_batch", "parallel_loss",
           "parallel_weight")
# name -> (class, hyper-parameters it accepts). A plain dict; the main
# `rank4class_tf.ranking.losses` table includes it.
LOSSES: lookup.Table = {
    "sodeep_spearman": (SoDeepSpearmanLoss, _COMMON),
    "sodeep_map": (SoDeepMAPLoss, _COMMON),
    "sodeep_recall": (SoDeepRecallLoss, _COMMON + ("margin",)),
}

LOSS_NAMES = tuple(LOSSES)


def hyperparameters(name: str) -> Tuple[str, ...]:
  """Names of the keyword arguments that loss `name` accepts."""
  return lookup.accepted(LOSSES, name)


def get(name: str, **kwargs) -> tf.keras.losses.Loss:
  """Builds the SoDeep loss called `name`.

  Args:
    name: one of `LOSS_NAMES`: sodeep_spearman, sodeep_map, sodeep_recall.
    **kwargs: its hyper-parameters (`hyperparameters(name)`) and `reduction`;
      a value of None keeps the default.

  Returns:
    A `tf.keras.losses.Loss`.

  Raises:
    ValueError: for an unknown name or hyper-parameter, or a sorter with no
      shipped weights for d.
  """
  return lookup.build(LOSSES, name, **kwargs)
