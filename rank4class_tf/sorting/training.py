"""Pretraining of a SoDeep sorter on synthetic data (paper §4.1.1).

The sorter learns f(y) ~ rk(y) on `synthetic.dataset` batches with the L1 loss
and Adam; the learning rate is halved every `halve_every_vectors` vectors (the
paper: 1e-3 halved every 100 epochs of 100,000 vectors, batch 512).

A run's model_dir holds:

  config.json            the resolved `SorterConfig`
  train/, validation/    TensorBoard events (L1 on training batches and on a
                         fixed 2,000-vector validation set, learning rate)
  backup/                Keras BackupAndRestore state: rerunning the same
                         command resumes from the last finished epoch
  checkpoints/ckpt-NNNN  weights after every epoch
  progress.json          training seconds, epochs done, the learning curve
  sorter.npz             the final sorter weights (`sorters.load_weights`)
  sorter.json            name, d, hyper-parameters, test L1, training seconds
                         and the learning curve (validation L1 against
                         vectors seen, the --init_from runs' curves first)
"""

import dataclasses
import json
import os
import time
from typing import Any, Callable, Dict, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.sorting import ops
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import synthetic

CONFIG_FILE = run_dir_lib.CONFIG_FILE
WEIGHTS_FILE = "sorter.npz"
RECORD_FILE = "sorter.json"
VALIDATION_SIZE = 2000


