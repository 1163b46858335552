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
  {input_word_ids, input_mask, input_type_ids}. `pooling` makes h from the
  token vectors: BERT's pooled output (dense + tanh on [CLS]), the [CLS]
  vector itself, or the masked mean of the tokens; by default each
  checkpoint's own (`default_pooling`: mean for all-MiniLM-L6-v2, trained
  with it; cls for ELECTRA, whose checkpoints have no pooler; pooled for
  Google BERT).
  `size` picks the architecture (`pretrained.SIZES`) and `init_checkpoint`
  the weights (`pretrained.init_encoder`: `minilm`, a .safetensors file or a
  Google BERT / ELECTRA TF checkpoint).
* `vgg16`: the VGG16 of geifmany/cifar-vgg for 32x32 colour images: 13 3x3
  convolutions (64, 64, 128, 128, 256 x 3, 512 x 6; each ReLU then batch
  norm, dropout 0.3 / 0.4 inside each block, 2x2 max-pooling after each
  block), dropout 0.5, flatten, a 512-unit ReLU dense layer with batch norm
  and dropout; L2 weight decay 5e-4 on every kernel. h is that last hidden
  dense layer (512); cifar-vgg's softmax layer is the ranking head here.
* `resnet50`: the Model Garden ResNet-50 backbone
  (`official.vision.modeling.backbones.ResNet`); h is the global average of
  its last feature map (2048). `init_checkpoint` restores a Model Garden
  checkpoint (every backbone variable must be in it).

Every dropout these encoders own is a `stateless_dropout.StatelessDropout`
keyed by the run's `seed` (each encoder's `seed` argument), the layer's
training step and its path in the encoder (`<encoder name>/dropout`), so a
run resumed from its backup draws the masks of the uninterrupted run. The
dropout inside the Model Garden BERT encoder (embeddings, attention, block
outputs) is Keras' own, stateful, and on only when that encoder trains.
"""

import os
from typing import Any, Dict, Optional

import tensorflow as tf

from rank4class_tf import lookup
from rank4class_tf.modeling import pretrained
from rank4class_tf.modeling import stateless_dropout

# How the BERT encoders turn token vectors into h (`BertInstanceEncoder`).
POOLINGS = ("pooled", "cls", "mean")


def dropout_layer(encoder: tf.keras.layers.Layer, rate: float, seed: int,
                  name: str = "dropout") -> stateless_dropout.StatelessDropout:
  """The `StatelessDropout` called `name` of `encoder`, salted by its path
  `<encoder name>/<name>` (the instance encoder's and a class tower's
  differ; a feature cache's `CachedFeatures`, named like the encoder it
  stands for, draws that encoder's masks)."""
  salt = stateless_dropout.salt_of(f"{encoder.name}/{name}")
  return stateless_dropout.StatelessDropout(rate, seed=seed, salt=salt,
                                            name=name)


def default_pooling(encoder: str, init_checkpoint: str) -> str:
  """The pooling a text checkpoint was trained with.

  >>> default_pooling("bert", "minilm"), default_pooling("electra", "")
  ('mean', 'cls')
  >>> default_pooling("bert", "/ckpt/uncased_L-12_H-768_A-12")
  'pooled'

  Args:
    encoder: `bert` or `electra`.
    init_checkpoint: the `--init_checkpoint` value.

  Returns:
    `mean` for the sentence-transformers checkpoints (`minilm`, or a
    .safetensors file: all-MiniLM-L6-v2's layout), `cls` for ELECTRA,
    `pooled` for Google BERT checkpoints and random weights.
  """
  if encoder == "electra":
    return "cls"
  if init_checkpoint == "minilm" or init_checkpoint.endswith(".safetensors"):
    return "mean"
  return "pooled"


def pool(outputs: Dict[str, tf.Tensor], mask: tf.Tensor,
         pooling: str) -> tf.Tensor:
  """h from a Model Garden BERT encoder's outputs.

  Args:
    outputs: the encoder's {"sequence_output": [batch_size, seq_length,
      hidden], "pooled_output": [batch_size, hidden]}.
    mask: input_mask [batch_size, seq_length], 1 on tokens.
    pooling: one of `POOLINGS`; `mean` is sum_t mask_t x_t / sum_t mask_t.

  Returns:
    [batch_size, hidden].
  """
  if pooling == "pooled":
    return outputs["pooled_output"]
  tokens = outputs["sequence_output"]
  if pooling == "cls":
    return tokens[:, 0, :]
  weights = tf.cast(mask, tokens.dtype)[:, :, tf.newaxis]
  return (tf.reduce_sum(tokens * weights, axis=1) /
          tf.maximum(tf.reduce_sum(weights, axis=1), 1.0))


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class SmallCNN(tf.keras.layers.Layer):
  """Small convolutional encoder: [batch, H, W, C] images -> [batch, dim].

  With `sequence=True` it returns the positions of the pooled feature map
  instead, for `label_attention`: {"features": [batch, H/2 * W/2, 64],
  "mask": [batch, H/2 * W/2] ones}.

  Args:
    dim: size of h.
    dropout: dropout rate on h (or the position features) during training.
    sequence: return position features instead of h.
    seed: the run's seed, which keys the dropout masks (`dropout_layer`).
  """

  def __init__(self, dim: int = 128, dropout: float = 0.1,
               sequence: bool = False, seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.dim = int(dim)
    self.dropout = float(dropout)
    self.sequence = bool(sequence)
    self.seed = int(seed)
    head = [] if self.sequence else [
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(self.dim, activation="relu"),
    ]
    self.body = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        tf.keras.layers.MaxPool2D(2),
        *head,
        dropout_layer(self, self.dropout, self.seed),
    ], name="body")

  def call(self, images, training=None):
    outputs = self.body(images, training=training)
    if self.sequence:
      return position_features(outputs)
    return outputs

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"dim": self.dim, "dropout": self.dropout,
                   "sequence": self.sequence, "seed": self.seed})
    return config


