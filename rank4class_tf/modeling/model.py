"""The Rank4Class ranking model: instance x classes -> [batch_size, num_classes].

Rank4Class (Wang et al.) reads a multiclass classifier as a ranking model: the
instance x is the query (TF-Ranking *context* features), the classes are the
documents (TF-Ranking *example* features, one entry per class), and

  h = H(x)              the instance encoder, run once per instance,
  h' = [h, 1]           the bias coordinate of the paper,
  c_i = E(i)            the class encoder (an embedding table here),
  s_i = I(h', c_i)      the interaction (`dot`, `lc_mlp`, `concat_mlp`).

`label_attention` replaces h by the encoder's token / position features and
lets every class attend over them (MulCon, see `label_attention`).

With `dot` the model equals a classical `Dense(num_classes)` classifier whose
kernel column i and bias i are c_i (paper §3.2).

The model is assembled with `tfr.keras.model.ModelBuilder` and our
`Rank4ClassScorer`. TF-Ranking's `UnivariateScorer` cannot be used: it scores
each (context, example) pair separately and would run the instance encoder
once per class.
"""

import hashlib
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf import config as config_lib
from rank4class_tf.data import features
from rank4class_tf.data import inputs as inputs_lib
from rank4class_tf import lookup
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import interactions
from rank4class_tf.modeling import pretrained
from rank4class_tf.modeling import zero_shot as zero_shot_lib
from rank4class_tf.multilabel import label_attention
from rank4class_tf.multilabel import mulcon
from rank4class_tf import ops


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ClassEmbedding(tf.keras.layers.Layer):
  """Class encoder c_i = W^T e_i: one trainable vector per class.

  `table()` returns the [num_classes, dim] class table after `build`.

  Args:
    num_classes: number of classes.
    dim: embedding size.
  """

  def __init__(self, num_classes: int, dim: int, **kwargs):
    super().__init__(**kwargs)
    self.num_classes = int(num_classes)
    self.dim = int(dim)

  def build(self, input_shape=None):
    self.embeddings = self.add_weight(
        name="embeddings", shape=[self.num_classes, self.dim],
        initializer="glorot_uniform")
    super().build(input_shape)

  def table(self) -> tf.Tensor:
    return self.embeddings

  def call(self, class_ids):
    """Looks up classes: [..., ] int ids -> [..., dim]."""
    return tf.gather(self.embeddings, tf.cast(class_ids, tf.int32))

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"num_classes": self.num_classes, "dim": self.dim})
    return config


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ClassRankingHead(tf.keras.layers.Layer):
  """Scores the listed classes of each instance from its encoding.

  Called as `head([h, class_ids])`:

  * h: [batch_size, dim] instance encodings;
  * class_ids: [batch_size, list_size] or [batch_size, list_size, 1] ids;
  * returns [batch_size, list_size] float32 scores (whatever the compute
    dtype, so mixed precision keeps losses and metrics in float32).

  Every class of the table is scored once per instance (the interaction sees
  [batch_size, dim] and [num_classes, class_dim]) and the listed ones are
  gathered, so lists may be any subset or order of the classes.

  Args:
    num_classes: size of the class table.
    interaction: an interaction layer (see `interactions.get`).
    class_dim: class embedding size; None makes it equal to h's size plus the
      bias coordinate, which `dot` and `lc_mlp` require.
    append_bias: use h' = [h, 1] (the paper's bias) instead of h.
    class_encoder: the class encoder, a layer with `table()` returning
      [num_classes, class_dim] (`class_encoders.TextClassEncoder`); None
      builds a `ClassEmbedding`.
    zero_shot: a `zero_shot.ZeroShotCalibration` applied to the scores at
      inference (its class encoder's table then carries the tower outputs
      and seen flags: `TextClassEncoder.carries_features`); None: none.
  """

  def __init__(self,
               num_classes: int,
               interaction: tf.keras.layers.Layer,
               class_dim: Optional[int] = None,
               append_bias: bool = True,
               class_encoder: Optional[tf.keras.layers.Layer] = None,
               zero_shot: Optional[tf.keras.layers.Layer] = None,
               **kwargs):
    super().__init__(**kwargs)
    if isinstance(interaction, dict):
      interaction = tf.keras.layers.deserialize(interaction)
    if isinstance(class_encoder, dict):
      class_encoder = tf.keras.layers.deserialize(class_encoder)
    if isinstance(zero_shot, dict):
      zero_shot = tf.keras.layers.deserialize(zero_shot)
    if zero_shot is not None and not getattr(class_encoder,
                                             "carries_features", False):
      raise ValueError("Zero-shot calibration needs a text class encoder "
                       "whose table carries its tower outputs and seen "
                       "flags (TextClassEncoder with `seen`).")
    self.zero_shot = zero_shot
    self.num_classes = int(num_classes)
    self.interaction = interaction
    self.class_dim = class_dim
    self.append_bias = bool(append_bias)
    self._given_class_encoder = class_encoder is not None
    self.class_encoder = class_encoder

  def build(self, input_shape):
    h_shape, _ = input_shape
    dim = int(h_shape[-1]) + (1 if self.append_bias else 0)
    if self.class_encoder is None:
      self.class_encoder = ClassEmbedding(
          self.num_classes, self.class_dim or dim, name="class_encoder")
    self.class_encoder.build(None)
    super().build(input_shape)

  def all_class_scores(self, h: tf.Tensor) -> tf.Tensor:
    """Scores of every class of the table: [batch_size, num_classes]."""
    return self.scores_from_table(h, self.class_encoder.table())

  def scores_from_table(self, h: tf.Tensor, table: tf.Tensor) -> tf.Tensor:
    """Scores of the classes of any class table: h [batch_size, dim],
    table [k, class_dim] -> [batch_size, k] (the `rank_classes` serving
    signature passes the table of a caller's class texts). With
    `zero_shot`, the table is [c | t | seen] and the scores are
    calibrated (at inference)."""
    features = seen = None
    if self.zero_shot is not None:
      table, features, seen = self.class_encoder.split_table(table)
    instance = h
    if self.append_bias:
      h = ops.append_one(h)
    scores = self.interaction([h, tf.cast(table, h.dtype)])
    if self.zero_shot is not None:
      scores = self.zero_shot([scores, instance, features, seen])
    return scores

  def call(self, inputs):
    h, class_ids = inputs
    if class_ids.shape.rank == 3:
      class_ids = tf.squeeze(class_ids, axis=-1)
    scores = ops.gather_class_scores(self.all_class_scores(h), class_ids)
    # Under mixed precision the layers compute in float16; losses and
    # metrics read float32 scores.
    return tf.cast(scores, tf.float32)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({
        "num_classes": self.num_classes,
        "interaction": tf.keras.layers.serialize(self.interaction),
        "class_dim": self.class_dim,
        "append_bias": self.append_bias,
        "class_encoder": (tf.keras.layers.serialize(self.class_encoder)
                          if self._given_class_encoder else None),
        "zero_shot": (None if self.zero_shot is None else
                      tf.keras.layers.serialize(self.zero_shot)),
    })
    return config


