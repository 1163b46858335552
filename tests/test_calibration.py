"""Tests of calibrated probabilities: the maths against independent numpy,
the exports' `probabilities`, `pipelines.calibrate`."""

import json
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import helpers
from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving
from rank4class_tf.ranking import calibration
from rank4class_tf.ranking import metrics
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training


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


@pytest.mark.slow
class ExportTest(tf.test.TestCase):
  """A digits run with a ranking loss: its export's probabilities."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), "digits_approx_ndcg")
    cls.config = config_lib.TrainConfig.create(
        dataset="digits", loss="approx_ndcg", train_steps=200,
        eval_every=100, model_dir=cls.model_dir)
    training.train(cls.config)

  def record(self, export=run_dir_lib.BEST_EXPORT):
    with open(run_dir_lib.RunDir(self.model_dir).calibration_file(export)) as f:
      return json.load(f)

  def test_validation_ece_drops_after_calibration(self):
    record = self.record()
    self.assertEqual(record["split"], "validation")
    self.assertEqual(record["num_examples"], 270)
    self.assertEqual(record["calibration"]["kind"], "temperature")
    got = record["metrics"]
    self.assertLess(got["calibrated_ece"], got["ece"])
    self.assertLess(got["calibrated_nll"], got["nll"])

  def test_probabilities_are_the_calibrated_softmax(self):
    ranker = serving.ExportedRanker(self.model_dir)
    self.assertTrue(ranker.has_probabilities)
    images = builders.load_data(self.config).splits["test"][0][:16]
    out = ranker.outputs(images)
    t = self.record()["calibration"]["temperature"]
    self.assertAllClose(out["probabilities"].sum(axis=1), np.ones(16),
                        atol=1e-5)
    self.assertAllClose(out["probabilities"],
                        calibration.softmax(out["scores"] / t), atol=1e-5)
    ranked = ranker.rank(images[:1], top_k=3, probabilities=True)[0]
    self.assertAllClose([p for _, _, p in ranked],
                        np.sort(out["probabilities"][0])[::-1][:3],
                        atol=1e-6)
    results = helpers.evaluate(self.model_dir, "test")
    self.assertLess(results["calibrated_ece"], results["ece"])

  def test_calibrate_binary_rewrites_exports_and_draws(self):
    before = self.record()
    out = helpers.run_module("pipelines.calibrate",
                             f"--model_dir={self.model_dir}")
    records = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertEqual(set(records), set(run_dir_lib.EXPORTS))
    self.assertAllClose(records[run_dir_lib.BEST_EXPORT]["calibration"]
                        ["temperature"], before["calibration"]["temperature"],
                        rtol=1e-4)  # The same weights: the same fit.
    with open(run_dir_lib.RunDir(self.model_dir).reliability_diagram,
              "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
    predicted = helpers.run_module("pipelines.predict",
                                   f"--model_dir={self.model_dir}",
                                   "--features=1", check=False)
    self.assertEqual(predicted.returncode, 1)

  def test_bad_inputs(self):
    empty = tempfile.mkdtemp()
    out = helpers.run_module("pipelines.calibrate", f"--model_dir={empty}",
                             check=False)
    self.assertEqual(out.returncode, 1)
    self.assertEqual(len(out.stderr.strip().splitlines()), 1)
    self.assertEqual(os.listdir(empty), [])
    out = helpers.run_module("pipelines.calibrate", check=False)
    self.assertEqual(out.stderr.strip(),
                     "calibrate: set one of --model_dir and --study_dir.")


if __name__ == "__main__":
  tf.test.main()


@pytest.mark.slow
class StudyTest(tf.test.TestCase):
  """A study's records carry each run's calibration; `pipelines.calibrate
  --study_dir` adds it to records without one; tables.md reports it."""

  def test_study_records_and_report(self):
    study_dir = os.path.join(tempfile.mkdtemp(), "study")
    helpers.run_module(
        "pipelines.study", f"--study_dir={study_dir}", "--dataset=digits",
        "--losses=softmax,approx_ndcg", "--interactions=dot",
        "--seeds=0,1", "--learning_rates=1e-2", "--train_steps=60",
        "--eval_every=30", "--export=false", "--deterministic")
    run = os.path.join(study_dir, "runs", "approx_ndcg.dot.lr0.01.seed0")
    result = os.path.join(run, "study_result.json")
    with open(result) as f:
      record = json.load(f)
    fitted = record["calibration"]
    self.assertLess(fitted["calibrated_ece"], fitted["ece"])
    with open(os.path.join(study_dir, "tables.md")) as f:
      tables = f.read()
    self.assertIn("## Calibration by loss", tables)
    self.assertIn("| **approx_ndcg** (every interaction) | 2 |", tables)
    with open(os.path.join(study_dir, "results.csv")) as f:
      header = f.readline().strip().split(",")
    self.assertContainsSubset(["test_ece", "test_calibrated_ece",
                               "temperature"], header)
    # A record from before calibration: added from the checkpoint.
    del record["calibration"]
    with open(result, "w") as f:
      json.dump(record, f)
    out = helpers.run_module("pipelines.calibrate",
                             f"--study_dir={study_dir}")
    self.assertIn("Calibrated 1 run(s)", out.stdout)
    with open(result) as f:
      again = json.load(f)["calibration"]
    self.assertAllClose(again["temperature"], fitted["temperature"],
                        rtol=1e-4)
    self.assertAllClose(again["calibrated_ece"], fitted["calibrated_ece"],
                        atol=1e-6)
