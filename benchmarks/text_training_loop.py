r"""Where the text training loop's time goes, beside the isolated step.

`benchmarks.text_step_time` times one compiled training step on a fixed
batch; `pipelines.train` runs the same step inside Keras' `fit` with the
input pipeline, the metrics, validation, checkpoints and exports. This
binary measures, in one process and one run (GoEmotions, MiniLM-L6 size
encoder, or `--encoder_size`, softmax + dot, batch 32, length 32), each
layer that `fit` adds:

1. the isolated step (`timing.make_step`, one fixed batch);
2. `model.fit` on that fixed batch repeated, loss only, one step per call;
3. the same with the run's metrics (Top-1, Top-5, NDCG@5, MRR);
4. the same with the real input pipeline tokenizing in tf.data (read,
   shuffle, tokenize, bucket, batch: what every text split did before
   issue 60, what a streamed split still does);
5. the same with the token ids computed once (today's in-memory splits);
6. the same with `steps_per_execution=10`;
7. `training.train` itself, one epoch of the steps and one validation:
   its steps after the first execution (whose tracing is one-off), and the
   seconds of each phase of the run (building, first execution, steps,
   validation, epoch-end callbacks, exports), beside the ms/step that
   Keras' own log prints.

  .venv/bin/python -m benchmarks.text_training_loop --steps=30

`--nolength_bucketing` pads every batch to --max_seq_length (release 0.1's
padding) and `--mixed_precision=bfloat16` computes every row in bfloat16,
so the table can be taken for each padding and precision.

Rows 4 and 5 alternate in `--rounds` rounds (the median, the rounds in
brackets), so that their ratio meets the same machine load.

Prints two markdown tables: ms per training step of 1-7 with the 1-minute
load average after each row, and the seconds of each phase of 7.
"""

import dataclasses
import contextlib
import io
import os
import re
import tempfile
import time
from typing import Tuple

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import timing
from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.data import contract
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics
from rank4class_tf.training import builders
from rank4class_tf.training import pipeline as pipeline_lib
from rank4class_tf.training import trainer as training

flags.DEFINE_integer("steps", 30, "Timed training steps per variant.")
flags.DEFINE_enum("encoder_size", "minilm_l6", ["minilm_l6", "bert_base",
                                                "electra_base"],
                  "Encoder architecture (random weights unless "
                  "--init_checkpoint): bert_base prices the paper's BERT-Base "
                  "runs on this machine.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per instance.")
flags.DEFINE_string("init_checkpoint", "",
                    "Encoder weights for the training.train row (empty: "
                    "random weights of the MiniLM-L6 size; speed is the "
                    "same).")
flags.DEFINE_bool("length_bucketing", True, "Pad each batch to its longest "
                  "text (the default of pipelines.train) instead of "
                  "--max_seq_length.")
flags.DEFINE_enum("mixed_precision", "float32", ["float32", "bfloat16"],
                  "Compute precision of every row (bfloat16 as runs compute "
                  "it: the sensitive layers in float32).")
flags.DEFINE_integer("rounds", 3, "Alternating rounds of rows 4 and 5.")
FLAGS = flags.FLAGS


class Clock(tf.keras.callbacks.Callback):
  """Times the phases of a `fit` (first in the callback list; `Last` marks
  the end of the other callbacks' epoch-end work)."""

  def __init__(self):
    super().__init__()
    self.marks = {}
    self._batch_ends = []

  def on_train_begin(self, logs=None):
    self.marks["train_begin"] = time.perf_counter()

  def on_train_batch_end(self, batch, logs=None):
    self._batch_ends.append((batch, time.perf_counter()))

  def on_test_begin(self, logs=None):
    self.marks["test_begin"] = time.perf_counter()

  def on_test_end(self, logs=None):
    self.marks["test_end"] = time.perf_counter()

  def on_train_end(self, logs=None):
    self.marks["train_end"] = time.perf_counter()

  def first_execution(self) -> Tuple[int, float]:
    """(steps, seconds) of the first execution, tracing included."""
    batch, end = self._batch_ends[0]
    return batch + 1, end - self.marks["train_begin"]

  def steady_ms(self) -> float:
    """ms per step after the first execution."""
    (first, start), (last, end) = self._batch_ends[0], self._batch_ends[-1]
    return (end - start) / (last - first) * 1e3


