"""End-to-end multi-label runs: GoEmotions-format files, Two-way, MulCon.

The binaries run as users run them (docs/multilabel.md's commands with fewer steps),
on a tiny multi-label fixture in GoEmotions' format with the `tiny` BERT
architecture.
"""

import json
import os
import subprocess
import sys
import tempfile

import pytest
import numpy as np
import tensorflow as tf

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import trainer as training
import helpers

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

REPO = helpers.REPO
CLASSES = ("joy", "anger", "surprise", "neutral")
ROWS = [
    ("I love this so much", "0"), ("wow what a great surprise", "0,2"),
    ("this is awful", "1"), ("no way, that is outrageous", "1,2"),
    ("the bus comes at nine", "3"), ("oh, I did not expect that", "2"),
    ("so happy and amazed", "0,2"), ("I hate waiting", "1"),
    ("it is a table", "3"), ("thank you, amazing", "0"),
    ("stop doing that, unbelievable", "1,2"), ("see the list below", "3"),
]



run = helpers.run_module


def goemotions_fixture(rows=ROWS):
  folder = tempfile.mkdtemp()
  with open(os.path.join(folder, "emotions.txt"), "w") as f:
    f.write("\n".join(CLASSES) + "\n")
  lines = [f"{text}\t{labels}\tid{i}" for i, (text, labels) in
           enumerate(rows)]
  for name in ("train.tsv", "dev.tsv", "test.tsv"):
    with open(os.path.join(folder, name), "w") as f:
      f.write("\n".join(lines) + "\n")
  return folder


ML_METRICS = "map_class,map_sample,cf1,of1"


