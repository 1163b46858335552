"""SoDeep sorters: Keras layers mapping scores [batch_size, d] to ranks.

Every sorter returns approximate normalised ranks (`ops.exact_rank`: the
largest score has rank 1/d, the smallest 1) and is differentiable in its
input, so a rank-based metric can be trained through it.

* `handcrafted`: no weights, rk_i = (1 + sum_{j != i} sigmoid(10 (y_j - y_i))) / d
  (paper eq. 11-12, with a fixed lambda = 10).
* `handcrafted_adaptive`: the same with the SoDeep reference code's lambda,
  6.8 / std of each vector's pairwise differences
  (`ops.adaptive_regularization`); scale-free.
* `lstm`: bidirectional LSTM layers over the score sequence, then an affine
  projection of all d x 2 units outputs to d ranks (the reference code's
  `Conv1d(d, d, 2 * units)`, paper Fig. 3a).
* `cnn`: 8 blocks of 1-D convolution + batch norm + ReLU whose (valid) filter
  sizes shrink the sequence of length d to length 1 while the last block has d
  channels, then the affine projection d -> d (paper Fig. 3b).
* `cnn_reference`: the SoDeep reference code's CNN layout (9 valid
  convolutions with PReLU, batch norm on every second one, then a
  convolution to d channels and a sigmoid); d >= 37.
* `pairwise` (not in the paper): the handcrafted sum of soft comparisons with
  a sharpness for each pair chosen by a small MLP of (x_i, x_j - x_i), shared
  by all pairs; permutation-equivariant, weights independent of d.

Learned sorters first standardise each row (`ops.standardize`), which keeps
its order: a sorter trained on unit-scale synthetic data then ranks logits of
any scale.

Example:

>>> sorter = get("handcrafted", 3)
>>> sorter(tf.constant([[0.3, -1., 2.]])).numpy()  # ranks 2, 3, 1 over d = 3
array([[0.6666..., 0.9999..., 0.3333...]], dtype=float32)
>>> sorter = load_sorter("lstm", d=100)    # a shipped, trained sorter
"""

import json
import os
from typing import Any, Dict, Tuple, Union

import numpy as np
import tensorflow as tf

from rank4class_tf.sorting import ops

