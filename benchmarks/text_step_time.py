r"""Text training step time (GoEmotions, MiniLM-size encoder) and input speed.

Measures in one run, batch 32, sequence length 32:

* one training step (forward, backward, Adam) of the ranking model with the
  `dot`, `lc_mlp` and `concat_mlp` interactions (softmax loss), and of a plain
  Keras classifier (the same encoder, `Dense(28)`, cross-entropy);
* the tf.data input pipeline on its own (read, shuffle, batch, tokenize),
  in examples per second.

  .venv/bin/python -m benchmarks.text_step_time --steps=20

Prints a markdown table.

Then the padding and precision table (issue 34), alternating in `--rounds`
rounds so that every figure meets the same machine load: the ranking model
(softmax + dot, MiniLM-L6 weights) with fixed padding to --max_seq_length
or with length bucketing, each in float32 and bfloat16, on the batches of
its own training stream (seed 0); and, when `make peer-venv` has made
`.venv-peer`, the PyTorch + Hugging Face peer (`benchmarks/torch_peer.py`)
fine-tuning the same MiniLM with its own best practice. Training steps are
traced once with a free length, as Keras' `fit` traces them. Serving: one
raw text per call (batch 1) through the exported SavedModel against the
peer's tokenizer + model. `uptime` is printed before and after.

  .venv/bin/python -m benchmarks.text_step_time --steps=15 --rounds=3
"""

import dataclasses
import os
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import timing
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.ranking import losses
from rank4class_tf.serving import saved_model
from rank4class_tf.training import builders
from rank4class_tf.training import pipeline as pipeline_lib

flags.DEFINE_integer("steps", 20, "Timed training steps per model.")
flags.DEFINE_integer("input_batches", 300, "Batches timed for the pipeline.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per instance.")
flags.DEFINE_integer("mlp_units", 256, "Hidden width of the MLP interactions.")
flags.DEFINE_integer("rounds", 3, "Rounds of the padding and precision "
                     "table (each variant and the peer once a round).")
flags.DEFINE_integer("serve_calls", 100, "Timed batch-1 serving calls per "
                     "variant and round.")
flags.DEFINE_bool("jit_compile", False, "Compile the padding and precision "
                  "table's training steps with XLA (one compilation per "
                  "length).")
flags.DEFINE_list("precisions", None, "Precisions of the padding and "
                  "precision table (default: float32, and bfloat16 where the "
                  "hardware computes it natively).")
flags.DEFINE_bool("interaction_table", True, "Also time the interactions "
                  "and the plain classifier (the first table).")
flags.DEFINE_string("peer_python", ".venv-peer/bin/python", "Python of the "
                    "PyTorch peer's virtual env (`make peer-venv`); the peer "
                    "is left out when it does not exist.")
FLAGS = flags.FLAGS



uptime = timing.uptime


class Variant:
  """The ranking model with one padding and one precision: its training
  step on its own stream's batches, and its export's batch-1 serving."""

  def __init__(self, data, bucketing: bool, precision: str, folder: str):
    self.name = (("bucketed" if bucketing else "fixed") +
                 f" length, {precision}")
    config = config_lib.TrainConfig.create(
        dataset="goemotions", encoder="bert", init_checkpoint="minilm",
        pooling="mean", max_seq_length=FLAGS.max_seq_length,
        batch_size=FLAGS.batch_size, model_dir="unused",
        length_bucketing=bucketing, mixed_precision=precision)
    self.inputs = builders.build_inputs(config, data)
    ds = datasets.ranking_dataset(data, "train", FLAGS.batch_size,
                                  training=True, seed=0,
                                  instance_inputs=self.inputs)
    self.batches = list(ds.take(5 + FLAGS.steps * FLAGS.rounds))
    self.mean_length = sum(f["input_word_ids"].shape[1]
                           for f, _ in self.batches) / len(self.batches)
    with pipeline_lib.precision_policy(precision):
      tf.keras.utils.set_random_seed(0)
      # bfloat16 as runs compute it: the sensitive layers in float32.
      self.model = pipeline_lib.build_model(model_lib.build_model_builder(
          data, dataclasses.replace(config.model, interaction="dot"),
          instance_inputs=self.inputs), config.trainer)
      self.step = timing.make_step(
          self.model, losses.get("softmax"), tf.keras.optimizers.Adam(1e-5),
          reduce_retracing=not FLAGS.jit_compile,
          jit_compile=FLAGS.jit_compile, autograph=False)
      export = os.path.join(folder, self.name.replace(" ", "_")
                            .replace(",", ""))
      saved_model.store_class_features(self.model)
      saved_model.export_saved_model(self.model, export, saved_model.signatures(
          self.model, self.inputs, data.class_names, 5))
    self.serve = tf.saved_model.load(export).signatures["serving_default"]
    self.texts = [str(t) for t in data.splits["train"][0][:200]]
    self.num_classes = data.num_classes
    for f, y in self.batches[:5]:  # Traces (every length), warms up.
      self.step(f, y).numpy()
    self.position = 5

  def train_ms(self) -> float:
    batches = self.batches[self.position:self.position + FLAGS.steps]
    self.position += FLAGS.steps
    start = time.perf_counter()
    for f, y in batches:
      loss = self.step(f, y)
    loss.numpy()
    return (time.perf_counter() - start) / len(batches) * 1e3

  def serve_ms(self) -> float:
    for text in self.texts[:5]:
      self.serve(text=tf.constant([text]))
    start = time.perf_counter()
    for i in range(FLAGS.serve_calls):
      self.serve(text=tf.constant([self.texts[i % len(self.texts)]]))
    return (time.perf_counter() - start) / FLAGS.serve_calls * 1e3