class Rank4ClassScorer(tfr.keras.model.Scorer):
  """TF-Ranking scorer: encodes the instance once, ranks every listed class.

  With the `label_attention` interaction the encoder returns token features
  and a `label_attention.LabelAttentionHead` scores the classes; the scorer
  then returns {"scores", "projections"} when `projections` is set (MulCon's
  contrastive training), the scores alone otherwise.

  Args:
    instance_inputs: picks the encoder's input from the context features.
    num_classes: size of the class table.
    encoder_fn: zero-argument callable returning a fresh encoder layer.
    interaction_fn: zero-argument callable returning a fresh interaction
      (for `label_attention`: the head).
    class_dim: see `ClassRankingHead`.
    label_attention: the interaction is a `LabelAttentionHead`.
    projections: also return the label-level projections.
    class_encoder_fn: None (one learned vector per class), or a callable
      taking the instance encoder layer and returning the class encoder
      (`class_encoders.TextClassEncoder`, whose tower may be that encoder).
    zero_shot_fn: None, or a zero-argument callable returning the head's
      `zero_shot.ZeroShotCalibration`.
  """

  def __init__(self, instance_inputs: features.InstanceInputs,
               num_classes: int, encoder_fn, interaction_fn,
               class_dim: Optional[int] = None,
               label_attention: bool = False, projections: bool = False,
               class_encoder_fn: Optional[Callable[
                   [tf.keras.layers.Layer], tf.keras.layers.Layer]] = None,
               zero_shot_fn: Optional[
                   Callable[[], tf.keras.layers.Layer]] = None):
    self._zero_shot_fn = zero_shot_fn
    self._instance_inputs = instance_inputs
    self._num_classes = num_classes
    self._encoder_fn = encoder_fn
    self._interaction_fn = interaction_fn
    self._class_dim = class_dim
    self._label_attention = label_attention
    self._projections = projections
    self._class_encoder_fn = class_encoder_fn

  def __call__(self, context_features, example_features, mask):
    del mask  # Every class is listed; padding is marked by negative labels.
    encoder = self._encoder_fn()
    encoded = encoder(self._instance_inputs.encoder_input(context_features))
    class_ids = example_features[features.CLASS_ID]
    class_encoder = (self._class_encoder_fn(encoder)
                     if self._class_encoder_fn else None)
    if self._label_attention:
      head = self._interaction_fn(class_encoder)
      outputs = head([encoded["features"], encoded["mask"], class_ids])
      return outputs if self._projections else outputs["scores"]
    head = ClassRankingHead(self._num_classes, self._interaction_fn(),
                            class_dim=self._class_dim,
                            class_encoder=class_encoder,
                            zero_shot=(self._zero_shot_fn()
                                       if self._zero_shot_fn else None),
                            name="ranking_head")
    return head([encoded, class_ids])


