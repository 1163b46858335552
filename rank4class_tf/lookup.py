"""Build an object by name from a plain dict: name -> (class, accepted kwargs).

One implementation behind `losses.get` and `sorting.losses.get` (STYLE.md,
"lookup by name with a plain dict"): the error lists the valid names, and a
keyword the class does not accept is refused by name.
"""

from typing import Any, Dict, Iterable, Tuple

Table = Dict[str, Tuple[type, Tuple[str, ...]]]


def check_choice(what: str, value: Any, valid: Iterable[str]) -> None:
  """Raises ValueError naming the argument `what`, `value` and the valid
  choices, in argument terms (a binary words `what` as its flag).

  >>> check_choice("pooling", "max", ("cls", "mean"))
  Traceback (most recent call last):
  ...
  ValueError: `pooling`='max' is not valid; choose one of: cls, mean.
  """
  valid = tuple(valid)
  if value not in valid:
    raise ValueError(f"`{what}`={value!r} is not valid; choose one of: "
                     f"{', '.join(valid)}.")


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