def serving_breakdown(variant: "Variant") -> None:
  """Where a batch-1 serving call's time goes: the SavedModel call, then
  its tokenization alone and the model alone on tokenized input (each a
  tf.function of the same layers)."""
  inputs, model = variant.inputs, variant.model
  num_classes = variant.num_classes
  tokenize = tf.function(inputs.serving_features)
  from rank4class_tf.data import features  # pylint: disable=g-import-not-at-top
  score = tf.function(lambda context: model(features.class_list_features(
      context, num_classes), training=False), reduce_retracing=True)
  texts = variant.texts
  tokenized = [tokenize(tf.constant([t])) for t in texts]
  for context in tokenized[:20]:
    score(context)

  def ms(fn, args):
    for a in args[:5]:
      fn(a)
    start = time.perf_counter()
    for i in range(FLAGS.serve_calls):
      out = fn(args[i % len(args)])
    del out
    return (time.perf_counter() - start) / FLAGS.serve_calls * 1e3

  strings = [tf.constant([t]) for t in texts]
  rows = [("whole SavedModel call (tokenize, encode, score 28 classes, top 5)",
           ms(lambda x: variant.serve(text=x), strings)),
          ("tokenization alone (TextPreprocessor, cut to the text)",
           ms(tokenize, strings)),
          ("model alone on tokenized input (encoder, dot, 28 scores)",
           ms(score, tokenized)),
          ("an empty tf.function call (dispatch overhead)",
           ms(tf.function(lambda x: x), strings))]
  print(f"\nWhere a batch-1 serving call goes ({variant.name}, "
        f"{FLAGS.serve_calls} calls each; {uptime()}):\n")
  print("| part | ms / call |")
  print("|---|---|")
  for name, value in rows:
    print(f"| {name} | {value:.2f} |")


