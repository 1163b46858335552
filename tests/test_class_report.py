"""Tests of `rank4class_tf/ranking/class_report.py` (with its maths
`class_report_ops.py`, tables `class_report_tables.py` and figure
`class_report_figure.py`) and of
`pipelines.evaluate --report_dir`.

The reference maths is written here on its own: the Top-1 class and the
rank of the true class come from a plain Python sort with the pessimistic
tie rule spelled out as a sort key, the per-class precision / recall / F1
and AP from scikit-learn. The module itself loads no TensorFlow, so these
tests import none either; the binary runs in subprocesses.
"""

import concurrent.futures
import csv
import io
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized
from sklearn import metrics as sk_metrics

from rank4class_tf.ranking import class_report
from rank4class_tf.ranking import class_report_figure
from rank4class_tf.ranking import class_report_ops
from rank4class_tf.ranking import class_report_tables

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# A hand-made split: 6 classes, 8 instances (class 4 is predicted but has no
# instance, class 5 is neither). Ties: instance 1 ties its true class 0 with
# class 1 (class 1 is predicted), instance 5 ties its class 2 with 3 and 4
# (class 3, the lower id, is predicted).
LABELS = np.array([0, 0, 0, 1, 1, 2, 2, 3])
SCORES = np.array([
    [3., 1., 0., 0., 0., -5.],   # 0 -> 0, rank 1
    [1., 1., 0., 0., 0., -5.],   # 0 -> 1, rank 2 (tie)
    [0., 2., 3., -1., -1., -5.],  # 0 -> 2, rank 3
    [0., 5., 1., 0., 0., -5.],   # 1 -> 1, rank 1
    [2., 0., 2., 1., 3., -5.],   # 1 -> 4, rank 5
    [0., 0., 1., 1., 1., -5.],   # 2 -> 3, rank 3 (tie)
    [0., 0., 4., 0., 0., -5.],   # 2 -> 2, rank 1
    [0., 0., 9., 1., 0., -5.],   # 3 -> 2, rank 2
])
NAMES = ["zero", "o|ne", "two, 2", "three", "four", "five"]
# Worked out by hand from the comments above.
CONFUSION = [[1, 1, 1, 0, 0, 0],
             [0, 1, 0, 0, 1, 0],
             [0, 0, 1, 1, 0, 0],
             [0, 0, 1, 0, 0, 0],
             [0, 0, 0, 0, 0, 0],
             [0, 0, 0, 0, 0, 0]]
SUPPORT = [3, 2, 2, 1, 0, 0]
PREDICTED = [1, 2, 3, 1, 1, 0]
PRECISION = [1., 1 / 2, 1 / 3, 0., 0., 0.]
RECALL = [1 / 3, 1 / 2, 1 / 2, 0., 0., 0.]
F1 = [2 / 4, 2 / 4, 2 / 5, 0., 0., 0.]
MRR = [(1 + 1 / 2 + 1 / 3) / 3, (1 + 1 / 5) / 2, (1 / 3 + 1) / 2, 1 / 2,
       math.nan, math.nan]
TOP2 = [2 / 3, 1 / 2, 1 / 2, 1., math.nan, math.nan]
TOP5 = [1., 1., 1., 1., math.nan, math.nan]


def reference_ranking(labels, scores):
  """(Top-1 class, rank of the true class) of each instance: classes sorted
  by score, a class tied with the true class before it, then by id."""
  predicted, ranks = [], []
  for y, row in zip(labels, scores):
    order = sorted(range(len(row)), key=lambda c: (-row[c], c == y, c))
    predicted.append(order[0])
    ranks.append(order.index(y) + 1)
  return np.array(predicted), np.array(ranks)


def reference_per_class_mean(labels, values, num_classes):
  out = []
  for c in range(num_classes):
    mine = [v for y, v in zip(labels, values) if y == c]
    out.append(sum(mine) / len(mine) if mine else math.nan)
  return np.array(out)


def png_size(data: bytes):
  """(width, height) from a PNG's IHDR chunk."""
  return struct.unpack(">II", data[16:24])


