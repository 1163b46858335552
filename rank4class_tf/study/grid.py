"""A study's grid: its runs, named after their values, and the paper's grid.

A `Grid` is losses x interactions (or named `cells`) x seeds x learning
rates x MLP widths (the width only for the interactions that have an MLP);
`Grid.runs()` lists its `Run`s in grid order, the order in which the report
breaks ties. A run's folder is named after its values
(`approx_ndcg.lc_mlp.lr0.001.u128.seed0`, `parse_run_name` reads it back);
the learning rate is written with `%g` where that is exact and in full
otherwise (`lr0.0012345678`), so two grid values never share a folder.
"""

import dataclasses
import math
from typing import Dict, List, Optional, Tuple

from rank4class_tf.modeling import interactions
from rank4class_tf.ranking import losses
from rank4class_tf.sorting import losses as sodeep_losses
from rank4class_tf.sorting import sorters


# The paper's grid (Tables 7-12 and App. B).
PAPER_LOSSES = ("softmax", "pairwise_logistic", "approx_ndcg",
                "gumbel_approx_ndcg", "mse")
PAPER_INTERACTIONS = ("dot", "lc_mlp", "concat_mlp")
# 1e-7 .. 0.1 by factors of about 3 (1, 3, 10, 30, ...), each the float of
# its decimal literal (3e-05, where 3 * 10.0 ** -5 is 3.0000000000000004e-05).
PAPER_LEARNING_RATES = tuple(float(f"{m}e{e}") for e in range(-7, -1)
                             for m in (1, 3)) + (0.1,)
PAPER_MLP_UNITS = (64, 128, 256, 512)
# The classical classifier every cell is compared with.
BASELINE = ("softmax", "dot")
# The interactions whose width is `mlp_units`.
MLP_INTERACTIONS = ("lc_mlp", "concat_mlp")
# `--losses=sodeep_spearman@pairwise`: a SoDeep loss with its own sorter, so
# that one study compares sorters cell by cell (the shared --sorter is the
# default of the unqualified sodeep_* losses).
SORTER_SEPARATOR = "@"
# The fields each run sets; every other TrainConfig field is shared.
GRID_FIELDS = ("loss", "interaction", "learning_rate", "mlp_units", "seed")
# The seeds `tf.keras.utils.set_random_seed` takes.
MAX_SEED = 2**32 - 1


def split_loss(label: str) -> Tuple[str, Optional[str]]:
  """(loss, sorter) of a grid loss: `sodeep_map@lstm` -> (sodeep_map, lstm),
  `softmax` -> (softmax, None)."""
  loss, separator, sorter = label.partition(SORTER_SEPARATOR)
  return loss, (sorter if separator else None)


def _check_loss_label(label: str) -> None:
  """Raises ValueError naming --losses for an unknown loss or sorter."""
  loss, sorter = split_loss(label)
  if loss not in losses.LOSS_NAMES:
    raise ValueError(f"`losses`: {label!r} is not valid; choose from: "
                     f"{', '.join(losses.LOSS_NAMES)} (sodeep_* losses may "
                     f"name their sorter: sodeep_spearman@pairwise).")
  if sorter is None:
    return
  if loss not in sodeep_losses.LOSSES:
    raise ValueError(
        f"`losses`: {label!r} names a sorter, but only the "
        f"SoDeep losses take one ({', '.join(sodeep_losses.LOSSES)}).")
  if sorter not in sorters.SORTER_NAMES:
    raise ValueError(f"`losses`: {label!r}: unknown sorter {sorter!r}; "
                     f"choose from: {', '.join(sorters.SORTER_NAMES)}.")


def rate_text(rate: float) -> str:
  """A learning rate as run names and tables write it: `%g` where that is
  exact, else in full (repr), so that the text gives the rate back.

  >>> rate_text(0.001), rate_text(3e-05), rate_text(0.0012345678)
  ('0.001', '3e-05', '0.0012345678')
  """
  short = f"{rate:g}"
  return short if float(short) == rate else repr(float(rate))


@dataclasses.dataclass(frozen=True)
class Run:
  """One point of the grid: a training run.

  `mlp_units` is None for interactions without an MLP (`dot`), which have no
  width to tune.
  """
  loss: str
  interaction: str
  learning_rate: float
  mlp_units: Optional[int]
  seed: int

  @property
  def name(self) -> str:
    """Folder name, e.g. `approx_ndcg.lc_mlp.lr0.001.u128.seed0`: one per
    run, the learning rate exact (`rate_text`)."""
    units = "" if self.mlp_units is None else f".u{self.mlp_units}"
    return (f"{self.loss}.{self.interaction}.lr{rate_text(self.learning_rate)}"
            f"{units}.seed{self.seed}")

  @property
  def cell(self) -> Tuple[str, str]:
    """(loss, interaction): the table cell the run belongs to."""
    return self.loss, self.interaction


