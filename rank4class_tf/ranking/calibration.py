"""Probabilities from any loss's scores: post-hoc calibration and its metrics.

A ranking loss (pairwise, ApproxNDCG, Gumbel, MSE) trains scores whose scale
means nothing; softmax cross-entropy trains logits that are usually
over-confident (Guo et al. 2017). After training, one map of the scores is
fitted by negative log-likelihood on the validation split, the classes'
order untouched (Top-k, NDCG and MRR do not change):

* **Single-label: temperature scaling**, p = softmax(s / T) (Guo et al.
  2017). One scalar is the whole family here: a shift of every score
  cancels in the softmax, so softmax(a s + b) = softmax(a s), and any
  increasing affine map is a temperature. For a ranking loss T often comes
  out far from 1 (MSE's scores live in [0, 1]: T ~ 0.1).
* **Multi-label: Platt scaling shared by the classes**, p_c = sigmoid(a s_c
  + b) (Platt 1999), two scalars: each class is its own yes/no question, so
  the shift matters.

`fit(scores, labels)` returns a `Calibration` (its `kind` and parameters);
`Calibration.probabilities` applies it in numpy, `Calibration.apply` in
TensorFlow (the export's `probabilities` output). NLL, ECE and Brier score
are computed here in numpy, the reliability diagram drawn with matplotlib.

Metrics (single-label: of the predicted class's probability, the usual
"confidence" view; multi-label: of every (instance, class) probability):

* NLL: mean -log p(true class) (multi-label: mean binary cross-entropy over
  classes); `report` computes it from the scores in log space, exactly.
* ECE (`ECE_BINS` = 15 equal-width bins of confidence in [0, 1]): sum over
  bins of (bin size / n) * |accuracy(bin) - mean confidence(bin)|.
* Brier score: mean over instances of sum over classes of (p_c - y_c)^2
  (multi-label: mean over instances and classes).

>>> import numpy as np
>>> scores = np.array([[2.0, 0.0], [0.0, 2.0]]); labels = np.array([0, 1])
>>> round(fit(scores, labels).temperature, 2) < 0.1  # Separable: sharpen.
True
"""

import dataclasses
from typing import Any, Dict, Optional

import numpy as np
from scipy import optimize
import tensorflow as tf

from rank4class_tf import fileio

# Equal-width confidence bins of the expected calibration error.
ECE_BINS = 15
# log(T) and Platt's scale are searched within these bounds.
LOG_T_BOUNDS = (-9.0, 9.0)
SINGLE_LABEL = "temperature"
MULTI_LABEL = "platt"


@dataclasses.dataclass(frozen=True)
class Calibration:
  """A fitted map from scores to probabilities.

  Attributes:
    kind: `temperature` (single-label: softmax(s / T)) or `platt`
      (multi-label: sigmoid(scale * s + shift)).
    temperature: T (`temperature` only).
    scale: Platt's a (`platt` only).
    shift: Platt's b (`platt` only).
  """
  kind: str
  temperature: float = 1.0
  scale: float = 1.0
  shift: float = 0.0

  def probabilities(self, scores: np.ndarray) -> np.ndarray:
    """[n, num_classes] scores -> probabilities (numpy)."""
    scores = np.asarray(scores, np.float64)
    if self.kind == SINGLE_LABEL:
      return softmax(scores / self.temperature)
    return sigmoid(self.scale * scores + self.shift)

  def apply(self, scores: tf.Tensor) -> tf.Tensor:
    """[batch_size, num_classes] scores -> probabilities, in TensorFlow (the
    export's `probabilities`); float32."""
    scores = tf.cast(scores, tf.float32)
    if self.kind == SINGLE_LABEL:
      return tf.nn.softmax(scores / self.temperature, axis=-1)
    return tf.sigmoid(self.scale * scores + self.shift)

  def to_json(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> "Calibration":
    if value.get("kind") not in (SINGLE_LABEL, MULTI_LABEL):
      raise ValueError(f"unknown calibration kind {value.get('kind')!r}.")
    return cls(**{f.name: value[f.name] for f in dataclasses.fields(cls)
                  if f.name in value})


def softmax(x: np.ndarray) -> np.ndarray:
  x = x - x.max(axis=-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=-1, keepdims=True)


def sigmoid(x: np.ndarray) -> np.ndarray:
  return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))),
                  np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