def padding_and_precision_table(data) -> None:
  """Ours (fixed / bucketed x float32 / bfloat16) against the peer."""
  folder = tempfile.mkdtemp()
  precisions = FLAGS.precisions or (
      ["float32", "bfloat16"] if checks.native_bfloat16() else ["float32"])
  variants = [Variant(data, bucketing, precision, folder)
              for bucketing in (False, True)
              for precision in precisions]
  peer = None
  if os.path.exists(FLAGS.peer_python):
    peer = timing.Peer(FLAGS.peer_python, FLAGS.max_seq_length)
  train = {v.name: [] for v in variants}
  serve = {v.name: [] for v in variants}
  peer_names = {dtype: f"peer (PyTorch {dtype}, dynamic padding)"
                for dtype in ("float32", "bfloat16")}
  if peer:
    for name in peer_names.values():
      train[name], serve[name] = [], []
  loads = {name: [] for name in train}
  load = lambda: float(uptime().split()[2].rstrip(","))
  before = uptime()
  for _ in range(FLAGS.rounds):
    for v in variants:
      train[v.name].append(v.train_ms())
      serve[v.name].append(v.serve_ms())
      loads[v.name].append(load())
    if peer:
      for dtype, name in peer_names.items():
        if dtype not in precisions:
          continue
        train[name].append(peer.ms("train", dtype, FLAGS.steps))
        serve[name].append(peer.ms("serve", dtype, FLAGS.serve_calls))
        loads[name].append(load())
  train = {name: values for name, values in train.items() if values}
  after = uptime()
  if peer:
    peer.close()
  median = lambda values: sorted(values)[len(values) // 2]
  base = median(train[variants[0].name])
  best_peer = min((median(train[n]) for n in peer_names.values()
                   if n in train), default=None)
  best_peer_serve = min((median(serve[n]) for n in peer_names.values()
                         if n in train), default=None)
  print(f"\nGoEmotions, MiniLM-L6 (all-MiniLM-L6-v2 weights), softmax + dot, "
        f"batch {FLAGS.batch_size}, up to {FLAGS.max_seq_length} tokens; "
        f"median of {FLAGS.rounds} alternating rounds of {FLAGS.steps} "
        f"training steps and {FLAGS.serve_calls} batch-1 serving calls; "
        f"{before} before, {after} after:\n")
  print("| variant | mean padded length | ms / step (rounds) | examples / s "
        "| step vs fixed float32 | step vs the peer's best | serving ms "
        "(batch 1) | serving vs the peer's best | 1-min load after each "
        "round |")
  print("|---|---|---|---|---|---|---|---|---|")
  lengths = {v.name: f"{v.mean_length:.1f}" for v in variants}
  for name in train:
    ms = median(train[name])
    rounds = ", ".join(f"{x:.0f}" for x in train[name])
    vs_peer = f"{ms / best_peer:.2f}" if best_peer else "—"
    serve_ms = median(serve[name])
    vs_serve = (f"{serve_ms / best_peer_serve:.2f}" if best_peer_serve
                else "—")
    print(f"| {name} | {lengths.get(name, 'longest in batch')} | {ms:.0f} "
          f"({rounds}) | {FLAGS.batch_size / ms * 1e3:.0f} | "
          f"{ms / base:.2f} | {vs_peer} | {serve_ms:.2f} | {vs_serve} | "
          f"{', '.join(f'{x:.1f}' for x in loads[name])} |")
  if not peer:
    print(f"\n(No peer: {FLAGS.peer_python} does not exist; "
          "`make peer-venv` makes it.)")
  serving_breakdown(next(v for v in variants
                          if v.name == "bucketed length, float32"))


def input_examples_per_second(data, instance_inputs):
  ds = datasets.ranking_dataset(data, "train", FLAGS.batch_size,
                                training=True, seed=0,
                                instance_inputs=instance_inputs)
  iterator = iter(ds)
  for _ in range(20):  # Fill the cache and prefetch buffers.
    next(iterator)
  start = time.perf_counter()
  for _ in range(FLAGS.input_batches):
    next(iterator)
  return FLAGS.input_batches * FLAGS.batch_size / (
      time.perf_counter() - start)


def main(argv):
  del argv
  if not FLAGS.interaction_table:
    padding_and_precision_table(datasets.get("goemotions"))
    return
  tf.keras.utils.set_random_seed(0)
  batch = timing.TextBatch.create(FLAGS.batch_size, FLAGS.max_seq_length,
                                  FLAGS.mlp_units)
  config, data, instance_inputs = (batch.config, batch.data,
                                   batch.instance_inputs)
  features, labels = batch.features, batch.labels

  rows = []
  for interaction in ("dot", "lc_mlp", "concat_mlp"):
    ranker = batch.ranker(interaction)
    step = timing.make_step(ranker, losses.get("softmax"),
                            tf.keras.optimizers.Adam(1e-5))
    rows.append((f"ranking model, {interaction}",
                 timing.time_step(step, features, labels, FLAGS.steps)))

  bert_inputs = instance_inputs.encoder_input(features)
  # The batch's own length, as the ranking models get it (the training
  # stream trims each batch to its longest comment).
  keras_inputs = {k: tf.keras.Input([None], dtype=tf.int32, name=k)
                  for k in bert_inputs}
  encoder = encoders.get("bert", **encoders.config_kwargs(config.model))
  classifier = tf.keras.Model(
      keras_inputs, tf.keras.layers.Dense(data.num_classes)(
          encoder(keras_inputs)))
  step = timing.make_step(
      classifier, tf.keras.losses.CategoricalCrossentropy(from_logits=True),
      tf.keras.optimizers.Adam(1e-5))
  base = timing.time_step(step, bert_inputs, labels, FLAGS.steps)
  rows.append(("plain Keras classifier (Dense + CCE)", base))

  examples = input_examples_per_second(data, instance_inputs)
  print(f"\nGoEmotions, MiniLM-L6 size encoder, batch {FLAGS.batch_size}, "
        f"length {FLAGS.max_seq_length}, {FLAGS.steps} timed steps each:\n")
  print("| model | ms / step | examples / s | ratio to plain |")
  print("|---|---|---|---|")
  for name, ms in rows:
    print(f"| {name} | {ms:.1f} | {FLAGS.batch_size / ms * 1e3:.0f} | "
          f"{ms / base:.2f} |")
  print(f"| input pipeline alone (read, shuffle, batch, tokenize) | | "
        f"{examples:.0f} | |")
  padding_and_precision_table(data)


if __name__ == "__main__":
  app.run(main)
