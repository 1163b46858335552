"""Tests of rank4class_tf.study.runner (with its settings and checks,
`study/settings.py`) and study_report without training.

The report is computed from records and per-instance arrays written here by
hand, so selection, tables and p-values have known answers; the end-to-end
grid is in test_study_pipeline.py.
"""

import csv
import glob
import json
import os
import re
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf import config as config_lib
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_tables
from rank4class_tf.study import report as study_report
from rank4class_tf.study import runner as study
from rank4class_tf.study import settings as study_settings
from rank4class_tf.study import summary as study_summary
from rank4class_tf.study import tables as study_tables

METRICS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")
N = 120  # Test instances.


def base_config(**kwargs):
  return config_lib.TrainConfig.create(model_dir="unused", train_steps=10,
                                eval_every=5, **kwargs)


def fake_run(study_dir, run, hits, validation_top1, val_offset=0.):
  """Writes a finished run whose true class is ranked 1st where `hits`, else
  2nd; returns its record."""
  hits = np.asarray(hits, np.float64)
  ranks = np.where(hits > 0, 1., 2.)
  arrays = {"top1_accuracy": hits, "top5_accuracy": np.ones(N),
            "ndcg@5": 1. / np.log2(1. + ranks), "mrr": 1. / ranks,
            "softmax_ce": np.log(ranks) + 0.1, "labels": np.zeros(N, int)}
  folder = study_folder.run_dir(study_dir, run)
  os.makedirs(folder)
  np.savez(os.path.join(folder, study_folder.TEST_FILE), **arrays)
  test = {m: float(arrays[m].mean()) for m in METRICS}
  validation = dict(test, top1_accuracy=validation_top1 + val_offset)
  mrr = test["mrr"]
  record = dict(
      run=run.name, loss=run.loss, interaction=run.interaction,
      learning_rate=run.learning_rate, mlp_units=run.mlp_units,
      seed=run.seed, validation=validation, test=test, num_test=N,
      test_softmax_ce=float(arrays["softmax_ce"].mean()),
      test_neg_log_mrr=-np.log(mrr), test_neg_log_ndcg=-np.log(test["ndcg@5"]),
      ce_bound_holds=True, best_step=10, train_seconds=1.5,
      resumed_at_step=0,
      validation_curve={"top1_accuracy": [[5, 0.5], [10, validation_top1]]})
  with open(os.path.join(folder, study_folder.RESULT_FILE), "w") as f:
    json.dump(record, f)
  return record