def copy_weights(source: tf.keras.Model, target: tf.keras.Model) -> int:
  """Assigns every weight of `source` to the weight of `target` that has the
  same name (in order, where names repeat), and returns how many.

  Used to export a run trained from a feature cache: `source` has no encoder
  weights, `target` is the same model over raw text, whose extra weights
  (the frozen encoder's) keep their values.

  Raises:
    ValueError: a weight of `source` has no counterpart of its shape.
  """
  targets: Dict[str, list] = {}
  for weight in target.weights:
    targets.setdefault(weight.name, []).append(weight)
  sources: Dict[str, list] = {}
  for weight in source.weights:
    sources.setdefault(weight.name, []).append(weight)
  count = 0
  for name, weights in sources.items():
    matches = targets.get(name, [])
    if len(matches) != len(weights) or any(
        a.shape != b.shape for a, b in zip(weights, matches)):
      raise ValueError(
          f"cannot copy weight {name!r} of shape(s) "
          f"{[w.shape.as_list() for w in weights]}: the target model's "
          f"weights of that name have shape(s) "
          f"{[w.shape.as_list() for w in matches]}.")
    for weight, match in zip(weights, matches):
      match.assign(weight)
      count += 1
  return count


def weights_digest(model: tf.keras.Model) -> str:
  """SHA-256 of every weight's name, dtype, shape and values, in order: two
  models of one architecture have the same digest when all their weights
  are equal (`Rank4ClassPipeline.export_saved_model` copies an export of
  the same weights)."""
  digest = hashlib.sha256()
  for weight in model.weights:
    value = np.ascontiguousarray(weight.numpy())
    digest.update(f"{weight.name}|{value.dtype.str}|{value.shape}|".encode())
    digest.update(value.tobytes())
  return digest.hexdigest()


