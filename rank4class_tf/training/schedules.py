"""The learning rate of a run: a constant, or the Model Garden's schedules.

`learning_rate(trainer)` maps `--lr_schedule`, `--learning_rate`,
`--warmup_steps` and `--train_steps` onto the Model Garden's optimization
package (`official.modeling.optimization`), as its BERT fine-tuning recipes
configure it: an `OptimizationConfig` whose `learning_rate` is a
`polynomial` (power 1: linear) or `cosine` decay from `--learning_rate` at
step 0 to 0 at `--train_steps` (the ceiling), wrapped by a `linear` warmup
(`LinearWarmup`) from 0 over the first `--warmup_steps`;
`OptimizerFactory.build_learning_rate` builds it. With T = train_steps,
W = warmup_steps, lr = learning_rate and s the optimizer's step:

  constant  lr
  linear    lr * (1 - s / T)
  cosine    lr * (1 + cos(pi * s / T)) / 2
  warmup    for s < W: (s / W) * schedule(W); from W on: schedule(s)

(the Model Garden's warmup climbs to the decay's value at W, and the decay
runs over [0, T], warmup included, as in its BERT recipes.)

`constant` without warmup is the plain float of before (the optimizer's
learning rate, not a schedule), so every run trained before these settings
existed trains the same. The optimizer's step count (`iterations`) is
checkpointed with its slots, so a resumed run goes on at the rate of the
step it resumes at. A decaying schedule depends on `--train_steps`: such a
run cannot be resumed or extended with other steps
(`run_guard.check_identity`).

>>> from rank4class_tf import config as config_lib
>>> trainer = config_lib.TrainConfig.create(
...     lr_schedule="linear", learning_rate=1e-3, train_steps=100,
...     warmup_steps=10).trainer
>>> schedule = learning_rate(trainer)
>>> [round(float(schedule(step)), 6) for step in (0, 5, 10, 55, 100)]
[0.0, 0.00045, 0.0009, 0.00045, 0.0]
>>> learning_rate(config_lib.TrainConfig().trainer)
0.001
"""

from typing import Union

import tensorflow as tf

from rank4class_tf import config as config_lib

LearningRate = Union[float, tf.keras.optimizers.schedules.LearningRateSchedule]


def optimization_params(trainer: config_lib.TrainerConfig) -> dict:
  """The Model Garden's `OptimizationConfig` of a run's learning rate (its
  `learning_rate` and `warmup` parts; the optimizer is Keras' `--optimizer`,
  which the factory's `optimizer` part names only).

  >>> from rank4class_tf import config as config_lib
  >>> optimization_params(config_lib.TrainConfig.create(
  ...     lr_schedule="cosine", train_steps=100).trainer)["learning_rate"]
  {'type': 'cosine', 'cosine': {'initial_learning_rate': 0.001, \
'decay_steps': 100, 'alpha': 0.0}}
  """
  rate, steps = trainer.learning_rate, trainer.train_steps
  decay = {
      "constant": {"type": "constant",
                   "constant": {"learning_rate": rate}},
      "linear": {"type": "polynomial",
                 "polynomial": {"initial_learning_rate": rate,
                                "decay_steps": steps,
                                "end_learning_rate": 0.0, "power": 1.0}},
      "cosine": {"type": "cosine",
                 "cosine": {"initial_learning_rate": rate,
                            "decay_steps": steps, "alpha": 0.0}},
  }[trainer.lr_schedule]
  params = {"optimizer": {"type": trainer.optimizer},
            "learning_rate": decay}
  if trainer.warmup_steps:
    params["warmup"] = {"type": "linear",
                        "linear": {"warmup_steps": trainer.warmup_steps,
                                   "warmup_learning_rate": 0.0}}
  return params


def learning_rate(trainer: config_lib.TrainerConfig) -> LearningRate:
  """The optimizer's learning rate: `--learning_rate` itself for a constant
  rate without warmup, else the Model Garden's schedule (module doc)."""
  if trainer.lr_schedule == "constant" and not trainer.warmup_steps:
    return trainer.learning_rate
  # Imported here: loading the Model Garden's optimization package costs a
  # second that runs at a constant rate do not need.
  from official.modeling import optimization  # pylint: disable=g-import-not-at-top
  factory = optimization.OptimizerFactory(
      optimization.OptimizationConfig(optimization_params(trainer)))
  return factory.build_learning_rate()


def decays(trainer: config_lib.TrainerConfig) -> bool:
  """Whether the run's learning rate depends on `--train_steps`."""
  return trainer.lr_schedule != "constant"
