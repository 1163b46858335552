"""Build an object by name from a plain dict: name -> (class, accepted kwargs).

One implementation behind `losses.get` and `sorting.losses.get` (STYLE.md,
"lookup by name with a plain dict"): the error lists the valid names, and a
keyword the class does not accept is refused by name.
"""

from typing import Any, Dict, Tuple

Table = Dict[str, Tuple[type, Tuple[str, ...]]]


def accepted(table: Table, name: str, kind: str = "loss") -> Tuple[str, ...]:
  """The keyword arguments that `name` accepts; ValueError if unknown."""
  if name not in table:
    raise ValueError(f"Unknown {kind} {name!r}; valid names: "
                     f"{', '.join(table)}.")
  return table[name][1]


def build(table: Table, name: str, kind: str = "loss",
          always: Tuple[str, ...] = ("reduction",), **kwargs) -> Any:
  """`cls(name=name, **kwargs)` for `table[name]`; None values are dropped.

  Raises:
    ValueError: for an unknown name or a keyword outside the accepted ones
      and `always`.
  """
  allowed = accepted(table, name, kind)
  kwargs = {k: v for k, v in kwargs.items() if v is not None}
  unknown = sorted(set(kwargs) - set(allowed) - set(always))
  if unknown:
    raise ValueError(f"{kind.capitalize()} {name!r} has no "
                     f"hyper-parameter(s) {', '.join(unknown)}; it accepts: "
                     f"{', '.join(allowed) or 'none'}.")
  return table[name][0](name=name, **kwargs)
