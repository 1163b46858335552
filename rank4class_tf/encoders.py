"""Instance encoders H(x) = h, looked up by name.

An encoder is a Keras layer mapping the raw instance feature to h
[batch_size, dim]. It runs once per instance, never once per class.

Names:

* `small_cnn`: two 3x3 convolutions (32, 64 filters, ReLU), 2x2 max-pooling,
  then a ReLU dense layer of `dim` units; for small images such as the 8x8
  scikit-learn digits.
* `mlp`: flatten, then two ReLU dense layers of `dim` units; for any
  fixed-size numeric instance.
"""

from typing import Any, Dict

import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class SmallCNN(tf.keras.layers.Layer):
  """Small convolutional encoder: [batch, H, W, C] images -> [batch, dim].

  Args:
    dim: size of h.
    dropout: dropout rate on h during training.
  """

  def __init__(self, dim: int = 128, dropout: float = 0.1, **kwargs):
    super().__init__(**kwargs)
    self.dim = int(dim)
    self.dropout = float(dropout)
    self.body = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        tf.keras.layers.MaxPool2D(2),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(self.dim, activation="relu"),
        tf.keras.layers.Dropout(self.dropout),
    ], name="body")

  def call(self, images, training=None):
    return self.body(images, training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"dim": self.dim, "dropout": self.dropout})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class MLPEncoder(tf.keras.layers.Layer):
  """Flatten then two ReLU dense layers: [batch, ...] -> [batch, dim].

  Args:
    dim: size of both layers and of h.
    dropout: dropout rate on h during training.
  """

  def __init__(self, dim: int = 128, dropout: float = 0.1, **kwargs):
    super().__init__(**kwargs)
    self.dim = int(dim)
    self.dropout = float(dropout)
    self.body = tf.keras.Sequential([
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(self.dim, activation="relu"),
        tf.keras.layers.Dense(self.dim, activation="relu"),
        tf.keras.layers.Dropout(self.dropout),
    ], name="body")

  def call(self, inputs, training=None):
    return self.body(inputs, training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"dim": self.dim, "dropout": self.dropout})
    return config


_ENCODERS = {
    "small_cnn": SmallCNN,
    "mlp": MLPEncoder,
}

ENCODER_NAMES = tuple(_ENCODERS)


def get(name: str, **kwargs) -> tf.keras.layers.Layer:
  """Builds the encoder called `name` with its keyword arguments.

  Raises:
    ValueError: for an unknown name.
  """
  if name not in _ENCODERS:
    raise ValueError(f"Unknown encoder {name!r}; valid names: "
                     f"{', '.join(ENCODER_NAMES)}.")
  return _ENCODERS[name](name="encoder", **kwargs)
