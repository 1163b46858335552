r"""Training step time of the `dot` ranking model against a plain Dense classifier.

Both models share the same encoder architecture and batch; the ranking model
goes through TF-Ranking's inputs (context image, example class ids, mask) and
the class-table gather. Prints a markdown table measured in one run.

  .venv/bin/python -m benchmarks.step_time --steps=300
"""

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import timing
from rank4class_tf.data import datasets
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.ranking import losses

flags.DEFINE_integer("steps", 300, "Timed steps per model (after warm-up).")
flags.DEFINE_integer("batch_size", 64, "Batch size.")
flags.DEFINE_integer("repeats", 3, "Alternating timing rounds; best is kept.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  tf.keras.utils.set_random_seed(0)
  data = datasets.get("digits")
  features, labels = next(iter(datasets.ranking_dataset(
      data, "train", FLAGS.batch_size, training=True)))
  ranker = model_lib.build_model_builder(data).build()
  images = tf.keras.Input([8, 8, 1])
  classifier = tf.keras.Model(
      images, tf.keras.layers.Dense(10)(encoders.get("small_cnn")(images)))
  steps = {
      "ranking model, dot + tfr softmax": (
          timing.make_step(ranker, losses.get("softmax"), tf.keras.optimizers.Adam()),
          features),
      "Dense classifier + Keras CCE": (
          timing.make_step(classifier,
                    tf.keras.losses.CategoricalCrossentropy(from_logits=True),
                    tf.keras.optimizers.Adam()),
          features["image"]),
  }
  times = {name: [] for name in steps}
  for _ in range(FLAGS.repeats):
    for name, (step, x) in steps.items():
      times[name].append(timing.time_step(step, x, labels, FLAGS.steps))
  base = min(times["Dense classifier + Keras CCE"])
  print(f"\nStep time, digits small CNN, batch {FLAGS.batch_size}, "
        f"best of {FLAGS.repeats} x {FLAGS.steps} steps, "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'all'} "
        "intra-op threads:\n")
  print("| model | ms / step | ratio to Dense |")
  print("|---|---|---|")
  for name, t in times.items():
    print(f"| {name} | {min(t):.3f} | {min(t) / base:.2f} |")


if __name__ == "__main__":
  app.run(main)
