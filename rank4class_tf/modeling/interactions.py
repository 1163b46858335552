"""Instance-class interactions I(h', c_i) -> s_i, looked up by name.

Every interaction is a Keras layer called as `layer([h, classes])` with

* `h`: [batch_size, dim] instance encodings (already h' = [h, 1] when the
  model appends the bias coordinate),
* `classes`: [num_classes, class_dim] the class table (the class encoder's
  output, shared by every instance),

and returns scores of every class, [batch_size, num_classes]. The model then
gathers the classes listed for each instance.

Names:

* `dot`: s_i = <h', c_i>. With h' = [h, 1] this is exactly the classical
  `Dense(num_classes)` classifier (Rank4Class §3.2).
* `cosine`: s_i = tau cos(h', c_i), tau a learned temperature (starting at
  `CosineInteraction.INITIAL_TEMPERATURE`): the scale of h and c_i no
  longer counts, only their angle, as in the untrained sentence-embedding
  baseline (with `--class_projection=residual` it starts as that
  baseline's ranking).
* `lc_mlp`: latent cross (Beutel et al. 2018), x_i = (1 + c_i) * h'
  element-wise, then an MLP to a scalar.
* `concat_mlp`: x_i = [h'; c_i], then an MLP to a scalar.
* `label_attention`: each class, as a learnable query, attends over the
  instance's token / position features (MulCon's label-level embeddings);
  it reads the encoder's sequence output instead of h, so it lives in
  `label_attention.py` and the model builds it.

The MLPs have two ReLU hidden layers of the same width `units` (the paper tunes
{64, 128, 256, 512}) and a linear output unit.

Both MLPs compute their first layer without building the
[batch_size, num_classes, dim] input of every (instance, class) pair: with
1,000 classes and h of ResNet-50's 2,049 coordinates that tensor alone is 0.5
GB at batch 64, plus its gradient. Both rewrites are exact (same weights, same
values up to float summation order); `benchmarks/interactions.py` measures
them against the naive forms.
"""

from typing import Any, Dict

import numpy as np
import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class DotInteraction(tf.keras.layers.Layer):
  """s_i = <h, c_i>: scores = h @ classes^T.

  Shapes: h [batch_size, dim], classes [num_classes, dim] ->
  [batch_size, num_classes].
  """

  def call(self, inputs):
    h, classes = inputs
    return tf.matmul(h, classes, transpose_b=True)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class CosineInteraction(tf.keras.layers.Layer):
  """s_i = tau cos(h, c_i), tau = exp(log_temperature) learned.

  Shapes: h [batch_size, dim], classes [num_classes, dim] ->
  [batch_size, num_classes]. A softmax over cosines in [-1, 1] needs a
  scale to express confident rankings; tau starts at 10 (softmax
  probabilities up to about e^20 / 27 times the others' for 28 classes).

  >>> layer = CosineInteraction()
  >>> layer([tf.constant([[3., 4.]]), tf.constant([[1., 0.], [0., 2.]])])
  <tf.Tensor: shape=(1, 2), dtype=float32, numpy=array([[6., 8.]], dtype=float32)>
  """

  INITIAL_TEMPERATURE = 10.0

  def build(self, input_shape):
    self.log_temperature = self.add_weight(
        name="log_temperature", shape=[],
        initializer=tf.constant_initializer(
            float(np.log(self.INITIAL_TEMPERATURE))))
    super().build(input_shape)

  def call(self, inputs):
    h, classes = inputs
    cosine = tf.matmul(tf.math.l2_normalize(h, axis=-1),
                       tf.math.l2_normalize(classes, axis=-1),
                       transpose_b=True)
    return tf.exp(tf.cast(self.log_temperature, cosine.dtype)) * cosine


def _mlp_tail(units: int, name: str) -> tf.keras.Sequential:
  """Second hidden layer and the scalar output of the interaction MLPs."""
  return tf.keras.Sequential([
      tf.keras.layers.Dense(units, activation="relu", name="hidden_2"),
      tf.keras.layers.Dense(1, name="score"),
  ], name=name)


