r"""Where bfloat16 loses precision in the text model, layer group by group.

The ranking model (GoEmotions, MiniLM-L6 from all-MiniLM-L6-v2, mean
pooling, softmax + dot) is first fine-tuned in float32 for `--warm_steps`
steps, so that its scores mean something. Its weights are then copied into
the same model built under Keras' `mixed_bfloat16`, once with Keras' policy
alone (every layer in bfloat16 but the Model Garden's layer norms and GELU,
what `--mixed_precision=bfloat16` ran before issue 60) and once per group of
`precision.GROUPS` kept in float32, and all of them together (today's
bfloat16). Each is compared with float32 on the same batches:

* validation scores (`--eval_batches` batches of 64, in inference): the
  mean absolute score error over the mean absolute score, and the share of
  comments whose top class differs from float32's;
* the softmax loss: the mean absolute error per comment;
* the gradient (`--grad_batches` training batches of 32, without dropout):
  the relative error ||g - g32|| / ||g32|| of the embeddings', the
  Transformer's and the head's weights.

  .venv/bin/python -m benchmarks.bfloat16_error

Numbers, not speed: on a CPU without bfloat16 instructions TensorFlow
emulates them (the same rounding, slower). Prints one markdown table, with
`uptime` before and after.
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
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.modeling import precision
from rank4class_tf.ranking import losses
from rank4class_tf.training import builders
from rank4class_tf.training import pipeline as pipeline_lib

flags.DEFINE_integer("warm_steps", 60, "float32 fine-tuning steps first.")
flags.DEFINE_float("learning_rate", 1e-4, "Their Adam learning rate.")
flags.DEFINE_integer("eval_batches", 8, "Validation batches of 64 scored.")
flags.DEFINE_integer("grad_batches", 2, "Training batches of 32 whose "
                     "gradient is compared.")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per instance.")
flags.DEFINE_bool("each_group", True, "Also one row per group alone.")
FLAGS = flags.FLAGS


def weight_group(name: str) -> str:
  """embeddings, transformer or head, by the weight's name."""
  if "transformer/" in name:
    return "transformer"
  if any(part in name for part in ("word_embeddings", "position_embedding",
                                   "type_embeddings", "embeddings/layer_norm")):
    return "embeddings"
  return "head"


def measure(model, eval_batches, grad_batches, loss_fn):
  """(scores [n, classes], per-comment losses [n], {group: gradient})."""
  scores, per_example = [], []
  for features, labels in eval_batches:
    s = model(features, training=False)
    scores.append(s.numpy())
    per_example.append(tf.nn.softmax_cross_entropy_with_logits(
        labels, s).numpy())
  grads = {}
  for features, labels in grad_batches:
    with tf.GradientTape() as tape:
      loss = loss_fn(labels, model(features, training=False))
    for var, grad in zip(model.trainable_variables,
                         tape.gradient(loss, model.trainable_variables)):
      if grad is None:
        continue
      grad = tf.convert_to_tensor(grad).numpy().astype(np.float64).ravel()
      key = weight_group(var.name)
      grads.setdefault(key, []).append(grad)
  grads = {k: np.concatenate(v) for k, v in grads.items()}
  return np.concatenate(scores), np.concatenate(per_example), grads


def main(argv):
  del argv
  before = timing.uptime()
  start = time.time()
  data = datasets.get("goemotions")
  config = config_lib.TrainConfig.create(
      dataset="goemotions", encoder="bert", init_checkpoint="minilm",
      pooling="mean", max_seq_length=FLAGS.max_seq_length, batch_size=32,
      model_dir="unused")
  inputs = builders.build_inputs(config, data)
  model_config = dataclasses.replace(config.model, interaction="dot")
  train = datasets.ranking_dataset(data, "train", 32, training=True, seed=0,
                                   instance_inputs=inputs)
  eval_batches = list(datasets.ranking_dataset(
      data, "validation", 64, training=False, instance_inputs=inputs,
      length_sorted=True).shard(8, 3).take(FLAGS.eval_batches))
  grad_batches = list(train.skip(FLAGS.warm_steps).take(FLAGS.grad_batches))
  loss_fn = losses.get("softmax")

  def build(precision_name, groups=None):
    with pipeline_lib.precision_policy(precision_name):
      tf.keras.utils.set_random_seed(0)
      model = model_lib.build_model_builder(
          data, model_config, instance_inputs=inputs).build()
      if groups is not None:
        precision.keep_float32(model, groups)
    return model

  reference = build("float32")
  reference.compile(optimizer=tf.keras.optimizers.Adam(FLAGS.learning_rate),
                    loss=loss_fn)
  reference.fit(train, epochs=1, steps_per_epoch=FLAGS.warm_steps, verbose=0)
  weights = reference.get_weights()
  ref_scores, ref_loss, ref_grads = measure(reference, eval_batches,
                                            grad_batches, loss_fn)
  variants = [("Keras mixed_bfloat16 (before issue 60)", ())]
  if FLAGS.each_group:
    variants += [(f"+ {group} in float32", (group,))
                 for group in precision.GROUPS + precision.OPTIONAL_GROUPS]
  variants += [
      (f"{', '.join(precision.GROUPS)} in float32 (today's bfloat16)",
       precision.GROUPS),
      ("today's + residual in float32",
       precision.GROUPS + precision.OPTIONAL_GROUPS)]
  rows = []
  for name, groups in variants:
    model = build("bfloat16", groups)
    model.set_weights(weights)
    scores, loss, grads = measure(model, eval_batches, grad_batches, loss_fn)
    error = np.abs(scores - ref_scores)
    rows.append((
        name, error.mean() / np.abs(ref_scores).mean(), error.max(),
        np.mean(scores.argmax(1) != ref_scores.argmax(1)),
        np.abs(loss - ref_loss).mean(),
        {k: np.linalg.norm(grads[k] - g) / np.linalg.norm(g)
         for k, g in ref_grads.items()}))
  after = timing.uptime()
  accuracy = np.mean(ref_scores.argmax(1) == np.concatenate(
      [y.numpy().argmax(1) for _, y in eval_batches]))
  print(f"\nGoEmotions, MiniLM-L6 (all-MiniLM-L6-v2, {FLAGS.warm_steps} "
        f"float32 steps at {FLAGS.learning_rate:g}: validation Top-1 "
        f"{accuracy:.3f} on the {len(ref_scores)} comments scored), softmax "
        f"+ dot, up to {FLAGS.max_seq_length} tokens; errors against "
        f"float32 on the same weights; {before} before, {after} after, "
        f"{time.time() - start:.0f} s:\n")
  groups = sorted(ref_grads)
  print("| bfloat16 variant | score error (mean, relative) | score error "
        "(max) | top class differs | loss error (mean) | " +
        " | ".join(f"gradient error: {g}" for g in groups) + " |")
  print("|---|---|---|---|---|" + "---|" * len(groups))
  for name, mean, worst, flips, loss, grad in rows:
    print(f"| {name} | {mean:.4f} | {worst:.3f} | {flips:.2%} | {loss:.4f} "
          "| " + " | ".join(f"{grad[g]:.3f}" for g in groups) + " |")


if __name__ == "__main__":
  app.run(main)
