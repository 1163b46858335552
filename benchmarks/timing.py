"""Shared timing helpers of the benchmarks (no flags here)."""

import dataclasses
import os
import subprocess
import time
from typing import Any

import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_step(model, loss_fn, optimizer, **function_kwargs):
  """A compiled training step: forward, loss, backward, optimizer update.
  `function_kwargs` go to `tf.function` (e.g. reduce_retracing, jit_compile)."""

  @tf.function(**function_kwargs)
  def step(x, y):
    with tf.GradientTape() as tape:
      loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  return step


def time_step(step, x, y, steps: int) -> float:
  """Milliseconds per call of `step(x, y)` after one warm-up call."""
  step(x, y).numpy()  # Trace and warm up.
  start = time.perf_counter()
  for _ in range(steps):
    loss = step(x, y)
  loss.numpy()
  return (time.perf_counter() - start) / steps * 1e3


@dataclasses.dataclass(frozen=True)
class TextBatch:
  """The fine-tuning benchmarks' set-up: GoEmotions and a MiniLM-L6 size
  encoder (`config`, `data`, `instance_inputs`), and the first batch of the
  training stream (`features`, `labels`). The library is imported when one
  is made (as `Peer` does): the benchmarks without a text model start
  without it."""
  config: Any
  data: Any
  instance_inputs: Any
  features: Any
  labels: Any

  @classmethod
  def create(cls, batch_size: int, max_seq_length: int,
             mlp_units: int) -> "TextBatch":
    # pylint: disable=g-import-not-at-top
    from rank4class_tf import config as config_lib
    from rank4class_tf.data import datasets
    from rank4class_tf.training import builders
    config = config_lib.TrainConfig.create(
        dataset="goemotions", encoder="bert", encoder_size="minilm_l6",
        max_seq_length=max_seq_length, batch_size=batch_size,
        mlp_units=mlp_units, model_dir="unused")
    data = datasets.get("goemotions")
    instance_inputs = builders.build_inputs(config, data)
    features, labels = next(iter(datasets.ranking_dataset(
        data, "train", batch_size, training=True,
        instance_inputs=instance_inputs)))
    return cls(config, data, instance_inputs, features, labels)

  def ranker(self, interaction: str) -> tf.keras.Model:
    """The ranking model of `interaction` on this set-up's encoder."""
    # pylint: disable-next=g-import-not-at-top
    from rank4class_tf.modeling import model as model_lib
    return model_lib.build_model_builder(
        self.data, dataclasses.replace(self.config.model,
                                       interaction=interaction),
        instance_inputs=self.instance_inputs).build()


def uptime() -> str:
  """The load average, as `uptime` prints it: `load average a, b, c`."""
  with open("/proc/loadavg") as f:
    return "load average " + ", ".join(f.read().split()[:3])


class Peer:
  """The PyTorch peer (`benchmarks/torch_peer.py`) in its own process, in
  its own virtual env (`make peer-venv`), fine-tuning and serving the same
  all-MiniLM-L6-v2 on the shipped GoEmotions texts.

  Args:
    python: the peer env's Python.
    max_seq_length: tokens per text.
  """

  def __init__(self, python: str, max_seq_length: int):
    # pylint: disable=g-import-not-at-top
    from rank4class_tf.data import datasets
    from rank4class_tf.data.sources import shipped_text
    from rank4class_tf.modeling import pretrained
    model = os.path.dirname(pretrained.minilm_files()[1])
    self._proc = subprocess.Popen(
        [python, os.path.join(REPO, "benchmarks", "torch_peer.py"), model,
         os.path.join(shipped_text.REPO_DATA_DIR, "goemotions"),
         str(max_seq_length)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    while self._proc.stdout.readline().strip() != "ready":
      if self._proc.poll() is not None:
        raise RuntimeError(f"the peer ({python}) did not start.")

  def ms(self, command: str, dtype: str, count: int) -> float:
    """ms per training step (`train`) or batch-1 call (`serve`)."""
    self._proc.stdin.write(f"{command} {dtype} {count}\n")
    self._proc.stdin.flush()
    return float(self._proc.stdout.readline())

  def close(self):
    self._proc.stdin.write("quit\n")
    self._proc.stdin.flush()
    self._proc.wait()
