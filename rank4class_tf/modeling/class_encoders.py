"""Class encoders from class metadata: classes described by text.

Rank4Class's model has three parts a ranking view can change: the loss, the
interaction and the class encoder c_i = E(i). The classical class encoder is
one learned vector per class id (`model.ClassEmbedding`, `--class_encoder=
embedding`). With `--class_encoder=text` each class is the text of its name
(and an optional description), encoded by a text tower and projected to the
interaction's width:

```
  t_i = T(text_i)          the tower's pooled output, [hidden_size]
  c_i = P t_i + b          a learned projection, [class_dim]
```

The tower is the instance encoder itself (`--class_tower=shared`: the same
weights, pooled the same way) or a second copy of it started from the same
checkpoint (`separate`). The class texts are encoded once per training step,
for every class at once (a [num_classes, seq_length] batch), never once per
instance. Because c_i is a function of the text, not of the id, a trained
model can rank classes it never saw in training (`--holdout_classes`) and a
served model can rank a class list its caller chooses (the `rank_classes`
signature of `serving`).

A frozen encoder with a feature cache trains without a tower: the classes'
tower outputs are a fixed [num_classes, hidden_size] table (computed once,
like the instances'), stored in the layer's `class_features` weight. An
exported model stores that table too (`store_features`, at export time), so
its `serving_default` signature encodes the training classes once, not per
call.

Why not a TF-Ranking or Model Garden part: TF-Ranking's scorers score each
(query, document) pair with document features read from the input; here the
documents are shared by every instance and their features are the model's
own constants, so they are encoded once per step inside the model.
"""

from typing import Any, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf


