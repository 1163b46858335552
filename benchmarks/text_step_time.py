r"""Text training step time (GoEmotions, MiniLM-size encoder) and input speed.

Measures in one run, batch 32, sequence length 32:

* one training step (forward, backward, Adam) of the ranking model with the
  `dot`, `lc_mlp` and `concat_mlp` interactions (softmax loss), and of a plain
  Keras classifier (the same encoder, `Dense(28)`, cross-entropy);
* the tf.data input pipeline on its own (read, shuffle, batch, tokenize),
  in examples per second.

  .venv/bin/python -m benchmarks.text_step_time --steps=20

Prints a markdown table.
"""

import time

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import timing
from rank4class_tf import config as config_lib
from rank4class_tf import datasets
from rank4class_tf import encoders
from rank4class_tf import losses
from rank4class_tf import model as model_lib
from rank4class_tf import training

flags.DEFINE_integer("steps", 20, "Timed training steps per model.")
flags.DEFINE_integer("input_batches", 300, "Batches timed for the pipeline.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per instance.")
flags.DEFINE_integer("mlp_units", 256, "Hidden width of the MLP interactions.")
FLAGS = flags.FLAGS


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
  tf.keras.utils.set_random_seed(0)
  config = config_lib.TrainConfig.create(
      dataset="goemotions", encoder="bert", encoder_size="minilm_l6",
      max_seq_length=FLAGS.max_seq_length, batch_size=FLAGS.batch_size,
      mlp_units=FLAGS.mlp_units, model_dir="unused")
  data = datasets.get("goemotions")
  instance_inputs = training.build_inputs(config, data)
  features, labels = next(iter(datasets.ranking_dataset(
      data, "train", FLAGS.batch_size, training=True,
      instance_inputs=instance_inputs)))

  rows = []
  for interaction in ("dot", "lc_mlp", "concat_mlp"):
    ranker = model_lib.build_model_builder(
        data, instance_inputs, encoder="bert",
        encoder_kwargs=encoders.config_kwargs(config.model),
        interaction=interaction,
        mlp_units=FLAGS.mlp_units).build()
    step = timing.make_step(ranker, losses.get("softmax"),
                               tf.keras.optimizers.Adam(1e-5))
    rows.append((f"ranking model, {interaction}",
                 timing.time_step(step, features, labels, FLAGS.steps)))

  bert_inputs = instance_inputs.encoder_input(features)
  keras_inputs = {k: tf.keras.Input([FLAGS.max_seq_length], dtype=tf.int32,
                                    name=k) for k in bert_inputs}
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


if __name__ == "__main__":
  app.run(main)
