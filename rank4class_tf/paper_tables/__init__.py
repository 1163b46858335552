"""The paper's per-dataset result tables, shown beside a study's numbers.

A table is a JSON file:

  {"title": "GoEmotions, BERT-Base",
   "source": "Wang et al., Rank4Class, arXiv:2112.09727v1, Table 7",
   "values": {"top1_accuracy": {"dot": {"softmax": 0.6512, ...},
                                "lc_mlp": {...}, "concat_mlp": {...}},
              "top5_accuracy": {...}, "ndcg@5": {...}}}

with metric names as `metrics.get` takes them, interaction names as
`--interactions`, loss names as `--losses`, values as fractions (the paper's
percentages / 100) and `null` for a cell the paper does not give.

`NAMES` are the paper's tables that `--paper_table` accepts by name; their
numbers are read from `<name>.json` in this folder. A path to a JSON file in
the format above is accepted too (a table typed in by the user):
`template.json` here has every cell of the paper's grid, all `null`, to copy
and fill in.
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
FOLDER = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class PaperTable:
  """One of the paper's tables: values[metric][interaction][loss]."""
  title: str
  source: str
  values: Dict[str, Dict[str, Dict[str, Optional[float]]]]

  def cells(self, metric: str) -> List[Tuple[Tuple[str, str], float]]:
    """[((interaction, loss), value)] of a metric, cells without value left
    out."""
    return [((interaction, loss), value)
            for interaction, row in self.values.get(metric, {}).items()
            for loss, value in row.items() if value is not None]


def load(name_or_path: str) -> PaperTable:
  """Reads a table by `NAMES` name or from a JSON file.

  Raises:
    ValueError: one line naming `--paper_table`: unknown name, a named
      table whose numbers are not shipped, an unreadable or malformed file.
  """
  flag = f"--paper_table={name_or_path}"
  if name_or_path in NAMES:
    path = os.path.join(FOLDER, f"{name_or_path}.json")
    if not os.path.exists(path):
      raise ValueError(
          f"{flag}: the paper's numbers for {NAMES[name_or_path]} are not "
          "shipped yet (no copy of the paper's tables could be read where "
          "this package was built); type them into a JSON file in the format "
          "of rank4class_tf/paper_tables and pass its path.")
  elif name_or_path.endswith(".json"):
    path = name_or_path
  else:
    raise ValueError(f"{flag} is neither a JSON file nor one of: "
                     f"{', '.join(NAMES)}.")
  try:
    with open(path) as f:
      raw = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"{flag}: cannot read {path}: {e}") from None
  try:
    table = PaperTable(str(raw["title"]), str(raw["source"]),
                       dict(raw["values"]))
    for metric, rows in table.values.items():
      for interaction, row in rows.items():
        for loss, value in row.items():
          if value is not None and not 0. <= float(value) <= 1.:
            raise ValueError(f"{metric}/{interaction}/{loss} = {value} is "
                             "not a fraction in [0, 1]")
  except (KeyError, TypeError, AttributeError, ValueError) as e:
    raise ValueError(f"{flag}: {path} is not a paper table: {e}") from None
  return table
