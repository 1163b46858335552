"""Multi-label Keras losses: the Two-way loss and its margin variant.

Thin Keras wrappers of the pure-tf functions of `multilabel_ops`, where the
formulas are written out:

* `TwoWayLoss` (Kobayashi, CVPR 2023): `multilabel_ops.two_way_loss`, the
  mean over instances of a softplus of "hardest negative minus hardest
  positive" over their classes, plus the same over classes across the
  instances of the batch (temperatures T_P = 4, T_N = 1);
* `TwoWayMarginLoss`: its margin-bias variant, T_P = T_N = 1 and a margin.

MulCon's label-level contrastive loss is `mulcon.LabelContrastiveLoss`.

Labels `y_true` are multi-hot [batch_size, num_classes] (1 = relevant, 0 =
not, negative = padding, the TF-Ranking convention). TF-Ranking has no loss
that compares the relevant classes of a *class* across the instances of a
batch, which these need, so they are ours. Each value is already the batch's
(one scalar for the Keras reduction); under a distribution strategy each
replica's batch gives its own class-wise terms.
"""

from typing import Any, Dict

import tensorflow as tf

from rank4class_tf.multilabel import ops as multilabel_ops


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class TwoWayLoss(tf.keras.losses.Loss):
  """Two-way multi-label loss (Kobayashi, CVPR 2023).

  ```
  l(P, N) = softplus(T_N * logsumexp_N(x / T_N) + T_P * logsumexp_P(-x / T_P))
  loss = mean over instances of l(their classes)
       + mean over classes of l(their instances in the batch)
  ```

  (`multilabel_ops.two_way_loss`; lists without a positive are left out of
  their mean). `y_true` [batch_size, num_classes] multi-hot, `y_pred` the
  logits [batch_size, num_classes]. The value is already the batch's (a
  class-wise term spans the instances), so the Keras reduction sees one
  scalar; under a distribution strategy each replica's batch gives its own
  class-wise term.

  Example:

  >>> loss = TwoWayLoss()
  >>> loss([[1., 0., 0.]], [[2., 0., -1.]]).numpy()  # sample + class terms
  0.16984601

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
    return multilabel_ops.two_way_loss(
        y_true, y_pred, self.positive_temperature, self.negative_temperature,
        self.margin)

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
  class-wise as `TwoWayLoss` (`multilabel_ops.two_way_loss` with T_P = T_N =
  1 and margin epsilon): the comparison point for its temperatures.

  Args:
    epsilon: the margin inside the softplus.
  """

  def __init__(self, epsilon: float = 1.0,
               reduction: str = tf.keras.losses.Reduction.AUTO,
               name: str = "two_way_margin"):
    super().__init__(reduction=reduction, name=name)
    self.epsilon = float(epsilon)

  def call(self, y_true, y_pred):
    return multilabel_ops.two_way_loss(y_true, y_pred, 1.0, 1.0, self.epsilon)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"epsilon": self.epsilon})
    return config
