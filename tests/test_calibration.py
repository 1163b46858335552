"""Tests of calibrated probabilities: the maths against independent numpy.

End to end (a run's export, `pipelines.calibrate`, a study's records and
report) they are tested on the runs other modules already train:
test_pipelines.TrainEvaluateTest (a digits ApproxNDCG run) and
test_study_pipeline.StudyTest (a digits study)."""

import numpy as np
import tensorflow as tf

from rank4class_tf.ranking import calibration
from rank4class_tf.ranking import metrics


def sampled(n=20000, k=5, seed=0):
  """Logits and labels drawn from softmax(logits): calibrated at T = 1."""
  rng = np.random.RandomState(seed)
  logits = rng.normal(0, 2, size=(n, k))
  p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
  cumulative = p.cumsum(axis=1)
  labels = (rng.rand(n, 1) > cumulative).sum(axis=1)
  return logits, labels


class FitTest(tf.test.TestCase):

  def test_temperature_recovers_a_known_temperature(self):
    logits, labels = sampled()
    for t in (0.25, 1.0, 3.0):
      fitted = calibration.fit(logits * t, labels)
      self.assertEqual(fitted.kind, "temperature")
      self.assertAllClose(fitted.temperature, t, rtol=0.05)

  def test_platt_recovers_a_known_scale_and_shift(self):
    rng = np.random.RandomState(1)
    z = rng.normal(0, 2, size=(20000, 4))
    labels = (rng.rand(*z.shape) < 1 / (1 + np.exp(-z))).astype(np.float32)
    fitted = calibration.fit((z - 0.5) / 2.0, labels)  # z = 2 s + 0.5.
    self.assertEqual(fitted.kind, "platt")
    self.assertAllClose([fitted.scale, fitted.shift], [2.0, 0.5], atol=0.08)
    probs = fitted.probabilities((z - 0.5) / 2.0)
    self.assertTrue(((probs >= 0) & (probs <= 1)).all())
    self.assertAllClose(fitted.apply(tf.constant((z[:3] - 0.5) / 2.0)),
                        probs[:3], atol=1e-5)  # TensorFlow = numpy.

  def test_refusals(self):
    with self.assertRaisesRegex(ValueError, r"non-finite scores"):
      calibration.fit(np.array([[np.nan, 1.0]]), np.array([0]))
    with self.assertRaisesRegex(ValueError, r"\[n > 0, num_classes\]"):
      calibration.fit(np.zeros([0, 3]), np.zeros([0], int))

  def test_json_round_trip(self):
    fitted = calibration.Calibration("platt", scale=2.0, shift=-1.0)
    self.assertEqual(calibration.Calibration.from_json(fitted.to_json()),
                     fitted)
    with self.assertRaisesRegex(ValueError, "unknown calibration kind"):
      calibration.Calibration.from_json({"kind": "isotonic"})


def reference_ece(p, labels, bins=15):
  """ECE written with loops: confidence = top probability."""
  total, n = 0.0, len(labels)
  for b in range(bins):
    lo, hi = b / bins, (b + 1) / bins
    members = [i for i in range(n)
               if (lo < p[i].max() <= hi) or (b == 0 and p[i].max() == 0)]
    if members:
      confidence = np.mean([p[i].max() for i in members])
      accuracy = np.mean([p[i].argmax() == labels[i] for i in members])
      total += len(members) / n * abs(accuracy - confidence)
  return total


