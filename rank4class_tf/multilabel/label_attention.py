r"""Label-wise attention: classes as queries over the instance (MulCon).

MulCon (Dao et al. 2021) gives every label its own embedding of the
instance. In Rank4Class terms it is an interaction in which each class, as a
learnable query, attends over the instance's token / position features
instead of meeting one pooled vector h:

```
  r  = Dense_D(features)              [batch_size, P, D]  (tokens, positions)
  r' = SAB(r)                         self-attention block over positions
  g  = SAB(MAB(U, r'))                [batch_size, num_classes, D]
  s_c = <w_c, g_c> + b_c              one linear classifier per class
  z_c = normalize(W_2 relu(W_1 g_c))  projection for the contrastive loss
```

with the blocks of MulCon's eq. (3)-(4) (those of the Set Transformer):

```
  MAB(X, Y) = LayerNorm(H + Dense(H)),  H = LayerNorm(X + MHA(X, Y, Y)),
  SAB(X)    = MAB(X, X),
```

`MHA` multi-head attention (4 heads), U [num_classes, D] the learnable label
embeddings (the class encoder). Padding tokens (mask 0) are never attended
to. The scores are a ranking over the class list like any other
interaction's, so `--interaction=label_attention` serves single-label runs
too; multi-label runs add MulCon's label-level contrastive loss on z
(`mulcon`).
"""

from typing import Any, Dict, Optional

import tensorflow as tf

