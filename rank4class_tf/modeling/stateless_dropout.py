"""Dropout whose masks a resumed run draws again: `StatelessDropout`.

Keras' `Dropout` draws its masks from a stateful generator: TensorFlow's
legacy random kernels (the default), whose state lives in the kernel and
is lost with the process, or a `tf.random.Generator`
(`tf.keras.backend.experimental.enable_tf_random_generator`) whose state
Keras keeps out of checkpoints on purpose (`BaseRandomLayer`). Either way a
run restored by `tf.keras.callbacks.BackupAndRestore` draws other masks than
the run that was never interrupted, and ends with other weights. Keras'
seeded `rng_type="stateless"` is no cure: it draws one mask, the same at
every step.

`StatelessDropout` keys each mask by (the run's seed, the layer's salt, the
layer's training step, the replica) and draws it with
`tf.random.stateless_uniform` (`ops.dropout_key`, `ops.stateless_dropout`).
The step is a non-trainable int64 variable of the layer, counting its
training calls: a model weight, so the checkpoints, Keras' backup and the
SavedModels hold it, and a resumed run goes on counting where the backup
was taken. So the resumed run redraws exactly the masks of the
uninterrupted one.

Checkpoints written before the counters existed load with `restore`: where
the counters only add weights to layers that had some, TensorFlow matches
every other weight and the counters start at 0; where a layer that had no
weights gains one (the dropout of a frozen run's `CachedFeatures`), Keras'
checkpoint keys (`layer_with_weights-N`) of the layers after it shift, and
`restore` loads the checkpoint into the same model built without counters
(`without_counters`) and copies its weights over. Plain
`model.load_weights(...).expect_partial()` would leave those layers at their
initial values without a word.

Design rejected: keying by the optimizer's `iterations` (in every checkpoint
already, so old checkpoints would need nothing). A layer cannot reach the
optimizer without being handed it, which ties every encoder to a compiled
model; the layer's own counter works in any loop, in a layer called twice a
step (two masks), and in a SavedModel.
"""

import contextlib
import re
import threading
import zlib
from typing import Any, Callable, Dict, List, Optional

import tensorflow as tf

from rank4class_tf import ops

# The name of the step counter (`StatelessDropout.step`): attribute, weight
# and the last part of its checkpoint key.
STEP_NAME = "step"

# Whether layers built now create their step counter (`without_counters`).
_BUILDING = threading.local()


def salt_of(name: str) -> int:
  """A layer's salt from a name: CRC-32 of its UTF-8 bytes (the same in
  every process, unlike Python's `hash`).

  >>> salt_of("encoder/dropout")
  787932767
  """
  return zlib.crc32(name.encode("utf-8"))


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class StatelessDropout(tf.keras.layers.Layer):
  """Inverted dropout with masks keyed by seed, step, salt and replica.

  In a training call, y = x / (1 - rate) where u >= rate, else 0, with u
  drawn by `tf.random.stateless_uniform` from the key
  `ops.dropout_key(seed, salt, step, replica)`; then `step` grows by one.
  Outside training the layer is the identity and `step` stays. Under a
  distribution strategy each replica folds its `replica_id_in_sync_group`
  into the key (its units differ from the other replicas') and counts its
  own calls (`step` is a sync-on-read variable, all replicas counting the
  same, the first replica's value saved).

  Input and output: any float tensor, e.g. h [batch_size, dim].

  Args:
    rate: the probability of dropping an entry, in [0, 1).
    seed: the run's seed (`TrainerConfig.seed`).
    salt: tells this layer's masks from another layer's of the same model;
      None: `salt_of(name)`. A layer that may be rebuilt under another
      automatic name (`dropout_1`) should be given a salt or a name.
    **kwargs: Keras layer arguments (`name`, ...).

  Example:

  >>> layer = StatelessDropout(0.5, seed=42, salt=7)
  >>> x = tf.ones([2, 4])
  >>> bool(tf.reduce_all(layer(x) == x)), int(layer.step.numpy())
  (True, 0)
  >>> y = layer(x, training=True)
  >>> sorted(set(y.numpy().ravel().tolist())), int(layer.step.numpy())
  ([0.0, 2.0], 1)
  """

  def __init__(self, rate: float, seed: int = 0, salt: Optional[int] = None,
               **kwargs):
    super().__init__(**kwargs)
    self.rate = float(rate)
    if not 0.0 <= self.rate < 1.0:
      raise ValueError(f"`rate`={rate!r} must be in [0, 1).")
    self.seed = int(seed)
    if not 0 <= self.seed < 2**63:
      raise ValueError(f"`seed`={seed!r} must be in [0, 2**63).")
    self.salt = salt_of(self.name) if salt is None else int(salt)
    if not 0 <= self.salt < 2**63:
      raise ValueError(f"`salt`={salt!r} must be in [0, 2**63).")
    self.supports_masking = True
    self.step = None

  def build(self, input_shape):
    if getattr(_BUILDING, "without_counters", False):
      super().build(input_shape)  # The layout of before the counters.
      return
    self.step = self.add_weight(
        name=STEP_NAME, shape=(), dtype=tf.int64, initializer="zeros",
        trainable=False,
        synchronization=tf.VariableSynchronization.ON_READ,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    super().build(input_shape)

  def call(self, inputs, training=None):
    if isinstance(training, (tf.Tensor, tf.Variable)):
      return tf.cond(tf.cast(training, tf.bool), lambda: self._drop(inputs),
                     lambda: tf.identity(inputs))
    if not training:
      return tf.identity(inputs)
    return self._drop(inputs)

  def _drop(self, inputs):
    context = tf.distribute.get_replica_context()
    replica = context.replica_id_in_sync_group if context else 0
    if self.step is None:  # Built by `without_counters`: one mask.
      return ops.stateless_dropout(
          inputs, self.rate, ops.dropout_key(
              self.seed, self.salt, tf.constant(0, tf.int64), replica))
    step = self.step.read_value()
    outputs = ops.stateless_dropout(
        inputs, self.rate, ops.dropout_key(self.seed, self.salt, step,
                                           replica))
    # Ordered after the read by the automatic control dependencies of a
    # tf.function (and by program order when eager).
    self.step.assign_add(1)
    return outputs

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"rate": self.rate, "seed": self.seed, "salt": self.salt})
    return config