def _text_class_encoder_fn(data, instance_inputs, encoder: str,
                           encoder_kwargs: Dict[str, Any],
                           class_encoder: str,
                           class_texts: Optional[Sequence[str]],
                           class_tower: str,
                           class_features: Optional[np.ndarray],
                           class_width: Optional[int],
                           projection: str = "dense",
                           seen: Optional[Sequence[int]] = None):
  """The callable that builds a run's `TextClassEncoder` from its instance
  encoder (see `Rank4ClassScorer`), after checking the settings."""
  lookup.check_choice("class_projection", projection,
                      class_encoders.CLASS_PROJECTIONS)
  lookup.check_choice("class_encoder", class_encoder,
                      class_encoders.CLASS_ENCODERS)
  lookup.check_choice("class_tower", class_tower,
                      class_encoders.CLASS_TOWERS)
  if encoder not in encoders.TEXT_ENCODERS:
    raise ValueError(f"`class_encoder`=text encodes class texts with a text "
                     f"encoder ({', '.join(encoders.TEXT_ENCODERS)}), not "
                     f"`encoder`={encoder}.")
  class_texts = list(class_texts or [])
  if len(class_texts) != data.num_classes:
    raise ValueError(f"`class_encoder`=text needs one text per class: got "
                     f"{len(class_texts)} for {data.num_classes} classes.")
  tower_kwargs = dict(encoder_kwargs, sequence=False)
  feature_dim = int(pretrained.SIZES[tower_kwargs.get(
      "size", "minilm_l6")]["hidden_size"])
  # c_i meets h' = [h, 1] (dot, lc_mlp need its width; concat_mlp any).
  width = class_width or feature_dim + 1
  if class_features is not None:
    return lambda _: class_encoders.TextClassEncoder(
        width, data.num_classes, feature_dim,
        class_features=class_features, projection=projection, seen=seen,
        name="class_encoder")
  class_inputs = class_encoders.tokenize(instance_inputs.preprocessor,
                                         class_texts)

  def build(instance_encoder):
    if class_tower == "shared":
      tower = instance_encoder
    else:
      tower = encoders.get(encoder, layer_name="class_tower",
                           **tower_kwargs)
    return class_encoders.TextClassEncoder(
        width, data.num_classes, feature_dim, class_inputs=class_inputs,
        tower=tower, projection=projection, seen=seen, name="class_encoder")

  return build


