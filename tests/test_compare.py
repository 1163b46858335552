"""Tests of rank4class_tf.study.compare and pipelines.compare_runs."""

import json
import math
import os
import shutil
import tempfile

import numpy as np
import re

import pytest
import tensorflow as tf
from scipy import stats as scipy_stats

from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.ranking import calibration
from rank4class_tf.study import compare
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training
import helpers
from test_study_hostile import image_folder


def write_run(root, name, classes=("a", "b"), **settings):
  """A run folder's config.json and classes.json (no training)."""
  folder = os.path.join(root, name)
  os.makedirs(folder)
  config = config_lib.TrainConfig.create(model_dir=folder, **settings)
  with open(os.path.join(folder, run_dir_lib.CONFIG_FILE), "w") as f:
    f.write(config.to_json())
  with open(os.path.join(folder, run_dir_lib.CLASSES_FILE), "w") as f:
    json.dump(list(classes), f)
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

  def test_runs_of_other_data_are_other_groups(self):
    # Issue 58 case 13: two data folders were one setting, their seeds
    # averaged into one interval.
    root = tempfile.mkdtemp()
    dirs = [write_run(root, "a0", dataset="text_files", data_dir="/d/a",
                      seed=0),
            write_run(root, "b1", dataset="text_files", data_dir="/d/b/",
                      seed=1),
            write_run(root, "a1", dataset="text_files", data_dir="/d/a/",
                      seed=1)]
    groups = compare.group_runs(dirs)
    self.assertEqual([(g.label, g.model_dirs) for g in groups],
                     [("data_dir=/d/a", [dirs[0], dirs[2]]),
                      ("data_dir=/d/b", [dirs[1]])])

  def test_settings_that_change_nothing_part_no_runs(self):
    # Seed 0 trained before --split_rule and --float32_layers existed.
    root = tempfile.mkdtemp()
    dirs = [write_run(root, "s0", seed=0, split_rule="by_format",
                      float32_layers=False),
            write_run(root, "s1", seed=1)]
    self.assertEqual([(g.label, g.seeds) for g in compare.group_runs(dirs)],
                     [("all runs", [0, 1])])
    # Where the rule cuts another split (a user's text files), they differ.
    dirs = [write_run(root, "t0", seed=0, split_rule="by_format",
                      dataset="text_files", data_dir="/d"),
            write_run(root, "t1", seed=1, dataset="text_files",
                      data_dir="/d")]
    self.assertEqual([g.label for g in compare.group_runs(dirs)],
                     ["split_rule=by_format", "split_rule=seed_file_record"])

  def test_same_data_folder_with_other_classes_is_refused(self):
    # The files under one --data_dir changed between two seeds' trainings.
    root = tempfile.mkdtemp()
    dirs = [write_run(root, "s0", classes=("anger", "joy"), seed=0,
                      dataset="text_files", data_dir="/d/a"),
            write_run(root, "s1", classes=("joy", "zzz"), seed=1,
                      dataset="text_files", data_dir="/d/a")]
    with self.assertRaisesRegex(ValueError, "^" + re.escape(
        f"`runs`: {dirs[0]} and {dirs[1]} have the same settings but other "
        f"classes (2 and 2 classes; only {dirs[0]} has anger; only {dirs[1]} "
        "has zzz): the data of `dataset`=text_files (`data_dir`=/d/a) "
        "changed between their trainings; compare runs trained on the same "
        "data.") + "$"):
      compare.group_runs(dirs)

  def test_unfinished_run_is_refused_before_scoring(self):
    # No final checkpoint (stopped, diverged): not scored, not averaged.
    root = tempfile.mkdtemp()
    dirs = [write_run(root, "s0", seed=0), write_run(root, "s1", seed=1)]
    with self.assertRaisesRegex(ValueError, "^" + re.escape(
        f"`runs`: 2 run(s) did not finish training (diverged, stopped, or "
        f"still running: no final checkpoint, or its backup remains): "
        f"{dirs[0]}, {dirs[1]}; a best checkpoint of an unfinished run is "
        "no result: leave it out of `runs`, or finish it.") + "$"):
      compare.evaluate_groups(compare.group_runs(dirs), ["mrr"])

  def test_same_settings_and_seed_is_refused(self):
    root = tempfile.mkdtemp()
    dirs = [write_run(root, "a", loss="mse"), write_run(root, "b", loss="mse")]
    with self.assertRaisesRegex(ValueError, "are the same run settings and "
                                "seed 42"):
      compare.group_runs(dirs)


