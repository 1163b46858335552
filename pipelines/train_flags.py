"""The flags of `pipelines.train`, shared with the binaries that run it.

`define()` declares one flag per `TrainConfig` field, generated from the
config's documented fields (`flag_utils`); `config_from_flags()` reads them
back into the config, so a new field needs nothing here. A binary that sets
some fields itself (`pipelines.study` sets the loss, interaction, learning
rate, MLP width and seed of each run) leaves their flags out with `skip` and
passes their values as overrides.
"""

from typing import Iterable

from rank4class_tf import config as config_lib
from . import flag_utils

_skipped = frozenset()  # The flags `define` left out.


def define(skip: Iterable[str] = ()) -> None:
  """Declares the training flags, except those named in `skip`."""
  global _skipped
  _skipped = frozenset(skip)
  flag_utils.define(config_lib.TrainConfig, _skipped, module_name=__name__)


def config_from_flags(**overrides) -> config_lib.TrainConfig:
  """The run's config: each field from its flag, or from `overrides` (by
  flag name)."""
  return flag_utils.config_from_flags(config_lib.TrainConfig, _skipped,
                                      **overrides)
