"""Flags generated from a config dataclass's documented fields.

`define(cls)` declares one absl flag per field of a config dataclass
(`rank4class_tf.config.TrainConfig`'s four groups, or a flat one such as
`sorting.training.SorterConfig`): the flag's type from the field's
annotation, its default from the field's, its help from the field's `help`.
`config_from_flags(cls)` reads them back. A new option is then one field in
the library's config and nothing here. `folders(flag, patterns)` expands the
run folders a list flag names.
"""

import glob
import typing
from typing import Any, Iterable, List

from absl import flags

from rank4class_tf import config as config_lib

FLAGS = flags.FLAGS

_DEFINERS = {
    str: flags.DEFINE_string,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    bool: flags.DEFINE_bool,
}


def _definer(kind):
  """The absl definer of a field annotation (Optional[x] -> x's)."""
  if typing.get_origin(kind) is typing.Union:
    (kind,) = [a for a in typing.get_args(kind) if a is not type(None)]
  if typing.get_origin(kind) is tuple:
    return flags.DEFINE_list
  return _DEFINERS[kind]


def define(cls, skip: Iterable[str] = (), module_name: str = None) -> None:
  """Declares one flag per field of config dataclass `cls`, except `skip`.

  Args:
    cls: the config dataclass.
    skip: flag names left out (a binary that sets those fields itself).
    module_name: the module the flags are reported under in --help.
  """
  skip = frozenset(skip)
  for field in config_lib.flag_fields(cls):
    if field.flag in skip:
      continue
    default = field.default
    if isinstance(default, tuple):
      default = list(default)
    _definer(field.type)(field.flag, default, field.help,
                         module_name=module_name)


def config_from_flags(cls, skip: Iterable[str] = (), **overrides: Any):
  """The config: each field from its flag, or from `overrides` (by flag
  name); a flag in `skip` that `overrides` does not set keeps its default.
  A string flag left unset (None) where the field wants a string reads as
  "" (e.g. --model_dir)."""
  skip = frozenset(skip)
  values = {}
  for field in config_lib.flag_fields(cls):
    if field.flag in overrides:
      values[field.flag] = overrides[field.flag]
    elif field.flag in FLAGS and field.flag not in skip:
      value = FLAGS[field.flag].value
      if value is None and field.type is str:
        value = ""
      values[field.flag] = value
  return config_lib.from_flat(cls, values)


def folders(flag: str, patterns: Iterable[str]) -> List[str]:
  """The folders a list flag names, in order: each entry as it is, or, with
  a shell pattern (`runs/a.seed*`), its matches sorted.

  Raises:
    ValueError: naming the flag, when it names nothing or a pattern
      matches no folder.
  """
  out = []
  for pattern in patterns or ():
    found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [
        pattern]
    if not found:
      raise ValueError(f"--{flag}: {pattern!r} matches no folder.")
    out += found
  if not out:
    raise ValueError(f"--{flag} must name at least one run folder.")
  return out
