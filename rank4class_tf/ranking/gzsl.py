"""Generalized zero-shot (GZSL) metrics and the post-hoc remedies' maths.

A zero-shot run (`--holdout_classes`) ranks every class, seen in training
or not, for every instance. Its instances are of two kinds: those of a seen
class and those of an unseen one. The numbers users compare (Xian et al.
2018; Chao et al. 2016):

* `seen_top1`: Top-1 accuracy on the seen classes' instances;
* `unseen_top5`, `unseen_mrr`: Top-5 accuracy and MRR on the unseen
  classes' instances (every class still ranked);
* `gzsl_h`: the harmonic mean of `seen_top1` and `unseen_top5`,
  2 a b / (a + b): high only when both are (Top-5 on the unseen side: a
  handful of unseen classes among 28 are rarely first; `gzsl_h1`, with
  Top-1 on both sides, is the literature's H);
* `ausuc`: the area under the seen-unseen accuracy curve (Chao et al.):
  a margin gamma is subtracted from every seen class's score and swept from
  -inf (only seen classes win: acc_U = 0) to +inf (only unseen classes win:
  acc_S = 0); the area under (acc_U(gamma), acc_S(gamma)), Top-1 on both
  sides, measures the trade-off independent of the margin chosen.

The remedies, pure numpy here (the served model computes the same in
`modeling.zero_shot`):

  s'_i = (1 - w) s_i + w cos(h, t_i) - m [i seen]

calibrated stacking (the margin m, Chao et al. 2016) and the fusion with the
untrained cosine of the instance's and the class text's sentence embeddings
(the weight w). `choose` fits m and w on a validation split whose
pseudo-unseen classes were held out of training too, maximising `gzsl_h`.

>>> scores = np.array([[3., 1., 2.], [2.5, 1., 2.]])
>>> labels = np.array([0, 2])
>>> seen = np.array([True, True, False])
>>> gzsl_metrics(labels, scores, seen)["gzsl_h1"]
0.0
>>> gzsl_metrics(labels, stacked(scores, seen, 0.75), seen)["gzsl_h1"]
1.0
"""

from typing import Dict, Iterable, Optional, Sequence

import numpy as np

from rank4class_tf.ranking import metrics

GZSL_METRICS = ("seen_top1", "unseen_top5", "unseen_mrr", "gzsl_h", "gzsl_h1",
                "ausuc")


def harmonic_mean(a: float, b: float) -> float:
  """2 a b / (a + b); 0 when both are 0.

  >>> harmonic_mean(0.5, 0.25)
  0.333...
  """
  return 0.0 if a + b <= 0 else 2.0 * a * b / (a + b)


def stacked(scores: np.ndarray, seen: np.ndarray, margin: float
           ) -> np.ndarray:
  """Calibrated stacking: `margin` subtracted from the seen classes' scores.

  Args:
    scores: [n, num_classes].
    seen: [num_classes] bool, the classes seen in training.
    margin: m.
  """
  return scores - margin * np.asarray(seen, scores.dtype)


def fused(scores: np.ndarray, cosine: np.ndarray, weight: float
         ) -> np.ndarray:
  """(1 - w) scores + w cosine: 0 gives the trained scores, 1 the cosine."""
  return (1.0 - weight) * scores + weight * cosine


def remedied(scores: np.ndarray, cosine: Optional[np.ndarray],
             seen: np.ndarray, margin: float = 0.0, weight: float = 0.0
            ) -> np.ndarray:
  """Fusion, then stacking: (1 - w) s + w cos - m [seen]."""
  if weight:
    scores = fused(scores, cosine, weight)
  return stacked(scores, seen, margin)


def _top1_margins(labels: np.ndarray, scores: np.ndarray,
                  seen: np.ndarray):
  """Per instance, the margins for which its Top-1 is right.

  A seen instance (true class y seen) is right for gamma < a = s_y - max
  unseen score when y beats every other seen class (else never: a = -inf);
  an unseen instance is right for gamma > b = max seen score - s_y when y
  beats every other unseen class (else never: b = +inf).
  """
  n = len(labels)
  true = scores[np.arange(n), labels]
  others = scores.copy()
  others[np.arange(n), labels] = -np.inf
  max_seen = others[:, seen].max(axis=1, initial=-np.inf)
  max_unseen = others[:, ~seen].max(axis=1, initial=-np.inf)
  is_seen = seen[labels]
  a = np.where(true > max_seen, true - max_unseen, -np.inf)[is_seen]
  b = np.where(true > max_unseen, max_seen - true, np.inf)[~is_seen]
  return a, b


def seen_unseen_curve(labels: np.ndarray, scores: np.ndarray,
                      seen: np.ndarray):
  """(acc_U, acc_S) over every margin, exactly: the Top-1 accuracies of the
  unseen and the seen instances as the margin subtracted from the seen
  classes' scores sweeps from -inf to +inf, one point per plateau.

  Returns:
    (acc_unseen, acc_seen), each [points], acc_unseen ascending.
  """
  a, b = _top1_margins(labels, scores, seen)
  edges = np.unique(np.concatenate([a[np.isfinite(a)], b[np.isfinite(b)]]))
  if len(edges):
    gammas = np.concatenate([[edges[0] - 1.0], (edges[1:] + edges[:-1]) / 2,
                             [edges[-1] + 1.0]])
  else:
    gammas = np.array([0.0])
  gammas = np.concatenate([[-np.inf], gammas, [np.inf]])
  acc_seen = (a[None, :] > gammas[:, None]).mean(axis=1) if len(a) else (
      np.zeros(len(gammas)))
  acc_unseen = (b[None, :] < gammas[:, None]).mean(axis=1) if len(b) else (
      np.zeros(len(gammas)))
  return acc_unseen, acc_seen