PRETRAINED_DIR = os.path.join(os.path.dirname(__file__), "pretrained")
PRETRAINED_INDEX = "sorters.json"


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class HandcraftedSorter(tf.keras.layers.Layer):
  r"""The paper's handcrafted differentiable sorter (eq. 11-12); no weights.

  ```
  rk_i = (1 + sum_{j != i} sigmoid(lambda * (y_j - y_i))) / d
  ```

  Input [batch_size, d] scores, output [batch_size, d] ranks. Its error grows
  when scores are closer than ~1/lambda (L1 0.0289 at d = 100 on our
  synthetic test set with lambda 10; see the package README).

  Args:
    d: list length (kept for a uniform interface; any d works).
    regularization: lambda: a number (the `handcrafted` sorter's 10), or
      "adaptive" (the `handcrafted_adaptive` sorter): the SoDeep reference
      code's 6.8 / std of each vector's pairwise differences
      (`ops.adaptive_regularization`).
  """

  def __init__(self, d: int, regularization: Union[float, str] = 10.0,
               **kwargs):
    super().__init__(**kwargs)
    ops.check_regularization(regularization)
    self.d = int(d)
    self.regularization = (regularization if isinstance(regularization, str)
                           else float(regularization))

  def call(self, scores):
    return ops.handcrafted_rank(scores, self.regularization)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"d": self.d, "regularization": self.regularization})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class LSTMSorter(tf.keras.layers.Layer):
  r"""Bidirectional-LSTM sorter (paper Fig. 3a).

  ```
  x = standardize(y)                        [batch_size, d]
  h = BiLSTM^num_layers(x[..., None])       [batch_size, d, 2 * units]
  rk = W flatten(h) + b                     [batch_size, d]   projection=full
  rk_i = w^T h_i + b                        [batch_size, d]   projection=shared
  ```

  `full` is the reference code's affine map of all outputs (d * 2 units * d
  weights); `shared` applies one affine map at every position (2 units + 1
  weights), which is d times smaller and learns faster on little compute.

  The reference code's default stacks 2 layers of 512 units; the shipped
  sorters have 2 layers of 128 units and the shared projection (2 MB each,
  trained with PyTorch on a GPU and imported, see `pretrained/sorters.json`):
  the 2 x 512 full-projection sorter would be 75 MB.

  Args:
    d: list length.
    units: LSTM units per direction.
    num_layers: stacked bidirectional layers.
    projection: `full` or `shared` (see above).
    standardize: standardise each row first.
  """

  def __init__(self, d: int, units: int = 128, num_layers: int = 2,
               projection: str = "full", standardize: bool = True, **kwargs):
    super().__init__(**kwargs)
    if projection not in ("full", "shared"):
      raise ValueError(f"projection={projection!r}; choose full or shared.")
    self.d = int(d)
    self.units = int(units)
    self.num_layers = int(num_layers)
    self.projection_kind = projection
    self.standardize = bool(standardize)
    self.rnns = [
        tf.keras.layers.Bidirectional(
            tf.keras.layers.LSTM(self.units, return_sequences=True),
            name=f"bilstm_{i}") for i in range(self.num_layers)]
    if projection == "full":
      self.flatten = tf.keras.layers.Reshape([self.d * 2 * self.units])
      self.projection = tf.keras.layers.Dense(self.d, name="projection")
    else:
      self.flatten = tf.keras.layers.Reshape([self.d, 2 * self.units])
      self.projection = tf.keras.Sequential(
          [tf.keras.layers.Dense(1), tf.keras.layers.Reshape([self.d])],
          name="projection")

  def call(self, scores, training=None):
    x = tf.cast(scores, tf.float32)
    if self.standardize:
      x = ops.standardize(x)
    x = x[..., None]
    for rnn in self.rnns:
      x = rnn(x, training=training)
    return self.projection(self.flatten(x))

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"d": self.d, "units": self.units,
                   "num_layers": self.num_layers,
                   "projection": self.projection_kind,
                   "standardize": self.standardize})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class PairwiseSorter(tf.keras.layers.Layer):
  r"""Permutation-equivariant sorter over pairwise differences.

  A learned generalisation of the handcrafted sorter: each soft comparison
  gets its own sharpness, chosen by a small MLP shared by all pairs.

  ```
  x = standardize(y)                                   [batch_size, d]
  delta_ij = x_j - x_i                                 [batch_size, d, d]
  m_ij = MLP(x_i, delta_ij)                            [batch_size, d, d]
  s_ij = max_sharpness * sigmoid(m_ij)   (max_sharpness > 0)
         exp(m_ij)                       (max_sharpness = 0: unbounded)
  rk_i = (1 + sum_{j != i} sigmoid(s_ij * delta_ij)) / d
  ```

  The MLP has `num_layers` hidden ReLU layers of `units` and one linear
  output with zero kernel whose bias makes s = initial_sharpness, so the
  untrained sorter is the handcrafted one with lambda = initial_sharpness on
  the standardised scores (7 is about the reference code's adaptive lambda
  on unit-variance scores). Because s_ij > 0, every comparison falls on the
  correct side (sigmoid > 1/2 exactly when x_j > x_i; a tie counts 1/2) and
  only its sharpness is learnt. Permuting the input permutes the output.
  O(d^2 * units^2) per vector.

  `max_sharpness` bounds the slope of each soft comparison in its difference,
  s_ij / 4 (at fixed s_ij; the MLP's own slope adds a term). Trained on the
  L1 alone, an unbounded sharpness grows until the sorter is an exact sort
  with (almost) no gradient, which is why the shipped sorters bound it
  (package README).

  Args:
    d: list length (the weights do not depend on it).
    units: hidden units per MLP layer.
    num_layers: hidden layers of the MLP.
    max_sharpness: the bound of s, > initial_sharpness; 0 for none.
    initial_sharpness: the sharpness s before training.
    standardize: standardise each row first.
  """

  # The untrained sorter is the handcrafted one with this lambda.
  INITIAL_SHARPNESS = 7.0

  def __init__(self, d: int, units: int = 16, num_layers: int = 2,
               max_sharpness: float = 60.0,
               initial_sharpness: float = INITIAL_SHARPNESS,
               standardize: bool = True, **kwargs):
    super().__init__(**kwargs)
    if not initial_sharpness > 0:
      raise ValueError(f"initial_sharpness={initial_sharpness!r} must be "
                       "> 0.")
    if max_sharpness and not max_sharpness > initial_sharpness:
      raise ValueError(f"max_sharpness={max_sharpness!r} must be 0 (no "
                       "bound) or > initial_sharpness="
                       f"{initial_sharpness!r}.")
    self.d = int(d)
    self.units = int(units)
    self.num_layers = int(num_layers)
    self.max_sharpness = float(max_sharpness)
    self.initial_sharpness = float(initial_sharpness)
    self.standardize = bool(standardize)
    self.hidden = [tf.keras.layers.Dense(self.units, activation="relu",
                                         name=f"hidden_{i}")
                   for i in range(self.num_layers)]
    if self.max_sharpness:
      ratio = self.initial_sharpness / self.max_sharpness
      bias = float(np.log(ratio / (1. - ratio)))
    else:
      bias = float(np.log(self.initial_sharpness))
    self.sharpness_logit = tf.keras.layers.Dense(
        1, kernel_initializer="zeros",
        bias_initializer=tf.keras.initializers.Constant(bias),
        name="sharpness_logit")

  def call(self, scores, training=None):
    x = tf.cast(scores, tf.float32)
    if self.standardize:
      x = ops.standardize(x)
    delta = x[:, None, :] - x[:, :, None]            # [batch, i, j]
    x_i = x[:, :, None] + tf.zeros_like(delta)        # [batch, i, j] = x_i
    h = tf.stack([x_i, delta], axis=-1)               # [batch, d, d, 2]
    for layer in self.hidden:
      h = layer(h)
    logit = self.sharpness_logit(h)[..., 0]
    sharpness = (self.max_sharpness * tf.sigmoid(logit) if self.max_sharpness
                 else tf.exp(logit))
    return ops.pairwise_soft_rank(sharpness * delta)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"d": self.d, "units": self.units,
                   "num_layers": self.num_layers,
                   "max_sharpness": self.max_sharpness,
                   "initial_sharpness": self.initial_sharpness,
                   "standardize": self.standardize})
    return config