def _log_softmax(x: np.ndarray) -> np.ndarray:
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _check(scores: np.ndarray, labels: np.ndarray) -> None:
  if scores.ndim != 2 or not len(scores):
    raise ValueError(f"scores of shape {scores.shape}: [n > 0, num_classes] "
                     "needed.")
  if not np.isfinite(scores).all():
    raise ValueError("non-finite scores (NaN or Inf): the model diverged; "
                     "nothing to calibrate.")
  if labels.shape[0] != scores.shape[0]:
    raise ValueError(f"{labels.shape[0]} labels for {scores.shape[0]} "
                     "score rows.")


def is_multi_label(labels: np.ndarray) -> bool:
  return np.asarray(labels).ndim == 2


def fit(scores: np.ndarray, labels: np.ndarray) -> Calibration:
  """The calibration of `scores` by NLL on `labels`.

  Args:
    scores: [n, num_classes].
    labels: [n] class ids (single-label: temperature scaling), or [n,
      num_classes] multi-hot (multi-label: Platt scaling).

  Raises:
    ValueError: empty or non-finite scores, or mismatched labels.
  """
  scores = np.asarray(scores, np.float64)
  labels = np.asarray(labels)
  _check(scores, labels)
  if not is_multi_label(labels):

    def nll_of(log_t):
      return nll_of_scores(scores, labels, Calibration(
          SINGLE_LABEL, temperature=float(np.exp(log_t))))

    best = optimize.minimize_scalar(nll_of, bounds=LOG_T_BOUNDS,
                                    method="bounded",
                                    options={"xatol": 1e-6})
    return Calibration(SINGLE_LABEL, temperature=float(np.exp(best.x)))
  y = labels.astype(np.float64)

  def bce(params):
    z = params[0] * scores + params[1]
    # log(1 + e^z) - y z, stably; its gradient is sigmoid(z) - y.
    loss = np.logaddexp(0.0, z) - y * z
    grad_z = sigmoid(z) - y
    n = z.size
    return loss.sum() / n, np.array([(grad_z * scores).sum() / n,
                                     grad_z.sum() / n])

  best = optimize.minimize(bce, x0=np.array([1.0, 0.0]), jac=True,
                           method="L-BFGS-B",
                           bounds=[(1e-6, np.exp(LOG_T_BOUNDS[1])),
                                   (None, None)])
  return Calibration(MULTI_LABEL, scale=float(best.x[0]),
                     shift=float(best.x[1]))


def uncalibrated(labels: np.ndarray) -> Calibration:
  """The identity map of the label kind: softmax(s), or sigmoid(s)."""
  return Calibration(MULTI_LABEL if is_multi_label(labels) else SINGLE_LABEL)


def nll(probabilities: np.ndarray, labels: np.ndarray) -> float:
  """Mean negative log-likelihood of the labels (see the module doc)."""
  p = np.clip(np.asarray(probabilities, np.float64), 1e-12, 1.0)
  labels = np.asarray(labels)
  if is_multi_label(labels):
    q = np.clip(1.0 - np.asarray(probabilities, np.float64), 1e-12, 1.0)
    return float(-(labels * np.log(p) + (1 - labels) * np.log(q)).mean())
  return float(-np.log(p[np.arange(len(labels)), labels.astype(int)]).mean())


def brier(probabilities: np.ndarray, labels: np.ndarray) -> float:
  """Brier score (see the module doc)."""
  p = np.asarray(probabilities, np.float64)
  labels = np.asarray(labels)
  if is_multi_label(labels):
    return float(((p - labels) ** 2).mean())
  y = np.zeros_like(p)
  y[np.arange(len(labels)), labels.astype(int)] = 1.0
  return float(((p - y) ** 2).sum(axis=1).mean())


def confidences(probabilities: np.ndarray, labels: np.ndarray):
  """(confidence, correct) pairs the ECE and the diagram bin: the top
  class's probability and whether it is the label (single-label), or every
  (instance, class) probability and its 0/1 label (multi-label)."""
  p = np.asarray(probabilities, np.float64)
  labels = np.asarray(labels)
  if is_multi_label(labels):
    return p.ravel(), labels.ravel().astype(np.float64)
  return p.max(axis=1), (p.argmax(axis=1) == labels).astype(np.float64)