def build_model_builder(data,
                        model: Optional[config_lib.ModelConfig] = None,
                        loss: Optional[config_lib.LossConfig] = None,
                        *,
                        instance_inputs: Optional[
                            features.InstanceInputs] = None,
                        encoder_fn: Optional[
                            Callable[[], tf.keras.layers.Layer]] = None,
                        class_texts: Optional[Sequence[str]] = None,
                        class_features: Optional[np.ndarray] = None,
                        seed: int = 0,
                        held_out: Sequence[int] = ()
                       ) -> tfr.keras.model.AbstractModelBuilder:
  """A TF-Ranking `ModelBuilder` of the Rank4Class model for `data`, from
  the run's model and loss configs, whole (the Model Garden's
  `task.build_model()`).

  Args:
    data: the dataset (`contract.ClassificationData`: its instance feature
      and class count).
    model: the encoder (`encoders.config_kwargs`), the interaction, its
      width and the class encoder (default: `ModelConfig()`).
    loss: the loss config, for MulCon's label-level contrastive term: with
      `contrastive_weight` > 0 (and `interaction='label_attention'`) the
      builder makes MulCon's `ContrastiveRankingModel`, its gamma starting
      at 0 when `contrastive_start_step` > 0 (a callback raises it). The
      loss itself is compiled by the pipeline. Default: `LossConfig()`.
    instance_inputs: how raw instances become context features (default:
      the raw numeric instance itself).
    encoder_fn: zero-argument callable returning the encoder layer, instead
      of `encoders.get(model.encoder, ...)` (a run trained from a feature
      cache: `encoders.CachedFeatures`); `model.encoder` still names the
      encoder the features come from.
    class_texts: `class_encoder='text'`: one text per class, index = class
      id.
    class_features: `text` trained from a feature cache: the frozen
      tower's outputs on the class texts, [num_classes, hidden_size]; no
      tower is built.
    seed: the run's seed (`TrainerConfig.seed`), which keys the encoders'
      dropout masks (`stateless_dropout.StatelessDropout`); it changes no
      weight, only the masks of training calls.
    held_out: the ids of the classes held out of training
      (`--holdout_classes`): with `seen_margin` or `cosine_fusion`, the
      classes the margin spares.

  Returns:
    A model builder; `.build()` returns a Keras model taking the context
    features, class_id and example_list_mask and returning
    [batch_size, list_size] scores.

  Raises:
    ValueError: for unknown names, or `label_attention` with an encoder that
      has no token / position features.
  """
  model = model or config_lib.ModelConfig()
  loss = loss or config_lib.LossConfig()
  encoder, interaction = model.encoder, model.interaction
  mlp_units, class_encoder = model.mlp_units, model.class_encoder
  label_dim, label_heads = model.label_dim, model.label_heads
  projection_dim = model.projection_dim
  class_dim = None  # h's size + 1.
  contrastive_temperature = (loss.contrastive_temperature
                             if loss.contrastive_weight > 0 else None)
  if encoder not in encoders.ENCODER_NAMES:
    encoders.get(encoder)  # Raises, listing the valid names.
  encoder_kwargs = dict(encoders.config_kwargs(model), seed=seed)
  instance_inputs = instance_inputs or inputs_lib.default_inputs(data)
  sequence = interaction in interactions.SEQUENCE_INTERACTIONS
  contrastive = sequence and contrastive_temperature is not None
  class_encoder_fn = zero_shot_fn = None
  calibrated = bool(model.seen_margin or model.cosine_fusion)
  if calibrated and (class_encoder != "text" or sequence):
    raise ValueError("`seen_margin` and `cosine_fusion` calibrate the scores "
                     "of a text class encoder (`class_encoder`=text) scored "
                     "from h (not `interaction`=label_attention).")
  if class_encoder != "embedding":
    seen = None
    if calibrated:
      held = set(int(i) for i in held_out)
      seen = [0 if i in held else 1 for i in range(data.num_classes)]
      zero_shot_fn = lambda: zero_shot_lib.ZeroShotCalibration(
          model.seen_margin, model.cosine_fusion, name="zero_shot")
    class_encoder_fn = _text_class_encoder_fn(
        data, instance_inputs, encoder, encoder_kwargs, class_encoder,
        class_texts, model.class_tower, class_features,
        class_width=(2 * label_dim + 1 if interaction in
                     interactions.SEQUENCE_INTERACTIONS else class_dim),
        projection=model.class_projection, seen=seen)
  if sequence:
    if encoder not in encoders.SEQUENCE_ENCODERS:
      raise ValueError(f"`interaction`={interaction} attends over token or "
                       f"position features; `encoder`={encoder} has none "
                       f"(use one of {', '.join(encoders.SEQUENCE_ENCODERS)}"
                       ").")
    encoder_kwargs["sequence"] = True
    interaction_fn = lambda class_encoder=None: (
        label_attention.LabelAttentionHead(
            data.num_classes, dim=label_dim, num_heads=label_heads,
            projection_dim=projection_dim if contrastive else 0,
            class_encoder=class_encoder, name="label_attention_head"))
    interaction_fn()  # Checks the width and heads now.
  else:
    if contrastive_temperature is not None:
      raise ValueError("The label-level contrastive loss needs "
                       "`interaction`=label_attention.")
    interactions.get(interaction, units=mlp_units)
    interaction_fn = lambda: interactions.get(interaction, units=mlp_units)
  input_creator = tfr.keras.model.FeatureSpecInputCreator(
      instance_inputs.context_spec(),
      {features.CLASS_ID: tf.io.FixedLenFeature([1], tf.int64)})
  scorer = Rank4ClassScorer(
      instance_inputs, data.num_classes,
      encoder_fn=encoder_fn or (
          lambda: encoders.get(encoder, **encoder_kwargs)),
      interaction_fn=interaction_fn,
      class_dim=class_dim, label_attention=sequence, projections=contrastive,
      class_encoder_fn=class_encoder_fn, zero_shot_fn=zero_shot_fn)
  builder = tfr.keras.model.ModelBuilder(
      input_creator=input_creator,
      preprocessor=tfr.keras.model.PreprocessorWithSpec(),
      scorer=scorer,
      mask_feature_name=features.MASK,
      name="rank4class")
  if contrastive:
    return mulcon.ContrastiveModelBuilder(
        builder, contrastive_temperature,
        loss.contrastive_weight if loss.contrastive_start_step == 0 else 0.,
        normalization=loss.contrastive_normalization,
        base_temperature=loss.contrastive_base_temperature)
  return builder