class GridTest(tf.test.TestCase, parameterized.TestCase):

  def test_runs_and_names(self):
    grid = study_grid.Grid(losses=("softmax", "mse"), interactions=("dot",
                                                               "lc_mlp"),
                      seeds=(0, 1), learning_rates=(1e-3, 3e-05),
                      mlp_units=(64, 128))
    runs = grid.runs()
    # dot has no width: 2 losses x (1 + 2 widths) x 2 rates x 2 seeds.
    self.assertLen(runs, 24)
    self.assertLen({r.name for r in runs}, 24)
    self.assertEqual(runs[0].name, "softmax.dot.lr0.001.seed0")
    self.assertIn("mse.lc_mlp.lr3e-05.u128.seed1", [r.name for r in runs])
    self.assertEqual([r.seed for r in runs[:12]], [0] * 12)

  def test_paper_grid(self):
    self.assertLen(study_grid.PAPER_LEARNING_RATES, 13)
    self.assertAllClose(study_grid.PAPER_LEARNING_RATES[:3], [1e-7, 3e-7, 1e-6])
    self.assertAllClose(study_grid.PAPER_LEARNING_RATES[-2:], [3e-2, 0.1])
    self.assertLen(study_grid.Grid().runs(), 5 * 3 * 3)

  @parameterized.parameters(
      (dict(losses=("softmax", "hinge")), "`losses`: 'hinge' is not valid"),
      (dict(interactions=("bilinear",)), "`interactions`: 'bilinear'"),
      (dict(losses=()), "`losses` is empty"),
      (dict(seeds=(1, 1)), "`seeds` repeats"),
      (dict(learning_rates=(0.,)), "`learning_rates`: 0.0 must be > 0"),
      (dict(mlp_units=(-4,)), "`mlp_units`: -4 must be > 0"))
  def test_bad_grid(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, re.escape(message)):
      study_grid.Grid(**kwargs).validate()

  def test_sodeep_loss_names_its_sorter(self):
    grid = study_grid.Grid(losses=("mse", "sodeep_spearman@pairwise",
                              "sodeep_spearman"), interactions=("dot",),
                      seeds=(0,))
    grid.validate()
    runs = grid.runs()
    self.assertEqual([r.name for r in runs], [
        "mse.dot.lr0.001.seed0", "sodeep_spearman@pairwise.dot.lr0.001.seed0",
        "sodeep_spearman.dot.lr0.001.seed0"])
    self.assertEqual(runs[1].cell, ("sodeep_spearman@pairwise", "dot"))
    base = base_config(sorter="handcrafted")
    configs = [study_settings.run_config(base, r, "dir") for r in runs]
    # The run trains the plain loss with the named sorter; the others keep
    # the shared --sorter.
    self.assertEqual([(c.loss.name, c.loss.sorter) for c in configs], [
        ("mse", "handcrafted"), ("sodeep_spearman", "pairwise"),
        ("sodeep_spearman", "handcrafted")])
    self.assertEqual(study_grid.split_loss("sodeep_map@lstm"), ("sodeep_map",
                                                           "lstm"))
    self.assertEqual(study_grid.split_loss("softmax"), ("softmax", None))

  @parameterized.parameters(
      ("mse@lstm", "`losses`: 'mse@lstm' names a sorter, but only the SoDeep "
       "losses take one (sodeep_spearman, sodeep_map, sodeep_recall)."),
      ("sodeep_map@bubble", "`losses`: 'sodeep_map@bubble': unknown sorter "
       "'bubble'; choose from: handcrafted, handcrafted_adaptive, lstm, cnn, "
       "cnn_reference, "
       "pairwise."),
      ("hinge@lstm", "`losses`: 'hinge@lstm' is not valid"))
  def test_bad_sorter_label(self, label, message):
    with self.assertRaisesRegex(ValueError, re.escape(message)):
      study_grid.Grid(losses=(label,)).validate()

  def test_sorter_without_shipped_weights_writes_nothing(self):
    # digits has 10 classes; no cnn sorter ships for d = 10.
    folder = os.path.join(tempfile.mkdtemp(), "study")
    grid = study_grid.Grid(losses=("sodeep_spearman@cnn",), interactions=("dot",),
                      seeds=(0,))
    with self.assertRaisesRegex(ValueError, "No trained 'cnn' sorter for "
                                "d=10"):
      study.run_study(folder, base_config(dataset="digits"), grid)
    self.assertFalse(os.path.exists(folder))

  def test_union_keeps_first_seen_order(self):
    a = study_grid.Grid(losses=("mse", "softmax"), seeds=(2,))
    b = study_grid.Grid(losses=("softmax", "approx_ndcg"), seeds=(0, 2))
    union = a.union(b)
    self.assertEqual(union.losses, ("mse", "softmax", "approx_ndcg"))
    self.assertEqual(union.seeds, (2, 0))


class TimeLeftTest(tf.test.TestCase):
  """The progress line's estimate counts whole runs only: a run resumed
  from its backup took this worker only its end (issue 61's study, resumed
  at step 12,000 of 14,000, once printed "about 2 h 02 min left" for some
  10 hours of runs)."""

  def test_only_runs_trained_from_their_first_step_are_timed(self):
    whole = study._whole_run_seconds
    self.assertEqual(whole({"resumed_at_step": 0, "train_seconds": 100.0},
                           130.0), 130.0)
    # Trained before, only evaluated here: its recorded training time.
    self.assertEqual(whole({"resumed_at_step": 0, "train_seconds": 4000.0},
                           12.0), 4000.0)
    self.assertIsNone(whole({"resumed_at_step": 12000,
                             "train_seconds": 875.4}, 921.0))
    # Trained, its earlier record gone: no training time to go by.
    self.assertIsNone(whole({"resumed_at_step": 0, "train_seconds": None},
                            15.0))

  def test_estimate(self):
    self.assertEqual(study._time_left([3600.0, 4200.0], 8),
                     "about 8 h 40 min left for 8 planned run(s)")
    self.assertEqual(study._time_left([90.0], 1),
                     "about 1 min 30 s left for 1 planned run(s)")
    self.assertEqual(study._time_left([], 0),
                     "about 0 s left for 0 planned run(s)")
    self.assertEqual(study._time_left([], 3),
                     "3 planned run(s) left, their time unknown until this "
                     "worker trains one from its first step")


class OpenStudyTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = os.path.join(tempfile.mkdtemp(), "study")
    self.grid = study_grid.Grid(losses=("softmax",), interactions=("dot",),
                           seeds=(0,))

  def test_creates_then_grows(self):
    study_settings.open_study(self.dir, base_config(), self.grid)
    # A grid holding the study's grows it.
    whole = study_settings.open_study(self.dir, base_config(),
                             study_grid.Grid(losses=("mse", "softmax"),
                                             interactions=("dot",),
                                             seeds=(1, 0)))
    self.assertEqual(whole.losses, ("softmax", "mse"))
    self.assertEqual(whole.seeds, (0, 1))
    shared, grid = study_folder.load_study(self.dir)
    self.assertEqual(grid, whole)
    self.assertEqual(shared["train_steps"], 10)
    self.assertNotIn("loss", shared)
    # One that lacks some of its runs would leave them to nobody.
    with self.assertRaisesRegex(
        ValueError, r"^`losses`=mse and `seeds`=1 differ from the study in "
        r".* \(losses=softmax,mse; seeds=0,1\): with it the study would "
        r"hold 3 run\(s\) this grid lacks \(softmax.dot.lr0.001.seed0, "
        r"mse.dot.lr0.001.seed0, softmax.dot.lr0.001.seed1\), which"):
      study_settings.open_study(self.dir, base_config(), study_grid.Grid(
          losses=("mse",), interactions=("dot",), seeds=(1,)))
    self.assertEqual(study_folder.load_study(self.dir)[1], whole)

  def test_changed_shared_flag_is_refused_and_nothing_changes(self):
    study_settings.open_study(self.dir, base_config(), self.grid)
    path = os.path.join(self.dir, study_folder.STUDY_FILE)
    with open(path) as f:
      before = f.read()
    with self.assertRaisesRegex(
        ValueError, r"^`train_steps`=20 differs from the study in .*"
        r"\(train_steps=10\)"):
      study_settings.open_study(self.dir, config_lib.TrainConfig.create(
          model_dir="x", train_steps=20, eval_every=5), self.grid)
    with open(path) as f:
      self.assertEqual(f.read(), before)

  def test_study_older_than_a_setting_takes_its_default(self):
    # A study begun before --freeze_encoder and --pooling existed.
    study_settings.open_study(self.dir, base_config(), self.grid)
    path = os.path.join(self.dir, study_folder.STUDY_FILE)
    with open(path) as f:
      saved = json.load(f)
    for key in ("freeze_encoder", "pooling", "feature_cache"):
      del saved["shared"][key]
    with open(path, "w") as f:
      json.dump(saved, f)
    study_settings.open_study(self.dir, base_config(), self.grid)  # Same settings.
    with open(path) as f:
      saved = json.load(f)
    with open(path, "w") as f:
      del saved["shared"]["export"]
      json.dump(saved, f)
    with self.assertRaisesRegex(ValueError, r"^`export`=False differs from "
                                r"the study in .*\(export=True\)"):
      study_settings.open_study(self.dir, base_config(export=False), self.grid)

  def test_study_older_than_bucketing_and_bfloat16(self):
    # A study begun before issue 34: no length_bucketing (it ran without)
    # and a boolean mixed_precision. A digits study goes on with today's
    # defaults (bucketing changes text only); a text study must say
    # --nolength_bucketing to go on as it began.
    for dataset, refused in (("digits", False), ("goemotions", True)):
      folder = os.path.join(tempfile.mkdtemp(), dataset)
      kwargs = dict(dataset=dataset)
      if dataset == "goemotions":
        kwargs.update(encoder="bert")
      study_settings.open_study(folder, base_config(**kwargs), self.grid)
      path = os.path.join(folder, study_folder.STUDY_FILE)
      with open(path) as f:
        saved = json.load(f)
      del saved["shared"]["length_bucketing"]
      saved["shared"]["mixed_precision"] = False
      with open(path, "w") as f:
        json.dump(saved, f)
      if refused:
        with self.assertRaisesRegex(
            ValueError, r"^`length_bucketing`=True differs from the study "
            r"in .*\(length_bucketing=False\)"):
          study_settings.open_study(folder, base_config(**kwargs), self.grid)
        kwargs.update(length_bucketing=False)
      study_settings.open_study(folder, base_config(**kwargs), self.grid)

  def test_folder_with_other_files_is_refused(self):
    os.makedirs(self.dir)
    open(os.path.join(self.dir, "notes.txt"), "w").close()
    with self.assertRaisesRegex(ValueError, "not empty and holds no "
                                "study.json"):
      study_settings.open_study(self.dir, base_config(), self.grid)
    self.assertEqual(os.listdir(self.dir), ["notes.txt"])

  def test_bad_run_config_writes_nothing(self):
    grid = study_grid.Grid(losses=("softmax",), interactions=("label_attention",),
                      seeds=(0,))
    with self.assertRaisesRegex(ValueError, "`interaction`=label_attention"):
      study_settings.open_study(self.dir, base_config(encoder="mlp"), grid)
    self.assertFalse(os.path.exists(self.dir))

  def test_multilabel_dataset_is_refused(self):
    with self.assertRaisesRegex(ValueError, "multi-label"):
      study_settings.open_study(self.dir, base_config(dataset="goemotions_multilabel",
                                             encoder="bert"), self.grid)