class SingleLabelTest(parameterized.TestCase):

  def assert_close(self, actual, expected):
    np.testing.assert_allclose(np.asarray(actual, float),
                               np.asarray(expected, float), rtol=1e-12,
                               atol=1e-12, equal_nan=True)

  def test_hand_made_example(self):
    report = class_report_ops.single_label_report(LABELS, SCORES, NAMES,
                                              ks=(1, 2, 5))
    self.assertEqual(report.confusion.tolist(), CONFUSION)
    self.assertEqual(report.support.tolist(), SUPPORT)
    self.assertEqual(report.predicted.tolist(), PREDICTED)
    self.assert_close(report.precision, PRECISION)
    self.assert_close(report.recall, RECALL)
    self.assert_close(report.f1, F1)
    self.assert_close(report.mrr, MRR)
    self.assertEqual(sorted(report.top_k), [1, 2, 5])
    self.assert_close(report.top_k[1], RECALL[:4] + [math.nan] * 2)
    self.assert_close(report.top_k[2], TOP2)
    self.assert_close(report.top_k[5], TOP5)

  def test_hand_made_averages(self):
    averages = class_report_ops.single_label_report(LABELS, SCORES).averages()
    # Macro P/R/F1: classes 0-4 (class 4 is predicted); Top-k, MRR: 0-3.
    self.assertAlmostEqual(averages["macro"]["precision"],
                           sum(PRECISION[:5]) / 5)
    self.assertAlmostEqual(averages["macro"]["f1"], sum(F1[:5]) / 5)
    self.assertAlmostEqual(averages["macro"]["mrr"], sum(MRR[:4]) / 4)
    # Weighted: the split's accuracy and MRR (3 of 8 correct).
    self.assertAlmostEqual(averages["weighted"]["recall"], 3 / 8)
    self.assertAlmostEqual(averages["weighted"]["top1_accuracy"], 3 / 8)
    self.assertAlmostEqual(averages["weighted"]["mrr"],
                           (1 + 1 / 2 + 1 / 3 + 1 + 1 / 5 + 1 / 3 + 1 + 1 / 2)
                           / 8)
    self.assertAlmostEqual(averages["weighted"]["precision"],
                           sum(p * n for p, n in zip(PRECISION, SUPPORT)) / 8)

  @parameterized.parameters(0, 1, 2)
  def test_random_ties_against_references(self, seed):
    rng = np.random.default_rng(seed)
    num_classes = 7
    labels = rng.integers(0, num_classes - 1, 80)  # Class 6 never true.
    scores = rng.integers(0, 4, (80, num_classes)).astype(float)  # Ties.
    report = class_report_ops.single_label_report(labels, scores, ks=(1, 3))
    predicted, ranks = reference_ranking(labels, scores)
    precision, recall, f1, support = (
        sk_metrics.precision_recall_fscore_support(
            labels, predicted, labels=range(num_classes), zero_division=0))
    self.assert_close(report.precision, precision)
    self.assert_close(report.recall, recall)
    self.assert_close(report.f1, f1)
    self.assertEqual(report.support.tolist(), support.tolist())
    self.assertEqual(report.confusion.tolist(), sk_metrics.confusion_matrix(
        labels, predicted, labels=range(num_classes)).tolist())
    self.assert_close(report.mrr, reference_per_class_mean(
        labels, 1. / ranks, num_classes))
    self.assert_close(report.top_k[3], reference_per_class_mean(
        labels, ranks <= 3, num_classes))
    averages = report.averages()
    for average in ("macro", "weighted"):
      want = sk_metrics.precision_recall_fscore_support(
          labels, predicted, average=average, zero_division=0)
      got = averages[average]
      self.assert_close([got["precision"], got["recall"], got["f1"]],
                        want[:3])
    self.assertAlmostEqual(averages["weighted"]["mrr"], np.mean(1. / ranks))
    self.assertAlmostEqual(averages["weighted"]["top3_accuracy"],
                           np.mean(ranks <= 3))

  def test_top_k_clipped_to_the_classes(self):
    report = class_report_ops.single_label_report([0, 1, 2], np.eye(3))
    self.assertEqual(sorted(report.top_k), [1, 3])
    self.assertEqual(list(report.columns()),
                     ["precision", "recall", "f1", "top1_accuracy",
                      "top3_accuracy", "mrr"])

  def test_most_confused_pairs_order(self):
    confusion = [[10, 3, 0, 0],
                 [0, 2, 3, 0],
                 [1, 0, 5, 1],
                 [0, 0, 1, 0]]
    pairs = class_report_ops.confused_pairs(confusion)
    # Count first; equal counts: the larger share of the true class first;
    # then class ids.
    self.assertEqual([(p.true, p.predicted, p.count) for p in pairs],
                     [(1, 2, 3), (0, 1, 3), (3, 2, 1), (2, 0, 1), (2, 3, 1)])
    self.assertAlmostEqual(pairs[1].share, 3 / 13)
    self.assertLen(class_report_ops.confused_pairs(confusion, limit=2), 2)
    report = class_report_ops.single_label_report(LABELS, SCORES)
    self.assertEqual(
        [(p.true, p.predicted, p.count, p.share)
         for p in report.confused_pairs()],
        [(3, 2, 1, 1.), (1, 4, 1, .5), (2, 3, 1, .5), (0, 1, 1, 1 / 3),
         (0, 2, 1, 1 / 3)])

  @parameterized.named_parameters(
      ("label_outside", [0, 3], [[1., 0.], [0., 1.]], "not class ids"),
      ("not_integers", [0.5, 1], [[1., 0.], [0., 1.]], "integers"),
      ("shapes", [0, 1, 1], [[1., 0.], [0., 1.]], "do not match"),
      ("nan", [0, 1], [[1., math.nan], [0., 1.]], "non-finite"),
      ("empty", [], np.zeros((0, 3)), "at least one"),
  )
  def test_bad_inputs(self, labels, scores, message):
    with self.assertRaisesRegex(ValueError, message):
      class_report_ops.single_label_report(labels, scores)

  def test_class_names_must_match(self):
    with self.assertRaisesRegex(ValueError, "2 class names for scores of 3"):
      class_report.class_report([0], [[1., 2., 3.]], ["a", "b"])