def cnn_kernel_sizes(d: int, num_blocks: int = 8) -> Tuple[int, ...]:
  """Filter sizes k_1..k_8 with sum(k_b - 1) = d - 1: valid convolutions
  shrink a length-d sequence to length 1."""
  share, extra = divmod(d - 1, num_blocks)
  return tuple(1 + share + (1 if b < extra else 0) for b in range(num_blocks))


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class CNNSorter(tf.keras.layers.Layer):
  r"""Convolutional sorter (paper Fig. 3b).

  ```
  x = standardize(y)[..., None]             [batch_size, d, 1]
  x = ReLU(BN(Conv1D_b(x)))  for b = 1..8   [batch_size, d - sum_b (k_b - 1), c_b]
                                            -> [batch_size, 1, d] after block 8
  rk = W x + b                              [batch_size, d]
  ```

  The filter sizes k_b (`cnn_kernel_sizes`) make the 8th block's output a
  single position with d channels; channels c_b are
  (w, w, 2w, 2w, 4w, 4w, 4w, d) for `width` w.

  Args:
    d: list length.
    width: channels of the first blocks.
    standardize: standardise each row first.
  """

  def __init__(self, d: int, width: int = 32, standardize: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    self.d = int(d)
    self.width = int(width)
    self.standardize = bool(standardize)
    w = self.width
    channels = (w, w, 2 * w, 2 * w, 4 * w, 4 * w, 4 * w, self.d)
    self.blocks = []
    for b, (c, k) in enumerate(zip(channels, cnn_kernel_sizes(self.d))):
      self.blocks.append((
          tf.keras.layers.Conv1D(c, k, padding="valid", use_bias=False,
                                 name=f"conv_{b}"),
          tf.keras.layers.BatchNormalization(name=f"bn_{b}")))
    self.flatten = tf.keras.layers.Reshape([self.d])
    self.projection = tf.keras.layers.Dense(self.d, name="projection")

  def call(self, scores, training=None):
    x = tf.cast(scores, tf.float32)
    if self.standardize:
      x = ops.standardize(x)
    x = x[..., None]
    for conv, norm in self.blocks:
      x = tf.nn.relu(norm(conv(x), training=training))
    return self.projection(self.flatten(x))

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"d": self.d, "width": self.width,
                   "standardize": self.standardize})
    return config