from rank4class_tf import ops


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class AttentionBlock(tf.keras.layers.Layer):
  """MAB(X, Y) = LayerNorm(H + Dense(H)), H = LayerNorm(X + MHA(X, Y, Y)).

  Called as `block(query, value, value_mask)`:

  * query: [batch_size, T, dim];
  * value: [batch_size, S, dim];
  * value_mask: optional [batch_size, S], nonzero where value is real;
  * returns [batch_size, T, dim].

  Args:
    dim: model width D (query and value must have it).
    num_heads: attention heads; dim must be a multiple of it.
    dropout: attention dropout in training.
  """

  def __init__(self, dim: int, num_heads: int = 4, dropout: float = 0.0,
               **kwargs):
    super().__init__(**kwargs)
    if dim % num_heads:
      raise ValueError(f"Attention width {dim} must be a multiple of the "
                       f"{num_heads} heads.")
    self.dim = int(dim)
    self.num_heads = int(num_heads)
    self.dropout = float(dropout)
    self.attention = tf.keras.layers.MultiHeadAttention(
        num_heads, dim // num_heads, dropout=self.dropout, name="attention")
    self.norm_1 = tf.keras.layers.LayerNormalization(name="norm_1")
    self.linear = tf.keras.layers.Dense(dim, name="linear")
    self.norm_2 = tf.keras.layers.LayerNormalization(name="norm_2")

  def build(self, input_shape=None):
    # Every weight is created here, not on the first call (Keras builds
    # MultiHeadAttention lazily): `tf.keras.models.load_model` builds a
    # revived layer, then restores its weights, and would miss lazy ones.
    # `build` runs in an init scope, so this call is eager.
    dummy = tf.zeros([1, 1, self.dim])
    self.attention(dummy, dummy)
    self.norm_1.build([None, None, self.dim])
    self.linear.build([None, None, self.dim])
    self.norm_2.build([None, None, self.dim])
    super().build(input_shape)

  def call(self, query, value, value_mask=None, training=None):
    mask = None
    if value_mask is not None:
      # [batch_size, T, S]: every query sees the same real positions.
      mask = tf.cast(value_mask, tf.bool)[:, tf.newaxis, :]
      mask = tf.tile(mask, [1, tf.shape(query)[1], 1])
    h = self.norm_1(query + self.attention(query, value, value,
                                           attention_mask=mask,
                                           training=training))
    return self.norm_2(h + self.linear(h))

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"dim": self.dim, "num_heads": self.num_heads,
                   "dropout": self.dropout})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class LabelAttentionHead(tf.keras.layers.Layer):
  """Scores (and projections) of the listed classes from token features.

  Called as `head([features, mask, class_ids])`:

  * features: [batch_size, P, C] token / position features of the instance;
  * mask: [batch_size, P], nonzero for real tokens;
  * class_ids: [batch_size, list_size] or [batch_size, list_size, 1];
  * returns {"scores": [batch_size, list_size] float32} and, when
    projection_dim > 0, "projections": [batch_size, list_size,
    projection_dim] float32 of unit norm, both in list order.

  Args:
    num_classes: size of the class table (label queries U).
    dim: width D of the label-level embeddings.
    num_heads: attention heads (MulCon: 4).
    projection_dim: size of z; 0 builds no projector (no contrastive loss).
    dropout: attention dropout in training.
    class_encoder: None learns U, w and b per class; a class encoder whose
      `table()` is [num_classes, 2 * dim + 1] (`class_encoders.
      TextClassEncoder`) gives each class's query u_c, classifier w_c and
      bias b_c from its text instead (columns [0, dim), [dim, 2 dim), 2 dim),
      so that any class text can be scored.
  """

  def __init__(self, num_classes: int, dim: int = 256, num_heads: int = 4,
               projection_dim: int = 128, dropout: float = 0.0,
               class_encoder: Optional[tf.keras.layers.Layer] = None,
               **kwargs):
    super().__init__(**kwargs)
    if isinstance(class_encoder, dict):
      class_encoder = tf.keras.layers.deserialize(class_encoder)
    self.class_encoder = class_encoder
    self.num_classes = int(num_classes)
    self.dim = int(dim)
    self.num_heads = int(num_heads)
    self.projection_dim = int(projection_dim)
    self.dropout = float(dropout)
    self.input_projection = tf.keras.layers.Dense(dim, name="input_projection")
    block = lambda name: AttentionBlock(dim, num_heads, dropout, name=name)
    self.token_block = block("token_self_attention")
    self.label_block = block("label_attention")
    self.label_self_block = block("label_self_attention")
    self.projector = None
    if self.projection_dim > 0:
      self.projector = tf.keras.Sequential([
          tf.keras.layers.Dense(dim, activation="relu"),
          tf.keras.layers.Dense(projection_dim),
      ], name="projector")

  def build(self, input_shape):
    # Sub-layers built here too, for `load_model` (see AttentionBlock.build).
    self.input_projection.build(input_shape[0])
    for block in (self.token_block, self.label_block, self.label_self_block):
      block.build(None)
    if self.projector is not None:
      self.projector.build([None, None, self.dim])
    if self.class_encoder is not None:
      self.class_encoder.build(None)
    else:
      self.label_queries = self.add_weight(
          name="label_queries", shape=[self.num_classes, self.dim],
          initializer="glorot_uniform")
      self.classifier_kernel = self.add_weight(
          name="classifier_kernel", shape=[self.num_classes, self.dim],
          initializer="glorot_uniform")
      self.classifier_bias = self.add_weight(
          name="classifier_bias", shape=[self.num_classes],
          initializer="zeros")
    super().build(input_shape)

  def class_table(self) -> tf.Tensor:
    """[num_classes, 2 * dim + 1]: each class's query, classifier and bias."""
    if self.class_encoder is not None:
      return self.class_encoder.table()
    return tf.concat([self.label_queries, self.classifier_kernel,
                      self.classifier_bias[:, tf.newaxis]], axis=1)

  def label_embeddings(self, features, mask, training=None,
                       queries=None) -> tf.Tensor:
    """g: [batch_size, num_classes, dim] label-level embeddings (of the
    given queries [k, dim]: [batch_size, k, dim])."""
    r = self.input_projection(features)
    r = self.token_block(r, r, mask, training=training)
    if queries is None:
      queries = self.class_table()[:, :self.dim]
    queries = tf.cast(queries, r.dtype)
    queries = tf.tile(queries[tf.newaxis], [tf.shape(r)[0], 1, 1])
    g = self.label_block(queries, r, mask, training=training)
    return self.label_self_block(g, g, training=training)

  def scores_from_table(self, features, mask, table,
                        training=None) -> tf.Tensor:
    """Scores of the classes of a class table [k, 2 * dim + 1]:
    [batch_size, k] (and the label-level embeddings g)."""
    g = self.label_embeddings(features, mask, training=training,
                              queries=table[:, :self.dim])
    table = tf.cast(table, g.dtype)
    scores = (tf.reduce_sum(g * table[:, self.dim:2 * self.dim], -1)
              + table[:, 2 * self.dim])
    return scores, g

  def call(self, inputs, training=None):
    features, mask, class_ids = inputs
    if class_ids.shape.rank == 3:
      class_ids = tf.squeeze(class_ids, axis=-1)
    scores, g = self.scores_from_table(features, mask, self.class_table(),
                                       training=training)
    ids = tf.cast(class_ids, tf.int32)
    outputs = {
        "scores": tf.cast(ops.gather_class_scores(scores, ids), tf.float32)}
    if self.projector is not None:
      projections = tf.math.l2_normalize(
          tf.cast(self.projector(g), tf.float32), axis=-1)
      outputs["projections"] = tf.gather(projections, ids, batch_dims=1)
    return outputs

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"num_classes": self.num_classes, "dim": self.dim,
                   "num_heads": self.num_heads,
                   "projection_dim": self.projection_dim,
                   "dropout": self.dropout,
                   "class_encoder": (
                       None if self.class_encoder is None else
                       tf.keras.layers.serialize(self.class_encoder))})
    return config
