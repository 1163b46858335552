"""Documented config fields and the flat {flag: value} view of a config.

`field` declares a field whose `help` documents it (and its flag);
`flag_fields` lists a config dataclass's flags, its groups' fields
flattened; `from_flat` and `to_flat` turn a config into {flag name: value}
and back. The run's config itself is `config/__init__.py`'s `TrainConfig`,
which names these here as `config.field`, `config.flag_fields`, ...
Imports nothing from the library (and no TensorFlow).
"""

import dataclasses
import typing
from typing import Any, Dict, Iterator, Optional


def field(default: Any, help: str, flag: Optional[str] = None,
          **kwargs) -> dataclasses.Field:
  """A documented config field: `help` is its documentation and its flag's
  help; `flag` its flag's name when that differs from the field's."""
  # pylint: disable=redefined-builtin
  metadata = {"help": help}
  if flag:
    metadata["flag"] = flag
  return dataclasses.field(default=default, metadata=metadata, **kwargs)


@dataclasses.dataclass(frozen=True)
class FlagField:
  """One flag of a (possibly grouped) config dataclass.

  Attributes:
    flag: the flag's name.
    group: the sub-config's attribute name, or "" for a flat dataclass.
    name: the field's name inside its (sub-)config.
    type: the field's annotation (e.g. `int`, `Optional[float]`).
    default: its default value.
    help: its documentation.
  """
  flag: str
  group: str
  name: str
  type: Any
  default: Any
  help: str


def flag_fields(cls) -> Iterator[FlagField]:
  """The flags of a config dataclass, in field order.

  Fields whose type is itself a dataclass are groups: their fields are
  flags. Works for any dataclass whose fields use `field` (`TrainConfig`,
  `sorting.training.SorterConfig`).
  """
  hints = _type_hints(cls)
  for f in dataclasses.fields(cls):
    kind = hints[f.name]
    if dataclasses.is_dataclass(kind):
      for sub in dataclasses.fields(kind):
        yield _flag_field(sub, f.name, _type_hints(kind)[sub.name])
    else:
      yield _flag_field(f, "", kind)


def _type_hints(cls) -> Dict[str, Any]:
  return typing.get_type_hints(cls)


def _flag_field(f: dataclasses.Field, group: str, kind) -> FlagField:
  default = (f.default_factory() if f.default is dataclasses.MISSING
             else f.default)
  return FlagField(f.metadata.get("flag", f.name), group, f.name, kind,
                   default, f.metadata.get("help", ""))


def from_flat(cls, values: Dict[str, Any]):
  """An instance of config dataclass `cls` from {flag name: value}; missing
  flags keep their defaults, unknown ones raise ValueError."""
  by_flag = {f.flag: f for f in flag_fields(cls)}
  unknown = sorted(set(values) - set(by_flag))
  if unknown:
    raise ValueError(f"Unknown settings: {', '.join(unknown)}.")
  groups: Dict[str, Dict[str, Any]] = {}
  flat = {}
  for flag, value in values.items():
    f = by_flag[flag]
    if isinstance(value, list):
      value = tuple(value)
    if f.group:
      groups.setdefault(f.group, {})[f.name] = value
    else:
      flat[f.name] = value
  hints = _type_hints(cls)
  for f in dataclasses.fields(cls):
    if dataclasses.is_dataclass(hints[f.name]):
      flat[f.name] = hints[f.name](**groups.get(f.name, {}))
  return cls(**flat)


def to_flat(config) -> Dict[str, Any]:
  """{flag name: value} of a config dataclass instance."""
  values = {}
  for f in flag_fields(type(config)):
    owner = getattr(config, f.group) if f.group else config
    values[f.flag] = getattr(owner, f.name)
  return values