class Last(tf.keras.callbacks.Callback):
  """Marks when the epoch-end callbacks before it are done."""

  def __init__(self, clock: Clock):
    super().__init__()
    self._clock = clock

  def on_epoch_end(self, epoch, logs=None):
    self._clock.marks["callbacks_end"] = time.perf_counter()


class StepTimer(tf.keras.callbacks.Callback):
  """Milliseconds per step of `fit` between its first and last batch (the
  first batch, tracing included, is not timed)."""

  def __init__(self):
    super().__init__()
    self.start = None
    self.batches = 0

  def on_train_batch_end(self, batch, logs=None):
    if self.start is None:
      self.start = time.perf_counter()
      self.first = batch
    self.last = batch
    self.end = time.perf_counter()

  def ms_per_step(self) -> float:
    return (self.end - self.start) / (self.last - self.first) * 1e3


def fit_ms(model, dataset, steps: int, with_metrics: bool,
           steps_per_execution: int) -> float:
  model.compile(optimizer=tf.keras.optimizers.Adam(1e-5),
                loss=losses.get("softmax"),
                metrics=(metrics.get_all(config_lib.DEFAULT_METRICS)
                         if with_metrics else None),
                steps_per_execution=steps_per_execution)
  timer = StepTimer()
  # One warm-up execution, then `steps` timed steps.
  model.fit(dataset, epochs=1, steps_per_epoch=steps + steps_per_execution,
            callbacks=[timer], verbose=0)
  return timer.ms_per_step()