def latent_cross_first_layer(h: tf.Tensor, classes: tf.Tensor,
                              kernel: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
  """Pre-activation of the first layer on every latent cross, factorised.

  ```
  z[b, i, u] = sum_k (1 + c[i, k]) h[b, k] W[k, u] + bias[u]
             = (h W + bias)[b, u] + sum_k c[i, k] (h[b, k] W[k, u])
  ```

  The first term is computed once per instance. The second is one matrix
  product, classes [num_classes, dim] @ A [dim, batch_size * units] with
  A[k, (b, u)] = h[b, k] W[k, u], so no [batch_size, num_classes, dim]
  tensor is built, and the gradients are matrix products too. The work is
  O(batch_size * num_classes * dim * units), as for the naive form (it is
  bilinear in h and c_i, so no exact form is cheaper); the largest tensors
  are [dim, batch_size * units] and [batch_size, num_classes, units] instead
  of [batch_size, num_classes, dim].

  Args:
    h: [batch_size, dim].
    classes: [num_classes, dim].
    kernel: W, [dim, units].
    bias: [units].

  Returns:
    [batch_size, num_classes, units].
  """
  batch_size, units = tf.shape(h)[0], tf.shape(kernel)[1]
  num_classes = tf.shape(classes)[0]
  per_instance = tf.matmul(h, kernel) + bias  # [batch_size, units]
  # A[k, b, u] = h[b, k] W[k, u], flattened to [dim, batch_size * units].
  scaled = tf.transpose(h)[:, :, tf.newaxis] * kernel[:, tf.newaxis, :]
  scaled = tf.reshape(scaled, [tf.shape(kernel)[0], batch_size * units])
  cross = tf.reshape(tf.matmul(classes, scaled),
                     [num_classes, batch_size, units])
  return per_instance[:, tf.newaxis, :] + tf.transpose(cross, [1, 0, 2])


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class LatentCrossMLP(tf.keras.layers.Layer):
  """Latent cross then MLP: s_i = MLP((1 + c_i) * h).

  Shapes: h [batch_size, dim], classes [num_classes, dim] ->
  [batch_size, num_classes]. The rest of the MLP runs on
  [batch_size, num_classes, units]. The first layer builds the crossed
  input [batch_size, num_classes, dim] when num_classes <= units, and runs
  factorised (`latent_cross_first_layer`, largest tensor
  [dim, batch_size * units]) when there are more classes than units: the
  same numbers, chosen once from the static shapes when the layer is traced.

  Args:
    units: width of both hidden layers.
  """

  def __init__(self, units: int = 128, **kwargs):
    super().__init__(**kwargs)
    self.units = int(units)
    self.hidden_1 = tf.keras.layers.Dense(
        self.units, activation="relu", name="hidden_1")
    self.tail = _mlp_tail(self.units, "mlp_tail")

  def build(self, input_shape):
    h_shape, _ = input_shape
    self.hidden_1.build(h_shape)
    super().build(input_shape)

  def call(self, inputs):
    h, classes = inputs
    num_classes = classes.shape[0]
    if num_classes is not None and num_classes <= self.units:
      crossed = (1. + classes[tf.newaxis, :, :]) * h[:, tf.newaxis, :]
      hidden = self.hidden_1(crossed)
    else:
      hidden = tf.nn.relu(latent_cross_first_layer(
          h, tf.cast(classes, h.dtype),
          tf.cast(self.hidden_1.kernel, h.dtype),
          tf.cast(self.hidden_1.bias, h.dtype)))
    return tf.squeeze(self.tail(hidden), axis=-1)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"units": self.units})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ConcatMLP(tf.keras.layers.Layer):
  """Concatenation then MLP: s_i = MLP([h; c_i]).

  The first layer W [h; c_i] + b is computed as (W_h h + b) + W_c c_i, the
  instance part once per instance and the class part once per class, then
  broadcast-added: the same numbers as concatenating, without materialising
  [batch_size, num_classes, dim + class_dim].

  Shapes: h [batch_size, dim], classes [num_classes, class_dim] ->
  [batch_size, num_classes].

  Args:
    units: width of both hidden layers.
  """

  def __init__(self, units: int = 128, **kwargs):
    super().__init__(**kwargs)
    self.units = int(units)
    self.instance_part = tf.keras.layers.Dense(self.units, name="hidden_1_h")
    self.class_part = tf.keras.layers.Dense(
        self.units, use_bias=False, name="hidden_1_c")
    self.tail = _mlp_tail(self.units, "mlp_tail")

  def call(self, inputs):
    h, classes = inputs
    first = tf.nn.relu(self.instance_part(h)[:, tf.newaxis, :] +
                       self.class_part(classes)[tf.newaxis, :, :])
    return tf.squeeze(self.tail(first), axis=-1)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"units": self.units})
    return config


_INTERACTIONS = {
    "dot": DotInteraction,
    "lc_mlp": LatentCrossMLP,
    "concat_mlp": ConcatMLP,
    "cosine": CosineInteraction,
}

# Interactions over the instance's token / position features rather than h;
# the model builds them (`label_attention.LabelAttentionHead`).
SEQUENCE_INTERACTIONS = ("label_attention",)
INTERACTION_NAMES = tuple(_INTERACTIONS)  # Built by `get`, on h.
ALL_NAMES = INTERACTION_NAMES + SEQUENCE_INTERACTIONS


def get(name: str, units: int = 128) -> tf.keras.layers.Layer:
  """Builds the interaction called `name` (`dot`, `lc_mlp`, `concat_mlp`).

  Args:
    name: interaction name.
    units: hidden width of the MLP interactions; ignored by `dot`.

  Raises:
    ValueError: for an unknown name or non-positive units.
  """
  if name in SEQUENCE_INTERACTIONS:
    raise ValueError(f"Interaction {name!r} attends over token features, "
                     "not h: the model builds it "
                     "(label_attention.LabelAttentionHead).")
  if name not in _INTERACTIONS:
    raise ValueError(f"Unknown interaction {name!r}; valid names: "
                     f"{', '.join(ALL_NAMES)}.")
  if name in ("dot", "cosine"):
    return _INTERACTIONS[name](name="interaction")
  if units <= 0:
    raise ValueError(f"MLP units must be positive, got {units}.")
  return _INTERACTIONS[name](units=units, name="interaction")
