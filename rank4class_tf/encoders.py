"""Instance encoders H(x) = h, looked up by name.

An encoder is a Keras layer mapping the raw instance feature to h
[batch_size, dim]. It runs once per instance, never once per class.

Names:

* `small_cnn`: two 3x3 convolutions (32, 64 filters, ReLU), 2x2 max-pooling,
  then a ReLU dense layer of `dim` units; for small images such as the 8x8
  scikit-learn digits.
* `mlp`: flatten, then two ReLU dense layers of `dim` units; for any
  fixed-size numeric instance.
* `bert`, `electra`: the Model Garden BERT encoder (`official.nlp`;
  ELECTRA's discriminator is the same architecture) over BERT inputs
  {input_word_ids, input_mask, input_type_ids}. h is BERT's pooled output
  (dense + tanh on [CLS]) for `bert`, and the [CLS] vector itself for
  `electra`, whose checkpoints have no pooler.
  `size` picks the architecture (`pretrained.SIZES`) and `init_checkpoint`
  the weights (`pretrained.init_encoder`: `minilm`, a .safetensors file or a
  Google BERT / ELECTRA TF checkpoint).
"""

from typing import Any, Dict, Optional

import tensorflow as tf

from rank4class_tf import pretrained


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


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class BertInstanceEncoder(tf.keras.layers.Layer):
  """BERT-family encoder: BERT inputs -> pooled [CLS] output h.

  Input: {input_word_ids, input_mask, input_type_ids}, each int32
  [batch_size, seq_length]. Output: [batch_size, hidden_size].

  Args:
    size: architecture name in `pretrained.SIZES` (e.g. `minilm_l6`,
      `bert_base`, `electra_base`, `tiny`).
    init_checkpoint: weights to start from (see `pretrained.init_encoder`);
      None starts from random weights.
    dropout: dropout rate on h during training.
    pooling: `pooled` (BERT's pooler output) or `cls` (the [CLS] vector of
      the last layer, ELECTRA's choice).
  """

  def __init__(self, size: str = "minilm_l6",
               init_checkpoint: Optional[str] = None, dropout: float = 0.1,
               pooling: str = "pooled", **kwargs):
    super().__init__(**kwargs)
    if size not in pretrained.SIZES:
      raise ValueError(f"Unknown encoder size {size!r}; valid sizes: "
                       f"{', '.join(pretrained.SIZES)}.")
    if pooling not in ("pooled", "cls"):
      raise ValueError(f"pooling must be 'pooled' or 'cls', got {pooling!r}.")
    self.size = size
    self.pooling = pooling
    self.init_checkpoint = init_checkpoint
    self.dropout = float(dropout)
    self.network = pretrained.build_bert_encoder(**pretrained.SIZES[size])
    if init_checkpoint:
      pretrained.init_encoder(self.network, init_checkpoint)
    self.dropout_layer = tf.keras.layers.Dropout(self.dropout)

  def call(self, inputs, training=None):
    outputs = self.network(inputs, training=training)
    if self.pooling == "cls":
      h = outputs["sequence_output"][:, 0, :]
    else:
      h = outputs["pooled_output"]
    return self.dropout_layer(h, training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"size": self.size, "init_checkpoint": self.init_checkpoint,
                   "dropout": self.dropout, "pooling": self.pooling})
    return config


_ENCODERS = {
    "small_cnn": SmallCNN,
    "mlp": MLPEncoder,
    "bert": BertInstanceEncoder,
    "electra": BertInstanceEncoder,
}
TEXT_ENCODERS = ("bert", "electra")
# Per-name defaults where two names share a class.
_DEFAULTS = {"electra": {"pooling": "cls"}}

ENCODER_NAMES = tuple(_ENCODERS)


def get(name: str, **kwargs) -> tf.keras.layers.Layer:
  """Builds the encoder called `name` with its keyword arguments.

  Raises:
    ValueError: for an unknown name.
  """
  if name not in _ENCODERS:
    raise ValueError(f"Unknown encoder {name!r}; valid names: "
                     f"{', '.join(ENCODER_NAMES)}.")
  return _ENCODERS[name](name="encoder", **dict(_DEFAULTS.get(name, {}),
                                                **kwargs))