def ausuc(labels: np.ndarray, scores: np.ndarray, seen: np.ndarray) -> float:
  """Area under the seen-unseen Top-1 accuracy curve (Chao et al. 2016).

  >>> ausuc(np.array([0, 1]), np.array([[2., 0.], [2., 1.]]),
  ...       np.array([True, False]))
  1.0
  """
  acc_unseen, acc_seen = seen_unseen_curve(labels, scores, seen)
  return float(np.trapz(acc_seen, acc_unseen))


def gzsl_metrics(labels, scores, seen,
                 names: Iterable[str] = GZSL_METRICS) -> Dict[str, float]:
  """The GZSL metrics of single-label scores.

  Args:
    labels: [n] class ids.
    scores: [n, num_classes].
    seen: [num_classes] bool: the classes trained on.
    names: which of `GZSL_METRICS`.

  Raises:
    ValueError: an unknown name, or no instance of a seen or of an unseen
      class.
  """
  labels = np.asarray(labels, np.int64)
  scores = np.asarray(scores, np.float64)
  seen = np.asarray(seen, bool)
  names = list(names)
  for name in names:
    if name not in GZSL_METRICS:
      raise ValueError(f"Unknown GZSL metric {name!r}; valid names: "
                       f"{', '.join(GZSL_METRICS)}.")
  is_seen = seen[labels]
  if is_seen.all() or not is_seen.any():
    raise ValueError("GZSL metrics need instances of seen and of unseen "
                     f"classes: got {int(is_seen.sum())} seen and "
                     f"{int((~is_seen).sum())} unseen.")
  on_seen = metrics.evaluate_scores(labels[is_seen], scores[is_seen],
                                    ("top1_accuracy",))
  on_unseen = metrics.evaluate_scores(labels[~is_seen], scores[~is_seen],
                                      ("top1_accuracy", "top5_accuracy",
                                       "mrr"))
  values = {
      "seen_top1": on_seen["top1_accuracy"],
      "unseen_top5": on_unseen["top5_accuracy"],
      "unseen_mrr": on_unseen["mrr"],
  }
  values["gzsl_h"] = harmonic_mean(values["seen_top1"], values["unseen_top5"])
  values["gzsl_h1"] = harmonic_mean(values["seen_top1"],
                                    on_unseen["top1_accuracy"])
  if "ausuc" in names:
    values["ausuc"] = ausuc(labels, scores, seen)
  return {name: float(values[name]) for name in names}


def _fast_h(labels: np.ndarray, scores: np.ndarray, seen: np.ndarray
           ) -> Dict[str, float]:
  """`seen_top1`, `unseen_top5` and `gzsl_h` for `choose`'s grid: ranks as
  the count of strictly higher scores (a tie ranks the true class first;
  `gzsl_metrics` reports the package's tie-broken metrics)."""
  n = len(labels)
  true = scores[np.arange(n), labels]
  rank = (scores > true[:, None]).sum(axis=1)
  is_seen = seen[labels]
  values = {"seen_top1": float((rank[is_seen] == 0).mean()),
            "unseen_top5": float((rank[~is_seen] < 5).mean())}
  values["gzsl_h"] = harmonic_mean(values["seen_top1"], values["unseen_top5"])
  return values


# The fusion weights `choose` tries: w / (1 - w) from 0.01 to 1000, so
# that the cosine (in [-1, 1]) can weigh from nothing to everything against
# trained scores of any scale.
FUSION_WEIGHTS = tuple([0.0] + [float(r / (1.0 + r))
                                for r in np.logspace(-2, 3, 31)] + [1.0])


def choose(labels: np.ndarray, scores: np.ndarray,
           cosine: Optional[np.ndarray], seen: np.ndarray,
           fit_margin: bool = True, fit_weight: bool = True,
           weights: Sequence[float] = FUSION_WEIGHTS,
           margins: int = 121) -> Dict[str, float]:
  """The margin and fusion weight that maximise `gzsl_h` on a split.

  For each weight, the margins tried are `margins` points evenly spaced
  over [-1, 3] standard deviations of the fused scores (and 0); ties keep
  the smallest change (weight, then |margin|).

  Args:
    labels, scores, seen: as `gzsl_metrics` (a validation split whose
      unseen classes are pseudo-unseen: held out of training, not the test's
      unseen classes).
    cosine: [n, num_classes] cosine of the instance and class-text vectors
      (needed when `fit_weight`).
    fit_margin, fit_weight: which to fit (the other stays 0).

  Returns:
    {"seen_margin", "cosine_fusion", and the chosen point's `gzsl_h`,
    `seen_top1`, `unseen_top5`}.
  """
  scores = np.asarray(scores, np.float64)
  seen = np.asarray(seen, bool)
  best = None
  for weight in (weights if fit_weight else (0.0,)):
    base = remedied(scores, cosine, seen, 0.0, weight)
    spread = float(base.std()) or 1.0
    grid = (np.concatenate([[0.0], np.linspace(-1.0, 3.0, margins) * spread])
            if fit_margin else np.array([0.0]))
    for margin in grid:
      values = _fast_h(labels, stacked(base, seen, margin), seen)
      key = (round(values["gzsl_h"], 12), -weight, -abs(margin))
      if best is None or key > best[0]:
        best = (key, dict(values, seen_margin=float(margin),
                          cosine_fusion=float(weight)))
  return best[1]
