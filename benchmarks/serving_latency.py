r"""Batch-1 serving latency of the text export: the levers of issue 60.

Builds the ranking model (GoEmotions, MiniLM-L6 from all-MiniLM-L6-v2, mean
pooling, dot, `--max_seq_length`), exports it once per variant of the
scores inside `serving_default` (the contract unchanged: raw text in,
scores and ranked classes out), loads each export back as a client does
(`tf.saved_model.load`) and times, alternating the variants in `--rounds`
rounds so that each meets the same machine load:

* `plain`: today's export (`saved_model.scoring_function`): the text padded to
  its own length;
* `padded to 8`: the same model on the text padded to a multiple of 8
  tokens (what the XLA variant computes, without XLA);
* `XLA at batch 1`: a batch of one text padded to a multiple of 8 tokens
  (at most `--max_seq_length`) and scored by the model compiled with XLA
  (`tf.function(jit_compile=True)`, one compilation per length bucket,
  made by the warm-up calls); other batch sizes take the plain path.

Rows: ms per call at batch 1 (median of the rounds, the rounds in
brackets) and comments per second at batch 64; and the largest score
difference from `plain` over texts of every token length 1..max.

  .venv/bin/python -m benchmarks.serving_latency --rounds=5

With `--peer` (and `make peer-venv`), the PyTorch peer's batch-1 serving
(`benchmarks/torch_peer.py`, float32) alternates with them.
"""

import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks import timing
from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.data import features
from rank4class_tf.data import text
from rank4class_tf.serving import saved_model
from rank4class_tf.training import builders

flags.DEFINE_integer("rounds", 5, "Alternating rounds.")
flags.DEFINE_integer("calls", 100, "Batch-1 calls per variant and round.")
flags.DEFINE_integer("batches", 5, "Batch-64 calls per variant and round.")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per instance.")
flags.DEFINE_bool("peer", True, "Also time the PyTorch peer when "
                  "--peer_python exists.")
flags.DEFINE_string("peer_python", ".venv-peer/bin/python", "The peer's "
                    "Python (`make peer-venv`).")
FLAGS = flags.FLAGS


def padded_to(context, quantum: int, seq_length: int):
  """Context features [batch, length] zero-padded to a multiple of
  `quantum` tokens, at most `seq_length` (masked: the same scores)."""
  length = tf.shape(context[text.WORD_IDS])[1]
  target = tf.minimum((length + quantum - 1) // quantum * quantum,
                      seq_length)
  return {name: (tf.pad(value, [[0, 0], [0, target - length]])
                 if name in text.BERT_INPUTS else value)
          for name, value in context.items()}


def variant_scores(model, inputs, num_classes, seq_length, variant):
  """The scores function of `variant` (see the module doc)."""
  spec = inputs.serving_spec()

  def score(context):
    return model(features.class_list_features(context, num_classes),
                 training=False)

  compiled = tf.function(score, jit_compile=True)

  @tf.function(input_signature=[tf.TensorSpec(None, spec.dtype, spec.name)])
  def scores(instance):
    instance = tf.ensure_shape(instance, spec.shape)
    context = inputs.serving_features(instance)
    if variant == "padded to 8":
      return score(padded_to(context, 8, seq_length))
    return tf.cond(tf.shape(instance)[0] == 1,
                   lambda: compiled(padded_to(context, 8, seq_length)),
                   lambda: score(context))

  return scores


def main(argv):
  del argv
  before = timing.uptime()
  data = datasets.get("goemotions")
  config = builders.resolve_defaults(config_lib.TrainConfig.create(
      dataset="goemotions", encoder="bert", init_checkpoint="minilm",
      max_seq_length=FLAGS.max_seq_length, interaction="dot",
      model_dir="unused", mixed_precision="float32"))
  pipeline = builders.build_pipeline(config, data)
  inputs = pipeline.dataset_builder.instance_inputs
  tf.keras.utils.set_random_seed(0)
  model = pipeline.model_builder.build()
  saved_model.store_class_features(model)
  folder = tempfile.mkdtemp()
  names = ("plain", "padded to 8", "XLA at batch 1")
  serve = {}
  for name in names:
    scores_fn = None
    if name != "plain":
      scores_fn = variant_scores(model, inputs, data.num_classes,
                                 FLAGS.max_seq_length, name)
    path = os.path.join(folder, name.replace(" ", "_"))
    saved_model.export_saved_model(model, path, saved_model.signatures(
        model, inputs, data.class_names, 5, scores_fn=scores_fn))
    serve[name] = tf.saved_model.load(path).signatures["serving_default"]

  # Texts of every token length 1..max (special tokens included: 3..max),
  # cut from the longest validation comments.
  texts = [str(t) for t in data.splits["validation"][0]]
  lengths = inputs.token_lengths(np.array(texts, object))
  by_length = {}
  for t, n in zip(texts, lengths):
    by_length.setdefault(int(n), t)
  probe = [by_length[n] for n in sorted(by_length)]
  reference = {t: serve["plain"](text=tf.constant([t]))["scores"].numpy()
               for t in probe}
  worst = {}
  for name in names:  # Also compiles every bucket of the XLA variant.
    worst[name] = max(float(np.abs(serve[name](text=tf.constant([t]))[
        "scores"].numpy() - reference[t]).max()) for t in probe)
  calls = [tf.constant([t]) for t in texts[:FLAGS.calls]]
  batch = tf.constant(texts[:64])
  one, many = {n: [] for n in names}, {n: [] for n in names}
  peer = None
  if FLAGS.peer and os.path.exists(FLAGS.peer_python):
    peer = timing.Peer(FLAGS.peer_python, FLAGS.max_seq_length)
    one["peer (PyTorch float32)"] = []
  for _ in range(FLAGS.rounds):
    for name in names:
      fn = serve[name]
      for c in calls[:5]:
        fn(text=c)
      start = time.perf_counter()
      for c in calls:
        fn(text=c)["scores"].numpy()
      one[name].append((time.perf_counter() - start) / len(calls) * 1e3)
      start = time.perf_counter()
      for _ in range(FLAGS.batches):
        fn(text=batch)["scores"].numpy()
      many[name].append(64 * FLAGS.batches / (time.perf_counter() - start))
    if peer:
      one["peer (PyTorch float32)"].append(
          peer.ms("serve", "float32", FLAGS.calls))
  if peer:
    peer.close()
  after = timing.uptime()
  base = statistics.median(one["plain"])
  print(f"\nGoEmotions, MiniLM-L6 (all-MiniLM-L6-v2), dot, float32, up to "
        f"{FLAGS.max_seq_length} tokens; the exported serving_default "
        f"loaded back; median of {FLAGS.rounds} alternating rounds of "
        f"{FLAGS.calls} batch-1 calls and {FLAGS.batches} batch-64 calls; "
        f"{before} before, {after} after:\n")
  print("| variant | batch 1 ms / call (rounds) | vs plain | batch 64 "
        "comments / s | largest score difference from plain, lengths "
        f"3..{max(by_length)} |")
  print("|---|---|---|---|---|")
  for name, values in one.items():
    ms = statistics.median(values)
    rounds = ", ".join(f"{v:.2f}" for v in values)
    rate = (f"{statistics.median(many[name]):.0f}" if name in many
            else "—")
    diff = f"{worst[name]:.1e}" if name in worst else "—"
    print(f"| {name} | {ms:.2f} ({rounds}) | {ms / base:.2f} | {rate} | "
          f"{diff} |")


if __name__ == "__main__":
  app.run(main)