@dataclasses.dataclass
class SorterConfig:
  """Hyper-parameters of one sorter pretraining run, documented by each
  field's `help` (also its flag's help in `pipelines.train_sorter`)."""
  # Sorter.
  sorter: str = config_lib.field(
      "lstm", "Sorter to train: lstm, cnn, cnn_reference, pairwise "
      "(`sorters.TRAINABLE_SORTERS`).")
  seq_len: int = config_lib.field(
      100, "d, the length of the score vectors.")
  units: int = config_lib.field(
      64, "lstm: units per direction; pairwise: units per hidden layer.")
  num_layers: int = config_lib.field(
      2, "lstm: stacked bidirectional layers; pairwise: hidden layers of "
      "its MLP.")
  projection: str = config_lib.field(
      "shared", "lstm: final projection, full (reference) or shared.")
  width: int = config_lib.field(32, "cnn: channels of the first blocks.")
  max_sharpness: float = config_lib.field(
      60.0, "pairwise: bound of the learned sharpness of each comparison "
      "(0: none; the sorter then learns an exact sort).")
  # Training.
  batch_size: int = config_lib.field(512, "Vectors per step (paper: 512).")
  learning_rate: float = config_lib.field(
      1e-3, "Initial Adam learning rate.")
  halve_every_vectors: int = config_lib.field(
      10_000_000, "Halve the learning rate after this many vectors (paper: "
      "100 epochs of 100,000).")
  epoch_vectors: int = config_lib.field(
      100_000, "Vectors per Keras epoch: between validations, checkpoints "
      "and TensorBoard points (paper epoch: 100,000).")
  train_vectors: int = config_lib.field(
      1_000_000, "Total training vectors (rounded up to whole epochs).")
  seed: int = config_lib.field(0, "Seed of initialisation and data.")
  init_from: str = config_lib.field(
      "", "A finished run, or a shipped sorter's key (lstm_d100), whose "
      "sorter weights start this one (to continue "
      "with a new learning-rate schedule, or to start an lstm with the "
      "shared projection or a pairwise sorter from one trained for another "
      "d).")
  continue_schedule: bool = config_lib.field(
      False, "With --init_from: the learning-rate schedule starts where the "
      "init run's vectors (all of its chain) left it, instead of at "
      "--learning_rate.")
  threads: int = config_lib.field(
      0, "TensorFlow intra-op threads (0: all); only takes effect before "
      "TensorFlow runs its first op in the process.")
  model_dir: str = config_lib.field(
      "", "Directory for everything the run makes.")

  def sorter_kwargs(self) -> Dict[str, Any]:
    """The sorter's hyper-parameters, named as `sorters.get` takes them."""
    candidates = {"units": self.units, "num_layers": self.num_layers,
                  "projection": self.projection, "width": self.width,
                  "max_sharpness": self.max_sharpness}
    return {k: candidates[k] for k in sorters.hyperparameters(self.sorter)
            if k in candidates}

  def steps_per_epoch(self) -> int:
    return max(1, self.epoch_vectors // self.batch_size)

  def num_epochs(self) -> int:
    return max(1, -(-self.train_vectors // self.epoch_vectors))

  def validate(self) -> None:
    """Checks every field; raises ValueError naming the flag."""
    if self.sorter not in sorters.TRAINABLE_SORTERS:
      raise ValueError(f"`sorter`={self.sorter!r} is not valid; choose one "
                       f"of: {', '.join(sorters.TRAINABLE_SORTERS)}.")
    if self.projection not in ("full", "shared"):
      raise ValueError(f"`projection`={self.projection!r} is not valid; "
                       "choose one of: full, shared.")
    for name in ("seq_len", "units", "num_layers", "width", "batch_size",
                 "learning_rate", "halve_every_vectors", "epoch_vectors",
                 "train_vectors"):
      if not getattr(self, name) > 0:
        raise ValueError(f"`{name}`={getattr(self, name)!r} must be > 0.")
    if self.seq_len < 2:
      raise ValueError(f"`seq_len`={self.seq_len} must be >= 2.")
    initial = sorters.PairwiseSorter.INITIAL_SHARPNESS
    if self.max_sharpness and not self.max_sharpness > initial:
      raise ValueError(f"`max_sharpness`={self.max_sharpness} must be 0 (no "
                       f"bound) or > {initial} (the initial sharpness).")
    if self.threads < 0:
      raise ValueError(f"`threads`={self.threads} must be >= 0.")
    if not self.model_dir:
      raise ValueError("`model_dir` must be set.")
    if self.continue_schedule and not self.init_from:
      raise ValueError("`continue_schedule` needs `init_from`.")

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)


def build_model(config: SorterConfig) -> tf.keras.Model:
  """The sorter wrapped in a functional model [batch, d] -> [batch, d]."""
  sorter = sorters.get(config.sorter, config.seq_len, name="sorter",
                       **config.sorter_kwargs())
  scores = tf.keras.Input([config.seq_len], name="scores")
  return tf.keras.Model(scores, sorter(scores), name=f"{config.sorter}_sorter")


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ShiftedSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
  """A learning-rate schedule started `offset` steps in: lr(step + offset)."""

  def __init__(self, schedule, offset: int):
    self.schedule = schedule
    self.offset = int(offset)

  def __call__(self, step):
    return self.schedule(step + self.offset)

  def get_config(self) -> Dict[str, Any]:
    return {"schedule": tf.keras.optimizers.schedules.serialize(
        self.schedule), "offset": self.offset}

  @classmethod
  def from_config(cls, config):
    return cls(tf.keras.optimizers.schedules.deserialize(config["schedule"]),
               config["offset"])


def learning_rate_schedule(config: SorterConfig, offset_vectors: int = 0):
  """Adam's learning rate: halved every `halve_every_vectors` vectors.

  Args:
    config: the run's hyper-parameters.
    offset_vectors: vectors already seen (by --init_from runs, with
      --continue_schedule): the schedule starts that far in.
  """
  schedule = tf.keras.optimizers.schedules.ExponentialDecay(
      config.learning_rate,
      decay_steps=max(1, config.halve_every_vectors // config.batch_size),
      decay_rate=0.5, staircase=True)
  offset = offset_vectors // config.batch_size
  return ShiftedSchedule(schedule, offset) if offset else schedule


def evaluate_l1(sorter, d: int, size: int = synthetic.TEST_SIZE,
                seed: int = synthetic.TEST_SEED, batch_size: int = 1000) -> float:
  """Mean L1 between a sorter's ranks and the exact ranks on a fixed set.

  Args:
    sorter: a callable [batch, d] -> [batch, d] (a sorter layer or model).
    d: vector length.
    size: number of vectors (10,000 for the paper's Table 1 figure).
    seed: seed of the set (`synthetic.TEST_SEED` is the test set).
    batch_size: vectors per forward pass.

  Returns:
    The L1 averaged over entries and vectors, as a Python float.
  """
  scores, ranks = synthetic.fixed_set(size, d, seed)

  @tf.function(autograph=False)
  def batch_error(x, r):
    return tf.reduce_sum(ops.l1_rank_error(r, sorter(x, training=False)))

  total = 0.
  for start in range(0, size, batch_size):
    total += float(batch_error(scores[start:start + batch_size],
                               ranks[start:start + batch_size]))
  return total / size


# An entry whose rank moves by less than this fraction of d when its score
# moves by one standard deviation of its vector counts as flat.
FLAT_GRADIENT = 0.01
SMOOTHNESS_SIZE = 1000


def self_gradients(sorter, d: int, size: int = SMOOTHNESS_SIZE,
                   seed: int = synthetic.TEST_SEED,
                   batch_size: int = 20) -> np.ndarray:
  """How each soft rank moves with its own score, on a fixed set.

  g[k, i] = d rank_i / d y_i of vector k, times the vector's (population)
  standard deviation: the change of the normalised rank (1/d per position)
  when y_i moves by one standard deviation of its vector, so sorters that
  standardise their input and those that do not (the handcrafted sorter's
  lambda is on raw scores) are measured in one unit. The exact rank has
  g = 0 almost everywhere (no gradient); a useful soft sorter has g < 0
  (a higher score, a better position) and not near 0. Computed as one
  backward pass over each vector repeated d times, row i picking rank_i.

  Args:
    sorter: a callable [batch, d] -> [batch, d].
    d: vector length.
    size: number of vectors of the set (its first ones).
    seed: seed of the set (`synthetic.TEST_SEED` is the test set).
    batch_size: vectors per pass (each becomes d rows).

  Returns:
    [size, d] float64 array.
  """
  scores, _ = synthetic.fixed_set(size, d, seed)
  pick = tf.eye(d, dtype=tf.float32)

  @tf.function(autograph=False)
  def batch_gradients(x):
    rows = tf.reshape(tf.repeat(x[:, None, :], d, axis=1), [-1, d])
    with tf.GradientTape() as tape:
      tape.watch(rows)
      ranks = sorter(rows, training=False)
      picked = tf.reduce_sum(
          tf.reshape(ranks, [-1, d, d]) * pick[None], axis=[1, 2])
    grads = tf.reshape(tape.gradient(  # None for an exact (argsort) rank.
        picked, rows, unconnected_gradients=tf.UnconnectedGradients.ZERO),
                       [-1, d, d])
    return tf.linalg.diag_part(grads)

  out = []
  for start in range(0, size, batch_size):
    out.append(batch_gradients(scores[start:start + batch_size]).numpy())
  g = np.concatenate(out).astype(np.float64)
  return g * np.std(scores.numpy().astype(np.float64), axis=1,
                    keepdims=True)


def smoothness(sorter, d: int, size: int = SMOOTHNESS_SIZE) -> Dict[str, float]:
  """Summary of `self_gradients` on the test set's first `size` vectors.

  Returns:
    `gradient_mean` (mean |g|), `gradient_median` (median |g|),
    `gradient_p99` (its 99th percentile: a sharp sorter's few large
    gradients), `flat_share` (share of entries with |g| < FLAT_GRADIENT) and
    `wrong_sign_share` (share with g > FLAT_GRADIENT: a higher score, a
    worse rank, by more than a flat entry moves).
  """
  g = self_gradients(sorter, d, size)
  return {"gradient_mean": float(np.mean(np.abs(g))),
          "gradient_median": float(np.median(np.abs(g))),
          "gradient_p99": float(np.percentile(np.abs(g), 99)),
          "flat_share": float(np.mean(np.abs(g) < FLAT_GRADIENT)),
          "wrong_sign_share": float(np.mean(g > FLAT_GRADIENT))}


class _TimeKeeper(tf.keras.callbacks.Callback):
  """Accumulates training wall time and the learning curve (validation L1
  and learning rate after each epoch) over resumed sessions in a JSON file."""

  def __init__(self, path: str, epoch_vectors: int):
    super().__init__()
    self._path = path
    self._epoch_vectors = epoch_vectors
    self.total = 0.
    self.curve = []
    if tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path) as f:
        stored = json.load(f)
      self.total = float(stored["train_seconds"])
      self.curve = stored.get("curve", [])
    self._last = None

  def on_epoch_begin(self, epoch, logs=None):
    self._last = time.time()

  def on_epoch_end(self, epoch, logs=None):
    self.total += time.time() - self._last
    logs = logs or {}
    # A resumed session repeats the epochs after the last backup.
    self.curve = [c for c in self.curve
                  if c["vectors"] <= epoch * self._epoch_vectors]
    self.curve.append({"vectors": (epoch + 1) * self._epoch_vectors,
                       "val_l1": float(logs.get("val_loss", float("nan"))),
                       "learning_rate": float(logs.get("learning_rate",
                                                       float("nan")))})
    with tf.io.gfile.GFile(self._path, "w") as f:
      json.dump({"train_seconds": self.total, "epochs_done": epoch + 1,
                 "curve": self.curve}, f)


class _LearningRateLogger(tf.keras.callbacks.Callback):
  """Adds the current learning rate to the epoch logs (for TensorBoard)."""

  def on_epoch_end(self, epoch, logs=None):
    if logs is not None:
      opt = self.model.optimizer
      rate = opt.learning_rate
      if callable(rate):
        rate = rate(opt.iterations)
      logs["learning_rate"] = float(rate)


def train(config: SorterConfig, verbose: int = 0) -> Dict[str, Any]:
  """Trains a sorter, writing everything into model_dir; resumes if present.

  Args:
    config: the run's hyper-parameters.
    verbose: Keras `fit` verbosity.

  Returns:
    The run's record (also written to model_dir/sorter.json): sorter, seq_len,
    hyperparameters, l1 on the test set, train_seconds (summed over
    resumed sessions), train_vectors, threads.
  """
  config.validate()
  finished = _finished_record(config)
  if finished is not None:
    return finished
  if config.threads:
    try:
      tf.config.threading.set_intra_op_parallelism_threads(config.threads)
      tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already started in this process.
      logging.warning("threads=%d ignored: TensorFlow is initialised.",
                      config.threads)
  init = None
  if config.init_from:  # Checked before anything is written.
    init, weights = init_source(config.init_from)
    if (init["sorter"], init["hyperparameters"]) != (
        config.sorter, config.sorter_kwargs()):
      raise ValueError(f"`init_from`={config.init_from} trained another "
                       "sorter (name or hyper-parameters differ).")
  tf.io.gfile.makedirs(config.model_dir)
  with tf.io.gfile.GFile(os.path.join(config.model_dir, CONFIG_FILE), "w") as f:
    f.write(config.to_json())
  tf.keras.utils.set_random_seed(config.seed)
  model = build_model(config)
  if init is not None:
    # Another seq_len works when the weights do not depend on d (an lstm
    # with the shared projection, pairwise): its comparisons transfer.
    sorters.load_weights(model.get_layer("sorter"), weights)
  offset = init["train_vectors"] if config.continue_schedule else 0
  model.compile(
      optimizer=tf.keras.optimizers.Adam(
          learning_rate_schedule(config, offset)),
      loss=tf.keras.losses.MeanAbsoluteError(name="l1"))
  train_data = synthetic.dataset(config.batch_size, config.seq_len,
                                 seed=config.seed)
  validation = synthetic.fixed_set(VALIDATION_SIZE, config.seq_len,
                                   synthetic.VALIDATION_SEED)
  epoch_vectors = config.steps_per_epoch() * config.batch_size
  timer = _TimeKeeper(os.path.join(config.model_dir, "progress.json"),
                      epoch_vectors)
  callbacks = [
      _LearningRateLogger(),
      timer,
      tf.keras.callbacks.BackupAndRestore(
          run_dir_lib.RunDir(config.model_dir).backup),
      tf.keras.callbacks.ModelCheckpoint(
          os.path.join(run_dir_lib.RunDir(config.model_dir).checkpoints,
                       run_dir_lib.CHECKPOINT_PATTERN),
          save_weights_only=True),
      tf.keras.callbacks.TensorBoard(config.model_dir),
  ]
  model.fit(train_data, epochs=config.num_epochs(),
            steps_per_epoch=config.steps_per_epoch(),
            validation_data=validation, validation_batch_size=1000,
            callbacks=callbacks, verbose=verbose)
  sorter = model.get_layer("sorter")
  sorters.save_weights(sorter, os.path.join(config.model_dir, WEIGHTS_FILE))
  record = {
      "sorter": config.sorter,
      "seq_len": config.seq_len,
      "hyperparameters": config.sorter_kwargs(),
      "l1": evaluate_l1(sorter, config.seq_len),
      "train_seconds": round(timer.total, 1),
      "train_vectors": config.num_epochs() * config.steps_per_epoch() *
                       config.batch_size,
      "threads": config.threads,
      "curve": timer.curve,
  }
  if init is not None:
    record["train_seconds"] = round(timer.total + init["train_seconds"], 1)
    record["curve"] = init.get("curve", []) + [
        dict(c, vectors=c["vectors"] + init["train_vectors"])
        for c in timer.curve]
    record["train_vectors"] += init["train_vectors"]
    record["init_from"] = config.init_from
  with tf.io.gfile.GFile(os.path.join(config.model_dir, RECORD_FILE), "w") as f:
    f.write(json.dumps(record, indent=2, sort_keys=True))
  return record


def _finished_record(config: SorterConfig) -> Optional[Dict[str, Any]]:
  """The record of a finished run of exactly this config, else None."""
  config_path = os.path.join(config.model_dir, CONFIG_FILE)
  record_path = os.path.join(config.model_dir, RECORD_FILE)
  if not (tf.io.gfile.exists(config_path) and tf.io.gfile.exists(record_path)):
    return None
  with tf.io.gfile.GFile(config_path) as f:
    stored = json.load(f)
  # Fields added after the run was made count with their defaults.
  defaults = json.loads(SorterConfig(model_dir=config.model_dir).to_json())
  if {**defaults, **stored} != json.loads(config.to_json()):
    return None
  return read_record(config.model_dir)


def export_pretrained(model_dir: str, directory: str,
                      command: str) -> Dict[str, Any]:
  """Ships a finished run's sorter: copies its weights into `directory` as
  `<sorter>_d<seq_len>.npz` and records it in `directory/sorters.json`.

  Args:
    model_dir: a finished `train` run.
    directory: the pretrained folder (`sorters.PRETRAINED_DIR` to ship).
    command: the command line that trained it, kept in the index.

  Returns:
    The index entry: the run's record plus `weights`, `size_bytes` and
    `command`.
  """
  return ship_weights(
      directory, read_record(model_dir), command,
      lambda path: tf.io.gfile.copy(os.path.join(model_dir, WEIGHTS_FILE),
                                    path, overwrite=True))


def ship_weights(directory: str, record: Dict[str, Any], command: str,
                 write: Callable[[str], None]) -> Dict[str, Any]:
  """Writes a sorter's weights as `<sorter>_d<d>.npz` into `directory` (by
  calling `write(path)`) and its entry into `directory/sorters.json`.

  Returns:
    The entry: `record` plus `weights`, `size_bytes` and `command`.
  """
  key = sorters.pretrained_key(record["sorter"], record["seq_len"])
  weights = key + ".npz"
  path = os.path.join(directory, weights)
  tf.io.gfile.makedirs(directory)
  write(path)
  entry = dict(record, weights=weights, command=command,
               size_bytes=tf.io.gfile.stat(path).length)
  index = sorters.pretrained_index(directory)
  index[key] = entry
  with tf.io.gfile.GFile(os.path.join(directory, sorters.PRETRAINED_INDEX),
                         "w") as f:
    f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
  return entry


def init_source(init_from: str,
                directory: str = sorters.PRETRAINED_DIR
                ) -> Tuple[Dict[str, Any], str]:
  """(record, weights file) of what --init_from names.

  A finished run folder, or the key of a shipped sorter (`lstm_d100`): the
  shipped weights and their index entry (its vectors and learning curve), so
  that training goes on from a committed sorter in a fresh clone.

  Raises:
    ValueError: naming --init_from when it is neither.
  """
  if tf.io.gfile.exists(os.path.join(init_from, RECORD_FILE)):
    return read_record(init_from), os.path.join(init_from, WEIGHTS_FILE)
  index = sorters.pretrained_index(directory)
  if init_from in index:
    entry = index[init_from]
    return entry, os.path.join(directory, entry["weights"])
  raise ValueError(f"`init_from`={init_from} is neither a finished sorter run "
                   f"(no {RECORD_FILE}) nor a shipped sorter (shipped: "
                   f"{', '.join(sorted(index)) or 'none'}).")


def read_record(model_dir: str) -> Dict[str, Any]:
  """The sorter.json a finished `train` run wrote into model_dir."""
  path = os.path.join(model_dir, RECORD_FILE)
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{path} not found: `model_dir` is not a finished "
                     "sorter run.")
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def load_trained(model_dir: str) -> tf.keras.layers.Layer:
  """The sorter a `train` run saved in model_dir (sorter.json + sorter.npz)."""
  record = read_record(model_dir)
  sorter = sorters.get(record["sorter"], record["seq_len"],
                       **record["hyperparameters"])
  sorters.load_weights(sorter, os.path.join(model_dir, WEIGHTS_FILE))
  return sorter


def sweep_first_score(sorter, d: int, seed: int = 0, low: float = -1.,
                      high: float = 1., step: float = 0.001):
  """The paper's Fig. 5 curve: rank of y_1 as y_1 sweeps [low, high].

  The other d - 1 scores are a fixed seeded uniform[-1, 1] vector.

  Args:
    sorter: a callable [batch, d] -> [batch, d] ranks, or None for the exact
      rank.
    d: vector length.
    seed: seed of the fixed vector.
    low, high, step: the sweep of y_1.

  Returns:
    (values [n], ranks [n]) numpy arrays: y_1 and its rank in positions
    (1 = largest score, d = smallest), i.e. d * normalised rank.
  """
  values = np.arange(low, high + step / 2, step, dtype=np.float32)
  rest = tf.random.stateless_uniform([d - 1], [seed, 1], -1., 1.)
  scores = tf.concat([values[:, None],
                      tf.tile(rest[None, :], [len(values), 1])], axis=1)
  ranks = (ops.exact_rank(scores) if sorter is None
           else sorter(scores, training=False))
  return values, d * np.asarray(ranks)[:, 0]