def many_class_report(num_classes=100, errors=True):
  """Each class: 3 instances right; with `errors`, 20 pairs (true ->
  predicted) of 20 classes each, counts 21 down to 2."""
  labels, predicted = [], []
  for c in range(num_classes):
    labels += [c] * 3
    predicted += [c] * 3
  pairs = [(2 * i, 2 * i + 41) for i in range(20)] if errors else []
  for count, (true, wrong) in zip(range(21, 1, -1), pairs):
    labels += [true] * count
    predicted += [wrong] * count
  scores = np.zeros((len(labels), num_classes))
  scores[np.arange(len(labels)), predicted] = 1.
  return class_report_ops.single_label_report(labels, scores), pairs


class HeatmapTest(absltest.TestCase):

  def test_many_classes_draw_those_of_the_most_confused_pairs(self):
    report, pairs = many_class_report()
    ids, reduced = class_report_figure.heatmap_classes(report.confusion)
    self.assertTrue(reduced)
    # The 15 largest pairs hold 30 classes.
    self.assertEqual(ids, sorted(c for pair in pairs[:15] for c in pair))
    title = class_report_figure.confusion_title(report, "the test split")
    self.assertTrue(title.startswith(
        "Confusion matrix of the test split: 530 instances, 100 classes\n"))
    self.assertIn("only 30 of 100 classes drawn: those of the most-confused "
                  "pairs", title)
    png = class_report_figure.confusion_png(report, "the test split")
    self.assertTrue(png.startswith(PNG_MAGIC))
    self.assertIn(b"only 30 of 100 classes drawn", png)  # Its Title text.
    # Same report, same bytes.
    self.assertEqual(png, class_report_figure.confusion_png(report,
                                                     "the test split"))

  def test_many_classes_without_errors(self):
    report, _ = many_class_report(errors=False)
    self.assertEqual(class_report_figure.heatmap_classes(report.confusion),
                     (list(range(30)), True))
    self.assertIn("only 30 of 100 classes drawn (no errors)",
                  class_report_figure.confusion_title(report))

  def test_28_classes_drawn_whole_and_large_enough_to_read(self):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 28, 500)
    scores = rng.normal(size=(500, 28))
    scores[np.arange(500), labels] += 2.
    report = class_report_ops.single_label_report(
        labels, scores, [f"emotion number {i}" for i in range(28)])
    self.assertEqual(class_report_figure.heatmap_classes(report.confusion),
                     (list(range(28)), False))
    title = class_report_figure.confusion_title(report)
    self.assertEqual(title,
                     "Confusion matrix: 500 instances, 28 classes")
    png = class_report_figure.confusion_png(report)
    self.assertTrue(png.startswith(PNG_MAGIC))
    width, height = png_size(png)
    self.assertGreater(min(width, height), 28 * 25)  # >= 25 px per class.