def position_features(feature_map: tf.Tensor) -> Dict[str, tf.Tensor]:
  """[batch, H, W, C] -> {"features": [batch, H * W, C], "mask": ones}."""
  shape = tf.shape(feature_map)
  features = tf.reshape(feature_map,
                        [shape[0], shape[1] * shape[2], feature_map.shape[-1]])
  return {"features": features,
          "mask": tf.ones(tf.shape(features)[:2], tf.int32)}


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class MLPEncoder(tf.keras.layers.Layer):
  """Flatten then two ReLU dense layers: [batch, ...] -> [batch, dim].

  Args:
    dim: size of both layers and of h.
    dropout: dropout rate on h during training.
    seed: the run's seed, which keys the dropout masks (`dropout_layer`).
  """

  def __init__(self, dim: int = 128, dropout: float = 0.1, seed: int = 0,
               **kwargs):
    super().__init__(**kwargs)
    self.dim = int(dim)
    self.dropout = float(dropout)
    self.seed = int(seed)
    self.body = tf.keras.Sequential([
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(self.dim, activation="relu"),
        tf.keras.layers.Dense(self.dim, activation="relu"),
        dropout_layer(self, self.dropout, self.seed),
    ], name="body")

  def call(self, inputs, training=None):
    return self.body(inputs, training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"dim": self.dim, "dropout": self.dropout,
                   "seed": self.seed})
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
    dropout: dropout rate on h during training (its masks keyed by `seed`,
      `dropout_layer`; the transformer's own dropout, 0.1 inside when it
      trains, is Keras' stateful one).
    pooling: how the token vectors become h (`POOLINGS`): `pooled` (BERT's
      pooler output, tanh(W h_[CLS] + b)), `cls` (the [CLS] vector of the
      last layer, ELECTRA's choice) or `mean` (the mean of the last layer's
      token vectors over the input mask, [CLS] and [SEP] included: the
      pooling sentence-transformers checkpoints such as all-MiniLM-L6-v2
      were trained with; their L2 normalisation is left out).
      `default_pooling` gives each checkpoint's own.
    trainable_encoder: False freezes the transformer: its weights are not
      trained and it always runs in inference mode (no dropout inside it),
      so h is a fixed function of the text, the one `feature_cache` stores.
      The dropout on h still applies during training.
    sequence: return every token's last-layer vector instead of h, for
      `label_attention`: {"features": [batch_size, seq_length, hidden_size],
      "mask": input_mask [batch_size, seq_length]}.
    seed: the run's seed, which keys the masks of the dropout on h.
  """

  def __init__(self, size: str = "minilm_l6",
               init_checkpoint: Optional[str] = None, dropout: float = 0.1,
               pooling: str = "pooled", sequence: bool = False,
               trainable_encoder: bool = True, seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    if size not in pretrained.SIZES:
      raise ValueError(f"Unknown encoder size {size!r}; valid sizes: "
                       f"{', '.join(pretrained.SIZES)}.")
    lookup.check_choice("pooling", pooling, POOLINGS)
    self.size = size
    self.pooling = pooling
    self.sequence = bool(sequence)
    self.init_checkpoint = init_checkpoint
    self.dropout = float(dropout)
    self.seed = int(seed)
    self.trainable_encoder = bool(trainable_encoder)
    self.network = pretrained.build_bert_encoder(**pretrained.SIZES[size])
    if init_checkpoint:
      pretrained.init_encoder(self.network, init_checkpoint)
    self.network.trainable = self.trainable_encoder
    if self.sequence or self.pooling != "pooled":
      # h does not read BERT's pooler: not training it spares its optimizer
      # slots and Keras' "gradients do not exist" warnings.
      self.network.get_layer("pooler_transform").trainable = False
    self.dropout_layer = dropout_layer(self, self.dropout, self.seed)

  @property
  def hidden_size(self) -> int:
    """Size of h (the transformer's hidden size)."""
    return int(pretrained.SIZES[self.size]["hidden_size"])

  def features(self, inputs, training=None):
    """h (or the token features) before the dropout on it: what
    `feature_cache` stores for a frozen encoder."""
    if not self.sequence:
      return self.pooled_features(inputs, training=training)
    outputs = self.network(
        inputs, training=training if self.trainable_encoder else False)
    return {"features": outputs["sequence_output"],
            "mask": inputs["input_mask"]}

  def pooled_features(self, inputs, training=None) -> tf.Tensor:
    """h [batch_size, hidden_size] before dropout, whatever `sequence` says:
    what a text class encoder reads from this encoder (its class tower)."""
    outputs = self.network(
        inputs, training=training if self.trainable_encoder else False)
    return pool(outputs, inputs["input_mask"], self.pooling)

  def call(self, inputs, training=None):
    encoded = self.features(inputs, training=training)
    if self.sequence:
      return {"features": self.dropout_layer(encoded["features"],
                                             training=training),
              "mask": encoded["mask"]}
    return self.dropout_layer(encoded, training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"size": self.size, "init_checkpoint": self.init_checkpoint,
                   "dropout": self.dropout, "pooling": self.pooling,
                   "sequence": self.sequence,
                   "trainable_encoder": self.trainable_encoder,
                   "seed": self.seed})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class CachedFeatures(tf.keras.layers.Layer):
  """The encoder of a run trained from a feature cache: dropout only.

  A frozen `BertInstanceEncoder` is a fixed function of the text before the
  dropout on its output (`BertInstanceEncoder.features`); `feature_cache`
  stores that function's values once per split and this layer applies the
  rest, the dropout, so training from the cache trains what a frozen encoder
  run on the fly trains.

  Input: h [batch_size, dim], or {"features": [batch_size, seq_length, dim],
  "mask": [batch_size, seq_length]} for `label_attention`. Output: the same,
  with dropout on h / the features during training.

  Named like the encoder it stands for (`encoder`), it draws that encoder's
  dropout masks (`dropout_layer`).

  Args:
    dropout: the text encoder's `dropout`.
    seed: the run's seed, which keys the dropout masks.
  """

  def __init__(self, dropout: float = 0.1, seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.dropout = float(dropout)
    self.seed = int(seed)
    self.dropout_layer = dropout_layer(self, self.dropout, self.seed)

  def call(self, inputs, training=None):
    if isinstance(inputs, dict):
      return {"features": self.dropout_layer(inputs["features"],
                                             training=training),
              "mask": inputs["mask"]}
    return self.dropout_layer(inputs, training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"dropout": self.dropout, "seed": self.seed})
    return config


# cifar-vgg's blocks: (filters, convolutions, dropout after all but the last).
VGG16_BLOCKS = ((64, 2, 0.3), (128, 2, 0.4), (256, 3, 0.4), (512, 3, 0.4),
                (512, 3, 0.4))


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class VGG16Encoder(tf.keras.layers.Layer):
  """cifar-vgg's VGG16: [batch, 32, 32, 3] images -> [batch, 512].

  Every convolution is conv -> ReLU -> batch norm; inside a block a dropout
  follows every convolution but the last, which is followed by 2x2
  max-pooling (`VGG16_BLOCKS`). Then dropout 0.5, flatten, dense(512) ->
  ReLU -> batch norm -> dropout (`dropout`): h.

  Args:
    dropout: dropout rate on h (cifar-vgg: 0.5).
    weight_decay: L2 factor of every kernel (cifar-vgg: 5e-4), added to the
      model's losses.
    seed: the run's seed, which keys the masks of all ten dropouts
      (`dropout_layer`; `dropout_0` ... `dropout_8` inside, `dropout` on h).
  """

  def __init__(self, dropout: float = 0.5, weight_decay: float = 5e-4,
               seed: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.dropout = float(dropout)
    self.weight_decay = float(weight_decay)
    self.seed = int(seed)
    l2 = tf.keras.regularizers.l2(self.weight_decay)
    layers, inner = [], 0  # `inner`: the inner dropouts so far.
    for filters, convs, rate in VGG16_BLOCKS:
      for i in range(convs):
        layers += [tf.keras.layers.Conv2D(filters, 3, padding="same",
                                          activation="relu",
                                          kernel_regularizer=l2),
                   tf.keras.layers.BatchNormalization()]
        if i < convs - 1:
          layers.append(dropout_layer(self, rate, self.seed,
                                      f"dropout_{inner}"))
          inner += 1
        else:
          layers.append(tf.keras.layers.MaxPool2D(2))
    layers += [
        dropout_layer(self, 0.5, self.seed, f"dropout_{inner}"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(512, activation="relu", kernel_regularizer=l2),
        tf.keras.layers.BatchNormalization(),
        dropout_layer(self, self.dropout, self.seed),
    ]
    self.body = tf.keras.Sequential(layers, name="body")

  def call(self, images, training=None):
    return self.body(images, training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"dropout": self.dropout,
                   "weight_decay": self.weight_decay, "seed": self.seed})
    return config


def restore_resnet(backbone: tf.keras.Model, init_checkpoint: str) -> str:
  """Restores a Model Garden ResNet backbone from a TF2 object checkpoint.

  Reads checkpoints that hold the backbone as `backbone` (what the Model
  Garden writes for backbone initialisation) or as `model/backbone` (a
  whole image-classification training checkpoint); the rest (head,
  optimizer) is ignored.

  Args:
    backbone: the built backbone.
    init_checkpoint: a checkpoint prefix, or a directory holding one.

  Returns:
    The checkpoint prefix read.

  Raises:
    ValueError: one line naming the checkpoint when it is not a readable TF
      checkpoint, holds no backbone, or lacks one of the backbone's
      variables.
  """
  path = init_checkpoint
  if os.path.isdir(path):
    path = tf.train.latest_checkpoint(path) or path
  try:
    names = [name for name, _ in tf.train.list_variables(path)]
  except (tf.errors.OpError, ValueError):
    raise ValueError(f"`init_checkpoint` {init_checkpoint!r}: not a "
                     "TensorFlow checkpoint prefix or a directory holding "
                     "one.") from None
  if any(n.startswith("backbone/") for n in names):
    root = tf.train.Checkpoint(backbone=backbone)
  elif any(n.startswith("model/backbone/") for n in names):
    root = tf.train.Checkpoint(model=tf.train.Checkpoint(backbone=backbone))
  else:
    raise ValueError(f"`init_checkpoint` {init_checkpoint!r}: holds no "
                     "`backbone` or `model/backbone` (not a Model Garden "
                     "ResNet checkpoint).")
  status = root.read(path)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    first = str(e).strip().splitlines()[0][:200]
    raise ValueError(f"`init_checkpoint` {init_checkpoint!r}: does not "
                     f"hold every ResNet variable ({first}).") from None
  status.expect_partial()
  return path


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ResNet50Encoder(tf.keras.layers.Layer):
  """Model Garden ResNet-50: [batch, H, W, 3] images -> [batch, 2048].

  h is the global average pooling of the backbone's last endpoint, as in the
  Model Garden's image classification model (which puts its dense softmax
  layer there).

  Args:
    init_checkpoint: Model Garden checkpoint to start from (see
      `restore_resnet`); None starts from random weights.
    dropout: dropout rate on h during training.
    sequence: return the positions of the last feature map instead of h,
      for `label_attention` ({"features": [batch, H/32 * W/32, 2048],
      "mask"}).
    seed: the run's seed, which keys the dropout masks (`dropout_layer`).
  """

  def __init__(self, init_checkpoint: Optional[str] = None,
               dropout: float = 0.0, sequence: bool = False, seed: int = 0,
               **kwargs):
    super().__init__(**kwargs)
    self.sequence = bool(sequence)
    self.init_checkpoint = init_checkpoint
    self.dropout = float(dropout)
    self.seed = int(seed)
    # Imported here: any official.vision import runs that package's
    # __init__, which imports every Model Garden vision task (Mask R-CNN's
    # plotting, matplotlib): 0.9 s of every binary's start
    # (`python -X importtime`), for the ResNet encoder alone.
    from official.vision.modeling.backbones import resnet  # pylint: disable=g-import-not-at-top
    self.backbone = resnet.ResNet(
        model_id=50,
        input_specs=tf.keras.layers.InputSpec(shape=[None, None, None, 3]))
    if init_checkpoint:
      restore_resnet(self.backbone, init_checkpoint)
    self.last_level = max(self.backbone.output_specs, key=int)
    self.pool = tf.keras.layers.GlobalAveragePooling2D()
    self.dropout_layer = dropout_layer(self, self.dropout, self.seed)

  def call(self, images, training=None):
    features = self.backbone(images, training=training)[self.last_level]
    if self.sequence:
      return position_features(self.dropout_layer(features,
                                                  training=training))
    return self.dropout_layer(self.pool(features), training=training)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"init_checkpoint": self.init_checkpoint,
                   "dropout": self.dropout, "sequence": self.sequence,
                   "seed": self.seed})
    return config


