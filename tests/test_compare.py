"""Tests of rank4class_tf.study.compare and pipelines.compare_runs."""

import math
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats as scipy_stats

from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving
from rank4class_tf.ranking import calibration
from rank4class_tf.study import compare
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training
import helpers


def write_run(root, name, **settings):
  folder = os.path.join(root, name)
  os.makedirs(folder)
  config = config_lib.TrainConfig.create(model_dir=folder, **settings)
  with open(os.path.join(folder, run_dir_lib.CONFIG_FILE), "w") as f:
    f.write(config.to_json())
  return folder


class SeedIntervalTest(tf.test.TestCase):

  def test_student_t_interval(self):
    values = [0.61, 0.64, 0.60, 0.66]
    mean, std, low, high = compare.seed_interval(values)
    self.assertAllClose(mean, np.mean(values))
    self.assertAllClose(std, np.std(values, ddof=1))
    # t_{0.975, 3} = 3.1824.
    self.assertAllClose(high - mean, 3.182446 * std / 2.0, atol=1e-6)
    self.assertAllClose(mean - low, high - mean)
    low2, high2 = scipy_stats.t.interval(0.95, 3, loc=mean,
                                         scale=std / math.sqrt(4))
    self.assertAllClose([low, high], [low2, high2])

  def test_one_seed_has_no_interval(self):
    mean, std, low, high = compare.seed_interval([0.5])
    self.assertEqual((mean, std), (0.5, 0.0))
    self.assertTrue(math.isnan(low) and math.isnan(high))


class GroupTest(tf.test.TestCase):

  def test_groups_by_settings_but_seed(self):
    root = tempfile.mkdtemp()
    dirs = [write_run(root, "a0", loss="mse", seed=0),
            write_run(root, "b0", loss="softmax", seed=0, export=False),
            write_run(root, "a1", loss="mse", seed=1),
            write_run(root, "b1", loss="softmax", seed=1)]
    groups = compare.group_runs(dirs)
    self.assertEqual([g.label for g in groups], ["loss=mse", "loss=softmax"])
    self.assertEqual(groups[0].model_dirs, [dirs[0], dirs[2]])
    self.assertEqual(groups[1].seeds, [0, 1])
    groups[0].values = {"mrr": [0.5, 0.7]}
    groups[1].values = {"mrr": [0.6, 0.6]}
    table = compare.markdown(groups, ["mrr"])
    self.assertEqual(table[0], "| runs | seeds | mrr |")
    # mean 0.6, std 0.1414, t_{0.975,1} = 12.706: +-1.2706.
    self.assertEqual(table[2], "| loss=mse | 0,1 | 0.6000 ± 0.1414 "
                     "[-0.6706, 1.8706] |")
    self.assertEqual(table[3], "| loss=softmax | 0,1 | 0.6000 ± 0.0000 "
                     "[0.6000, 0.6000] |")

  def test_same_settings_and_seed_is_refused(self):
    root = tempfile.mkdtemp()
    dirs = [write_run(root, "a", loss="mse"), write_run(root, "b", loss="mse")]
    with self.assertRaisesRegex(ValueError, "are the same run settings and "
                                "seed 42"):
      compare.group_runs(dirs)


@pytest.mark.slow
class CompareRunsBinaryTest(tf.test.TestCase):

  def test_two_seeds_of_digits(self):
    root = tempfile.mkdtemp()
    dirs = []
    for seed in (0, 1):
      config = config_lib.TrainConfig.create(
          dataset="digits", train_steps=20, eval_every=10, seed=seed,
          export=False, model_dir=os.path.join(root, f"run{seed}"))
      training.train(config)
      dirs.append(config.trainer.model_dir)
    result = helpers.run_module("pipelines.compare_runs",
                                f"--runs={root}/run*",
                                "--metrics=top1_accuracy,mrr,ece,"
                                "calibrated_ece")
    lines = result.stdout.strip().splitlines()
    self.assertEqual(lines[0], "| runs | seeds | top1_accuracy | mrr | ece | "
                     "calibrated_ece |")
    self.assertTrue(lines[2].startswith("| all runs | 0,1 | "), lines[2])
    # The row's means are those of each run's best checkpoint.
    data = builders.load_data(config)
    top1 = []
    for model_dir in dirs:
      labels, scores = training.checkpoint_scores(
          serving.load_config(model_dir), data, ("test",))["test"]
      top1.append(np.mean(np.argmax(scores, 1) == labels))
    self.assertIn(f"{np.mean(top1):.4f} ± ", lines[2])
    # ECE before and after each run's temperature, fitted on validation.
    ece, calibrated = [], []
    for model_dir in dirs:
      scored = training.checkpoint_scores(serving.load_config(model_dir),
                                          data, ("validation", "test"))
      fitted = calibration.fit(scored["validation"][1],
                               scored["validation"][0])
      labels, scores = scored["test"]
      ece.append(calibration.ece(calibration.softmax(scores), labels))
      calibrated.append(calibration.ece(fitted.probabilities(scores), labels))
    self.assertIn(f"| {np.mean(ece):.4f} ± ", lines[2])
    self.assertIn(f"| {np.mean(calibrated):.4f} ± ", lines[2])
    bad = helpers.run_module("pipelines.compare_runs",
                             f"--runs={root}/none*", check=False)
    self.assertEqual(bad.returncode, 1)
    self.assertEqual(bad.stderr.strip().splitlines()[-1],
                     f"compare_runs: --runs: '{root}/none*' matches no "
                     "folder.")