class MultiLabelTest(parameterized.TestCase):

  @parameterized.parameters(0.5, 0.3)
  def test_against_sklearn(self, threshold):
    rng = np.random.default_rng(1)
    labels = (rng.random((60, 6)) < 0.3).astype(np.float32)
    labels[:, 5] = 0.  # A class without positive: no AP.
    scores = np.round(rng.normal(size=(60, 6)), 1)  # Ties, and exact 0s.
    scores[:5, 0] = 0.
    report = class_report.class_report(labels, scores, threshold=threshold)
    self.assertTrue(report.multi_label)
    for c in range(5):
      self.assertAlmostEqual(
          report.ap[c], sk_metrics.average_precision_score(labels[:, c],
                                                           scores[:, c]))
    self.assertTrue(math.isnan(report.ap[5]))
    predicted = 1. / (1. + np.exp(-scores)) >= threshold
    for name, function in (("precision", sk_metrics.precision_score),
                           ("recall", sk_metrics.recall_score),
                           ("f1", sk_metrics.f1_score)):
      np.testing.assert_allclose(
          getattr(report, name),
          function(labels, predicted, average=None, zero_division=0))
      for average in ("macro", "weighted"):
        self.assertAlmostEqual(
            report.averages()[average][name],
            function(labels, predicted, average=average, zero_division=0))
    self.assertEqual(report.support.tolist(), labels.sum(0).tolist())
    self.assertEqual(report.predicted.tolist(), predicted.sum(0).tolist())
    self.assertAlmostEqual(report.averages()["macro"]["ap"],
                           np.mean(report.ap[:5]))

  def test_padding_is_left_out(self):
    labels = np.array([[1., 0.], [-1., 1.], [0., 1.], [1., -1.]])
    scores = np.array([[0.5, 0.2], [9., 0.1], [0.7, -0.3], [0.1, 9.]])
    report = class_report_ops.multi_label_report(labels, scores)
    # Class 0 over instances 0, 2, 3; class 1 over instances 0, 1, 2.
    self.assertAlmostEqual(report.ap[0], sk_metrics.average_precision_score(
        [1, 0, 1], [0.5, 0.7, 0.1]))
    self.assertAlmostEqual(report.ap[1], sk_metrics.average_precision_score(
        [0, 1, 1], [0.2, 0.1, -0.3]))
    self.assertEqual(report.support.tolist(), [2, 2])
    self.assertEqual(report.predicted.tolist(), [3, 2])

  def test_bad_threshold(self):
    with self.assertRaisesRegex(ValueError, "`threshold`=1.0 must be in"):
      class_report_ops.multi_label_report([[1., 0.]], [[1., 2.]], threshold=1.)


def read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


class FilesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = tempfile.mkdtemp()
    self.report = class_report_ops.single_label_report(LABELS, SCORES, NAMES)
    self.context = {"model_dir": "runs/x", "split": "test"}

  def test_single_label_files(self):
    folder = os.path.join(self.root, "new", "parents", "report")
    paths = class_report.write(self.report, folder, self.context)
    self.assertEqual(sorted(os.path.basename(p) for p in paths),
                     sorted(class_report_tables.REPORT_FILES))
    self.assertEqual(sorted(os.listdir(os.path.dirname(folder))), ["report"])
    rows = list(csv.DictReader(io.StringIO(
        read(os.path.join(folder, "per_class.csv")))))
    self.assertEqual([r["class"] for r in rows], NAMES)
    self.assertEqual([int(r["support"]) for r in rows], SUPPORT)
    np.testing.assert_allclose([float(r["precision"]) for r in rows],
                               PRECISION)
    np.testing.assert_allclose([float(r["f1"]) for r in rows], F1)
    self.assertEqual([r["mrr"] for r in rows][4:], ["", ""])
    np.testing.assert_allclose([float(r["mrr"]) for r in rows[:4]], MRR[:4])
    matrix = list(csv.reader(io.StringIO(
        read(os.path.join(folder, "confusion_matrix.csv")))))
    self.assertEqual(matrix[0], ["true \\ predicted", *NAMES])
    self.assertEqual([row[0] for row in matrix[1:]], NAMES)
    self.assertEqual([[int(v) for v in row[1:]] for row in matrix[1:]],
                     CONFUSION)
    markdown = read(os.path.join(folder, "per_class.md"))
    lines = markdown.splitlines()
    table = [line for line in lines if line.startswith("| ")]
    # Sorted by support (ties: class id); `|` escaped; averages last.
    self.assertEqual(
        table[1:9],
        ["| zero | 3 | 1.0000 | 0.3333 | 0.5000 | 0.3333 | 1.0000 | 0.6111 |",
         "| o\\|ne | 2 | 0.5000 | 0.5000 | 0.5000 | 0.5000 | 1.0000 | "
         "0.6000 |",
         "| two, 2 | 2 | 0.3333 | 0.5000 | 0.4000 | 0.5000 | 1.0000 | "
         "0.6667 |",
         "| three | 1 | 0.0000 | 0.0000 | 0.0000 | 0.0000 | 1.0000 | "
         "0.5000 |",
         "| four | 0 | 0.0000 | 0.0000 | 0.0000 | – | – | – |",
         "| five | 0 | 0.0000 | 0.0000 | 0.0000 | – | – | – |",
         f"| **macro average** | 8 | {sum(PRECISION[:5]) / 5:.4f} | "
         f"{sum(RECALL[:5]) / 5:.4f} | {sum(F1[:5]) / 5:.4f} | "
         f"{sum(RECALL[:4]) / 4:.4f} | 1.0000 | {sum(MRR[:4]) / 4:.4f} |",
         "| **weighted average** | 8 | 0.5833 | 0.3750 | 0.4125 | 0.3750 | "
         "1.0000 | 0.6083 |"])
    self.assertIn("model_dir: `runs/x`, split: `test`", markdown)
    # The most-confused pairs, in the summary and on their own.
    first_pair = "| three | two, 2 | 1 | 100.0% |"
    self.assertIn(first_pair, markdown)
    pairs = read(os.path.join(folder, "confused_pairs.md")).splitlines()
    self.assertEqual(pairs[pairs.index(first_pair) + 1],
                     "| o\\|ne | four | 1 | 50.0% |")
    with open(os.path.join(folder, "confusion_matrix.png"), "rb") as f:
      self.assertEqual(f.read(8), PNG_MAGIC)
    summary = json.loads(read(os.path.join(folder, "report.json")))
    self.assertEqual(summary["report"], class_report_tables.REPORT_MARK)
    self.assertEqual(summary["weighted"]["recall"], 3 / 8)
    self.assertIsNone(summary["macro"].get("ap"))
    self.assertEqual((summary["num_examples"], summary["num_classes"]),
                     (8, 6))

  def test_multi_label_files(self):
    report = class_report_ops.multi_label_report(
        [[1., 0.], [0., 1.], [1., 1.]], [[2., -1.], [0.5, 1.], [1., -2.]],
        ["a", "b"], threshold=0.5)
    folder = os.path.join(self.root, "report")
    paths = class_report.write(report, folder)
    self.assertEqual(sorted(os.listdir(folder)),
                     ["per_class.csv", "per_class.md", "report.json"])
    self.assertLen(paths, 3)
    rows = list(csv.DictReader(io.StringIO(
        read(os.path.join(folder, "per_class.csv")))))
    # a: 2 positives, predicted 3 times (all scores >= 0); b: 1 of 2.
    self.assertEqual([(r["class"], r["support"], r["predicted"]) for r in rows],
                     [("a", "2", "3"), ("b", "2", "1")])
    self.assertAlmostEqual(float(rows[0]["f1"]), 2 * 2 / (2 + 3))
    self.assertAlmostEqual(float(rows[1]["ap"]),
                           sk_metrics.average_precision_score(
                               [0, 1, 1], [-1., 1., -2.]))
    markdown = read(os.path.join(folder, "per_class.md"))
    self.assertIn("No confusion matrix", markdown)
    self.assertIn("| a | 2 | 0.6667 | 1.0000 | 0.8000 | 1.0000 |", markdown)
    self.assertEqual(json.loads(read(os.path.join(
        folder, "report.json")))["labels"], "multi-label")

  def test_previous_report_replaced(self):
    folder = os.path.join(self.root, "report")
    class_report.write(self.report, folder)
    other = class_report_ops.single_label_report([0, 1], [[1., 0.], [1., 0.]])
    class_report.write(other, folder + os.sep)  # A trailing slash too.
    rows = list(csv.DictReader(io.StringIO(
        read(os.path.join(folder, "per_class.csv")))))
    self.assertEqual([r["support"] for r in rows], ["1", "1"])
    self.assertEqual(os.listdir(self.root), ["report"])  # No temporary left.
    empty = os.path.join(self.root, "empty")
    os.mkdir(empty)
    class_report.write(other, empty)
    self.assertIn("per_class.md", os.listdir(empty))

  def test_refused_and_nothing_written(self):
    a_file = os.path.join(self.root, "a_file")
    with open(a_file, "w") as f:
      f.write("keep")
    other = os.path.join(self.root, "other")
    os.mkdir(other)
    with open(os.path.join(other, "notes.txt"), "w") as f:
      f.write("keep")
    unmarked = os.path.join(self.root, "unmarked")
    os.mkdir(unmarked)
    with open(os.path.join(unmarked, "report.json"), "w") as f:
      f.write("{}")
    before = sorted(os.listdir(self.root))
    for folder, message in (
        ("", r"^`report_dir` is empty"),
        (a_file, r"^`report_dir`=.*a_file is a file, not a folder"),
        (os.path.join(a_file, "report"),
         r"^`report_dir`=.*cannot be made: .*a_file is a file"),
        (other, r"^`report_dir`=.*other exists and holds other files"),
        (unmarked, r"^`report_dir`=.*unmarked exists and holds other files"),
    ):
      with self.subTest(folder=folder):
        with self.assertRaisesRegex(ValueError, message):
          class_report.write(self.report, folder)
    self.assertEqual(sorted(os.listdir(self.root)), before)
    self.assertEqual(read(a_file), "keep")
    self.assertEqual(os.listdir(other), ["notes.txt"])

  def test_failed_write_leaves_nothing_or_the_previous_report(self):
    calls = []

    def failing_fsync(fd):
      calls.append(fd)
      if len(calls) == 3:
        raise OSError(28, "No space left on device")

    new = os.path.join(self.root, "made", "for", "report")
    with mock.patch.object(class_report.os, "fsync", failing_fsync):
      with self.assertRaisesRegex(
          ValueError, r"^`report_dir`=.*report cannot be written \(No space "
          r"left on device\); nothing was written"):
        class_report.write(self.report, new)
    self.assertEqual(os.listdir(self.root), [])  # Parents made: removed.
    previous = os.path.join(self.root, "previous")
    class_report.write(self.report, previous)
    before = read(os.path.join(previous, "per_class.md"))
    calls.clear()
    other = class_report_ops.single_label_report([0, 1], [[1., 0.], [1., 0.]])
    with mock.patch.object(class_report.os, "fsync", failing_fsync):
      with self.assertRaises(ValueError):
        class_report.write(other, previous)
    self.assertEqual(os.listdir(self.root), ["previous"])
    self.assertEqual(read(os.path.join(previous, "per_class.md")), before)