class MulConRunTest(tf.test.TestCase):
  """label_attention + BCE, then BCE + LLCL: MulCon's two steps."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = goemotions_fixture()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), "mulcon")
    run("pipelines.train", "--dataset=goemotions_multilabel",
        f"--data_dir={cls.data_dir}", "--encoder=bert", "--encoder_size=tiny",
        "--loss=sigmoid_cross_entropy", "--interaction=label_attention",
        "--label_dim=16", "--projection_dim=8", "--contrastive_weight=1.0",
        "--contrastive_start_step=2", "--contrastive_learning_rate=1e-4",
        "--batch_size=6", "--max_seq_length=12", "--train_steps=4",
        "--eval_every=2", f"--metrics={ML_METRICS}",
        "--best_metric=map_class", f"--model_dir={cls.model_dir}")

  def test_second_step_logged_the_contrastive_loss(self):
    # TensorBoard's train events hold `epoch_contrastive_loss` for both
    # epochs: 0 weight (still computed) then the second step.
    config = exported_ranker.load_config(self.model_dir)
    self.assertEqual(config.loss.contrastive_start_step, 2)
    self.assertEqual(config.model.interaction, "label_attention")
    tags = set()
    train_dir = os.path.join(self.model_dir, "train")
    for name in os.listdir(train_dir):
      for event in tf.compat.v1.train.summary_iterator(
          os.path.join(train_dir, name)):
        tags.update(v.tag for v in event.summary.value)
    self.assertIn("epoch_contrastive_loss", tags)
    self.assertIn("epoch_map_class", tags)

  def test_evaluate_prints_multilabel_metrics(self):
    proc = run("pipelines.evaluate", f"--model_dir={self.model_dir}",
               f"--metrics={ML_METRICS},cf1_top3,precision@2",
               "--threshold=0.3")
    results = json.loads(proc.stdout.strip().split("\n")[-1])
    calibration_keys = {"nll", "ece", "brier", "calibrated_nll",
                        "calibrated_ece", "calibrated_brier"}
    self.assertEqual(
        set(results) - {"num_examples", "split", "export", "threshold"} -
        calibration_keys,
        set(ML_METRICS.split(",")) | {"cf1_top3", "precision@2"})
    # The exported model's scores give the same numbers through the
    # library's metrics.
    ranker = exported_ranker.ExportedRanker(self.model_dir)
    texts = np.array([t for t, _ in ROWS], object)
    labels = np.zeros([len(ROWS), 4], np.float32)
    for i, (_, ids) in enumerate(ROWS):
      labels[i, [int(x) for x in ids.split(",")]] = 1.
    want = metrics.evaluate_scores(labels, ranker.scores(texts),
                                   ML_METRICS.split(","), threshold=0.3)
    self.assertEqual(results["threshold"], 0.3)
    for name, value in want.items():
      self.assertAlmostEqual(results[name], value, places=5)

  def test_bad_metric_name_or_threshold_is_one_line(self):
    proc = run("pipelines.evaluate", f"--model_dir={self.model_dir}",
               "--metrics=map_klass", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertLen(proc.stderr.strip().split("\n"), 1)
    self.assertIn("evaluate: --metrics: Unknown metric 'map_klass'",
                  proc.stderr)
    with self.assertRaisesRegex(ValueError, r"`threshold`=1.5 must be in"):
      helpers.evaluate(self.model_dir, metric_names=["cf1"], threshold=1.5)


class TwoWayRunTest(tf.test.TestCase):

  def test_two_way_trains_and_exports(self):
    # In-process (the binary's path is the MulCon run's): docs/multilabel.md's
    # two_way command with fewer steps.
    model_dir = os.path.join(tempfile.mkdtemp(), "two_way")
    training.train(config_lib.TrainConfig.create(
        dataset="goemotions_multilabel", data_dir=goemotions_fixture(),
        encoder="bert", encoder_size="tiny", loss="two_way",
        two_way_positive_temperature=2., batch_size=6, max_seq_length=12,
        train_steps=2, eval_every=2, metrics=("map_class", "ndcg@3"),
        best_metric="map_class", model_dir=model_dir))
    config = exported_ranker.load_config(model_dir)
    self.assertEqual(losses.config_kwargs(config.loss, 4, 0),
                     {"positive_temperature": 2.0,
                      "negative_temperature": 1.0})
    ranker = exported_ranker.ExportedRanker(model_dir)
    out = ranker.outputs(np.array(["so happy", "awful"], object))
    scores = out["scores"]
    self.assertEqual(scores.shape, (2, 4))
    self.assertTrue(np.all(np.isfinite(scores)))
    # Multi-label probabilities: per class, sigmoid(a s + b), in [0, 1].
    fitted = ranker.calibration
    self.assertEqual(fitted.kind, "platt")
    probabilities = out["probabilities"]
    self.assertTrue(np.all((probabilities >= 0) & (probabilities <= 1)))
    self.assertAllClose(probabilities, 1 / (1 + np.exp(
        -(fitted.scale * scores + fitted.shift))), atol=1e-5)


class MultiLabelFaultsTest(tf.test.TestCase):

  def test_label_outside_the_class_list(self):
    folder = goemotions_fixture(ROWS[:3] + [("a new emotion", "0,4")])
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    proc = run("pipelines.train", "--dataset=goemotions_multilabel",
               f"--data_dir={folder}", "--encoder=bert",
               "--encoder_size=tiny", "--loss=two_way",
               f"--model_dir={model_dir}", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(
        proc.stderr.strip(),
        f"train: {os.path.join(folder, 'train.tsv')}:4: label '4' is not a "
        "class (4 classes).")
    self.assertFalse(os.path.exists(model_dir))

  def test_config_checks(self):
    base = dict(model_dir="/tmp/x")
    cases = [
        (dict(contrastive_weight=1.),
         r"^`contrastive_weight` > 0 \(MulCon's label-level contrastive "
         r"loss\) needs `interaction`=label_attention\.$"),
        (dict(interaction="label_attention", encoder="mlp"),
         "`encoder`='mlp' has none"),
        (dict(interaction="label_attention", label_dim=10, label_heads=4),
         "`label_dim`=10 must be a multiple of `label_heads`=4"),
        (dict(interaction="label_attention", contrastive_weight=1.,
              contrastive_start_step=150, eval_every=100),
         "`contrastive_start_step`=150 must be a multiple"),
        (dict(interaction="label_attention", contrastive_weight=-1.),
         "`contrastive_weight`=-1.0 must be >= 0"),
        (dict(metrics=("map_class",), best_metric="map_class",
              strategy="mirrored"),
         "map_class needs every score of the validation split"),
        (dict(two_way_positive_temperature=0.), "must be > 0"),
    ]
    for overrides, message in cases:
      with self.assertRaisesRegex(ValueError, message):
        checks.validate(
            config_lib.TrainConfig.create(**dict(base, **overrides)))


if __name__ == "__main__":
  tf.test.main()