@pytest.mark.slow
class FoldersTest(tf.test.TestCase):
  """`flag_utils.folders`: the run folders of --runs / --pseudo_runs."""

  def test_patterns_expand_sorted_and_entries_stay(self):
    from pipelines import flag_utils  # pylint: disable=g-import-not-at-top
    root = tempfile.mkdtemp()
    for name in ("r.seed1", "r.seed0", "other"):
      os.makedirs(os.path.join(root, name))
    self.assertEqual(
        flag_utils.folders("runs", [f"{root}/other", f"{root}/r.seed*"]),
        [f"{root}/other", f"{root}/r.seed0", f"{root}/r.seed1"])
    with self.assertRaisesRegex(ValueError, r"^--pseudo_runs: '.*/x\.\*' "
                                r"matches no folder\.$"):
      flag_utils.folders("pseudo_runs", [f"{root}/r.seed0", f"{root}/x.*"])
    with self.assertRaisesRegex(ValueError, r"^--runs must name at least "
                                r"one run folder\.$"):
      flag_utils.folders("runs", [])


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
          exported_ranker.load_config(model_dir), data, ("test",))["test"]
      top1.append(np.mean(np.argmax(scores, 1) == labels))
    self.assertIn(f"{np.mean(top1):.4f} ± ", lines[2])
    # ECE before and after each run's temperature, fitted on validation.
    ece, calibrated = [], []
    for model_dir in dirs:
      scored = training.checkpoint_scores(exported_ranker.load_config(model_dir),
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


def poison_best_checkpoint(model_dir):
  """Writes NaN into every weight of a run's best checkpoint (a run whose
  weights diverged while its losses still looked finite)."""
  config = exported_ranker.load_config(model_dir).replace(model_dir=model_dir)
  data = builders.load_data(config)
  model = builders.build_pipeline(builders.resolve_defaults(config),
                                  data).model_builder.build()
  best = run_dir_lib.RunDir(model_dir).best_checkpoint()
  model.load_weights(best).expect_partial()
  for weight in model.weights:
    if weight.dtype.is_floating:
      weight.assign(tf.fill(weight.shape, float("nan")))
  model.save_weights(best)


def set_seed(model_dir, seed):
  path = os.path.join(model_dir, run_dir_lib.CONFIG_FILE)
  with open(path) as f:
    config = json.load(f)
  config["trainer"]["seed"] = seed
  with open(path, "w") as f:
    json.dump(config, f)


@pytest.mark.slow
class ImageFolderRunsTest(tf.test.TestCase):
  """Issue 58 case 13 on a streamed data set (an image folder): its run is
  scored (it was `KeyError: 'test'`); a diverged copy of it is refused,
  never averaged as a result (`GroupTest` refuses unfinished runs)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    data_dir = image_folder(os.path.join(cls.root, "images"))
    cls.model_dir = os.path.join(cls.root, "runs", "seed0")
    training.train(config_lib.TrainConfig.create(
        dataset="image_folder", data_dir=data_dir, image_size=32,
        encoder="small_cnn", train_steps=20, eval_every=10, batch_size=16,
        learning_rate=3e-3, seed=0, model_dir=cls.model_dir))

  def test_streamed_run_is_scored(self):
    out = helpers.run_module("pipelines.compare_runs",
                             f"--runs={self.model_dir}",
                             "--metrics=top1_accuracy,mrr")
    exported = helpers.evaluate(self.model_dir, "test")  # Its best export.
    self.assertEqual(exported["num_examples"], 9)
    self.assertEqual(out.stdout.strip().splitlines()[2],
                     f"| all runs | 0 | {exported['top1_accuracy']:.4f} ± "
                     f"0.0000 | {exported['mrr']:.4f} ± 0.0000 |")

  def test_diverged_run_is_refused(self):
    diverged = os.path.join(os.path.dirname(self.model_dir), "diverged")
    shutil.copytree(self.model_dir, diverged)
    set_seed(diverged, 1)
    poison_best_checkpoint(diverged)
    bad = helpers.run_module("pipelines.compare_runs",
                             f"--runs={self.model_dir},{diverged}",
                             check=False)
    self.assertEqual(bad.returncode, 1)
    self.assertEqual(bad.stdout, "")
    self.assertEqual(bad.stderr.strip().splitlines()[-1], (
        "compare_runs: --runs: the best checkpoint of 1 run(s) gives "
        f"non-finite scores (diverged weights): {diverged}; their metrics "
        "are no result: leave them out of --runs."))
