"""Distribution strategies, devices and cluster resolvers of a run.

`get_strategy(name)` returns the tf.distribute strategy behind `--strategy`
through TF-Ranking's `strategy_utils` (which builds it and its scope); this
module adds what that falls short of: the cluster resolver each strategy
needs, a check that a multi-worker cluster names its chief, and logical CPU
devices so that `mirrored` runs data-parallel on one CPU.

A multi-worker strategy must exist before any TensorFlow op runs: create it
first (`configure_devices`, then `get_strategy`), then build everything in
its scope.
"""

from typing import Optional

import tensorflow as tf
import tensorflow_ranking as tfr

# `--strategy` name -> TF-Ranking's strategy key (None: the default device).
TFR_STRATEGIES = {
    "default": None,
    "mirrored": tfr.keras.strategy_utils.MIRRORED_STRATEGY,
    "multi_worker_mirrored": tfr.keras.strategy_utils.MWMS_STRATEGY,
    "parameter_server": tfr.keras.strategy_utils.PS_STRATEGY,
    "tpu": tfr.keras.strategy_utils.TPU_STRATEGY,
}
STRATEGY_NAMES = tuple(TFR_STRATEGIES)


def check_name(name: str) -> None:
  """Raises ValueError naming the valid strategies unless `name` is one."""
  if name not in TFR_STRATEGIES:
    raise ValueError(f"`strategy`={name!r} is not valid; choose one of: "
                     f"{', '.join(STRATEGY_NAMES)}.")


def cluster_resolver(name: str, tpu: str = ""):
  """The cluster resolver behind `--strategy=name`, or None where none is
  needed.

  * `multi_worker_mirrored`, `parameter_server`: the cluster comes from the
    TF_CONFIG environment variable (`TFConfigClusterResolver`);
  * `tpu`: `TPUClusterResolver(tpu=tpu)`;
  * `default`, `mirrored`: one process, no resolver.
  """
  if name in ("multi_worker_mirrored", "parameter_server"):
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if "chief" not in resolver.cluster_spec().as_dict():
      raise ValueError(f"`strategy`={name} needs TF_CONFIG to describe the "
                       "cluster with a 'chief' task (it writes the "
                       "checkpoints and exports).")
    return resolver
  if name == "tpu":
    return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
  return None


def get_strategy(name: str, tpu: str = ""
                ) -> Optional[tf.distribute.Strategy]:
  """The tf.distribute strategy of `--strategy=name` (None for `default`)."""
  check_name(name)
  return tfr.keras.strategy_utils.get_strategy(
      TFR_STRATEGIES[name], cluster_resolver(name, tpu), tpu=tpu)


def configure_devices(cpu_devices: int) -> None:
  """Splits the host CPU into `cpu_devices` logical devices (if > 1).

  Lets `--strategy=mirrored` run data-parallel on one CPU (tests, demos).
  Must run before TensorFlow initialises its devices.
  """
  if cpu_devices > 1:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_devices)


def num_replicas(strategy: Optional[tf.distribute.Strategy]) -> int:
  """Replicas a global batch is split over (1 without a strategy)."""
  return strategy.num_replicas_in_sync if strategy else 1


def is_chief(strategy: Optional[tf.distribute.Strategy]) -> bool:
  """Whether this process writes the run's files (checkpoints, exports)."""
  return strategy is None or strategy.extended.should_checkpoint
