"""Shared timing helpers of the benchmarks (no flags here)."""

import time

import tensorflow as tf


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


def uptime() -> str:
  """The load average, as `uptime` prints it: `load average a, b, c`."""
  with open("/proc/loadavg") as f:
    return "load average " + ", ".join(f.read().split()[:3])