# The SoDeep reference code's CNN (technicolor-research/sodeep, `model.py`,
# class `cnn`): channels and filter sizes of its 9 hidden convolutions, and
# the blocks with batch norm.
REFERENCE_CNN_CHANNELS = (8, 16, 32, 64, 96, 128, 256, 256, 128)
REFERENCE_CNN_KERNELS = (2, 3, 5, 7, 10, 7, 5, 3, 3)
REFERENCE_CNN_NORMED = (1, 3, 5, 7)
# Positions the 9 valid convolutions take off the sequence (36); the output
# convolution's filter spans the d - 36 left, so d >= 37.
REFERENCE_CNN_SHRINK = sum(k - 1 for k in REFERENCE_CNN_KERNELS)
REFERENCE_CNN_MIN_D = REFERENCE_CNN_SHRINK + 1


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ReferenceCNNSorter(tf.keras.layers.Layer):
  r"""The SoDeep reference code's convolutional sorter (paper Fig. 3b).

  ```
  x = standardize(y)[..., None]                     [batch_size, d, 1]
  x = PReLU([BN](Conv1D_b(x)))  for b = 1..9        [batch_size, d - 36, 128]
  rk = sigmoid(Conv1D_{d-36}(x))                    [batch_size, 1, d] -> [batch_size, d]
  ```

  Nine valid convolutions with bias, of (8, 16, 32, 64, 96, 128, 256, 256,
  128) channels and filter sizes (2, 3, 5, 7, 10, 7, 5, 3, 3), batch norm
  (epsilon 1e-5, as PyTorch's) after the 2nd, 4th, 6th and 8th, each followed
  by a PReLU with one shared slope (initial 0.25); then a valid convolution
  of d channels whose filter spans the remaining d - 36 positions, and a
  sigmoid. 1.44 M weights at d = 100. Unlike the reference, the scores are
  standardised first, as in the other learned sorters. The shipped
  `cnn_reference_d100` was trained with PyTorch on a GPU
  (`tools/torch_sorter/`) and imported by `pipelines.import_sorter`.

  Args:
    d: list length, at least 37.
    standardize: standardise each row first.
  """

  def __init__(self, d: int, standardize: bool = True, **kwargs):
    super().__init__(**kwargs)
    if d < REFERENCE_CNN_MIN_D:
      raise ValueError(f"Sorter 'cnn_reference' needs d >= "
                       f"{REFERENCE_CNN_MIN_D} (its 9 convolutions take 36 "
                       f"positions), not d={d}.")
    self.d = int(d)
    self.standardize = bool(standardize)
    self.blocks = []
    for b, (c, k) in enumerate(zip(REFERENCE_CNN_CHANNELS,
                                   REFERENCE_CNN_KERNELS)):
      norm = (tf.keras.layers.BatchNormalization(
          epsilon=1e-5, momentum=0.9, name=f"bn_{b}")
              if b in REFERENCE_CNN_NORMED else None)
      self.blocks.append((
          tf.keras.layers.Conv1D(c, k, padding="valid", name=f"conv_{b}"),
          norm,
          tf.keras.layers.PReLU(
              alpha_initializer=tf.keras.initializers.Constant(0.25),
              shared_axes=[1, 2], name=f"prelu_{b}")))
    self.output_conv = tf.keras.layers.Conv1D(
        self.d, self.d - REFERENCE_CNN_SHRINK, padding="valid",
        activation="sigmoid", name="output")
    self.flatten = tf.keras.layers.Reshape([self.d])

  def call(self, scores, training=None):
    x = tf.cast(scores, tf.float32)
    if self.standardize:
      x = ops.standardize(x)
    x = x[..., None]
    for conv, norm, prelu in self.blocks:
      x = conv(x)
      if norm is not None:
        x = norm(x, training=training)
      x = prelu(x)
    return self.flatten(self.output_conv(x))

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"d": self.d, "standardize": self.standardize})
    return config


# name -> (class, hyper-parameters it accepts besides d, the settings the
# name fixes). A plain dict.
_SORTERS: Dict[str, Tuple[type, Tuple[str, ...], Dict[str, Any]]] = {
    "handcrafted": (HandcraftedSorter, ("regularization",), {}),
    "handcrafted_adaptive": (HandcraftedSorter, (),
                             {"regularization": "adaptive"}),
    "lstm": (LSTMSorter, ("units", "num_layers", "projection",
                         "standardize"), {}),
    "cnn": (CNNSorter, ("width", "standardize"), {}),
    "cnn_reference": (ReferenceCNNSorter, ("standardize",), {}),
    "pairwise": (PairwiseSorter, ("units", "num_layers", "max_sharpness",
                                  "initial_sharpness", "standardize"), {}),
}

SORTER_NAMES = tuple(_SORTERS)
TRAINABLE_SORTERS = ("lstm", "cnn", "cnn_reference", "pairwise")


def _check_name(name: str) -> None:
  if name not in _SORTERS:
    raise ValueError(f"Unknown sorter {name!r}; valid names: "
                     f"{', '.join(SORTER_NAMES)}.")


def hyperparameters(name: str) -> Tuple[str, ...]:
  """Names of the keyword arguments sorter `name` accepts besides d."""
  _check_name(name)
  return _SORTERS[name][1]


