"""Grid extension: no chosen run left on an edge of what was tried.

A tuning grid is fair to a cell only if the cell's chosen value lies inside
it: a choice on the lowest learning rate says the best rate may be lower
still. The paper tuned 13 rates and 4 widths; a study here tunes a few, so
after its grid it may extend them (`--extend_grid=N`): for each (loss,
interaction, seed) whose chosen run (best validation `select_metric`, the
first in grid order on ties, as the report selects) has the lowest or the
highest learning rate tried for it, the run one step beyond is added
(`next_rate`); likewise the width of an MLP interaction (`next_units`), at
the chosen run's other values. The choice is then made again over all runs,
up to N rounds per (loss, interaction, seed), until it is interior. A
choice still on an edge after N rounds is reported as such (the limit
reached), never hidden.

Extensions are decided from finished runs only, so the same command started
again makes the same decisions: those already made are kept in study.json
(`extensions`), each with its round and reason, and are trained like any
run; every extension run's record names them.

The steps beyond an edge follow the paper's grid where the value is on it:
learning rates 1, 3 x 10^k (so 1e-3 -> 3e-4 below, 3e-3 above; about x3 or
/3), widths x2 or /2 (64 -> 32 below, 512 -> 1024 above).
"""

import dataclasses
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

# A study's run; imported lazily by type only (study imports this module).
Run = object

_LADDER = (1., 3.)  # Mantissas of the paper's learning-rate grid.
MIN_UNITS = 1


def _on_ladder(rate: float) -> Optional[Tuple[int, int]]:
  """(exponent, mantissa index) of a rate of the 1, 3 x 10^k ladder."""
  exponent = math.floor(math.log10(rate) + 1e-9)
  for i, mantissa in enumerate(_LADDER):
    if float(f"{mantissa:g}e{exponent}") == rate:
      return exponent, i
  return None


def next_rate(rate: float, up: bool) -> float:
  """The learning rate one step beyond `rate`.

  On the paper's ladder (1, 3 x 10^k) the next ladder value; elsewhere
  `rate` x3 or /3, rounded to two significant digits so that run names stay
  short.

  >>> next_rate(1e-3, up=False), next_rate(3e-3, up=True)
  (0.0003, 0.01)
  >>> next_rate(0.002, up=True), next_rate(0.002, up=False)
  (0.006, 0.00067)
  """
  place = _on_ladder(rate)
  if place is None:
    return float(f"{rate * 3. if up else rate / 3.:.2g}")
  exponent, i = place
  i += 1 if up else -1
  exponent += i // len(_LADDER)
  return float(f"{_LADDER[i % len(_LADDER)]:g}e{exponent}")


def next_units(units: int, up: bool) -> Optional[int]:
  """The MLP width one step beyond: x2 or /2 (None: below `MIN_UNITS`, or
  an odd width that halves to no integer)."""
  if up:
    return units * 2
  if units % 2 or units // 2 < MIN_UNITS:
    return None
  return units // 2


@dataclasses.dataclass(frozen=True)
class Extension:
  """A run the extension added: `round` counts per (loss, interaction,
  seed) from 1; `reason` says which edge it extends."""
  run: "Run"
  round: int
  reason: str

  def to_json(self) -> Dict[str, object]:
    return dict(dataclasses.asdict(self.run), round=self.round,
                reason=self.reason)


def group_key(run) -> Tuple[str, str, int]:
  return run.loss, run.interaction, run.seed


def choose(runs: Sequence["Run"], records: Dict[str, Dict],
           select_metric: str) -> Optional["Run"]:
  """The chosen run among `runs` (in grid order): the best validation
  `select_metric`, the first of equal values; None if any has no record
  (its choice waits until every run it depends on is finished)."""
  best, best_value = None, None
  for run in runs:
    record = records.get(run.name)
    if record is None:
      return None
    value = record["validation"][select_metric]
    if best is None or value > best_value:
      best, best_value = run, value
  return best


def edges(chosen, tried: Sequence["Run"]) -> List[Tuple[str, str]]:
  """[(field, "low" | "high")] of the chosen run's values that are the
  lowest / highest of that field tried for its (loss, interaction, seed),
  over all its runs (a product grid's edges, kept as extensions add
  values)."""
  out = []
  for field in ("learning_rate", "mlp_units"):
    value = getattr(chosen, field)
    if value is None:  # dot: no width.
      continue
    values = sorted({getattr(r, field) for r in tried})
    if value == values[0]:
      out.append((field, "low"))
    if value == values[-1]:
      out.append((field, "high"))
  return out


def plan(runs: Sequence["Run"], extensions: Sequence[Extension],
         records: Dict[str, Dict], select_metric: str, max_rounds: int,
         replace: Callable[..., "Run"]) -> List[Extension]:
  """The extensions to add now (see the module doc).

  Args:
    runs: every run of the study so far (grid and extensions), grid order.
    extensions: the extensions made before.
    records: {run name: record} of the finished runs.
    select_metric: the validation metric that chooses.
    max_rounds: `--extend_grid`.
    replace: `dataclasses.replace` on a run (so this module needs no Run).

  Returns:
    The new extensions, in the order of their groups' first runs.
  """
  rounds: Dict[Tuple[str, str, int], int] = {}
  for extension in extensions:
    key = group_key(extension.run)
    rounds[key] = max(rounds.get(key, 0), extension.round)
  groups: Dict[Tuple[str, str, int], List] = {}
  for run in runs:
    groups.setdefault(group_key(run), []).append(run)
  names = {run.name for run in runs}
  new = []
  for key, tried in groups.items():
    done = rounds.get(key, 0)
    if done >= max_rounds:
      continue
    chosen = choose(tried, records, select_metric)
    if chosen is None:
      continue
    for field, side in edges(chosen, tried):
      value = getattr(chosen, field)
      if field == "learning_rate":
        beyond = next_rate(value, up=side == "high")
      else:
        beyond = next_units(value, up=side == "high")
        if beyond is None:
          continue
      run = replace(chosen, **{field: beyond})
      if run.name in names:
        continue
      names.add(run.name)
      new.append(Extension(run, done + 1, (
          f"{field} {value:g} of the chosen run {chosen.name} is the "
          f"{'lowest' if side == 'low' else 'highest'} tried")))
  return new


def still_on_edge(runs: Sequence["Run"], records: Dict[str, Dict],
                  select_metric: str) -> Dict[Tuple[str, str, int],
                                              List[Tuple[str, str]]]:
  """{(loss, interaction, seed): edges} of the choices still on an edge
  (for the report: the limit reached, or no extension asked)."""
  groups: Dict[Tuple[str, str, int], List] = {}
  for run in runs:
    groups.setdefault(group_key(run), []).append(run)
  out = {}
  for key, tried in groups.items():
    chosen = choose(tried, records, select_metric)
    if chosen is not None:
      found = edges(chosen, tried)
      if found:
        out[key] = found
  return out