@dataclasses.dataclass(frozen=True)
class Grid:
  """The study's grid; every list non-empty and without repeats.

  `cells` (`--cells`, `loss.interaction` each) restricts the study to those
  cells of losses x interactions (empty: every cell), for a design that is
  not a product, e.g. five losses on `dot` plus two losses on all three
  interactions. `choose_on_seed` (`--choose_on_seed`) tunes the learning
  rate and width on that seed only: the grid's other seeds run each cell's
  choice there (`followers`), where by default (None) every seed chooses its
  own, as the paper does (App. B).
  """
  losses: Tuple[str, ...] = PAPER_LOSSES
  interactions: Tuple[str, ...] = PAPER_INTERACTIONS
  seeds: Tuple[int, ...] = (0, 1, 2)
  learning_rates: Tuple[float, ...] = (1e-3,)
  mlp_units: Tuple[int, ...] = (128,)
  cells: Tuple[str, ...] = ()
  choose_on_seed: Optional[int] = None

  @classmethod
  def from_json(cls, values: Dict[str, object]) -> "Grid":
    """The grid study.json holds (`dataclasses.asdict`; older studies lack
    `cells` and `choose_on_seed`)."""
    values = dict(values)
    seed = values.pop("choose_on_seed", None)
    if seed is not None and (isinstance(seed, bool) or
                             not isinstance(seed, int)):
      raise TypeError(f"choose_on_seed {seed!r} is not a seed")
    return cls(choose_on_seed=seed,
               **{k: tuple(v) for k, v in values.items()})

  def validate(self) -> None:
    """Raises ValueError naming the flag of an empty list or unknown name."""
    valid = {"interactions": interactions.ALL_NAMES}
    for cell in self.cells:
      loss, _, interaction = cell.rpartition(".")
      if interaction not in interactions.ALL_NAMES or not loss:
        raise ValueError(
            f"`cells`: {cell!r} is not loss.interaction with an interaction "
            f"of: {', '.join(interactions.ALL_NAMES)}.")
    for name in ("losses", "interactions", "seeds", "learning_rates",
                 "mlp_units"):
      values = getattr(self, name)
      if not values:
        raise ValueError(f"`{name}` is empty; give at least one value.")
      if len(set(values)) != len(values):
        raise ValueError(f"`{name}` repeats a value: "
                         f"{','.join(map(str, values))}.")
      for value in values:
        if name == "losses":
          _check_loss_label(value)
        if name in valid and value not in valid[name]:
          raise ValueError(f"`{name}`: {value!r} is not valid; choose from: "
                           f"{', '.join(valid[name])}.")
    for seed in self.seeds:
      if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"`seeds`: {seed} must be between 0 and 2**32 - 1.")
    for rate in self.learning_rates:
      if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"`learning_rates`: {rate!r} must be > 0.")
    for units in self.mlp_units:
      if units <= 0:
        raise ValueError(f"`mlp_units`: {units!r} must be > 0.")
    if len(set(self.cells)) != len(self.cells):
      raise ValueError(f"`cells` repeats a cell: {','.join(self.cells)}.")
    for cell in self.cells:
      loss, _, interaction = cell.rpartition(".")
      if loss not in self.losses or interaction not in self.interactions:
        raise ValueError(
            f"`cells`: {cell!r} is not a cell of `losses` x `interactions` "
            f"(write loss.interaction, e.g. softmax.dot).")
    if self.choose_on_seed is not None and (
        self.choose_on_seed not in self.seeds):
      raise ValueError(f"`choose_on_seed`={self.choose_on_seed} is not one "
                       f"of `seeds` ({','.join(map(str, self.seeds))}).")

  def cell_keys(self) -> List[Tuple[str, str]]:
    """The (loss, interaction) cells, in grid order."""
    if self.cells:
      return [tuple(cell.rpartition(".")[::2]) for cell in self.cells]
    return [(loss, interaction) for loss in self.losses
            for interaction in self.interactions]

  def tuned_seeds(self) -> Tuple[int, ...]:
    """The seeds whose runs try every value (all, or `choose_on_seed`)."""
    if self.choose_on_seed is None:
      return self.seeds
    return (self.choose_on_seed,)

  def runs(self) -> List[Run]:
    """The runs, seed by seed: every cell gets its first seed early. With
    `choose_on_seed`, that seed's only (the others follow its choices)."""
    runs = []
    for seed in self.tuned_seeds():
      for loss, interaction in self.cell_keys():
        widths = (self.mlp_units if interaction in MLP_INTERACTIONS
                  else (None,))
        for rate in self.learning_rates:
          runs.extend(Run(loss, interaction, rate, units, seed)
                      for units in widths)
    return runs

  def union(self, other: "Grid") -> "Grid":
    """The grid of both, each list in first-seen order.

    Raises:
      ValueError: the two choose on different seeds (naming the flag).
    """
    if self.choose_on_seed != other.choose_on_seed:
      raise ValueError(
          f"`choose_on_seed`={flag_value(other.choose_on_seed)} differs "
          f"from the study's ({flag_value(self.choose_on_seed)}); pass the "
          "same value, or another `study_dir`.")
    def merge(a, b):
      return tuple(dict.fromkeys(tuple(a) + tuple(b)))
    cells = ()
    if self.cells or other.cells:
      cells = merge(*(tuple(f"{l}.{i}" for l, i in g.cell_keys())
                      for g in (self, other)))
    return Grid(*(merge(getattr(self, name), getattr(other, name))
                  for name in ("losses", "interactions", "seeds",
                               "learning_rates", "mlp_units")),
                cells=cells, choose_on_seed=self.choose_on_seed)


def parse_run_name(name: str) -> Run:
  """The Run a folder name names (`Run.name` read back).

  >>> parse_run_name("approx_ndcg.lc_mlp.lr0.001.u128.seed2")
  Run(loss='approx_ndcg', interaction='lc_mlp', learning_rate=0.001, mlp_units=128, seed=2)
  """
  head, _, seed = name.rpartition(".seed")
  units = None
  if ".u" in head.rpartition(".lr")[2]:
    head, _, units_text = head.rpartition(".u")
    units = int(units_text)
  cell, _, rate = head.rpartition(".lr")
  loss, _, interaction = cell.rpartition(".")
  run = Run(loss, interaction, float(rate), units, int(seed))
  if run.name != name:
    raise ValueError(f"{name!r} is not a run name")
  return run


def flag_value(value) -> str:
  if value is None:
    return "(not set)"
  if isinstance(value, (list, tuple)):
    return ",".join(map(str, value))
  return str(value)
