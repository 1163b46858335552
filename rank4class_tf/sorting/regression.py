"""A regression task scored by Spearman's correlation: MSE vs the SoDeep loss.

The data is scikit-learn's `load_diabetes` (442 patients, 10 standardised
features, a disease-progression target). A small MLP (two hidden ReLU layers)
is trained either with the mean squared error on the standardised target, or
with the SoDeep Spearman loss (paper eq. 4) over each batch:

  loss = 1/B || f(s) - rk(y) ||^2   (+ |s - y| during the first
                                      `align_epochs`, the paper's alignment)

where s [B] are the MLP's predictions for a batch of B = d patients, f the
sorter and rk(y) the normalised average ranks of their targets. The metric is
Spearman's rho between predictions and targets on a held-out test split.
"""

import dataclasses
from typing import Dict

import numpy as np
from scipy import stats
from sklearn import datasets as sk_datasets
from sklearn import model_selection
import tensorflow as tf

from rank4class_tf.sorting import losses as sodeep_losses

METHODS = ("mse", "sodeep_spearman")


@dataclasses.dataclass
class RegressionConfig:
  """One run of the diabetes experiment.

  Attributes:
    method: `mse` or `sodeep_spearman`.
    sorter: sorter of the SoDeep loss (`lstm`, `cnn`, `pairwise`, `handcrafted`,
      `handcrafted_adaptive`).
    batch_size: patients per step; the sorter's d for `sodeep_spearman`.
    epochs: passes over the training split.
    align_epochs: first epochs adding the L1 alignment term (SoDeep only).
    hidden_units: width of the two hidden layers.
    learning_rate: Adam learning rate.
    test_fraction: share of patients held out for the test.
    seed: seed of the split, the initialisation and the shuffling.
  """
  method: str = "mse"
  sorter: str = "lstm"
  batch_size: int = 100
  epochs: int = 200
  align_epochs: int = 1
  hidden_units: int = 64
  learning_rate: float = 1e-3
  test_fraction: float = 0.2
  seed: int = 0

  def validate(self) -> None:
    if self.method not in METHODS:
      raise ValueError(f"`method`={self.method!r} is not valid; choose one "
                       f"of: {', '.join(METHODS)}.")
    for name in ("batch_size", "epochs", "hidden_units", "learning_rate"):
      if not getattr(self, name) > 0:
        raise ValueError(f"`{name}`={getattr(self, name)!r} must be > 0.")
    if not 0. < self.test_fraction < 1.:
      raise ValueError(f"`test_fraction`={self.test_fraction} must be in "
                       "(0, 1).")


def load_split(test_fraction: float, seed: int):
  """(x_train, y_train, x_test, y_test), features and targets standardised
  with the training split's statistics; float32 arrays."""
  x, y = sk_datasets.load_diabetes(return_X_y=True)
  x_tr, x_te, y_tr, y_te = model_selection.train_test_split(
      x, y, test_size=test_fraction, random_state=seed)
  mx, sx = x_tr.mean(0), x_tr.std(0)
  my, sy = y_tr.mean(), y_tr.std()
  f = lambda a: a.astype(np.float32)
  return (f((x_tr - mx) / sx), f((y_tr - my) / sy),
          f((x_te - mx) / sx), f((y_te - my) / sy))


def build_mlp(hidden_units: int) -> tf.keras.Model:
  """MLP [batch_size, 10] -> [batch_size, 1]."""
  return tf.keras.Sequential([
      tf.keras.layers.Dense(hidden_units, activation="relu"),
      tf.keras.layers.Dense(hidden_units, activation="relu"),
      tf.keras.layers.Dense(1),
  ])


def run(config: RegressionConfig) -> Dict[str, float]:
  """Trains one MLP and returns its test and train Spearman correlations."""
  config.validate()
  x_tr, y_tr, x_te, y_te = load_split(config.test_fraction, config.seed)
  if config.batch_size > len(x_tr):
    raise ValueError(f"`batch_size`={config.batch_size} exceeds the "
                     f"{len(x_tr)} training patients.")
  tf.keras.utils.set_random_seed(config.seed)
  model = build_mlp(config.hidden_units)
  optimizer = tf.keras.optimizers.Adam(config.learning_rate)
  mse = tf.keras.losses.MeanSquaredError()
  if config.method == "sodeep_spearman":
    rank_loss = sodeep_losses.get(
        "sodeep_spearman", sorter=config.sorter, d=config.batch_size,
        rank_over_batch=True)
    aligned = sodeep_losses.get(
        "sodeep_spearman", sorter=config.sorter, d=config.batch_size,
        rank_over_batch=True, parallel_loss="mae", parallel_weight=1.0)
    aligned.sorter = rank_loss.sorter  # one sorter for both phases
  else:
    rank_loss = aligned = mse

  def make_step(loss_fn):
    @tf.function
    def step(x, y):
      with tf.GradientTape() as tape:
        loss = loss_fn(y[:, None], model(x, training=True))
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    return step

  align_step, main_step = make_step(aligned), make_step(rank_loss)
  rng = np.random.RandomState(config.seed)
  per_epoch = len(x_tr) // config.batch_size  # full groups only: d is fixed
  for epoch in range(config.epochs):
    step = align_step if epoch < config.align_epochs else main_step
    order = rng.permutation(len(x_tr))
    for b in range(per_epoch):
      idx = order[b * config.batch_size:(b + 1) * config.batch_size]
      step(x_tr[idx], y_tr[idx])
  pred_te = model(x_te, training=False).numpy()[:, 0]
  pred_tr = model(x_tr, training=False).numpy()[:, 0]
  return {
      "test_spearman": float(stats.spearmanr(pred_te, y_te).correlation),
      "train_spearman": float(stats.spearmanr(pred_tr, y_tr).correlation),
      "test_mse": float(np.mean((pred_te - y_te) ** 2)),
  }