_ENCODERS = {
    "small_cnn": SmallCNN,
    "mlp": MLPEncoder,
    "bert": BertInstanceEncoder,
    "electra": BertInstanceEncoder,
    "vgg16": VGG16Encoder,
    "resnet50": ResNet50Encoder,
}
TEXT_ENCODERS = ("bert", "electra")
# Read 3-channel images (`catalog.IMAGE_DATASETS`).
IMAGE_ENCODERS = ("vgg16", "resnet50")
# Can return per-token / per-position features (`sequence=True`), which the
# `label_attention` interaction attends over.
SEQUENCE_ENCODERS = ("small_cnn", "bert", "electra", "resnet50")
# Per-name defaults where two names share a class.
_DEFAULTS = {"electra": {"pooling": "cls"}}

ENCODER_NAMES = tuple(_ENCODERS)


def get(name: str, layer_name: str = "encoder",
        **kwargs) -> tf.keras.layers.Layer:
  """Builds the encoder called `name` with its keyword arguments.

  Args:
    name: encoder name.
    layer_name: the Keras layer's name (a separate class tower's is
      `class_tower`).
    **kwargs: the encoder's arguments.

  Raises:
    ValueError: for an unknown name.
  """
  if name not in _ENCODERS:
    raise ValueError(f"Unknown encoder {name!r}; valid names: "
                     f"{', '.join(ENCODER_NAMES)}.")
  return _ENCODERS[name](name=layer_name, **dict(_DEFAULTS.get(name, {}),
                                                 **kwargs))


def config_kwargs(config) -> Dict[str, Any]:
  """The keyword arguments of `get(config.encoder)` from a
  `config.ModelConfig`."""
  if config.encoder in TEXT_ENCODERS:
    return {"size": config.encoder_size,
            "init_checkpoint": config.init_checkpoint or None,
            "dropout": config.dropout,
            "pooling": config.pooling or default_pooling(
                config.encoder, config.init_checkpoint),
            "trainable_encoder": not config.freeze_encoder}
  if config.encoder == "resnet50":
    return {"init_checkpoint": config.init_checkpoint or None,
            "dropout": config.dropout}
  if config.encoder == "vgg16":
    return {"dropout": config.dropout}
  return {"dim": config.encoder_dim, "dropout": config.dropout}
