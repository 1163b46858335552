"""Ranking losses over the class list, looked up by name.

Every loss takes `y_true` [batch_size, num_classes] (one-hot for multiclass,
graded or multi-hot otherwise; negative entries are padding) and `y_pred`
[batch_size, num_classes] scores, as TF-Ranking's Keras losses do. The names
map to TF-Ranking's classes, except:

* `pairwise_logistic`, `approx_ndcg` and `gumbel_approx_ndcg` map to the
  subclasses in `fast_losses`, which equal TF-Ranking's values and gradients
  but cost O(batch_size * num_classes * k) for k relevant classes per list
  (O(batch_size * num_classes) for one-hot labels) instead of TF-Ranking's
  O(batch_size * num_classes^2);
* `rescaled_mse` (Hui & Belkin 2021) is ours because TF-Ranking has no
  rescaled square loss;
* `two_way` and `two_way_margin` (Kobayashi 2023, multi-label) are ours, in
  `multilabel_losses`; `sigmoid_cross_entropy` is TF-Ranking's (BCE).

Example:

>>> loss = get("rescaled_mse", k=15., m=30.)
>>> float(loss([[0., 1.]], [[1., 29.]]))
8.0
"""

import dataclasses
from typing import Any, Dict, Tuple

import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import config as config_lib
from rank4class_tf import lookup
from rank4class_tf.multilabel import losses as multilabel_losses
from rank4class_tf import ops
from rank4class_tf.ranking import fast_losses
from rank4class_tf.sorting import losses as sodeep_losses


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class RescaledMeanSquaredLoss(tf.keras.losses.Loss):
  r"""Rescaled square loss (Hui & Belkin, ICLR 2021).

  ```
  loss(y, s) = 1/C * [ k * (s_c - M)^2 + sum_{i != c} s_i^2 ]
  ```

  for the true class c among C classes; their ImageNet setting is k = 15,
  M = 30. With k = M = 1 it equals the mean squared error against the one-hot
  labels (TF-Ranking's `MeanSquaredLoss`). The per-list value is reduced over
  the batch with the Keras `reduction`.

  Example:

  >>> loss = RescaledMeanSquaredLoss(k=15., m=30.)
  >>> loss([[0., 1.]], [[1., 29.]]).numpy()  # (1 + 15 * 1) / 2
  8.0
  """

  def __init__(self,
               k: float = 1.0,
               m: float = 1.0,
               reduction: str = tf.keras.losses.Reduction.AUTO,
               name: str = "rescaled_mse"):
    super().__init__(reduction=reduction, name=name)
    self.k = float(k)
    self.m = float(m)

  def call(self, y_true, y_pred):
    return ops.rescaled_mse(y_true, y_pred, k=self.k, m=self.m)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"k": self.k, "m": self.m})
    return config


# name -> (class, hyper-parameters it accepts). A plain dict, no registry.
_LOSSES: lookup.Table = {
    "softmax": (tfr.keras.losses.SoftmaxLoss, ("temperature",)),
    "pairwise_logistic": (fast_losses.FastPairwiseLogisticLoss,
                          ("temperature",)),
    "approx_ndcg": (fast_losses.FastApproxNDCGLoss, ("temperature",)),
    "gumbel_approx_ndcg": (fast_losses.FastGumbelApproxNDCGLoss,
                           ("temperature", "sample_size",
                            "gumbel_temperature", "seed")),
    "mse": (tfr.keras.losses.MeanSquaredLoss, ()),
    # Binary cross-entropy of sigmoid(s_i) against each label: the usual
    # multi-label loss, averaged over every (instance, class) entry.
    "sigmoid_cross_entropy": (tfr.keras.losses.SigmoidCrossEntropyLoss, ()),
    "rescaled_mse": (RescaledMeanSquaredLoss, ("k", "m")),
    # Multi-label (Kobayashi 2023): ours, TF-Ranking has no loss with a
    # class-wise term across the instances of a batch.
    "two_way": (multilabel_losses.TwoWayLoss,
                ("positive_temperature", "negative_temperature")),
    "two_way_margin": (multilabel_losses.TwoWayMarginLoss, ("epsilon",)),
    # SoDeep (Engilberge et al. 2019): rank losses on a learned sorter whose
    # list length d is the class count (`d` is filled in from the data).
    **sodeep_losses.LOSSES,
}

LOSS_NAMES = tuple(_LOSSES)


def hyperparameters(name: str) -> Tuple[str, ...]:
  """Names of the keyword arguments that loss `name` accepts."""
  return lookup.accepted(_LOSSES, config_lib.canonical_loss(name))


def get(name: str, **kwargs) -> tf.keras.losses.Loss:
  """Builds the loss called `name`.

  Args:
    name: one of `LOSS_NAMES` (the table above names each one's class), or
      TF-Ranking's name of it (`config.TFR_LOSS_NAMES`: `softmax_loss`,
      `approx_ndcg_loss`, `mean_squared_loss`, ...).
    **kwargs: that loss's hyper-parameters (see `hyperparameters(name)`);
      `reduction` is accepted by all. A value of None keeps the default.

  Returns:
    A `tf.keras.losses.Loss`.

  Raises:
    ValueError: for an unknown name or a hyper-parameter the loss lacks.
  """
  return lookup.build(_LOSSES, config_lib.canonical_loss(name), **kwargs)


def config_kwargs(config, num_classes: int, seed: int) -> Dict[str, Any]:
  """The settings of a `config.LossConfig` that its loss takes.

  The config names each setting as the losses' constructors do; the class
  count (SoDeep's list length `d`) and the run's seed come from the run.
  """
  settings = dataclasses.asdict(config)
  settings.update(d=num_classes, seed=seed,
                  parallel_loss=config.parallel_loss or None)
  return {k: settings[k] for k in hyperparameters(config.name)
          if k in settings}


def build(config, num_classes: int, seed: int) -> tf.keras.losses.Loss:
  """The loss of a `config.LossConfig` for lists of `num_classes` classes."""
  return get(config.name, **config_kwargs(config, num_classes, seed))