def get(name: str, d: int, /, **kwargs) -> tf.keras.layers.Layer:
  """Builds an untrained sorter layer called `name` for lists of length d.

  Args:
    name: one of `SORTER_NAMES`: handcrafted (lambda 10 unless
      `regularization` says otherwise), handcrafted_adaptive (the SoDeep
      code's lambda per vector), lstm, cnn, cnn_reference (d >= 37),
      pairwise.
    d: list length.
    **kwargs: that sorter's hyper-parameters (`hyperparameters(name)`) and
      Keras layer arguments (`name`, `trainable`, `dtype`).

  Returns:
    A Keras layer [batch_size, d] -> [batch_size, d].

  Raises:
    ValueError: for an unknown name or hyper-parameter.
  """
  _check_name(name)
  cls, accepted, fixed = _SORTERS[name]
  unknown = sorted(set(kwargs) - set(accepted) - {"name", "trainable",
                                                  "dtype"})
  if unknown:
    raise ValueError(f"Sorter {name!r} has no hyper-parameter(s) "
                     f"{', '.join(unknown)}; it accepts: "
                     f"{', '.join(accepted) or 'none'}.")
  return cls(d=d, **fixed, **kwargs)


def pretrained_key(name: str, d: int) -> str:
  """Key of a shipped sorter in `pretrained/sorters.json`, e.g. `lstm_d100`."""
  return f"{name}_d{int(d)}"


def pretrained_index(directory: str = PRETRAINED_DIR) -> Dict[str, Any]:
  """The shipped sorters' records: hyper-parameters, L1, command, file."""
  path = os.path.join(directory, PRETRAINED_INDEX)
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f)


def _ordered_weights(sorter: tf.keras.layers.Layer):
  """The sorter's variables in build order, whether it is frozen or not
  (Keras lists a frozen layer's weights in another order)."""
  trainable = sorter.trainable
  sorter.trainable = True
  weights = list(sorter.weights)
  sorter.trainable = trainable
  return weights


def save_weights(sorter: tf.keras.layers.Layer, path: str) -> None:
  """Writes a built sorter's weights to an .npz file (float32, in order)."""
  np.savez_compressed(path, *[w.numpy().astype(np.float32)
                              for w in _ordered_weights(sorter)])


def load_weights(sorter: tf.keras.layers.Layer, path: str) -> None:
  """Builds `sorter` and sets its weights from a `save_weights` .npz file."""
  sorter(tf.zeros([1, sorter.d]))
  weights = _ordered_weights(sorter)
  with np.load(path) as data:
    if len(data.files) != len(weights):
      raise ValueError(f"{path} holds {len(data.files)} arrays; the sorter "
                       f"has {len(weights)} weights.")
    for i, variable in enumerate(weights):
      variable.assign(data[f"arr_{i}"])


def check_available(name: str, d: int,
                    directory: str = PRETRAINED_DIR) -> None:
  """Raises ValueError unless `load_sorter(name, d)` can succeed.

  A training binary calls it before writing anything, once d is known.
  """
  _check_name(name)
  if name not in TRAINABLE_SORTERS:
    return
  index = pretrained_index(directory)
  if pretrained_key(name, d) not in index:
    shipped = ", ".join(sorted(index)) or "none"
    raise ValueError(f"No trained {name!r} sorter for d={d}; shipped: "
                     f"{shipped}. Train one with pipelines/train_sorter.py.")


def load_sorter(name: str, d: int, trainable: bool = False,
                directory: str = PRETRAINED_DIR) -> tf.keras.layers.Layer:
  """A ready sorter by name and list length, trained ones from shipped weights.

  `handcrafted` and `handcrafted_adaptive` need no weights and are returned
  for any d. `lstm`, `cnn` and `pairwise`
  load `pretrained/<name>_d<d>.npz` with the hyper-parameters recorded in
  `pretrained/sorters.json`.

  Args:
    name: one of `SORTER_NAMES`.
    d: list length.
    trainable: whether the sorter's weights may be fine-tuned.
    directory: folder of the weights and their index.

  Returns:
    A built Keras layer [batch_size, d] -> [batch_size, d].

  Raises:
    ValueError: for an unknown name or a (name, d) with no shipped weights.
  """
  check_available(name, d, directory)
  if name not in TRAINABLE_SORTERS:
    return get(name, d, trainable=trainable)
  record = pretrained_index(directory)[pretrained_key(name, d)]
  sorter = get(name, d, trainable=trainable, **record["hyperparameters"])
  load_weights(sorter, os.path.join(directory, record["weights"]))
  return sorter
