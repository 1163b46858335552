"""The paper's per-dataset result tables (Tables 7-12), shipped as data.

Wang et al. report every loss x interaction cell of their grid for six
dataset / encoder pairs in Appendix C. Each is a JSON file in this folder,
typed from the paper and checked cell by cell against its text:

  {"title": "GoEmotions, BERT-Base",
   "source": "Wang et al., Rank4Class ..., Appendix C, Table 7",
   "note": "what is odd in the paper itself (optional)",
   "values": {"top1_accuracy": {"dot": {"softmax": 0.59, ...},
                                "lc_mlp": {...}, "concat_mlp": {...}},
              "top5_accuracy": {...}, "ndcg@5": {...}},
   "marked_best": {"top1_accuracy": [["lc_mlp", "approx_ndcg"]], ...}}

with metric names as `metrics.get` takes them, interaction names as
`--interactions`, loss names as `--losses`, values as fractions (the paper's
percentages / 100), `null` for a cell the paper does not give, and
`marked_best` the (interaction, loss) cells the paper stars as the best of
each metric (kept as printed, even where a `note` says the star is odd).

What can be compared across encoders of different sizes is not a cell's
value but its *effect*, its difference from the paper's baseline, softmax
cross-entropy with the dot interaction (`PaperTable.effects`):

>>> table = load("goemotions_bert")
>>> table.source.endswith("Table 7")
True
>>> table.values["top1_accuracy"]["dot"]["softmax"]
0.59
>>> round(table.effects("top1_accuracy")[("lc_mlp", "approx_ndcg")], 4)
0.0035

`NAMES` are the tables `--paper_table` accepts by name, `DATASET_TABLES` the
tables of each dataset (first the one a study is compared with by default).
A path to a JSON file in the format above is accepted too (a table typed in
by the user): `template.json` has every cell of the grid, all `null`.
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional, Tuple

NAMES = {
    "goemotions_bert": "GoEmotions, BERT",
    "goemotions_electra": "GoEmotions, ELECTRA",
    "mind_bert": "MIND, BERT",
    "mind_electra": "MIND, ELECTRA",
    "imagenet_resnet50": "ImageNet, ResNet-50",
    "cifar10_vgg16": "CIFAR-10, VGG16",
}
# The paper's tables of each dataset (`--dataset` names), the default first.
DATASET_TABLES = {
    "goemotions": ("goemotions_bert", "goemotions_electra"),
    "mind": ("mind_bert", "mind_electra"),
    "imagenet2012": ("imagenet_resnet50",),
    "cifar10": ("cifar10_vgg16",),
}
# The paper's baseline, against which every cell's effect is measured:
# (interaction, loss).
BASELINE = ("dot", "softmax")
FOLDER = os.path.dirname(os.path.abspath(__file__))

Cell = Tuple[str, str]  # (interaction, loss)


@dataclasses.dataclass(frozen=True)
class PaperTable:
  """One of the paper's tables: values[metric][interaction][loss].

  Attributes:
    title: dataset and encoder.
    source: where in the paper the numbers are.
    values: {metric: {interaction: {loss: fraction or None}}}.
    note: what is odd in the paper's own table ("" if nothing).
    marked_best: {metric: [(interaction, loss)]}: the cells the paper stars.
    dataset: the `--dataset` the table is of (None: a user's table that
      names none).
  """
  title: str
  source: str
  values: Dict[str, Dict[str, Dict[str, Optional[float]]]]
  note: str = ""
  marked_best: Dict[str, Tuple[Cell, ...]] = dataclasses.field(
      default_factory=dict)
  dataset: Optional[str] = None

  def cells(self, metric: str) -> List[Tuple[Cell, float]]:
    """[((interaction, loss), value)] of a metric, cells without value left
    out."""
    return [((interaction, loss), value)
            for interaction, row in self.values.get(metric, {}).items()
            for loss, value in row.items() if value is not None]

  def value(self, metric: str, cell: Cell) -> Optional[float]:
    """The paper's value of (interaction, loss), or None."""
    interaction, loss = cell
    return self.values.get(metric, {}).get(interaction, {}).get(loss)

  def effects(self, metric: str, baseline: Cell = BASELINE
             ) -> Dict[Cell, float]:
    """{(interaction, loss): value - baseline value} of every other cell
    with a value; {} when the table has no baseline value."""
    base = self.value(metric, baseline)
    if base is None:
      return {}
    return {cell: value - base for cell, value in self.cells(metric)
            if cell != baseline}


def dataset_of(name: str) -> Optional[str]:
  """The `--dataset` a named table belongs to (None: not a shipped name)."""
  for dataset, names in DATASET_TABLES.items():
    if name in names:
      return dataset
  return None


def load(name_or_path: str) -> PaperTable:
  """Reads a table by `NAMES` name or from a JSON file.

  Raises:
    ValueError: one line naming `--paper_table`: unknown name, an
      unreadable or malformed file.
  """
  flag = f"`paper_table`={name_or_path}"
  if name_or_path in NAMES:
    path = os.path.join(FOLDER, f"{name_or_path}.json")
  elif name_or_path.endswith(".json"):
    path = name_or_path
  else:
    raise ValueError(f"{flag} is neither a JSON file nor one of: "
                     f"{', '.join(NAMES)}.")
  try:
    with open(path, encoding="utf-8") as f:
      raw = json.load(f)
  except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
    raise ValueError(f"{flag}: cannot read {path}: {e}") from None
  try:
    values = dict(raw["values"])
    for metric, rows in values.items():
      for interaction, row in rows.items():
        for loss, value in row.items():
          if value is not None and not 0. <= float(value) <= 1.:
            raise ValueError(f"{metric}/{interaction}/{loss} = {value} is "
                             "not a fraction in [0, 1]")
    marked = {metric: tuple((str(i), str(l)) for i, l in cells)
              for metric, cells in dict(raw.get("marked_best", {})).items()}
    for metric, cells in marked.items():
      for interaction, loss in cells:
        if values.get(metric, {}).get(interaction, {}).get(loss) is None:
          raise ValueError(f"marked_best {metric}/{interaction}/{loss} has "
                           "no value")
    table = PaperTable(
        str(raw["title"]), str(raw["source"]), values,
        note=str(raw.get("note", "")), marked_best=marked,
        dataset=raw.get("dataset") or dataset_of(name_or_path))
  except (KeyError, TypeError, AttributeError, ValueError) as e:
    raise ValueError(f"{flag}: {path} is not a paper table: {e}") from None
  return table