class MetricsTest(tf.test.TestCase):

  def test_against_independent_numpy(self):
    rng = np.random.RandomState(2)
    p = rng.dirichlet(np.ones(4), size=300)
    labels = rng.randint(0, 4, size=300)
    self.assertAllClose(calibration.ece(p, labels), reference_ece(p, labels))
    self.assertAllClose(calibration.nll(p, labels),
                        -np.mean([np.log(p[i, labels[i]])
                                  for i in range(300)]))
    onehot = np.eye(4)[labels]
    self.assertAllClose(calibration.brier(p, labels),
                        np.mean(np.sum((p - onehot) ** 2, axis=1)))
    # Multi-label: every (instance, class) probability.
    q = rng.rand(50, 3)
    y = (rng.rand(50, 3) < 0.5).astype(float)
    self.assertAllClose(calibration.nll(q, y), -np.mean(
        y * np.log(q) + (1 - y) * np.log(1 - q)))
    self.assertAllClose(calibration.brier(q, y), np.mean((q - y) ** 2))
    counts, conf, acc = calibration.bin_table(q, y, bins=2)
    low = q.ravel() <= 0.5
    self.assertAllEqual(counts, [low.sum(), (~low).sum()])
    self.assertAllClose(acc, [y.ravel()[low].mean(), y.ravel()[~low].mean()])

  def test_a_known_ece(self):
    # Two instances at confidence 0.9, one right: |0.5 - 0.9| = 0.4.
    p = np.array([[0.9, 0.1], [0.9, 0.1]])
    self.assertAllClose(calibration.ece(p, np.array([0, 1])), 0.4)

  def test_report_nll_is_exact_where_a_probability_underflows(self):
    # Single-label: the true class 40 below the other (p = e^-40 / (1 +
    # e^-40) < 1e-12): -log p = 40 + log(1 + e^-40) ~ 40, not the clipped
    # -log 1e-12 = 27.63; the second instance right at margin 2.
    scores = np.array([[0.0, 40.0], [2.0, 0.0]])
    labels = np.array([0, 0])
    expected = np.mean([40.0 + np.log1p(np.exp(-40.0)),
                        np.log1p(np.exp(-2.0))])
    report = calibration.report(scores, labels, calibration.Calibration(
        calibration.SINGLE_LABEL, temperature=0.5))
    self.assertAllClose(report["nll"], expected, rtol=1e-12)
    # T = 0.5 doubles every margin: 80 + log(1 + e^-80) and log(1 + e^-4).
    self.assertAllClose(report["calibrated_nll"],
                        np.mean([80.0, np.log1p(np.exp(-4.0))]), rtol=1e-12)
    # The probability-based `nll` keeps its documented clip.
    self.assertAllClose(
        calibration.nll(calibration.softmax(scores), labels),
        np.mean([-np.log(1e-12), np.log1p(np.exp(-2.0))]))
    # Multi-label (Platt a = 2, b = 1): z = 2 s + 1; positives at z = -49
    # and negatives at z = 51 each cost 49 + log(1 + e^-49), 51 + ...
    s = np.array([[-25.0, 25.0], [1.0, -1.0]])
    y = np.array([[1.0, 0.0], [1.0, 0.0]])
    z = 2.0 * s + 1.0
    reference = np.mean([[-np.log(1 / (1 + np.exp(-z[i, j]))) if y[i, j]
                          else -np.log(1 / (1 + np.exp(z[i, j])))
                          for j in range(2)] for i in range(2)])
    self.assertGreater(reference, 20.0)
    report = calibration.report(s, y, calibration.Calibration(
        calibration.MULTI_LABEL, scale=2.0, shift=1.0))
    self.assertAllClose(report["calibrated_nll"], reference, rtol=1e-12)

  def test_calibration_never_changes_the_ranking(self):
    logits, labels = sampled(n=2000, k=6, seed=3)
    scores = logits * 7.0 + 2.0
    fitted = calibration.fit(scores, labels)
    names = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")
    before = metrics.evaluate_scores(labels, scores, names)
    after = metrics.evaluate_scores(labels, fitted.probabilities(scores),
                                    names)
    self.assertEqual(before, after)
    report = calibration.report(scores, labels, fitted)
    self.assertLess(report["calibrated_nll"], report["nll"])
    self.assertLess(report["calibrated_ece"], report["ece"])


if __name__ == "__main__":
  tf.test.main()
