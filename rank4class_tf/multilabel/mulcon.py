r"""MulCon's label-level contrastive learning (Dao et al. 2021), in one place.

MulCon trains the label-wise attention interaction (`label_attention`) with
the ranking loss plus gamma times a label-level contrastive loss (LLCL) on
its per-class projections z_c: every relevant (instance, class) of a batch
is an anchor, its positives the same class in the other instances where it
is relevant; the contrast set is every other relevant (instance, class).
Here:

  label_contrastive_loss  the LLCL's maths (pure tf), MulCon's and the
                          positive-anchors normalization
  LabelContrastiveLoss    the Keras loss
  ContrastiveRankingModel the model trained on loss + gamma * LLCL
  ContrastiveModelBuilder TF-Ranking's model builder of that model
  ContrastiveSchedule     MulCon's two steps: the loss alone, then with the
                          LLCL (and its own learning rate)

The LLCL (MulCon, eq. 8): with z the L2-normalised projections of the
label-level embeddings [batch_size, num_classes, dim], the anchors A are the
embeddings z_{b,c} of relevant labels (y_{b,c} = 1); the positives P(a) of
an anchor are the embeddings of the same class in the other instances where
it is relevant; the contrast set is every other anchor of the batch:

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

The settings are `LossConfig`'s `contrastive_*` fields (`--contrastive_*`
flags); `checks` refuses the LLCL without `--interaction=label_attention`.
"""

from typing import Any, Dict, Optional

import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import lookup
from rank4class_tf.multilabel import ops as multilabel_ops


# What `label_contrastive_loss` divides its sum over anchors by: every anchor
# (MulCon's code), or the anchors that have a positive.
CONTRASTIVE_NORMALIZATIONS = ("mulcon", "positive_anchors")


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
  log_norm, _ = multilabel_ops.masked_logsumexp(logits, contrast, axis=1)  # [n]
  log_prob = logits - log_norm[:, tf.newaxis]
  positive_f = tf.cast(positive, tf.float32)
  num_positive = tf.reduce_sum(positive_f, axis=1)
  per_anchor = -(temperature / base_temperature) * tf.math.divide_no_nan(
      tf.reduce_sum(tf.where(positive, log_prob, tf.zeros_like(log_prob)),
                    axis=1), num_positive)
  if normalization == "mulcon":
    return multilabel_ops.mean_over(per_anchor, active)
  return multilabel_ops.mean_over(per_anchor, num_positive > 0)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class LabelContrastiveLoss(tf.keras.losses.Loss):
  """MulCon's label-level contrastive loss; `y_pred` are the projections.

  `label_contrastive_loss`: a supervised contrastive loss
  whose anchors are the relevant labels' embeddings and whose positives are
  the same class's embeddings in the other instances,

  ```
  LLCL = (tau / base_temperature) * sum_{anchors a} l(a) / N
  ```

  with N every anchor ("mulcon", MulCon's code: an anchor without positive
  adds 0) or the anchors with a positive ("positive_anchors"). `y_true`
  [batch_size, num_classes] multi-hot, `y_pred` [batch_size, num_classes,
  dim] L2-normalised projections; the value is the batch's (one scalar).

  Example:

  >>> z = tf.constant([[[1., 0.], [0., 1.]], [[1., 0.], [0., 1.]]])
  >>> loss = LabelContrastiveLoss(normalization="positive_anchors",
  ...                             base_temperature=0.1)  # Factor 0.2 / 0.1.
  >>> loss([[1., 1.], [1., 0.]], z).numpy()  # 2 * -log(e^5 / (e^5 + 1))
  0.013430595

  Args:
    temperature: tau (MulCon: 0.2).
    normalization: "mulcon" (divide by every anchor, MulCon's code) or
      "positive_anchors" (by the anchors that have a positive); see
      `CONTRASTIVE_NORMALIZATIONS`.
    base_temperature: SupCon's base temperature: the loss is scaled by
      temperature / base_temperature (MulCon: 0.2, a factor 1).
  """

  def __init__(self, temperature: float = 0.2, normalization: str = "mulcon",
               base_temperature: float = 0.2,
               reduction: str = tf.keras.losses.Reduction.AUTO,
               name: str = "label_contrastive"):
    super().__init__(reduction=reduction, name=name)
    for key, value in (("temperature", temperature),
                       ("base_temperature", base_temperature)):
      if not value > 0:
        raise ValueError(f"{key} must be > 0, got {value}.")
    check_contrastive_normalization(normalization)
    self.temperature = float(temperature)
    self.normalization = normalization
    self.base_temperature = float(base_temperature)

  def call(self, y_true, y_pred):
    return label_contrastive_loss(
        y_true, y_pred, self.temperature, self.normalization,
        self.base_temperature)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"temperature": self.temperature,
                   "normalization": self.normalization,
                   "base_temperature": self.base_temperature})
    return config


