"""Tests of `modeling.stateless_dropout` and of its maths in `ops`.

The maths is checked against a numpy reference of inverted dropout
(y = x / (1 - rate) where u >= rate, else 0) and by its statistics; the
layer by its config, a checkpoint, a SavedModel and a strategy; and the
whole by the claim it exists for: a digits run with dropout 0.1, killed
after a validation and started again, ends with the weights and test scores
of the run that was never interrupted.
"""

import os
import re
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf import ops
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import stateless_dropout as sd
from rank4class_tf.ranking import metrics
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training
import helpers


def reference_dropout(x, rate, uniform):
  """Inverted dropout in numpy, given the uniform draws."""
  return np.where(uniform >= rate, x / (1.0 - rate), 0.0)


def uniform_of(shape, key):
  """The U[0, 1) draws behind a mask (TensorFlow's generator, the only
  thing not recomputed here)."""
  return tf.random.stateless_uniform(shape, seed=key,
                                     alg=ops.DROPOUT_RNG).numpy()


class OpsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.1, 0.5, 0.9)
  def test_equals_numpy_reference(self, rate):
    x = np.random.default_rng(0).normal(size=(64, 33)).astype(np.float32)
    key = ops.dropout_key(42, 7, step=3)
    got = ops.stateless_dropout(x, rate, key).numpy()
    want = reference_dropout(x, rate, uniform_of(x.shape, key))
    self.assertAllClose(got, want, rtol=1e-6, atol=0)
    kept = got != 0
    self.assertAllClose(got[kept], x[kept] / (1 - rate), rtol=1e-6)

  @parameterized.parameters(0.1, 0.5, 0.9)
  def test_keeps_one_minus_rate(self, rate):
    n = 200_000
    kept = np.mean(ops.stateless_dropout(
        tf.ones([n]), rate, ops.dropout_key(1, 2, 3)).numpy() != 0)
    # Binomial(n, 1 - rate): within 5 standard deviations.
    self.assertLess(abs(kept - (1 - rate)),
                    5 * np.sqrt(rate * (1 - rate) / n))

  def test_same_key_same_mask_any_other_key_another(self):
    x = tf.ones([100_000])
    mask = lambda *key: ops.stateless_dropout(
        x, 0.5, ops.dropout_key(*key)).numpy() != 0
    base = mask(42, 7, 3, 0)
    self.assertAllEqual(mask(42, 7, 3, 0), base)
    self.assertAllEqual(mask(tf.constant(42), 7, tf.constant(3, tf.int64),
                             tf.constant(0)), base)
    for other in ((42, 7, 4, 0), (42, 8, 3, 0), (43, 7, 3, 0),
                  (42, 7, 3, 1)):
      # Independent masks of rate 0.5 agree on half the entries.
      agree = np.mean(mask(*other) == base)
      self.assertBetween(agree, 0.49, 0.51, msg=str(other))

  def test_rate_zero_is_the_identity_and_bad_rates_refused(self):
    x = tf.random.uniform([3, 4])
    self.assertAllEqual(ops.stateless_dropout(x, 0.0, [1, 2]), x)
    for rate in (-0.1, 1.0):
      with self.assertRaisesRegex(ValueError, r"`rate`=.* must be in"):
        ops.stateless_dropout(x, rate, [1, 2])

  def test_float16_inputs_keep_their_dtype(self):
    x = tf.ones([4, 8], tf.float16)
    y = ops.stateless_dropout(x, 0.5, ops.dropout_key(0, 0, 0))
    self.assertEqual(y.dtype, tf.float16)
    self.assertAllInSet(y, [0.0, 2.0])


class LayerTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.x = tf.random.uniform([8, 16], 0.5, 1.0, seed=1)

  def expected(self, step, seed=42, salt=7, rate=0.3):
    return reference_dropout(self.x.numpy(), rate, uniform_of(
        self.x.shape, ops.dropout_key(seed, salt, step)))

  def test_inference_is_the_identity_and_counts_nothing(self):
    layer = sd.StatelessDropout(0.3, seed=42, salt=7)
    self.assertAllEqual(layer(self.x), self.x)
    self.assertAllEqual(layer(self.x, training=False), self.x)
    self.assertEqual(int(layer.step.numpy()), 0)

  def test_each_training_call_draws_the_mask_of_its_step(self):
    layer = sd.StatelessDropout(0.3, seed=42, salt=7)
    eager = [layer(self.x, training=True).numpy() for _ in range(3)]
    self.assertEqual(int(layer.step.numpy()), 3)
    for step, got in enumerate(eager):
      self.assertAllClose(got, self.expected(step), rtol=1e-6)
    self.assertNotAllClose(eager[0], eager[1])
    # Inside tf.function, and with a tensor `training`: the same sequence.
    layer = sd.StatelessDropout(0.3, seed=42, salt=7)
    call = tf.function(lambda x, training: layer(x, training=training))
    self.assertAllClose(call(self.x, True), eager[0])
    self.assertAllEqual(call(self.x, tf.constant(False)), self.x)
    self.assertAllClose(call(self.x, tf.constant(True)), eager[1])
    self.assertEqual(int(layer.step.numpy()), 2)

  def test_salt_defaults_to_the_name(self):
    a = sd.StatelessDropout(0.5, name="a")
    self.assertEqual(a.salt, sd.salt_of("a"))
    self.assertEqual(sd.salt_of("encoder/dropout"),
                     sd.salt_of("encoder/dropout"))
    self.assertNotEqual(sd.salt_of("encoder/dropout"),
                        sd.salt_of("class_tower/dropout"))
    with self.assertRaisesRegex(ValueError, r"^`rate`=1\.5 must be in"):
      sd.StatelessDropout(1.5)

  def test_restored_counter_redraws_the_next_mask(self):
    layer = sd.StatelessDropout(0.3, seed=42, salt=7)
    for _ in range(2):
      layer(self.x, training=True)
    path = tf.train.Checkpoint(layer=layer).write(
        os.path.join(self.get_temp_dir(), "ckpt"))
    third = layer(self.x, training=True)
    fresh = sd.StatelessDropout(0.3, seed=42, salt=7)
    fresh(self.x)  # Builds the counter.
    tf.train.Checkpoint(layer=fresh).read(path).assert_consumed()
    self.assertAllEqual(fresh(self.x, training=True), third)

  def test_config_round_trip(self):
    layer = sd.StatelessDropout(0.3, seed=42, salt=7, name="drop")
    restored = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    self.assertIsInstance(restored, sd.StatelessDropout)
    self.assertEqual(restored.get_config(), layer.get_config())
    self.assertEqual((restored.rate, restored.seed, restored.salt),
                     (0.3, 42, 7))
    self.assertAllEqual(restored(self.x, training=True),
                        layer(self.x, training=True))

  def test_saved_model_round_trip(self):
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(16, kernel_initializer="identity"),
        sd.StatelessDropout(0.3, seed=42, salt=7, name="drop")])
    model(self.x, training=True)  # Step 0 drawn: the counter is at 1.
    path = os.path.join(self.get_temp_dir(), "saved")
    model.save(path, save_format="tf")
    loaded = tf.keras.models.load_model(path)
    layer = loaded.get_layer("drop")
    self.assertIsInstance(layer, sd.StatelessDropout)
    self.assertEqual(layer.get_config(), model.get_layer("drop").get_config())
    self.assertEqual(int(layer.step.numpy()), 1)
    self.assertAllClose(loaded(self.x), self.x, rtol=1e-6)  # Inference.
    self.assertAllClose(loaded(self.x, training=True), self.expected(1),
                        rtol=1e-6)
    # Without the Keras objects: the serving function is the identity.
    serving = tf.saved_model.load(path)
    self.assertAllClose(serving(self.x), self.x, rtol=1e-6)

  def test_mirrored_strategy(self):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
      layer = sd.StatelessDropout(0.3, seed=42, salt=7)
      layer(self.x)
    step = tf.function(lambda x: strategy.run(
        lambda x: layer(x, training=True), args=(x,)))
    self.assertAllClose(step(self.x), self.expected(0), rtol=1e-6)
    self.assertAllClose(step(self.x), self.expected(1), rtol=1e-6)
    self.assertEqual(int(layer.step.numpy()), 2)
    # A second replica folds in its id: other units.
    key = lambda replica: ops.dropout_key(42, 7, 0, replica)
    self.assertNotAllClose(uniform_of([64], key(0)), uniform_of([64], key(1)))

  def test_checkpoint_from_before_the_counters_loads(self):
    """A checkpoint with Keras' Dropout where `StatelessDropout` is now
    lacks only the counters: accepted, the counters at 0; a checkpoint
    lacking another weight is not."""
    folder = self.get_temp_dir()

    def model(dropout):
      m = tf.keras.Sequential([tf.keras.layers.Dense(4), dropout])
      m(tf.ones([1, 3]))
      return m

    old = os.path.join(folder, "old")
    model(tf.keras.layers.Dropout(0.5)).save_weights(old)
    new = model(sd.StatelessDropout(0.5))
    self.assertFalse(sd.checkpoint_has_counters(old))
    sd.assert_existing_objects_matched(new.load_weights(old), new, old)
    self.assertEqual(int(sd.step_counters(new)[0].numpy()), 0)
    wider = tf.keras.Sequential([tf.keras.layers.Dense(4),
                                 tf.keras.layers.Dense(2),
                                 sd.StatelessDropout(0.5)])
    wider(tf.ones([1, 3]))
    with self.assertRaisesRegex(AssertionError, "Found 3 Python objects"):
      sd.assert_existing_objects_matched(wider.load_weights(old), wider, old)


  def test_checkpoint_whose_layout_the_counters_shift_is_restored(self):
    """Dropout before the first weighted layer (a frozen run's
    `CachedFeatures`): its counter becomes `layer_with_weights-0`, so an old
    checkpoint's keys name other layers. `restore` reads it through the
    model built without counters; plain `load_weights` would not."""
    folder = self.get_temp_dir()

    def build():
      x = tf.keras.Input([3])
      y = tf.keras.layers.Dense(2)(sd.StatelessDropout(0.5, salt=1)(x))
      return tf.keras.Model(x, y)

    with sd.without_counters():
      old = build()
    self.assertEqual(sd.step_counters(old), [])
    kernel = np.arange(6, dtype=np.float32).reshape(3, 2)
    old.layers[-1].set_weights([kernel, np.array([1., -1.], np.float32)])
    path = os.path.join(folder, "old")
    old.save_weights(path)
    self.assertFalse(sd.checkpoint_has_counters(path))
    # The silent failure `restore` prevents: the Dense layer keeps its
    # initial kernel.
    plain = build()
    plain.load_weights(path).expect_partial()
    self.assertNotAllClose(plain.layers[-1].kernel, kernel)
    new = build()
    sd.restore(new, path, rebuild=build)
    self.assertAllEqual(new.layers[-1].kernel, kernel)
    self.assertAllEqual(new.layers[-1].bias, [1., -1.])
    self.assertEqual(int(sd.step_counters(new)[0].numpy()), 0)
    x = tf.ones([4, 3])
    self.assertAllEqual(new(x), old(x))
    with self.assertRaisesRegex(ValueError, "^" + re.escape(
        f"{path} was written before the dropout step counters, in a layout "
        "they shift (Found 3 Python objects that were not bound to "
        "checkpointed values): go on from it with the commit that wrote it "
        "(the run's provenance).") + "$"):
      sd.restore(build(), path)
    # A checkpoint of another model: an error, with or without fallback.
    other = os.path.join(folder, "other")
    current = build()
    current.save_weights(other)
    wider = lambda: tf.keras.Sequential([tf.keras.Input([3]),
                                         tf.keras.layers.Dense(5),
                                         sd.StatelessDropout(0.5, salt=1)])
    with self.assertRaisesRegex(ValueError, "^" + re.escape(
        f"{other} does not hold this model's weights (Found 3 Python "
        "objects that were not bound to checkpointed values): it was "
        "written by another model.") + "$"):
      sd.restore(wider(), other, rebuild=wider)
    with self.assertRaisesRegex(ValueError, re.escape(
        f"{path} does not hold this model's weights, with or without "
        "dropout step counters")):
      sd.restore(wider(), path, rebuild=wider)

  def test_shifted_layout_whose_shapes_clash(self):
    """Two Dense layers after the dropout: the old second layer's key now
    names the first, of another shape, and TensorFlow refuses the load
    outright; `restore` still reads it through the model without
    counters."""
    def build():
      x = tf.keras.Input([3])
      h = tf.keras.layers.Dense(2)(sd.StatelessDropout(0.5, salt=1)(x))
      return tf.keras.Model(x, tf.keras.layers.Dense(4)(h))

    with sd.without_counters():
      old = build()
    path = os.path.join(self.get_temp_dir(), "old")
    old.save_weights(path)
    with self.assertRaisesRegex(ValueError, "incompatible"):
      build().load_weights(path)
    new = build()
    sd.restore(new, path, rebuild=build)
    x = tf.ones([2, 3])
    self.assertAllEqual(new(x), old(x))