CLASS_ENCODERS = ("embedding", "text")
CLASS_TOWERS = ("shared", "separate")
# `--class_projection`: c = P t + b (dense), or c = [t, 0] + P t + b with
# P and b starting at 0 (residual): training starts from the tower's own
# geometry, so `cosine` ranks classes as the untrained cosine does.
CLASS_PROJECTIONS = ("dense", "residual")
# Most classes the `rank_classes` serving signature ranks in one call: the
# tower encodes every listed class text per call (1,000 classes of 32
# tokens is one MiniLM forward pass of 1,000 sequences).
MAX_SERVED_CLASSES = 4096


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class TextClassEncoder(tf.keras.layers.Layer):
  """c_i = P T(text_i) + b: class vectors from class texts.

  `table()` returns [num_classes, dim], like `model.ClassEmbedding.table`;
  calling the layer on class ids gathers rows of it.

  Two modes, chosen when the layer is built:

  * with a `tower` (a `encoders.BertInstanceEncoder`, the instance's own for
    a shared tower): the class texts' token ids are constants of the layer
    and every `table()` call runs the tower on all of them, once per step;
  * without one (a frozen encoder trained from a feature cache): the tower's
    outputs are given as `class_features` and only P, b train.

  `store_features()` runs the tower once and keeps its outputs in the
  `class_features` weight, which `table()` then reads: an export does this,
  so serving the training classes costs no tower pass.

  Args:
    dim: width of c_i (the interaction's class width).
    num_classes: number of classes.
    feature_dim: the tower's output size (hidden_size).
    class_inputs: {input_word_ids, input_mask, input_type_ids}, each
      [num_classes, seq_length] ints: the tokenized class texts (needed with
      a tower).
    tower: the text tower, or None.
    class_features: [num_classes, feature_dim] initial `class_features`
      (without a tower: the frozen tower's outputs).
    projection: `dense` or `residual` (`CLASS_PROJECTIONS`).
    seen: [num_classes] 0/1, the classes seen in training; given, the
      table carries the tower outputs and the seen flags,
      [c_i | t_i | seen_i] of width dim + feature_dim + 1
      (`zero_shot.ZeroShotCalibration` reads them; `split_table` splits
      them), and a class text `encode`s as seen when its tokens are those
      of a seen training class.
  """

  def __init__(self, dim: int, num_classes: int, feature_dim: int,
               class_inputs: Optional[Dict[str, Any]] = None,
               tower: Optional[tf.keras.layers.Layer] = None,
               class_features: Optional[np.ndarray] = None,
               projection: str = "dense",
               seen: Optional[Sequence[int]] = None, **kwargs):
    super().__init__(**kwargs)
    if projection not in CLASS_PROJECTIONS:
      raise ValueError(f"`class_projection`={projection!r} is not valid; "
                       f"choose one of: {', '.join(CLASS_PROJECTIONS)}.")
    if projection == "residual" and dim < feature_dim:
      raise ValueError(f"`class_projection`=residual adds the tower output "
                       f"({feature_dim} wide) to c_i: c_i must be at least "
                       f"as wide, not {dim}.")
    if isinstance(tower, dict):
      tower = tf.keras.layers.deserialize(tower)
    if tower is not None and class_inputs is None:
      raise ValueError("A text class encoder with a tower needs the class "
                       "texts' token ids (class_inputs).")
    self.dim = int(dim)
    self.num_classes = int(num_classes)
    self.feature_dim = int(feature_dim)
    self.class_inputs = None
    if class_inputs is not None:
      self.class_inputs = {name: np.asarray(value, np.int32)
                           for name, value in class_inputs.items()}
      rows = {v.shape[0] for v in self.class_inputs.values()}
      if rows != {self.num_classes}:
        raise ValueError(f"class_inputs have {sorted(rows)} rows for "
                         f"{self.num_classes} classes.")
    self.tower = tower
    self._initial_features = class_features
    self.stored = tower is None
    self.projection_kind = projection
    self.seen = None if seen is None else [int(v) for v in seen]
    if self.seen is not None and len(self.seen) != self.num_classes:
      raise ValueError(f"`seen` has {len(self.seen)} flags for "
                       f"{self.num_classes} classes.")
    zeros = ({"kernel_initializer": "zeros"} if projection == "residual"
             else {})
    self.projection = tf.keras.layers.Dense(self.dim, name="projection",
                                            **zeros)

  @property
  def carries_features(self) -> bool:
    """Whether `table` and `encode` return [c | t | seen]."""
    return self.seen is not None

  def split_table(self, table: tf.Tensor):
    """(c [k, dim], t [k, feature_dim], seen [k]) of a carried table."""
    return (table[:, :self.dim],
            table[:, self.dim:self.dim + self.feature_dim],
            table[:, -1])

  def _project(self, features: tf.Tensor) -> tf.Tensor:
    """c = P t + b (dense), [t, 0] + P t + b (residual)."""
    projected = self.projection(features)
    if self.projection_kind == "residual":
      projected += tf.pad(tf.cast(features, projected.dtype),
                          [[0, 0], [0, self.dim - self.feature_dim]])
    return projected

  def _output(self, features: tf.Tensor, seen) -> tf.Tensor:
    """c, or [c | t | seen] when the table carries features."""
    projected = self._project(features)
    if not self.carries_features:
      return projected
    return tf.concat([projected, tf.cast(features, projected.dtype),
                      tf.cast(seen, projected.dtype)[:, tf.newaxis]], axis=1)

  def _seen_of(self, class_inputs: Dict[str, tf.Tensor]) -> tf.Tensor:
    """[k] 1. where a class text's tokens are those of a seen training
    class (padding ignored), else 0."""
    known = self.class_inputs["input_word_ids"][np.asarray(self.seen) > 0]
    ids = tf.cast(class_inputs["input_word_ids"], tf.int32)
    known = tf.constant(known, tf.int32)
    width = tf.maximum(tf.shape(ids)[1], tf.shape(known)[1])
    ids = tf.pad(ids, [[0, 0], [0, width - tf.shape(ids)[1]]])
    known = tf.pad(known, [[0, 0], [0, width - tf.shape(known)[1]]])
    same = tf.reduce_all(tf.equal(ids[:, tf.newaxis, :],
                                  known[tf.newaxis, :, :]), axis=-1)
    return tf.cast(tf.reduce_any(same, axis=1), tf.float32)

  def build(self, input_shape=None):
    initial = self._initial_features
    self.class_features = self.add_weight(
        name="class_features", shape=[self.num_classes, self.feature_dim],
        initializer=(tf.constant_initializer(np.asarray(initial, np.float32))
                     if initial is not None else "zeros"),
        trainable=False)
    self.projection.build([None, self.feature_dim])
    super().build(input_shape)

  def encode(self, class_inputs: Dict[str, tf.Tensor],
             training=None) -> tf.Tensor:
    """c of any class texts: tokenized [k, seq_length] -> [k, dim]."""
    if self.tower is None:
      raise ValueError("This text class encoder has no tower (it was trained "
                       "from a feature cache); encode texts with the "
                       "exported model.")
    class_inputs = trim_padding(class_inputs)
    features = self.tower.pooled_features(class_inputs, training=training)
    seen = self._seen_of(class_inputs) if self.carries_features else None
    return self._output(features, seen)

  def table(self, training=None) -> tf.Tensor:
    """c of every class: [num_classes, dim]."""
    seen = (None if self.seen is None else
            tf.constant(self.seen, tf.float32))
    if self.stored:
      return self._output(self.class_features, seen)
    # The constants were trimmed when tokenized: their shape stays static
    # (for XLA).
    return self._output(self.tower.pooled_features(
        {name: tf.constant(value)
         for name, value in self.class_inputs.items()}, training=training),
                        seen)

  def store_features(self) -> None:
    """Runs the tower on the class texts once and serves from its outputs
    from now on (before an export). Without a tower: nothing to do."""
    if self.tower is None:
      return
    inputs = {name: tf.constant(value)
              for name, value in self.class_inputs.items()}
    self.class_features.assign(
        tf.cast(self.tower.pooled_features(inputs, training=False),
                tf.float32))
    self.stored = True

  def call(self, class_ids):
    """Looks up classes: [..., ] int ids -> [..., dim] (c only)."""
    table = self.table()
    if self.carries_features:
      table = self.split_table(table)[0]
    return tf.gather(table, tf.cast(class_ids, tf.int32))

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({
        "dim": self.dim, "num_classes": self.num_classes,
        "feature_dim": self.feature_dim,
        "projection": self.projection_kind, "seen": self.seen,
        "class_inputs": None if self.class_inputs is None else {
            name: value.tolist() for name, value in self.class_inputs.items()},
        # A shared tower is serialized as a copy of its config: rebuilt
        # from it, it is a separate tower of the same architecture and
        # checkpoint (Keras configs cannot express shared layers).
        "tower": (None if self.tower is None else
                  tf.keras.layers.serialize(self.tower)),
    })
    return config


def trim_padding(inputs: Dict[str, Any]) -> Dict[str, Any]:
  """BERT inputs cut to their longest text: the columns where every mask
  is 0 are padding, which changes no token vector and no masked mean, so the
  tower's output is the same at a fraction of the cost (class names are a
  few tokens; instances are padded to `max_seq_length`).

  >>> trim_padding({"input_mask": np.array([[1, 1, 0, 0], [1, 0, 0, 0]])})
  {'input_mask': array([[1, 1],
         [1, 0]])}
  """
  mask = inputs["input_mask"]
  if isinstance(mask, np.ndarray):
    length = max(int(mask.sum(axis=1).max()), 1)
  else:
    length = tf.maximum(tf.reduce_max(tf.reduce_sum(mask, axis=1)), 1)
  return {name: value[:, :length] for name, value in inputs.items()}


def tokenize(preprocessor, texts: Sequence[str]) -> Dict[str, np.ndarray]:
  """Token ids of class texts with the instance's tokenizer, cut to the
  longest text (`trim_padding`): {name: [len(texts), length] int32}."""
  outputs = preprocessor(tf.constant(list(texts)))
  return trim_padding({name: value.numpy() for name, value in outputs.items()})