def step_counters(model: tf.Module) -> List[tf.Variable]:
  """The step variables of every `StatelessDropout` in `model` (any
  `tf.Module`, a Keras model or layer), built ones only."""
  return [module.step for module in model.submodules
          if isinstance(module, StatelessDropout) and module.step is not None]


def checkpoint_has_counters(checkpoint: str) -> bool:
  """Whether a checkpoint holds dropout step counters (False: written
  before the dropout layers counted their steps)."""
  suffix = f"/{STEP_NAME}/.ATTRIBUTES/VARIABLE_VALUE"
  return any(name.endswith(suffix)
             for name, _ in tf.train.list_variables(checkpoint))


def assert_existing_objects_matched(status, model: tf.Module,
                                    checkpoint: str) -> None:
  """`status.assert_existing_objects_matched()` of `model.load_weights(
  checkpoint)`, but a checkpoint written before the dropout layers counted
  their steps may lack exactly their counters, which then start at 0.

  Args:
    status: what `model.load_weights(checkpoint)` returned.
    model: the model loaded.
    checkpoint: the checkpoint prefix loaded.

  Raises:
    AssertionError: TensorFlow's, when an object other than a step counter
      has no value in the checkpoint (TensorFlow's message counts them:
      "Found N Python objects that were not bound ...").
  """
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    counters = step_counters(model)
    found = re.match(r"Found (\d+) Python objects that were not bound",
                     str(e))
    if not (counters and found and int(found[1]) == len(counters) and
            not checkpoint_has_counters(checkpoint)):
      raise


@contextlib.contextmanager
def without_counters():
  """Layers built inside create no step counter: a model built here has the
  weights, and the checkpoint layout, of before the counters (`restore`)."""
  before = getattr(_BUILDING, "without_counters", False)
  _BUILDING.without_counters = True
  try:
    yield
  finally:
    _BUILDING.without_counters = before


def _unbound(error: Exception) -> str:
  """The first sentence of TensorFlow's message (an unmatched-objects one
  goes on to list every variable with its values)."""
  return str(error).split(", likely due to", 1)[0].split("\n", 1)[0]


def restore(model: tf.keras.Model, checkpoint: str,
            rebuild: Optional[Callable[[], tf.keras.Model]] = None) -> None:
  """Loads `checkpoint`'s weights into `model`, every weight or an error.

  Values in the checkpoint the model has no use for (the optimizer's) are
  fine. A checkpoint written before the dropout step counters: the counters
  start at 0; when they shift its layout (module doc), `rebuild()` builds
  the same model, which is built again without counters to read it, and its
  weights are copied into `model`.

  Args:
    model: the model to load into (built).
    checkpoint: a checkpoint prefix written by `model.save_weights` or
      Keras' `ModelCheckpoint` for a model built the same way.
    rebuild: builds the model again (its builder); None: no such fallback.

  Raises:
    ValueError: naming the checkpoint, when some weight of the model has no
      value in it, or one of another shape.
  """
  status = None  # Unset when TensorFlow refuses a shape outright.
  try:
    status = model.load_weights(checkpoint)
    assert_existing_objects_matched(status, model, checkpoint)
  except (AssertionError, ValueError) as e:  # Unmatched, or other shapes.
    if checkpoint_has_counters(checkpoint):
      raise ValueError(f"{checkpoint} does not hold this model's weights "
                       f"({_unbound(e)}): it was written by another "
                       "model.") from None
    if rebuild is None:
      raise ValueError(f"{checkpoint} was written before the dropout step "
                       "counters, in a layout they shift "
                       f"({_unbound(e)}): go on from it with the commit "
                       "that wrote it (the run's provenance).") from None
    _restore_without_counters(model, checkpoint, rebuild)
  if status is not None:
    status.expect_partial()


def _restore_without_counters(model: tf.keras.Model, checkpoint: str,
                              rebuild: Callable[[], tf.keras.Model]) -> None:
  """`restore`'s fallback: the checkpoint read by the model built without
  counters, its weights copied into `model` in order, counters at 0."""
  with without_counters():
    legacy = rebuild()
  try:
    status = legacy.load_weights(checkpoint)
    status.assert_existing_objects_matched()
  except (AssertionError, ValueError) as e:
    raise ValueError(f"{checkpoint} does not hold this model's weights, "
                     f"with or without dropout step counters "
                     f"({_unbound(e)}).") from None
  status.expect_partial()
  skip = {id(v) for v in step_counters(model)}  # Not in it: they stay 0.
  targets = [v for v in model.weights if id(v) not in skip]
  if [tuple(v.shape) for v in targets] != [tuple(v.shape)
                                           for v in legacy.weights]:
    raise ValueError(f"{checkpoint}: the model built without dropout step "
                     "counters has other weights than the model.")
  for target, value in zip(targets, legacy.weights):
    target.assign(value)