class EncodersTest(tf.test.TestCase):

  def test_every_package_dropout_is_stateless_and_seeded(self):
    built = {
        "small_cnn": (encoders.get("small_cnn", dim=8, seed=5),
                      tf.zeros([2, 8, 8, 1])),
        "mlp": (encoders.get("mlp", dim=8, seed=5), tf.zeros([2, 4])),
        "cached": (encoders.CachedFeatures(0.1, seed=5, name="encoder"),
                   tf.zeros([2, 4])),
    }
    for name, (encoder, x) in built.items():
      encoder(x, training=True)
      layers = [m for m in encoder.submodules
                if isinstance(m, tf.keras.layers.Dropout)]
      self.assertEqual(layers, [], msg=name)
      counters = sd.step_counters(encoder)
      self.assertLen(counters, 1, msg=name)
      self.assertEqual(int(counters[0].numpy()), 1, msg=name)
      dropout = [m for m in encoder.submodules
                 if isinstance(m, sd.StatelessDropout)][0]
      self.assertEqual((dropout.seed, dropout.salt),
                       (5, sd.salt_of("encoder/dropout")), msg=name)
      restored = tf.keras.layers.deserialize(
          tf.keras.layers.serialize(encoder))
      self.assertEqual(restored.seed, 5, msg=name)


