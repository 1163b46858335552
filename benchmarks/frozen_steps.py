r"""Where a frozen-encoder run's steps go (GoEmotions from the feature cache).

A frozen MiniLM run trains a tiny model (the cached 384-wide features, a dot
product with 28 class embeddings, batch 64) for 3,000 steps; its
`train_seconds` in `results/study_goemotions_frozen` is about 10 s. This
binary builds that run's model and data as `pipelines.train` does
(`training.builders.build_pipeline`, the feature cache of `--cache_dir`),
traces every variant first, then times `--steps` steps of each, alternating
in `--rounds` rounds, in CPU seconds (less sensitive to a shared machine's
load than wall time, which is printed beside them):

1. the input pipeline alone (the cached features, shuffled and batched);
2. `model.fit` as a run does it: loss, the 4 ranking metrics, 1 step a call;
3. the same without the training metrics (the loss alone);
4. the same as 2 at 50 steps a call (`steps_per_execution`);
5. one validation (4,548 comments, the 4 metrics).

  .venv/bin/python -m benchmarks.frozen_steps --steps=1000 --rounds=2 \
      --cache_dir=runs/feature_cache

The cache is built on first use (about 17 minutes on 2 cores) when
`--cache_dir` holds none for MiniLM at 32 tokens.
"""

import os
import time

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import timing
from rank4class_tf import config as config_lib
from rank4class_tf.training import builders
from rank4class_tf.training import pipeline as pipeline_lib

flags.DEFINE_integer("steps", 1000, "Timed training steps per variant.")
flags.DEFINE_integer("rounds", 2, "Alternating rounds.")
flags.DEFINE_string("cache_dir", "runs/feature_cache",
                    "The feature cache folder (`--feature_cache_dir`).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  config = builders.resolve_defaults(config_lib.TrainConfig.create(
      dataset="goemotions", encoder="bert", init_checkpoint="minilm",
      freeze_encoder=True, feature_cache_dir=FLAGS.cache_dir,
      train_steps=3000, eval_every=500, batch_size=64, max_seq_length=32,
      export=False, learning_rate=3e-3,
      model_dir=os.path.join(FLAGS.cache_dir, "..", "frozen_steps_run")))
  pipeline = builders.build_pipeline(config, builders.load_data(config))
  data = pipeline.dataset_builder

  def model(with_metrics: bool = True, steps_per_execution: int = 1):
    with pipeline_lib.precision_policy("float32"):
      built = pipeline_lib.build_model(pipeline.model_builder, config.trainer)
      built.compile(optimizer=tf.keras.optimizers.Adam(3e-3),
                    loss=pipeline.build_loss(),
                    metrics=pipeline.build_metrics() if with_metrics else None,
                    steps_per_execution=steps_per_execution)
    # Traced here, so that the timed rows are steps.
    built.fit(data.build_train_dataset(), epochs=1,
              steps_per_epoch=max(50, steps_per_execution), verbose=0)
    built.evaluate(data.build_valid_dataset(), verbose=0)
    return built

  models = {"run": model(), "loss": model(False), "spe": model(True, 50)}

  def fit(name):
    return lambda: models[name].fit(data.build_train_dataset(), epochs=1,
                                    steps_per_epoch=FLAGS.steps, verbose=0)

  rows = {
      "1. input pipeline alone": lambda: [
          None for _ in data.build_train_dataset().take(FLAGS.steps)],
      "2. fit as a run: loss and 4 metrics, 1 step a call": fit("run"),
      "3. fit, the loss alone": fit("loss"),
      "4. fit as a run, 50 steps a call": fit("spe"),
      "5. one validation (4 metrics)": lambda: models["run"].evaluate(
          data.build_valid_dataset(), verbose=0),
  }
  before = timing.uptime()
  times = {name: [] for name in rows}
  for _ in range(FLAGS.rounds):
    for name, run in rows.items():
      cpu, wall = time.process_time(), time.perf_counter()
      run()
      times[name].append((time.process_time() - cpu,
                          time.perf_counter() - wall,
                          os.getloadavg()[0]))
  print(f"\nGoEmotions from the feature cache (frozen MiniLM, 32 tokens), "
        f"softmax + dot, batch 64, {FLAGS.steps} steps a row (row 5: one "
        f"validation), {FLAGS.rounds} alternating rounds; {before} before, "
        f"{timing.uptime()} after:\n")
  print("| what runs | CPU s (rounds) | CPU ms / step | wall s (rounds) "
        "| 1-min load after |")
  print("|---|---|---|---|---|")
  for name, values in times.items():
    cpu = sorted(v[0] for v in values)[len(values) // 2]
    per_step = "" if name.startswith("5.") else f"{cpu / FLAGS.steps * 1e3:.2f}"
    print(f"| {name} | {cpu:.2f} ({', '.join(f'{v[0]:.2f}' for v in values)})"
          f" | {per_step} | {', '.join(f'{v[1]:.2f}' for v in values)} | "
          f"{values[-1][2]:.2f} |")


if __name__ == "__main__":
  app.run(main)