def main(argv):
  del argv
  before = timing.uptime()
  tf.keras.utils.set_random_seed(0)
  config = config_lib.TrainConfig.create(
      dataset="goemotions", encoder="bert", encoder_size=FLAGS.encoder_size,
      max_seq_length=FLAGS.max_seq_length, batch_size=FLAGS.batch_size,
      model_dir="unused", length_bucketing=FLAGS.length_bucketing,
      mixed_precision=FLAGS.mixed_precision)
  data = datasets.get("goemotions")
  instance_inputs = builders.build_inputs(config, data)
  stream = lambda d: datasets.ranking_dataset(
      d, "train", FLAGS.batch_size, training=True, seed=0,
      instance_inputs=instance_inputs)
  real = stream(data)
  # The same examples read as a stream: tokenized in tf.data.
  in_tf_data = stream(contract.streamed(data))
  features, labels = next(iter(real))
  fixed = tf.data.Dataset.from_tensors((features, labels)).repeat()

  def fresh_model():
    with pipeline_lib.precision_policy(FLAGS.mixed_precision):
      return pipeline_lib.build_model(model_lib.build_model_builder(
          data, dataclasses.replace(config.model, interaction="dot"),
          instance_inputs=instance_inputs), config.trainer)

  rows = []

  def row(name, ms):
    rows.append((name, ms, timing.uptime().split()[2].rstrip(",")))

  model = fresh_model()
  step = timing.make_step(model, losses.get("softmax"),
                          tf.keras.optimizers.Adam(1e-5))
  row("1. isolated step (fixed batch)",
      timing.time_step(step, features, labels, FLAGS.steps))
  row("2. fit, fixed batch, loss only, 1 step per call",
      fit_ms(fresh_model(), fixed, FLAGS.steps, False, 1))
  row("3. + the 4 ranking metrics",
      fit_ms(fresh_model(), fixed, FLAGS.steps, True, 1))
  pipelines = {"4. + the real input pipeline, tokenizing in tf.data":
               in_tf_data,
               "5. + the real input pipeline, token ids computed once":
               real}
  measured = {name: [] for name in pipelines}
  for _ in range(FLAGS.rounds):
    for name, dataset in pipelines.items():
      measured[name].append(fit_ms(fresh_model(), dataset, FLAGS.steps,
                                   True, 1))
  for name, values in measured.items():
    rounds = ", ".join(f"{v:.0f}" for v in values)
    row(f"{name} (rounds: {rounds})", sorted(values)[len(values) // 2])
  steps = -(-FLAGS.steps // 10) * 10
  row("6. + steps_per_execution=10 (token ids)",
      fit_ms(fresh_model(), real, steps, True, 10))

  # 6. The real run: one epoch of `steps` steps, one validation, exports.
  run_steps = steps + 10
  model_dir = tempfile.mkdtemp()
  run_config = config.replace(
      model_dir=os.path.join(model_dir, "run"), train_steps=run_steps,
      eval_every=run_steps, learning_rate=1e-5,
      init_checkpoint=FLAGS.init_checkpoint)
  clock = Clock()
  build_callbacks = pipeline_lib.Rank4ClassPipeline.build_callbacks
  def with_clock(self):
    return [clock] + build_callbacks(self) + [Last(clock)]
  pipeline_lib.Rank4ClassPipeline.build_callbacks = with_clock
  keras_log = io.StringIO()
  start = time.perf_counter()
  with contextlib.redirect_stdout(keras_log):
    training.train(run_config, verbose=2)
  end = time.perf_counter()
  pipeline_lib.Rank4ClassPipeline.build_callbacks = build_callbacks
  logged = re.search(r"- (\d+)(ms|s)/step", keras_log.getvalue())
  row(f"7. training.train, after its first {steps_per_call(clock)} steps",
      clock.steady_ms())

  base = rows[0][1]
  size = {"minilm_l6": "MiniLM-L6", "bert_base": "BERT-Base",
          "electra_base": "ELECTRA-Base"}[FLAGS.encoder_size]
  print(f"\n{before} before, {timing.uptime()} after.")
  print(f"\nGoEmotions, {size} size, softmax + dot, batch "
        f"{FLAGS.batch_size}, length {FLAGS.max_seq_length} ("
        f"{'bucketed' if FLAGS.length_bucketing else 'fixed'} padding; rows "
        f"1-3 on one batch of that stream), {FLAGS.mixed_precision}, "
        f"{FLAGS.steps} timed steps per row:\n")
  print("| what runs | ms / step | ratio to the isolated step | 1-min load "
        "after |")
  print("|---|---|---|---|")
  for name, ms, load in rows:
    print(f"| {name} | {ms:.1f} | {ms / base:.2f} | {load} |")
  marks = clock.marks
  first_steps, first_seconds = clock.first_execution()
  phases = [
      ("checks, data, model, weights (before fit)",
       marks["train_begin"] - start),
      (f"first execution: {first_steps} steps, tracing included",
       first_seconds),
      (f"the other {run_steps - first_steps} steps",
       marks["test_begin"] - clock._batch_ends[0][1]),  # pylint: disable=protected-access
      (f"one validation ({data.size('validation')} comments)",
       marks["test_end"] - marks["test_begin"]),
      ("epoch-end callbacks (TensorBoard, per-validation and best "
       "checkpoints, backup)", marks["callbacks_end"] - marks["test_end"]),
      ("after fit: two exports, backup removed", end - marks["train_end"]),
  ]
  print(f"\ntraining.train, {run_steps} steps, one validation: "
        f"{end - start:.1f} s in all.\n")
  print("| phase | seconds |")
  print("|---|---|")
  for name, seconds in phases:
    print(f"| {name} | {seconds:.1f} |")
  if logged:
    print(f"\nKeras' log (verbose=2) said {logged.group(1)} "
          f"{logged.group(2)}/step: the "
          "epoch's time, its validation included, over its steps.")


def steps_per_call(clock: Clock) -> int:
  return clock.first_execution()[0]


if __name__ == "__main__":
  app.run(main)