class ResumeTest(tf.test.TestCase):
  """A run with dropout 0.1 killed after its first validation and started
  again ends as the run never interrupted: the same weights (every
  variable of the final checkpoint: model, dropout counters, optimizer)
  and the same test scores and metrics."""

  STEPS = dict(train_steps=20, eval_every=10)
  FINAL_EPOCH = 2

  @classmethod
  def config(cls, model_dir):
    return config_lib.TrainConfig.create(
        dataset="digits", dropout=0.1, deterministic=True, export=False,
        model_dir=model_dir, **cls.STEPS)

  @staticmethod
  def final_values(model_dir):
    reader = tf.train.load_checkpoint(
        run_dir_lib.RunDir(model_dir).checkpoint(ResumeTest.FINAL_EPOCH))
    return {name: reader.get_tensor(name)
            for name in reader.get_variable_to_shape_map()
            if not name.startswith("_CHECKPOINTABLE")}

  @staticmethod
  def scores_of(config):
    data = builders.load_data(config)
    labels, scores = training.checkpoint_scores(
        config, data, ("test",),
        checkpoint=run_dir_lib.RunDir(config.trainer.model_dir).checkpoint(
            ResumeTest.FINAL_EPOCH))["test"]
    return scores, metrics.evaluate_scores(labels, scores)

  def test_killed_and_resumed_equals_uninterrupted(self):
    root = tempfile.mkdtemp()
    whole = self.config(os.path.join(root, "whole"))
    training.train(whole)
    broken = self.config(os.path.join(root, "broken"))

    helpers.train_killed_after_first_validation(broken)
    run = run_dir_lib.RunDir(broken.trainer.model_dir)
    self.assertEqual(run.resume_epoch(), 1)
    training.train(broken)  # Resumes after epoch 1.
    self.assertFalse(run.has_backup())

    want, got = self.final_values(whole.trainer.model_dir), self.final_values(
        broken.trainer.model_dir)
    self.assertEqual(set(got), set(want))
    counters = [n for n in want if f"/{sd.STEP_NAME}/" in n]
    self.assertNotEmpty(counters)
    for name in counters:  # Every training step drew a mask.
      self.assertEqual(int(want[name]), 20, msg=name)
    for name in want:
      self.assertAllEqual(got[name], want[name], msg=name)
    (want_scores, want_metrics), (got_scores, got_metrics) = (
        self.scores_of(whole), self.scores_of(broken))
    self.assertAllEqual(got_scores, want_scores)
    self.assertEqual(got_metrics, want_metrics)


if __name__ == "__main__":
  tf.test.main()