def bin_table(probabilities: np.ndarray, labels: np.ndarray,
              bins: int = ECE_BINS):
  """Per equal-width bin of confidence: (count, mean confidence, accuracy);
  empty bins have count 0 and NaN means. Bin i holds (i/B, (i+1)/B], the
  first also 0."""
  conf, correct = confidences(probabilities, labels)
  index = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
  counts = np.bincount(index, minlength=bins)
  with np.errstate(invalid="ignore", divide="ignore"):
    mean_conf = np.bincount(index, conf, bins) / counts
    accuracy = np.bincount(index, correct, bins) / counts
  return counts, mean_conf, accuracy


def ece(probabilities: np.ndarray, labels: np.ndarray,
        bins: int = ECE_BINS) -> float:
  """Expected calibration error over `bins` equal-width bins."""
  counts, mean_conf, accuracy = bin_table(probabilities, labels, bins)
  used = counts > 0
  return float((counts[used] / counts.sum() *
                np.abs(accuracy[used] - mean_conf[used])).sum())


def metrics(probabilities: np.ndarray, labels: np.ndarray,
            prefix: str = "") -> Dict[str, float]:
  """{prefix + nll, ece, brier} of the probabilities."""
  return {prefix + "nll": nll(probabilities, labels),
          prefix + "ece": ece(probabilities, labels),
          prefix + "brier": brier(probabilities, labels)}


def nll_of_scores(scores: np.ndarray, labels: np.ndarray,
                  calibration: Calibration) -> float:
  """`nll` of `calibration.probabilities(scores)`, computed from the scores
  in log space: exact where a probability underflows (`nll` clips it at
  1e-12, capping an instance's loss at 27.6; a ranking loss's or a sharp
  temperature's scores go far past that)."""
  scores = np.asarray(scores, np.float64)
  labels = np.asarray(labels)
  if calibration.kind == SINGLE_LABEL:
    log_p = _log_softmax(scores / calibration.temperature)
    return float(-log_p[np.arange(len(labels)), labels.astype(int)].mean())
  z = calibration.scale * scores + calibration.shift
  # -[y log sigmoid(z) + (1 - y) log sigmoid(-z)] = log(1 + e^z) - y z.
  return float((np.logaddexp(0.0, z) - labels * z).mean())


def report(scores: np.ndarray, labels: np.ndarray,
           calibration: Optional[Calibration]) -> Dict[str, float]:
  """NLL, ECE and Brier of the scores before calibration (softmax or
  sigmoid of the raw scores) and, given a calibration, after it
  (`calibrated_` names); the NLLs from the scores (`nll_of_scores`)."""
  out = {}
  for prefix, fitted in (("", uncalibrated(labels)),
                         ("calibrated_", calibration)):
    if fitted is not None:
      probabilities = fitted.probabilities(scores)
      out.update({prefix + "nll": nll_of_scores(scores, labels, fitted),
                  prefix + "ece": ece(probabilities, labels),
                  prefix + "brier": brier(probabilities, labels)})
  return out


def reliability_diagram(scores: np.ndarray, labels: np.ndarray,
                        calibration: Optional[Calibration], path: str,
                        title: str = "") -> None:
  """A PNG of accuracy against confidence per bin, before and after the
  calibration, the diagonal being perfect calibration."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, axis = pyplot.subplots(figsize=(4.5, 4.5))
  axis.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
  maps = [("scores", uncalibrated(labels))]
  if calibration is not None:
    maps.append(("calibrated", calibration))
  for name, mapping in maps:
    probabilities = mapping.probabilities(scores)
    counts, mean_conf, accuracy = bin_table(probabilities, labels)
    used = counts > 0
    axis.plot(mean_conf[used], accuracy[used], marker="o",
              label=f"{name} (ECE {ece(probabilities, labels):.3f})")
  axis.set_xlim(0, 1)
  axis.set_ylim(0, 1)
  axis.set_xlabel("confidence")
  axis.set_ylabel("accuracy")
  axis.set_title(title or f"reliability ({ECE_BINS} equal-width bins)")
  axis.legend(loc="upper left", fontsize=8)
  figure.tight_layout()

  def write(f):
    figure.savefig(f, format="png", dpi=100)

  fileio.write_atomically(path, write, binary=True)
  pyplot.close(figure)
