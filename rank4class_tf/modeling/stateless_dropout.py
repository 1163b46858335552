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

Design rejected: keying by the optimizer's `iterations` (in every checkpoint
already, so old checkpoints would need nothing). A layer cannot reach the
optimizer without being handed it, which ties every encoder to a compiled
model; the layer's own counter works in any loop, in a layer called twice a
step (two masks), and in a SavedModel.
"""

import re
import zlib
from typing import Any, Dict, List, Optional

import tensorflow as tf

from rank4class_tf import ops

# The name of the step counter (`StatelessDropout.step`): attribute, weight
# and the last part of its checkpoint key.
STEP_NAME = "step"


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
