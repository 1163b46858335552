"""Tests of rank4class_tf.training.schedules: `--lr_schedule` and
`--warmup_steps` are the Model Garden's schedules, whose values at chosen
steps equal the formulas written here; the default is the constant rate of
before; a resumed run goes on at its step's rate."""

import math
import os
import tempfile
from unittest import mock

from absl.testing import parameterized
import tensorflow as tf

from official.modeling.optimization import lr_schedule
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.training import pipeline as pipeline_lib
from rank4class_tf.training import schedules
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training

RATE, STEPS, WARMUP = 1e-3, 1000, 100


def linear(step):
  """BERT's recipe: linear decay from RATE at 0 to 0 at STEPS."""
  return RATE * (1 - step / STEPS)


def cosine(step):
  return RATE * (1 + math.cos(math.pi * step / STEPS)) / 2


def constant(step):
  del step  # Unused.
  return RATE


def warmed(decay):
  """The Model Garden's LinearWarmup from 0 to decay(WARMUP) over WARMUP
  steps, then `decay` itself (its steps counted from 0)."""
  return lambda step: (step / WARMUP * decay(WARMUP) if step < WARMUP
                       else decay(step))


def trainer(**values):
  return config_lib.TrainConfig.create(
      learning_rate=RATE, train_steps=STEPS, eval_every=100,
      **values).trainer


class ScheduleTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(("linear", linear), ("cosine", cosine),
                            ("constant", constant))
  def test_values_at_warmup_end_mid_decay_and_end(self, name, decay):
    schedule = schedules.learning_rate(trainer(lr_schedule=name,
                                               warmup_steps=WARMUP))
    self.assertIsInstance(schedule, lr_schedule.LinearWarmup)
    expected = warmed(decay)
    # In the warmup, its end, mid-decay, one before the end, the end.
    for step in (0, 50, WARMUP, 550, STEPS - 1, STEPS):
      self.assertAllClose(float(schedule(step)), expected(step), rtol=1e-5,
                          atol=1e-10, msg=f"{name} at step {step}")
    self.assertAllClose(
        [float(schedule(s)) for s in (WARMUP, 550, STEPS)],
        {"linear": [9e-4, 4.5e-4, 0.0],
         "cosine": [9.755283e-4, 4.217828e-4, 0.0],
         "constant": [1e-3, 1e-3, 1e-3]}[name], rtol=1e-5, atol=1e-10)

  @parameterized.parameters(("linear", linear,
                             lr_schedule.PolynomialDecayWithOffset),
                            ("cosine", cosine,
                             lr_schedule.CosineDecayWithOffset))
  def test_decay_without_warmup(self, name, decay, kind):
    schedule = schedules.learning_rate(trainer(lr_schedule=name))
    self.assertIsInstance(schedule, kind)
    for step in (0, 500, STEPS):
      self.assertAllClose(float(schedule(step)), decay(step), rtol=1e-5,
                          atol=1e-10)

  def test_default_is_the_constant_rate_of_before(self):
    rate = schedules.learning_rate(config_lib.TrainConfig().trainer)
    self.assertIs(type(rate), float)
    self.assertEqual(rate, 1e-3)

  @parameterized.parameters(
      (dict(lr_schedule="step"), r"^`lr_schedule`='step' is not valid; "
       r"choose one of: constant, linear, cosine\.$"),
      (dict(warmup_steps=-1), r"^`warmup_steps`=-1 must be an integer "
       r">= 0\.$"),
      (dict(warmup_steps=STEPS), r"^`warmup_steps`=1000 must be less than "
       r"`train_steps`=1000\.$"),
      (dict(patience=-2), r"^`patience`=-2 must be an integer >= 0\.$"),
      (dict(lr_schedule="cosine", interaction="label_attention",
            contrastive_weight=0.1, contrastive_learning_rate=1e-4),
       r"^`contrastive_learning_rate` sets the rate of MulCon's second "
       r"step, which a schedule \(`lr_schedule`=cosine, `warmup_steps`=0\) "
       r"sets too: use one or the other\.$"),
  )
  def test_bad_settings(self, values, message):
    config = config_lib.TrainConfig.create(train_steps=STEPS, eval_every=100,
                                           model_dir="/never", **values)
    with self.assertRaisesRegex(ValueError, message):
      checks.validate(config)


class Killed(Exception):
  pass


class Rates(tf.keras.callbacks.Callback):
  """Records (step, learning rate) at each training step."""

  def __init__(self, rates, kill_after=None):
    super().__init__()
    self.rates, self.kill_after = rates, kill_after

  def on_train_batch_begin(self, batch, logs=None):
    optimizer = self.model.optimizer
    rate = optimizer.learning_rate
    step = optimizer.iterations
    self.rates.append((int(step), float(rate(step) if callable(rate)
                                        else rate)))

  def on_epoch_end(self, epoch, logs=None):
    if epoch + 1 == self.kill_after:
      raise Killed()  # As SIGKILL, once the epoch is backed up.


class ResumeTest(tf.test.TestCase):

  def test_resumed_run_goes_on_at_its_steps_rate(self):
    config = config_lib.TrainConfig.create(
        dataset="digits", train_steps=10, eval_every=5, batch_size=32,
        encoder_dim=16, lr_schedule="linear", warmup_steps=4,
        learning_rate=RATE, export=False,
        model_dir=os.path.join(tempfile.mkdtemp(), "run"))
    build = pipeline_lib.Rank4ClassPipeline.build_callbacks
    rates = []
    for kill_after in (1, None):  # Killed after epoch 1, then resumed.
      with mock.patch.object(
          pipeline_lib.Rank4ClassPipeline, "build_callbacks",
          lambda pipeline, k=kill_after: build(pipeline) + [Rates(rates, k)]):
        try:
          training.train(config)
        except Killed:
          pass
    # Warmup to 1e-3 * (1 - 4 / 10) over 4 steps, then linear to 0 at 10;
    # the resumed half starts at step 5's rate.
    self.assertEqual([step for step, _ in rates], list(range(10)))
    self.assertAllClose([rate for _, rate in rates],
                        [0.0, 1.5e-4, 3e-4, 4.5e-4, 6e-4, 5e-4, 4e-4, 3e-4,
                         2e-4, 1e-4], atol=1e-9)
    self.assertTrue(run_state.is_trained(config))


if __name__ == "__main__":
  tf.test.main()