class ReportTest(tf.test.TestCase):
  """A hand-made study: 3 cells x 2 seeds x 2 learning rates."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.dir = os.path.join(tempfile.mkdtemp(), "study")
    grid = study_grid.Grid(losses=("softmax", "approx_ndcg"),
                      interactions=("dot", "lc_mlp"), seeds=(0, 1),
                      learning_rates=(1e-3, 1e-2), mlp_units=(8,))
    study_settings.open_study(cls.dir, base_config(), grid)
    half = np.tile([1., 0.], N // 2)  # Baseline: right on every other one.
    rng = np.random.default_rng(0)
    cls.records = []
    for run in grid.runs():
      chosen_rate = 1e-3 if run.seed == 0 else 1e-2
      val = 0.9 if run.learning_rate == chosen_rate else 0.5
      if run.cell == ("softmax", "dot"):
        hits = half
      elif run.cell == ("approx_ndcg", "dot"):
        hits = half  # The same model as the baseline: p = 1.
      elif run.cell == ("softmax", "lc_mlp"):
        hits = np.ones(N)  # Right wherever the baseline misses.
      else:
        hits = (rng.random(N) < 0.5).astype(float)
      if run.learning_rate != chosen_rate:
        hits = np.zeros(N)  # Never chosen: must not leak into the tables.
      cls.records.append(fake_run(cls.dir, run, hits, val))
    cls.paths = study_report.write_report(cls.dir, num_samples=10_000)
    with open(cls.paths["tables"]) as f:
      cls.tables = f.read()
    with open(cls.paths["results"]) as f:
      cls.rows = list(csv.DictReader(f))

  def cell_text(self, metric, interaction, loss_column):
    """The text of a cell of the main table."""
    titles = {"top1_accuracy": "Top-1", "mrr": "MRR"}
    header = next(l for l in self.tables.splitlines()
                  if l.startswith("| metric | interaction |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    for line in self.tables.splitlines():
      cells = [c.strip() for c in line.strip("|").split("|")]
      if cells[:2] == [titles[metric], interaction]:
        return cells[columns.index(loss_column)]
    raise AssertionError(f"no row {metric} {interaction}")

  def test_results_csv_has_every_run_and_the_selection(self):
    self.assertLen(self.rows, 16)
    selected = [r["run"] for r in self.rows if r["selected"] == "True"]
    self.assertLen(selected, 8)  # One per (loss, interaction, seed).
    for name in selected:
      self.assertTrue(("lr0.001" in name and "seed0" in name) or
                      ("lr0.01" in name and "seed1" in name), name)
    row = self.rows[0]
    for column in ("learning_rate", "mlp_units", "seed", "best_step",
                   "validation_top1_accuracy", "test_ndcg@5",
                   "test_softmax_ce", "test_neg_log_mrr", "ce_bound_holds",
                   "train_seconds", "dataset", "train_steps", "batch_size"):
      self.assertIn(column, row)

  def test_table_recomputed_from_results_csv(self):
    # Independent of the report code: choose on validation, mean and sample
    # std over seeds of the chosen rows' test metrics.
    for loss, title in (("softmax", "Softmax CE"),
                        ("approx_ndcg", "ApproxNDCG")):
      for interaction, row_title in (("dot", "Dot"), ("lc_mlp", "LC+MLP")):
        chosen = []
        for seed in ("0", "1"):
          rows = [r for r in self.rows if (r["loss"], r["interaction"],
                                           r["seed"]) == (loss, interaction,
                                                          seed)]
          best = max(rows, key=lambda r: float(r["validation_top1_accuracy"]))
          chosen.append(float(best["test_top1_accuracy"]))
        want = f"{np.mean(chosen):.4f} ± {np.std(chosen, ddof=1):.4f}"
        self.assertIn(want, self.cell_text("top1_accuracy", row_title, title))

  def test_p_values_against_softmax_dot(self):
    self.assertIn("(base)", self.cell_text("top1_accuracy", "Dot",
                                           "Softmax CE"))
    self.assertIn("(p=1.0000, Holm 1.0000)", self.cell_text(
        "top1_accuracy", "Dot", "ApproxNDCG"))
    # The smallest hierarchical p, times the 12 comparisons of the family
    # (3 cells x 4 metrics), of which 3 share it (Holm: 12, 11, 10 times
    # 1/10001, then the running maximum).
    self.assertIn("(p=0.0001, Holm 0.0012)", self.cell_text(
        "top1_accuracy", "LC+MLP", "Softmax CE"))

  def test_best_and_top_three_marked(self):
    best = self.cell_text("mrr", "LC+MLP", "Softmax CE")
    self.assertTrue(best.startswith("**1.0000 ± 0.0000** *"), best)
    # One best for Top-1, NDCG@5 and MRR; Top-5 is 1.0 in all four cells,
    # which all tie for the best.
    self.assertEqual(self.tables.count("** *"), 3 + 4)
    # Top-1: the top three are bold, the fourth (baseline or its twin,
    # 0.5000) is not.
    bold = [self.cell_text("top1_accuracy", i, l).startswith("**")
            for i in ("Dot", "LC+MLP") for l in ("Softmax CE", "ApproxNDCG")]
    self.assertEqual(sum(bold), 3)

  def test_summary_informativeness_and_bound(self):
    self.assertRegex(self.tables, r"\| Top-1 \| 0\.5000 ± 0\.0000 \| "
                     r"Softmax CE \+ LC\+MLP \| 1\.0000 ± 0\.0000 \| "
                     r"\+0\.5000 \[\+0\.4\d{3}, \+0\.5\d{3}\] \| 0\.0001 \| "
                     r"0\.0012 \|")
    # Top-5 is 1 for every cell: it separates no pair of the 6, and the
    # report says it is at its ceiling.
    self.assertIn("| Top-5 | 0 of 6 | 0 | 0% |", self.tables)
    self.assertIn("Top-5 is 1.0 in every cell here", self.tables)
    self.assertIn("| Softmax CE + Dot | ", self.tables)
    self.assertIn("holds in 2/2 runs", self.tables)

  def test_figures_and_hparams(self):
    figures = sorted(os.listdir(self.paths["figures"]))
    # digits: no paper table, so no paper_effects.png.
    self.assertEqual(figures, ["effects.png", "mrr.png", "ndcg_at_5.png",
                               "top1_accuracy.png", "top5_accuracy.png",
                               "validation_curves.png"])
    from tensorboard.plugins.hparams import metadata  # pylint: disable=g-import-not-at-top
    run = self.records[0]["run"]
    folder = os.path.join(self.dir, "runs", run)
    (path,) = tf.io.gfile.glob(os.path.join(folder, "*.study_hparams"))
    values, scalars = {}, {}
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == metadata.SESSION_START_INFO_TAG:
          info = metadata.parse_session_start_info_plugin_data(
              value.metadata.plugin_data.content)
          values = {k: v for k, v in info.hparams.items()}
        elif value.HasField("tensor"):
          scalars[value.tag] = float(tf.make_ndarray(value.tensor))
    self.assertEqual(values["loss"].string_value, "softmax")
    self.assertAllClose(values["learning_rate"].number_value, 1e-3)
    self.assertTrue(values["selected"].bool_value)  # seed 0 chose 1e-3.
    self.assertAllClose(scalars["test/top1_accuracy"],
                        self.records[0]["test"]["top1_accuracy"])
    (root,) = tf.io.gfile.glob(os.path.join(self.dir, "*.study_hparams"))
    tags = {v.tag for e in tf.compat.v1.train.summary_iterator(root)
            for v in e.summary.value}
    self.assertIn(metadata.EXPERIMENT_TAG, tags)

  def test_report_is_deterministic(self):
    study_report.write_report(self.dir, num_samples=10_000)
    with open(self.paths["tables"]) as f:
      self.assertEqual(f.read(), self.tables)

  def test_contrasts_of_the_papers_claims(self):
    lines = self.tables.splitlines()
    start = lines.index("## Ranking losses against softmax CE, interactions "
                        "against dot")
    rows = [l for l in lines[start:] if l.startswith("| ") and " vs " in l]
    self.assertEqual([r.split(" | ")[0] for r in rows], [
        "| ApproxNDCG + Dot vs Softmax CE + Dot",
        "| ApproxNDCG + LC+MLP vs Softmax CE + LC+MLP",
        "| Softmax CE + LC+MLP vs Softmax CE + Dot",
        "| ApproxNDCG + LC+MLP vs ApproxNDCG + Dot"])
    # The same model: no difference, p = 1 in both tests.
    self.assertIn("| +0.0000 (1.0000; 1.0000; 1.0000) |", rows[0])
    # Right wherever the baseline misses: Top-1 +0.5, the bootstrap's
    # smallest p, Holm over the table's 16 contrasts; every seed +0.5, so
    # the seed-level t-test's p is 0: resolved (bold).
    self.assertEqual(rows[2].split(" | ")[1],
                     "**+0.5000** (0.0001; 0.0016; 0.0000)")
    self.assertIn("Holm over the 16 contrasts of this table (4 × 4 "
                  "metrics)", self.tables)

  def test_sodeep_sorters_against_handcrafted_and_mse(self):
    folder = os.path.join(tempfile.mkdtemp(), "study")
    grid = study_grid.Grid(losses=("mse", "sodeep_spearman@pairwise",
                              "sodeep_spearman@handcrafted"),
                      interactions=("dot",), seeds=(0, 1))
    study_settings.open_study(folder, base_config(dataset="digits"), grid)
    half = np.tile([1., 0.], N // 2)
    for run in grid.runs():
      # pairwise: right wherever the other two (the same model) miss.
      hits = np.ones(N) if "pairwise" in run.loss else half
      fake_run(folder, run, hits, 0.9)
    paths = study_report.write_report(folder, num_samples=10_000)
    with open(paths["tables"]) as f:
      lines = f.read().splitlines()
    header = next(l for l in lines if l.startswith("| metric | interaction"))
    self.assertEqual(header, "| metric | interaction | MSE | SoDeep Spearman "
                     "(pairwise) | SoDeep Spearman (handcrafted) |")
    rows = [l for l in lines if l.startswith("| ") and " vs " in l]
    self.assertEqual([r.split(" | ")[:2] for r in rows], [
        ["| SoDeep Spearman (pairwise) + Dot vs SoDeep Spearman (handcrafted) "
         "+ Dot", "**+0.5000** (0.0001; 0.0012; 0.0000)"],
        ["| SoDeep Spearman (pairwise) + Dot vs MSE + Dot",
         "**+0.5000** (0.0001; 0.0012; 0.0000)"],
        ["| SoDeep Spearman (handcrafted) + Dot vs MSE + Dot",
         "+0.0000 (1.0000; 1.0000; 1.0000)"]])

  def test_summary_regenerates_the_same_report(self):
    summary = os.path.join(tempfile.mkdtemp(), "summary")
    self.assertEqual(study_summary.write_summary(self.dir, summary), 16)
    with open(os.path.join(summary, study_report.TABLES_FILE)) as f:
      self.assertEqual(f.read(), self.tables)
    runs = os.path.join(summary, study_folder.RUNS_DIR)
    self.assertLen(os.listdir(runs), 16)
    with_arrays = [r for r in os.listdir(runs) if os.path.exists(
        os.path.join(runs, r, study_folder.TEST_FILE))]
    # Only the 8 chosen runs keep their per-instance arrays.
    self.assertLen(with_arrays, 8)
    self.assertTrue(all(("lr0.001" in r and "seed0" in r) or
                        ("lr0.01" in r and "seed1" in r) for r in with_arrays))
    # --report_only on the summary alone.
    study_report.write_report(summary, num_samples=10_000)
    with open(os.path.join(summary, study_report.TABLES_FILE)) as f:
      self.assertEqual(f.read(), self.tables)
    with self.assertRaisesRegex(ValueError, "is the study folder"):
      study_summary.write_summary(self.dir, self.dir)
    other = tempfile.mkdtemp()
    open(os.path.join(other, "notes.txt"), "w").close()
    with self.assertRaisesRegex(ValueError, "not empty and holds no "
                                "study.json"):
      study_summary.write_summary(self.dir, other)

  def test_check_report_compares_with_the_report_this_code_makes(self):
    def listing(folder):
      return sorted((os.path.relpath(os.path.join(root, name), folder),
                     os.path.getmtime(os.path.join(root, name)))
                    for root, _, names in os.walk(folder) for name in names)
    before = listing(self.dir)
    scratch = os.path.join(tempfile.gettempdir(), "rank4class_check_report-*")
    scratches = set(glob.glob(scratch))
    self.assertEqual(study_summary.check_report(self.dir), [])
    self.assertEqual(listing(self.dir), before)  # Nothing written.
    self.assertEqual(set(glob.glob(scratch)), scratches)  # Removed.
    summary = os.path.join(tempfile.mkdtemp(), "summary")
    study_summary.write_summary(self.dir, summary)
    figures = os.path.join(summary, study_report.FIGURES_DIR)
    figure = sorted(os.listdir(figures))[0]
    os.remove(os.path.join(figures, figure))
    # A record's test Top-1 changed by hand: every table made of it differs.
    chosen = [r for r in self.records
              if r["learning_rate"] == 1e-3 and r["seed"] == 0][0]
    path = os.path.join(summary, study_folder.RUNS_DIR, chosen["run"],
                        study_folder.RESULT_FILE)
    record = dict(chosen, test=dict(chosen["test"], top1_accuracy=0.25))
    with open(path, "w") as f:
      json.dump(record, f)
    # effects.png is missing; top1_accuracy.png plots the changed Top-1.
    self.assertEqual(figure, "effects.png")
    self.assertEqual(study_summary.check_report(summary), [
        "figures/effects.png", "figures/top1_accuracy.png", "report.json",
        "results.csv", "tables.md"])
    with self.assertRaisesRegex(ValueError, r"^`study_dir`=.*/empty holds no "
                                r"report \(tables.md\): write it with "
                                r"--report_only first.$"):
      study_summary.check_report(os.path.join(summary, "empty"))

  def test_frozen_regime_is_stated(self):
    lines = study_tables.regime_lines(
        {"init_checkpoint": "minilm", "encoder_size": "minilm_l6",
         "pooling": "mean", "max_seq_length": 32, "freeze_encoder": True,
         "feature_cache": True})
    self.assertEqual(lines[0], "Encoder weights from `minilm`, `minilm_l6` "
                     "size, pooling mean, 32 tokens.")
    self.assertEqual(study_tables.regime_lines(
        {"init_checkpoint": "minilm", "encoder": "bert", "pooling": "",
         "encoder_size": "minilm_l6", "max_seq_length": 32})[0],
        "Encoder weights from `minilm`, `minilm_l6` size, pooling mean (the "
        "checkpoint's default), 32 tokens.")
    self.assertIn("**Frozen encoder**", lines[1])
    self.assertIn("not the paper's regime", lines[1])
    self.assertEqual(study_tables.regime_lines({"init_checkpoint": ""}), [])

  def test_paper_table_beside_ours(self):
    path = os.path.join(tempfile.mkdtemp(), "paper.json")
    with open(path, "w") as f:
      json.dump({"title": "Digits (made up for this test)", "source": "test",
                 "values": {"top1_accuracy": {"dot": {
                     "softmax": 0.25, "approx_ndcg": 0.5, "mse": None}}}}, f)
    study_report.write_report(self.dir, num_samples=10_000, paper_table=path)
    with open(self.paths["tables"]) as f:
      text = f.read()
    # Effects, not absolute values: ApproxNDCG + Dot equals the baseline
    # (0), the made-up paper says +0.25 for it.
    # Both tests' Holm p 1; nothing to detect (no spread); the sign of a
    # Δ whose interval is [0, 0] is unknown.
    self.assertIn("| ApproxNDCG + Dot | +0.0000 [+0.0000, +0.0000] | 1.0000 "
                  "| 1.0000 | 1.0000 | 0.0000 | 0.0000 | +0.2500 | above | "
                  "unknown |", text)
    self.assertIn("test: its 1 gains lie above our interval in 1, inside in "
                  "0, below in 0 (1 outside even with their single-run "
                  "band); no losses. Signs: 0 of the 0 cells whose interval "
                  "excludes 0 agree with test (1 unknown).", text)
    # A paper effect of -0.25 falls below our interval [0, 0].
    with open(path, "w") as f:
      json.dump({"title": "Digits (made up for this test)", "source": "test",
                 "values": {"top1_accuracy": {"dot": {
                     "softmax": 0.25, "approx_ndcg": 0.0}}}}, f)
    study_report.write_report(self.dir, num_samples=10_000, paper_table=path)
    with open(self.paths["tables"]) as f:
      text = f.read()
    self.assertIn("| ApproxNDCG + Dot | +0.0000 [+0.0000, +0.0000] | 1.0000 "
                  "| 1.0000 | 1.0000 | 0.0000 | 0.0000 | -0.2500 | below | "
                  "unknown |", text)
    self.assertIn("test: no gains; its 1 losses lie above our interval in 0, "
                  "inside in 0, below in 1 (1 outside even with their "
                  "single-run band).", text)
    study_report.write_report(self.dir, num_samples=10_000)  # As it was.

  def test_bad_report_options(self):
    with self.assertRaisesRegex(ValueError, "^`select_metric`='map'"):
      study_report.write_report(self.dir, select_metric="map")
    with self.assertRaisesRegex(ValueError, "^`bootstrap_samples`=10 must be >= 10000"):
      study_report.write_report(self.dir, num_samples=10)
    with self.assertRaisesRegex(ValueError, "^`paper_table`=cifar10_vgg16 "
                                "is the paper's table of cifar10; this study "
                                "is of digits.$"):
      study_report.write_report(self.dir, paper_table="cifar10_vgg16")
    with self.assertRaisesRegex(ValueError, "^`paper_table`=table7 is "
                                "neither a JSON file nor one of"):
      study_report.write_report(self.dir, paper_table="table7")


class PaperTablesTest(tf.test.TestCase):

  def test_template_has_the_paper_grid_and_no_number(self):
    table = paper_tables.load(os.path.join(paper_tables.FOLDER,
                                           "template.json"))
    self.assertEqual(sorted(table.values), ["ndcg@5", "top1_accuracy",
                                            "top5_accuracy"])
    for rows in table.values.values():
      self.assertEqual(sorted(rows), sorted(study_grid.PAPER_INTERACTIONS))
      for row in rows.values():
        self.assertEqual(sorted(row), sorted(study_grid.PAPER_LOSSES))
    self.assertEqual(table.cells("top1_accuracy"), [])

  def test_names_and_bad_files(self):
    self.assertLen(paper_tables.NAMES, 6)
    with self.assertRaisesRegex(ValueError, "neither a JSON file nor"):
      paper_tables.load("goemotions")
    path = os.path.join(tempfile.mkdtemp(), "bad.json")
    with open(path, "w") as f:
      json.dump({"title": "t", "source": "s",
                 "values": {"mrr": {"dot": {"softmax": 61.2}}}}, f)
    with self.assertRaisesRegex(ValueError, "not a fraction"):
      paper_tables.load(path)


if __name__ == "__main__":
  tf.test.main()