def run_module(module, *flags):
  """`python -m module flags` from the repository root (tests/helpers.py's
  `run_module`, without importing TensorFlow into this process)."""
  return subprocess.run([sys.executable, "-m", module, *flags], cwd=REPO,
                        capture_output=True, text=True, timeout=600,
                        check=False)


@pytest.mark.slow  # End-to-end: the binaries in subprocesses.
class EvaluateReportDirTest(absltest.TestCase):
  """`pipelines.evaluate --report_dir` on a digits run trained for 20 steps;
  the bad --report_dir cases run beside the good one."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.model_dir = os.path.join(cls.root, "digits")
    train = run_module("pipelines.train", "--dataset=digits",
                       "--train_steps=20", "--eval_every=10",
                       f"--model_dir={cls.model_dir}")
    assert train.returncode == 0, train.stderr[-3000:]
    cls.a_file = os.path.join(cls.root, "a_file")
    with open(cls.a_file, "w") as f:
      f.write("keep")
    cls.other = os.path.join(cls.root, "other")
    os.mkdir(cls.other)
    with open(os.path.join(cls.other, "notes.txt"), "w") as f:
      f.write("keep")
    cls.report_dir = os.path.join(cls.root, "reports", "test")
    # The binary's wording of each refusal (`FilesTest` checks them all in
    # the library): the good case and one bad one, as flags.
    cases = {
        "good": cls.report_dir,
        "other_folder": cls.other,
    }
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
      futures = {
          name: pool.submit(run_module, "pipelines.evaluate",
                            f"--model_dir={cls.model_dir}",
                            f"--report_dir={value}")
          for name, value in cases.items()}
      cls.procs = {name: f.result() for name, f in futures.items()}

  def test_report_written_and_agrees_with_the_json_line(self):
    proc = self.procs["good"]
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    first, second = proc.stdout.strip().splitlines()
    results = json.loads(first)
    self.assertEqual(
        second, f"Wrote the per-class report to {self.report_dir} "
        f"({', '.join(sorted(class_report_tables.REPORT_FILES))}).")
    self.assertEqual(sorted(os.listdir(self.report_dir)),
                     sorted(class_report_tables.REPORT_FILES))
    rows = list(csv.DictReader(io.StringIO(
        read(os.path.join(self.report_dir, "per_class.csv")))))
    self.assertEqual([r["class"] for r in rows],
                     [str(i) for i in range(10)])
    self.assertEqual(sum(int(r["support"]) for r in rows),
                     results["num_examples"])
    summary = json.loads(read(os.path.join(self.report_dir, "report.json")))
    self.assertEqual(summary["context"]["split"], "test")
    # The weighted Top-1 / Top-5 / MRR are the split's, as evaluate prints.
    for name in ("top1_accuracy", "top5_accuracy", "mrr"):
      self.assertAlmostEqual(summary["weighted"][name], results[name],
                             places=6)
    self.assertAlmostEqual(summary["weighted"]["recall"],
                           results["top1_accuracy"], places=6)
    confusion = np.loadtxt(os.path.join(self.report_dir,
                                        "confusion_matrix.csv"),
                           delimiter=",", skiprows=1,
                           usecols=range(1, 11), dtype=int)
    self.assertEqual(confusion.sum(), results["num_examples"])
    self.assertAlmostEqual(np.trace(confusion) / confusion.sum(),
                           results["top1_accuracy"], places=6)
    markdown = read(os.path.join(self.report_dir, "per_class.md"))
    self.assertIn("| **weighted average** | "
                  f"{results['num_examples']} | ", markdown)
    self.assertEqual(os.listdir(os.path.dirname(self.report_dir)), ["test"])

  def assert_refused(self, case, message):
    proc = self.procs[case]
    self.assertEqual(proc.returncode, 1, proc.stderr[-3000:])
    self.assertEqual(proc.stdout, "")  # Nothing scored, no JSON line.
    self.assertLen(proc.stderr.strip().splitlines(), 1, proc.stderr)
    self.assertRegex(proc.stderr.strip(), message)

  def test_folder_of_other_files(self):
    self.assert_refused("other_folder", r"^evaluate: --report_dir=.*other "
                        "exists and holds other files than a previous "
                        "per-class report")
    self.assertEqual(os.listdir(self.other), ["notes.txt"])

  def test_nothing_else_written(self):
    self.assertEqual(sorted(os.listdir(self.root)),
                     ["a_file", "digits", "other", "reports"])


if __name__ == "__main__":
  absltest.main()