class ContrastiveRankingModel(tf.keras.Model):
  """A ranking model trained with its loss plus gamma * LLCL (MulCon).

  Wraps a functional `network` whose outputs are {"scores", "projections"}.
  Calling the model returns the scores only, so metrics, evaluation and the
  serving signature see an ordinary ranking model. `train_step` adds
  `contrastive_weight * contrastive_loss(labels, projections)` to the
  compiled loss; `contrastive_weight` is a variable, so a callback can switch
  the contrastive term on for MulCon's second training step. The
  contrastive term (unweighted) is logged as `contrastive_loss`, in
  training and validation.

  Args:
    network: the functional model.
    contrastive_loss: a loss taking (labels, projections).
    contrastive_weight: gamma at the start of training.
  """

  def __init__(self, network: tf.keras.Model,
               contrastive_loss: tf.keras.losses.Loss,
               contrastive_weight: float = 0.0, **kwargs):
    super().__init__(**kwargs)
    self.network = network
    self.contrastive_loss = contrastive_loss
    self.contrastive_weight = tf.Variable(
        float(contrastive_weight), trainable=False, dtype=tf.float32,
        name="contrastive_weight")
    self.contrastive_tracker = tf.keras.metrics.Mean(name="contrastive_loss")

  def call(self, inputs, training=None):
    return self.network(inputs, training=training)["scores"]

  @property
  def metrics(self):
    return super().metrics + [self.contrastive_tracker]

  def train_step(self, data):
    x, y = data[0], data[1]
    with tf.GradientTape() as tape:
      outputs = self.network(x, training=True)
      scores = outputs["scores"]
      loss = self.compute_loss(x, y, scores)  # Compiled loss + regularisers.
      contrastive = self.contrastive_loss(y, outputs["projections"])
      replicas = tf.distribute.get_strategy().num_replicas_in_sync
      loss += self.contrastive_weight * contrastive / replicas
    self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
    self.contrastive_tracker.update_state(contrastive)
    return self.compute_metrics(x, y, scores, None)

  def test_step(self, data):
    x, y = data[0], data[1]
    outputs = self.network(x, training=False)
    self.compute_loss(x, y, outputs["scores"])  # Updates the loss metric.
    self.contrastive_tracker.update_state(
        self.contrastive_loss(y, outputs["projections"]))
    return self.compute_metrics(x, y, outputs["scores"], None)


class ContrastiveSchedule(tf.keras.callbacks.Callback):
  """MulCon's two training steps, by epoch: first the loss alone, then
  loss + gamma * LLCL at a lower learning rate.

  Set at the start of every epoch from the epoch number alone, so a run
  resumed by `BackupAndRestore` continues in the right step.

  Args:
    start_epoch: first epoch (0-based) of the second step.
    weight: gamma in the second step.
    learning_rate: learning rate of the second step (None: unchanged).
  """

  def __init__(self, start_epoch: int, weight: float,
               learning_rate: Optional[float] = None):
    super().__init__()
    self.start_epoch = int(start_epoch)
    self.weight = float(weight)
    self.learning_rate = learning_rate
    self._first_learning_rate = None

  def on_epoch_begin(self, epoch, logs=None):
    optimizer = self.model.optimizer
    if self._first_learning_rate is None:
      self._first_learning_rate = float(
          tf.keras.backend.get_value(optimizer.learning_rate))
    second = epoch >= self.start_epoch
    self.model.contrastive_weight.assign(self.weight if second else 0.0)
    if self.learning_rate is not None:
      optimizer.learning_rate.assign(
          self.learning_rate if second else self._first_learning_rate)


class ContrastiveModelBuilder(tfr.keras.model.AbstractModelBuilder):
  """Wraps a model builder whose model returns {"scores", "projections"} in
  a `ContrastiveRankingModel` (MulCon's training).

  Args:
    model_builder: builds the functional network.
    temperature: tau of the label-level contrastive loss.
    weight: gamma at the start of training (a `ContrastiveSchedule`
      callback may change it).
    normalization: what the loss's sum over anchors is divided by
      (`LabelContrastiveLoss`; "mulcon": every anchor).
    base_temperature: the loss is scaled by temperature / base_temperature.
  """

  def __init__(self, model_builder: tfr.keras.model.AbstractModelBuilder,
               temperature: float = 0.2, weight: float = 0.0,
               normalization: str = "mulcon", base_temperature: float = 0.2):
    self._model_builder = model_builder
    self._weight = weight
    # Built (and so checked) now; the model of `build` holds it.
    self._loss = LabelContrastiveLoss(
        temperature, normalization=normalization,
        base_temperature=base_temperature)

  def build(self) -> tf.keras.Model:
    network = self._model_builder.build()
    model = ContrastiveRankingModel(
        network, self._loss,
        contrastive_weight=self._weight, name="rank4class_mulcon")
    # Builds the model on the network's symbolic inputs: its train and test
    # steps call the network directly, and Keras saves only a model whose
    # own `__call__` has recorded the input signature.
    model(network.input)
    return model
