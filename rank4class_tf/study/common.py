"""What every part of the study report shares: the titles it gives losses,
interactions, cells and metrics, how it prints numbers, and its one file
writer (whole files or none, a failure named in one line)."""

import math
from typing import Optional, Tuple

from rank4class_tf import fileio
from rank4class_tf.study import effects as study_effects
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import selection as selection_lib


LOSS_TITLES = {
    "softmax": "Softmax CE",
    "pairwise_logistic": "Pairwise logistic",
    "approx_ndcg": "ApproxNDCG",
    "gumbel_approx_ndcg": "Gumbel-ApproxNDCG",
    "mse": "MSE",
    "sodeep_spearman": "SoDeep Spearman",
    "sodeep_map": "SoDeep mAP",
    "sodeep_recall": "SoDeep Recall"
}
INTERACTION_TITLES = {"dot": "Dot", "lc_mlp": "LC+MLP",
                      "concat_mlp": "Concat+MLP"}


def metric_title(name: str) -> str:
  """`top1_accuracy` -> Top-1, `ndcg@5` -> NDCG@5, `mrr` -> MRR."""
  if name.startswith("top") and name.endswith("_accuracy"):
    return f"Top-{name[3:-len('_accuracy')]}"
  if name.startswith("precision@"):
    return f"P@{name.split('@')[1]}"
  return name.upper()


def loss_title(label: str) -> str:
  """`softmax` -> Softmax CE; `sodeep_spearman@lstm` -> SoDeep Spearman
  (lstm)."""
  loss, sorter = study_grid.split_loss(label)
  title = LOSS_TITLES.get(loss, loss)
  return title if sorter is None else f"{title} ({sorter})"


def cell_title(cell: Tuple[str, str]) -> str:
  loss, interaction = cell
  return (f"{loss_title(loss)} + "
          f"{INTERACTION_TITLES.get(interaction, interaction)}")


def write(path: str, write, binary: bool = False,
           newline: Optional[str] = None) -> None:
  """`fileio.write_atomically`; a failed write raises ValueError naming
  `path` (the file is as it was, no temporary file is left)."""
  try:
    fileio.write_atomically(path, write, binary=binary, newline=newline)
  except OSError as e:
    raise ValueError(f"cannot write {path}: {e.strerror or e}; the report "
                     "files written before it are whole.") from None


def mean_text(cell: selection_lib.Cell, metric: str) -> str:
  """`mean ± std` over seeds; the mean alone for one seed (no spread)."""
  if len(cell.runs) == 1:
    return f"{cell.mean(metric):.4f}"
  return f"{cell.mean(metric):.4f} ± {cell.std(metric):.4f}"


def p_text(p: float) -> str:
  """Four decimals; a p that would print as 0.0000 (a bootstrap of more than
  20,000 resamples can go below 0.00005) in two significant digits."""
  if 0 < p < 5e-5:
    return f"{p:.1e}"
  return f"{p:.4f}"


def holm_text(p_holm: float) -> str:
  """`p_text`, or `—` for an untested p (one seed: no seed-level test)."""
  return "—" if math.isnan(p_holm) else p_text(p_holm)


def axis(values):
  return list(dict.fromkeys(values))


def effect_text(effect: study_effects.Effect) -> str:
  return f"{effect.delta:+.4f} [{effect.low:+.4f}, {effect.high:+.4f}]"
