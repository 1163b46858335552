r"""Cost of encoding classes from text: training step and serving latency.

Measures in one run, MiniLM-L6-size encoder (random weights: the cost does
not depend on them), batch 32, instances of 32 tokens, softmax loss, dot:

* the training step (forward, backward, Adam) with the class encoder
  `embedding`, `text` (shared tower, trained: the class texts go through
  MiniLM at every step) and `text` frozen (from a feature cache: the stored
  class features are projected), at 28 classes (GoEmotions' names) and at
  --many_classes synthetic class names (two random words of MiniLM's
  vocabulary each);
* serving: `serving_default` (the training classes; a text class encoder's
  features stored at export) and the `rank_classes` signature with every
  class text passed in the call, per call of --serving_batch instances.

  .venv/bin/python -m benchmarks.class_encoders --steps=3

Prints two markdown tables.
"""

import dataclasses
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks import timing
from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.modeling import pretrained
from rank4class_tf.ranking import losses
from rank4class_tf.serving import saved_model
from rank4class_tf.training import builders

flags.DEFINE_integer("steps", 3, "Timed training steps per model.")
flags.DEFINE_integer("calls", 5, "Timed serving calls per signature.")
flags.DEFINE_integer("batch_size", 32, "Training batch size.")
flags.DEFINE_integer("serving_batch", 1, "Instances per serving call.")
flags.DEFINE_integer("many_classes", 1000, "The synthetic class count.")
FLAGS = flags.FLAGS


def synthetic_names(count: int, seed: int = 0):
  """`count` distinct two-word class names from MiniLM's vocabulary."""
  with open(pretrained.minilm_files()[1]) as f:
    words = [w.strip() for w in f if w.strip().isalpha() and len(w) > 3]
  rng = np.random.default_rng(seed)
  names = set()
  while len(names) < count:
    names.add(" ".join(rng.choice(words, 2)))
  return sorted(names)


def build(data, instance_inputs, config, class_encoder, frozen=False):
  model = dataclasses.replace(config.model, interaction="dot",
                              class_encoder=class_encoder)
  texts = list(data.class_names)
  features = None
  if frozen:
    features = np.random.default_rng(0).normal(
        size=[len(texts), 384]).astype(np.float32)
  return model_lib.build_model_builder(
      data, model, instance_inputs=instance_inputs, class_texts=texts,
      class_features=features).build()


def time_calls(fn, calls: int) -> float:
  """Milliseconds per call of `fn()` after one warm-up call."""
  fn()
  start = time.perf_counter()
  for _ in range(calls):
    fn()
  return (time.perf_counter() - start) / calls * 1e3


def main(argv):
  del argv
  tf.keras.utils.set_random_seed(0)
  config = config_lib.TrainConfig.create(
      dataset="goemotions", encoder="bert", encoder_size="minilm_l6",
      max_seq_length=32, batch_size=FLAGS.batch_size, model_dir="unused")
  goemotions = datasets.get("goemotions")
  instance_inputs = builders.build_inputs(config, goemotions)
  step_rows, serving_rows = [], []
  for count in (goemotions.num_classes, FLAGS.many_classes):
    names = (goemotions.class_names if count == goemotions.num_classes
             else tuple(synthetic_names(count)))
    data = dataclasses.replace(goemotions, class_names=names)
    features, labels = next(iter(datasets.ranking_dataset(
        dataclasses.replace(goemotions, class_names=names,
                            splits={"train": (
                                goemotions.splits["train"][0],
                                goemotions.splits["train"][1] % count)}),
        "train", FLAGS.batch_size, training=True,
        instance_inputs=instance_inputs)))
    tokens = class_encoders.tokenize(instance_inputs.preprocessor, names)
    length = tokens["input_mask"].shape[1]
    for name, class_encoder, frozen in (
        ("embedding", "embedding", False),
        (f"text, shared tower trained (class texts of {length} tokens)",
         "text", False),
        ("text, class tower frozen (stored class features), instance encoder trained", "text", True)):
      model = build(data, instance_inputs, config, class_encoder, frozen)
      step = timing.make_step(model, losses.get("softmax"),
                              tf.keras.optimizers.Adam(1e-5))
      step_rows.append((count, name, timing.time_step(
          step, features, labels, FLAGS.steps)))
      if frozen:
        continue
      saved_model.store_class_features(model)
      signatures = saved_model.signatures(model, instance_inputs, names, 5)
      instances = tf.constant(goemotions.splits["test"][0][
          :FLAGS.serving_batch])
      serving_rows.append((count, f"{name.split(',')[0]}: serving_default",
                           time_calls(lambda: signatures[
                               saved_model.SERVING_KEY](instances),
                                      FLAGS.calls)))
      if saved_model.CLASS_LIST_KEY in signatures:
        texts = tf.constant(list(names))
        serving_rows.append((
            count, f"text: rank_classes with the {count} class texts",
            time_calls(lambda: signatures[saved_model.CLASS_LIST_KEY](
                instances, texts), FLAGS.calls)))
  print(f"\nTraining step, MiniLM-L6 size, batch {FLAGS.batch_size}, length "
        f"32, dot, {FLAGS.steps} timed steps:\n")
  print("| classes | class encoder | ms / step | ratio to embedding |")
  print("|---|---|---|---|")
  base = {count: ms for count, name, ms in step_rows if name == "embedding"}
  for count, name, ms in step_rows:
    print(f"| {count} | {name} | {ms:.1f} | {ms / base[count]:.2f} |")
  print(f"\nServing, {FLAGS.serving_batch} instance(s) per call, "
        f"{FLAGS.calls} timed calls:\n")
  print("| classes | signature | ms / call |")
  print("|---|---|---|")
  for count, name, ms in serving_rows:
    print(f"| {count} | {name} | {ms:.1f} |")


if __name__ == "__main__":
  app.run(main)
