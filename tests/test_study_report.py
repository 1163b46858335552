"""Tests of the verdict statistics in the study report (issue 33;
`study/effects.py`, `study/selection.py`, `study/verdicts.py`):
hierarchical intervals and tests, Holm, fairness marks, provenance, the
paper's effects beside ours, Bruch's claim, determinism.

Hand-made studies (`test_study.fake_run`): known per-instance hits, no
training.
"""

import csv
import json
import math
import os
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_tf.study import effects as study_effects
from rank4class_tf.study import findings as study_findings
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_effects as study_paper_effects
from rank4class_tf.study import paper_tables
from rank4class_tf.study import report as study_report
from rank4class_tf.study import selection as study_selection
from rank4class_tf.study import settings as study_settings
from rank4class_tf.study import significance
from rank4class_tf.study import verdicts as study_verdicts
from test_study import base_config
from test_study import fake_run
from test_study import N

METRICS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")


def make_study(hits_of, seeds=(0, 1, 2), dataset="digits",
               losses=("softmax", "approx_ndcg"), interactions=("dot",),
               rates=(1e-3, 1e-2), val_of=None, record_of=None):
  """A finished hand-made study: `hits_of(run)` its per-instance Top-1
  hits, `val_of(run)` its validation Top-1 (default: 1e-3 chosen)."""
  folder = os.path.join(tempfile.mkdtemp(), "study")
  grid = study_grid.Grid(losses=losses, interactions=interactions, seeds=seeds,
                    learning_rates=rates, mlp_units=(8,))
  extra = {"encoder": "bert"} if dataset == "goemotions" else {}
  study_settings.open_study(folder, base_config(dataset=dataset, **extra), grid)
  for run in grid.runs():
    val = (val_of or (lambda r: 0.9 if r.learning_rate == rates[0]
                      else 0.5))(run)
    record = fake_run(folder, run, hits_of(run), val)
    if record_of is not None:
      record.update(record_of(run))
      with open(os.path.join(study_folder.run_dir(folder, run),
                             study_folder.RESULT_FILE), "w") as f:
        json.dump(record, f)
  return folder


def hits(p, seed):
  return (np.random.default_rng(seed).random(N) < p).astype(float)


def report(folder, **kwargs):
  paths = study_report.write_report(folder, num_samples=10_000,
                                    progress=lambda _: None, **kwargs)
  with open(paths["tables"]) as f:
    return paths, f.read()


def effect_row(tables, cell_title):
  """The cells of `cell_title`'s row in the first table with an interval
  (the effects against softmax + dot)."""
  for line in tables.splitlines():
    if line.startswith(f"| {cell_title} | ") and "[" in line:
      return [c.strip() for c in line.strip("|").split("|")]
  raise AssertionError(f"no effect row for {cell_title}")


class HierarchicalReportTest(tf.test.TestCase):

  def test_seeds_that_disagree_widen_the_interval(self):
    # ApproxNDCG's seeds: 0.05, 0.5 and 0.95 right; softmax 0.5 in each.
    # Pooled over seeds the instances look alike (mean 0.5 each); the
    # hierarchical interval of the effect must show the seeds' spread.
    spread = {0: 0.05, 1: 0.5, 2: 0.95}
    def hits_of(run):
      if run.loss == "softmax":
        return hits(0.5, 100 + run.seed)
      return hits(spread[run.seed], 200 + run.seed)
    folder = make_study(hits_of)
    stats_ = self.statistics(folder)
    effect = stats_.effects[(("approx_ndcg", "dot"), "top1_accuracy")]
    self.assertGreater(effect.high - effect.low, 0.4)
    # The seeds-pooled interval (the old report's) is far narrower.
    cells = self.cells(folder)
    pooled = significance.bootstrap_interval(
        cells[1].pooled("top1_accuracy") - cells[0].pooled("top1_accuracy"))
    self.assertLess(pooled[1] - pooled[0], 0.2)
    self.assertGreater(effect.p, 0.2)

  def test_identical_seeds_give_the_instance_only_interval(self):
    folder = make_study(lambda run: hits(0.5 if run.loss == "softmax"
                                         else 0.7, 300 if run.loss ==
                                         "softmax" else 301))
    stats_ = self.statistics(folder)
    effect = stats_.effects[(("approx_ndcg", "dot"), "top1_accuracy")]
    d = hits(0.7, 301) - hits(0.5, 300)
    low, high = significance.bootstrap_interval(d, num_samples=10_000)
    self.assertAllClose([effect.low, effect.high], [low, high], atol=1e-12)
    self.assertAllClose(effect.delta, d.mean())

  def test_one_seed_says_so_and_shows_no_spread(self):
    folder = make_study(lambda run: hits(0.5, run.seed), seeds=(0,))
    _, tables = report(folder)
    self.assertIn("**One seed per cell: the intervals and p-values cover "
                  "test sampling only, not training noise.**", tables)
    self.assertNotIn("±", tables.split("## Test metrics")[1].split(
        "## Effects")[0])

  def test_holm_family_is_stated_and_applied(self):
    folder = make_study(lambda run: hits(0.5, run.seed))
    _, tables = report(folder)
    self.assertIn("Holm: adjusted over the family of 4 comparisons (1 cells "
                  "× 4 metrics against softmax + dot)", tables)
    stats_ = self.statistics(folder)
    raw = [stats_.effects[(("approx_ndcg", "dot"), m)].p
           for m in ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")]
    got = [stats_.effects[(("approx_ndcg", "dot"), m)].p_holm
           for m in ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")]
    self.assertAllClose(got, significance.holm(raw))

  def cells(self, folder, order=(("softmax", "dot"), ("approx_ndcg", "dot"))):
    records = study_folder.load_records(folder)
    chosen = study_selection.select(records, "top1_accuracy")
    return study_selection.build_cells(folder, chosen, METRICS, order)

  def statistics(self, folder):
    return study_selection.compute_statistics(
        self.cells(folder), ("top1_accuracy", "top5_accuracy", "ndcg@5",
                             "mrr"), 10_000)


class FairnessTest(tf.test.TestCase):

  def test_marks(self):
    tried = [{"learning_rate": r, "mlp_units": u} for r in (1e-3, 1e-2)
             for u in (64, 128)]
    record = {"learning_rate": 1e-3, "mlp_units": 128, "best_step": 100,
              "validation_curve": {"top1_accuracy": [[50, 0.1], [100, 0.2]]}}
    self.assertEqual(study_effects.fairness(record, tried),
                     {"lr_edge": "low", "units_edge": "high",
                      "best_is_last": True})
    record = dict(record, mlp_units=None, best_step=50)
    only = [{"learning_rate": 1e-3, "mlp_units": None}]
    self.assertEqual(study_effects.fairness(record, only, train_steps=100),
                     {"lr_edge": "only", "units_edge": "",
                      "best_is_last": False})

  def test_report_marks_edges_and_runs_still_improving(self):
    # Rates 1e-4, 1e-3, 1e-2: softmax chooses the interior 1e-3 and peaks
    # early; approx_ndcg chooses the lowest and peaks at its last step.
    def val_of(run):
      best = 1e-3 if run.loss == "softmax" else 1e-4
      return 0.9 if run.learning_rate == best else 0.5
    def record_of(run):
      return {"best_step": 5 if run.loss == "softmax" else 10}
    folder = make_study(lambda run: hits(0.5, run.seed),
                        rates=(1e-4, 1e-3, 1e-2), val_of=val_of,
                        record_of=record_of)
    paths, tables = report(folder)
    self.assertIn("**3 of 6 chosen runs are on an edge of the learning "
                  "rates or widths tried; 3 of 6 peaked at their last "
                  "validation**", tables)
    self.assertIn("| Softmax CE + Dot | 0 of 3 | 0 of 3 | 0 of 3 |", tables)
    self.assertIn("| ApproxNDCG + Dot | 3 of 3 (low) | 0 of 3 | 3 of 3 |",
                  tables)
    with open(paths["results"]) as f:
      rows = {r["run"]: r for r in csv.DictReader(f)}
    row = rows["approx_ndcg.dot.lr0.0001.seed0"]
    self.assertEqual((row["selected"], row["lr_edge"], row["units_edge"],
                      row["best_is_last"]), ("True", "low", "", "True"))
    self.assertEqual(rows["softmax.dot.lr0.001.seed0"]["lr_edge"], "")
    self.assertEqual(rows["softmax.dot.lr0.01.seed0"]["lr_edge"], "high")
    # No run says `converged` (no --patience): no word of it, as before.
    self.assertNotIn("converge", tables)

  def test_report_counts_chosen_runs_that_did_not_converge(self):
    # --patience: softmax's chosen runs converged; ApproxNDCG's did not,
    # seed 2's even after --extend_steps trained it on (its limit).
    def record_of(run):
      out = {"converged": run.loss == "softmax"}
      if run.loss == "softmax":
        out["best_step"] = 5  # Stopped, or at its last step, 1 later.
      if run.loss == "approx_ndcg" and run.seed == 2:
        out["extended_steps"] = {"from": 10, "to": 20}
      return out
    folder = make_study(lambda run: hits(0.5, run.seed),
                        record_of=record_of)
    _, tables = report(folder)
    self.assertIn(
        "**3 of 6 chosen runs did not converge** (`--patience`: their best "
        "validation is followed by fewer validations than the patience when "
        "they reached their last step); the others stopped, or reached "
        "their last step, that many validations after their best.\n1 of "
        "those 3 did not converge after `--extend_steps` had trained them "
        "on: its limit (`--extend_steps_limit`).", tables)
    self.assertIn("| cell | learning rate on an edge | width on an edge | "
                  "peaked last | peaked in the last two | not converged |\n"
                  "|---|---|---|---|---|---|\n"
                  "| Softmax CE + Dot | 3 of 3 (low) | 0 of 3 | 0 of 3 | "
                  "3 of 3 | 0 of 3 |\n"
                  "| ApproxNDCG + Dot | 3 of 3 (low) | 0 of 3 | 2 of 3 | "
                  "3 of 3 | 3 of 3 |", tables)


class ProvenanceTest(tf.test.TestCase):

  def made_by(self, commit):
    return {"package": "0.1.0", "git_commit": commit, "git_dirty": False,
            "tensorflow": "2.15.1", "tensorflow_ranking": "0.5.5",
            "python": "3.11.7"}

  def test_one_version_and_a_mixed_study(self):
    one = make_study(lambda run: hits(0.5, run.seed), record_of=lambda run: {
        "provenance": self.made_by("a" * 40)})
    paths, tables = report(one)
    self.assertIn("- 12 run(s): rank4class_tf 0.1.0, commit aaaaaaaaaaaa, "
                  "TensorFlow 2.15.1, TF-Ranking 0.5.5", tables)
    self.assertNotIn("Warning", tables)
    with open(paths["results"]) as f:
      self.assertEqual(next(csv.DictReader(f))["git_commit"], "a" * 40)
    mixed = make_study(lambda run: hits(0.5, run.seed),
                       record_of=lambda run: {"provenance": self.made_by(
                           "a" * 40 if run.seed else "b" * 40)})
    _, tables = report(mixed)
    self.assertIn("**Warning: these runs were not all made by one known "
                  "version of the code**", tables)
    self.assertIn("- 4 run(s): rank4class_tf 0.1.0, commit bbbbbbbbbbbb",
                  tables)
    # The study.json of a study created now names this code.
    self.assertIn("- the study was created by rank4class_tf", tables)
    # These records name no machine: nothing is said of machines.
    self.assertNotIn("finished on", tables)

  def test_machines_are_counted_and_two_kinds_are_flagged(self):
    def made_on(run):
      machine = ({"cpu": "Intel Xeon (family 6, model 143)", "cpu_count": 2,
                  "cpu_features": ["avx2", "avx512f", "avx512_bf16"]}
                 if run.seed == 2 else
                 {"cpu": "AMD EPYC (family 25, model 1)", "cpu_count": 2,
                  "cpu_features": ["avx2"]})
      return {"provenance": dict(self.made_by("a" * 40), machine=machine)}
    _, tables = report(make_study(lambda run: hits(0.5, run.seed),
                                  record_of=made_on))
    self.assertIn(
        "- 8 run(s) finished on: AMD EPYC (family 25, model 1), 2 cores, "
        "avx2\n- 4 run(s) finished on: Intel Xeon (family 6, model 143), 2 "
        "cores, avx2, avx512f, avx512_bf16\n- more than one kind of machine "
        "finished these runs: their training times are not comparable, and "
        "`--deterministic` runs may differ in their last bits (oneDNN picks "
        "its kernels by the CPU).", tables)
    # The machine is not the code: one version, no warning.
    self.assertIn("- 12 run(s): rank4class_tf 0.1.0, commit aaaaaaaaaaaa",
                  tables)
    self.assertNotIn("Warning", tables)


class PaperEffectsTest(tf.test.TestCase):

  def test_goemotions_study_beside_tables_7_and_8(self):
    # Every cell: right on 60% of the instances where softmax + dot is right
    # on 50%, so every effect is about +0.1; Table 7's effects for dot:
    # pairwise -0.0079, approx_ndcg -0.0042, gumbel -0.0011, mse -0.0020
    # (signs disagree), lc_mlp softmax -0.0035 (disagrees).
    def hits_of(run):
      if run.cell == ("softmax", "dot"):
        return np.tile([1., 0.], N // 2)
      return np.tile([1., 1., 1., 0., 0.], N // 5)
    folder = make_study(hits_of, dataset="goemotions",
                        losses=("softmax", "approx_ndcg"),
                        interactions=("dot", "lc_mlp"))
    _, tables = report(folder)
    self.assertIn("Paper: GoEmotions, BERT-Base", tables)
    self.assertIn("GoEmotions, ELECTRA-Base", tables)
    row = effect_row(tables, "ApproxNDCG + Dot")
    self.assertEqual(row[0], "ApproxNDCG + Dot")
    self.assertTrue(row[1].startswith("+0.1000 ["), row)
    # 120 test instances: every interval is [-0.0250, +0.2250], wide
    # enough to hold each of the paper's small effects.
    # Every seed makes the same hits: the seed-level t-test finds the
    # constant +0.1 (Holm 0), the single-run band is 0, and with the
    # interval holding 0 every sign is unknown. Detectable: (z(1 - 0.05 /
    # 24) + z(0.8)) × the bootstrap's standard error.
    self.assertEqual(row[1:], ["+0.1000 [-0.0250, +0.2250]", "0.1388",
                               "1.0000", "0.0000", "0.2372", "0.0000",
                               "-0.0042", "inside", "unknown", "+0.0078",
                               "inside", "unknown"])
    effect = study_selection.compute_statistics(
        HierarchicalReportTest().cells(folder, [
            ("softmax", "dot"), ("approx_ndcg", "dot"), ("softmax", "lc_mlp"),
            ("approx_ndcg", "lc_mlp")]), METRICS, 10_000).effects[
                (("approx_ndcg", "dot"), "top1_accuracy")]
    self.assertAllClose(significance.detectable_effect(effect.se, 12), 0.2372,
                        atol=5e-5)
    row = effect_row(tables, "ApproxNDCG + LC+MLP")
    self.assertEqual(row[7:], ["+0.0035", "inside", "unknown", "+0.0078",
                               "inside", "unknown"])
    # Counted per table: the paper's gains and losses apart.
    self.assertIn("Table 7: its 1 gains lie above our interval in 0, inside "
                  "in 1, below in 0 (0 outside even with their single-run "
                  "band); its 2 losses lie above our interval in 0, inside "
                  "in 2, below in 0 (0 outside even with their single-run "
                  "band). Signs: 0 of the 0 cells whose interval excludes 0 "
                  "agree with Table 7 (3 unknown). 0 of its 3 |Δ| reach the "
                  "Δ this study detects with 80% power in that cell.",
                  tables)
    self.assertIn("Table 8: its 2 gains lie above", tables)

  def test_digits_has_no_paper_table(self):
    folder = make_study(lambda run: hits(0.5, run.seed))
    _, tables = report(folder)
    self.assertIn("The paper has no table for digits", tables)

  def test_another_datasets_table_is_refused_before_writing(self):
    folder = make_study(lambda run: hits(0.5, run.seed), dataset="goemotions")
    before = sorted(os.listdir(folder))
    with self.assertRaisesRegex(ValueError, "^`paper_table`=mind_bert is the "
                                "paper's table of mind; this study is of "
                                "goemotions.$"):
      study_report.write_report(folder, paper_table="mind_bert")
    self.assertEqual(sorted(os.listdir(folder)), before)


class BruchTest(tf.test.TestCase):

  def test_spearman(self):
    self.assertAlmostEqual(study_effects.spearman([1, 2, 3, 4], [8, 6, 4, 2]),
                           -1.0)
    # Ties share their average rank: scipy's value for this pair.
    self.assertAlmostEqual(study_effects.spearman([1, 2, 2, 3], [1, 3, 2, 4]),
                           0.9486832980505138)
    self.assertTrue(math.isnan(study_effects.spearman([1, 2], [2, 1])))
    self.assertTrue(math.isnan(study_effects.spearman([1, 1, 1], [1, 2, 3])))

  def test_correlations_across_runs(self):
    records = [{"loss": loss, "test_softmax_ce": ce,
                "test_neg_log_mrr": -math.log(mrr),
                "test_neg_log_ndcg": -math.log(mrr)}
               for loss, ce, mrr in (("a", 1., .5), ("a", 2., .4),
                                     ("a", 3., .3), ("b", 1., .1),
                                     ("b", 2., .2), ("b", 3., .3))]
    found = study_effects.bruch_correlations(records, lambda r: r["loss"])
    self.assertEqual(found["a"]["mrr"], -1.0)
    self.assertEqual(found["b"]["mrr"], 1.0)
    self.assertEqual(found[None]["runs"], 6)

  def test_correlations_within_softmax_runs(self):
    # Run 1: CE falls as MRR rises (rho -1); NDCG@5 rises then falls
    # (ranks 0, 2, 1 against CE ranks 2, 1, 0: rho -0.5). Run 2 has two
    # validations (too few); the MSE run's loss is not its CE.
    records = [
        {"loss": "softmax", "validation_curve": {
            "loss": [[100, 0.9], [200, 0.5], [300, 0.4]],
            "mrr": [[100, 0.1], [200, 0.2], [300, 0.3]],
            "ndcg_5": [[100, 0.1], [200, 0.3], [300, 0.2]]}},
        {"loss": "softmax", "validation_curve": {
            "loss": [[100, 0.9], [200, 0.5]], "mrr": [[100, 0.1],
                                                     [200, 0.2]]}},
        {"loss": "mse", "validation_curve": {
            "loss": [[100, 0.9], [200, 0.5], [300, 0.4]],
            "mrr": [[100, 0.1], [200, 0.2], [300, 0.3]]}}]
    found = study_effects.bruch_within_runs(records)
    self.assertEqual(found["runs"], 1)
    self.assertAlmostEqual(found["mrr"][0], -1.0)
    self.assertAlmostEqual(found["ndcg_5"][0], -0.5)


class RobustnessAndPerClassTest(tf.test.TestCase):

  def test_a_contrast_whose_sign_depends_on_the_selection(self):
    # ApproxNDCG: its 1e-3 run wins on validation Top-1 and is worse than
    # softmax on test; its 1e-2 run wins on validation MRR and is better.
    def val_of(run):
      return 0.9 if run.learning_rate == 1e-3 else 0.5
    def record_of(run):
      if run.loss != "approx_ndcg":
        return {}
      top1 = 0.4 if run.learning_rate == 1e-3 else 0.6
      return {"validation": {"top1_accuracy": 1.0 - top1,
                             "top5_accuracy": 1.0, "ndcg@5": top1,
                             "mrr": top1},
              "test": {"top1_accuracy": top1, "top5_accuracy": 1.0,
                       "ndcg@5": top1, "mrr": top1}}
    folder = make_study(lambda run: np.tile([1., 0.], N // 2),
                        val_of=val_of, record_of=record_of)
    _, tables = report(folder)
    self.assertIn("| Top-1 | Top-1 | ApproxNDCG + Dot | -0.1000 |", tables)
    self.assertIn("| MRR | Top-1 | ApproxNDCG + Dot | +0.1000 |", tables)
    self.assertIn("- ApproxNDCG + Dot vs Softmax CE + Dot, Top-1 (Top-1: −, "
                  "NDCG@5: +, MRR: +)", tables)

  def test_per_class(self):
    cell = lambda loss, hits_: study_selection.Cell(
        loss, "dot", {0: {}}, {"top1_accuracy": {0: np.array(hits_)},
                              "mrr": {0: np.array(hits_)}})
    labels = np.array([0, 0, 1, 1, 1, 2])
    base = cell("softmax", [1., 1., 0., 0., 0., 1.])
    other = cell("mse", [0., 1., 1., 1., 1., 1.])
    lines = study_findings.per_class_lines([base, other], labels,
                                         ["a", "b", "c"])
    # Macro Top-1: mean over classes of the per-class means.
    self.assertIn("| Softmax CE + Dot | 0.6667 | 0.6667 |", lines)
    self.assertIn("| MSE + Dot | 0.8333 | 0.8333 |", lines)
    self.assertIn("| MSE + Dot | b +1.000 (n=3) | a -0.500 (n=2) |", lines)


def first(k):
  """Right on the first k of the N test instances."""
  return (np.arange(N) < k).astype(float)


class VerdictTest(tf.test.TestCase):
  """Issue 59: both tests, the resolved rule, signs, the paper's noise,
  the metric claim, robustness under `--choose_on_seed`."""

  def effect(self, delta, low, high, **kwargs):
    return study_effects.Effect(delta, low, high, 0.5, 1., (0, 1, 2), **kwargs)

  def test_sign_agreement_needs_an_interval_that_excludes_zero(self):
    # A Δ of +0.00003 whose interval holds 0 agrees with nothing.
    noise = self.effect(3e-5, -0.01, 0.01)
    self.assertEqual(study_paper_effects.sign_agreement(+0.0035, noise), "unknown")
    self.assertEqual(study_paper_effects.sign_agreement(-0.0035, noise), "unknown")
    above = self.effect(0.02, 0.005, 0.035)
    self.assertEqual(study_paper_effects.sign_agreement(+0.0035, above), "yes")
    self.assertEqual(study_paper_effects.sign_agreement(-0.0035, above), "no")
    self.assertEqual(study_paper_effects.sign_agreement(0., above), "unknown")
    self.assertEqual(study_paper_effects.sign_agreement(
        -0.01, self.effect(-0.02, -0.03, -0.001)), "yes")

  def test_the_papers_single_run_band(self):
    ours = self.effect(-0.02, -0.03, -0.01)
    self.assertEqual(study_paper_effects.place(0.005, ours, 0.01), "above")
    self.assertEqual(study_paper_effects.place(0.005, ours, 0.016),
                     "above, band overlaps")
    self.assertEqual(study_paper_effects.place(-0.02, ours, 0.0), "inside")
    self.assertEqual(study_paper_effects.place(-0.05, ours, 0.03),
                     "below, band overlaps")
    self.assertEqual(study_paper_effects.place(-0.05, ours, math.nan), "below")
    # 1.96 √(sd_cell² + sd_base²) from the seeds' test values.
    cell = lambda loss, values: study_selection.Cell(
        loss, "dot", {s: {"test": {"top1_accuracy": v}}
                      for s, v in enumerate(values)}, {})
    band = study_paper_effects.single_run_band(cell("mse", [0.1, 0.2, 0.3]),
                                          cell("softmax", [0.5, 0.5, 0.5]),
                                          "top1_accuracy")
    self.assertAllClose(band, 1.96 * 0.1)

  def test_bootstrap_alone_does_not_resolve(self):
    # ApproxNDCG's seeds: 0.9, 0.9 and 0.55 right against softmax's 0.5:
    # almost no resample reaches 0 (only seed 2 thrice, drawing none of the
    # 6 instances it gains: the bootstrap's p is 2 / 10,001), but the three
    # per-seed differences 0.4, 0.4, 0.05 give the
    # t-test t = 2.43 on 2 degrees of freedom (p = 0.1358).
    share = {0: 108, 1: 108, 2: 66}
    folder = make_study(lambda run: first(60) if run.loss == "softmax"
                        else first(share[run.seed]))
    _, tables = report(folder)
    diffs = np.array([0.4, 0.4, 0.05])
    t = diffs.mean() / (diffs.std(ddof=1) / math.sqrt(3))
    p = 1. - t / math.sqrt(t * t + 2.)  # df = 2, by hand.
    self.assertAllClose(p, 0.1358, atol=1e-4)
    rows = [l for l in tables.splitlines()
            if l.startswith("| ApproxNDCG + Dot vs Softmax CE + Dot")]
    self.assertLen(rows, 1)
    # Holm over the 4 contrasts: the bootstrap's 4 × 0.0002 = 0.0008;
    # NDCG@5 and MRR share Top-1's t (their per-seed differences
    # are proportional), Top-5 ties (p 1), so the t-test's Holm is 4 ×
    # 0.1358 for each of the three; not bold.
    top1 = rows[0].split(" | ")[1]
    self.assertEqual(top1, "+0.2833 (0.0002; 0.0008; "
                     f"{4 * p:.4f})")
    self.assertIn("| ranking loss against softmax CE (same interaction) | 4 "
                  "| 3 / 0 / 0 | 0 / 0 / 0 |", tables)
    self.assertIn("The two tests decide 3 of the 4 contrasts differently "
                  "(Holm p < 0.05 in one only):", tables)
    self.assertIn("- ApproxNDCG + Dot vs Softmax CE + Dot, Top-1 +0.2833: "
                  f"bootstrap Holm 0.0008, t-test Holm {4 * p:.4f}", tables)
    # The main table marks it; Table 2 says it is not resolved.
    self.assertIn("(p=0.0002, Holm 0.0008)†", tables)
    self.assertIn("| Top-1 | 0.5000 ± 0.0000 | ApproxNDCG + Dot | 0.7833 ± "
                  "0.2021 | +0.2833 [+0.0583, +0.4583] | 0.0002 | 0.0008 | "
                  f"{4 * p:.4f} | no |", tables)
    self.assertIn("| each cell against softmax + dot | 4 | 0.0004 | 3 | 0 | "
                  "0 |", tables)

  def test_b_is_raised_for_the_largest_family(self):
    # 21 cells, one metric: 210 pairs, so B = 50,000 (210 / 50,001 =
    # 0.0042 <= 0.005), and a pair at the floor survives Holm.
    rng = np.random.default_rng(0)
    cells = [study_selection.Cell(
        f"loss{i}", "dot", {s: {} for s in range(3)},
        {"top1_accuracy": {s: (rng.random(N) < 0.2 + 0.03 * i).astype(float)
                           for s in range(3)}}) for i in range(21)]
    found = study_selection.compute_statistics(cells, ["top1_accuracy"],
                                               10_000)
    self.assertEqual(found.num_samples, 50_000)
    self.assertEqual(found.requested_samples, 10_000)
    self.assertAllClose(found.floor, 1 / 50_001)
    lines = study_verdicts.tests_lines(found, [], ["top1_accuracy"])
    self.assertIn("B = 50,000 resamples, fixed seed, the requested 10,000 "
                  "raised so that the smallest reachable p, 1 / (B + 1), "
                  "times the largest family (210 tests) is at most α / 10",
                  lines[2])
    self.assertIn("| every pair of cells | 210 | 0.0042 |", "\n".join(lines))
    farthest = found.pair_effects[(("loss0", "dot"), ("loss20", "dot"))][
        "top1_accuracy"]
    self.assertEqual(farthest.p, found.floor)
    self.assertLess(farthest.p_holm, 0.05)

  def test_effects_equal_the_bootstrap_of_the_differences(self):
    # The draws of each cell's series, subtracted, are the draws of the
    # differences (the resampled mean is linear).
    rng = np.random.default_rng(4)
    a = {s: rng.random(N) for s in range(3)}
    b = {s: rng.random(N) for s in range(3)}
    got = study_effects.effects([("x", a, b)], 10_000)["x"]
    d = significance.seed_matrix(a, (0, 1, 2)) - significance.seed_matrix(b, (0, 1, 2))
    self.assertAllClose(got.p, significance.hierarchical_bootstrap(d, 10_000))
    self.assertAllClose([got.low, got.high],
                        significance.hierarchical_interval(d, 0.95, 10_000),
                        atol=1e-12)
    self.assertAllClose(got.p_seed, significance.seed_t_test(d)[0])

  def test_metric_claim_counts_and_sign_test(self):
    def pair(top5, ndcg):
      make = lambda holm: self.effect(0.01, 0.001, 0.02).__class__(
          0.01, 0.001, 0.02, holm, holm, (0, 1, 2), p_seed=holm,
          p_seed_holm=holm)
      return {"top5_accuracy": make(top5), "ndcg@5": make(ndcg)}
    found = study_selection.Statistics({}, {}, {}, 10, pair_effects={
        (("a", "dot"), (str(i), "dot")): pair(*holms) for i, holms in
        enumerate([(0.5, 0.01)] * 7 + [(0.01, 0.5)] * 2 + [(0.01, 0.01)] +
                  [(0.5, 0.5)])})
    lines = study_verdicts.metric_claim_lines(
        found, ["top5_accuracy", "ndcg@5"])
    # Top-5 leaves 8 pairs unresolved, NDCG@5 separates 7 of them; NDCG@5
    # leaves 3 unresolved, 2 of which Top-5 separates: sign test of 7
    # against 2 = 2 (1 + 9 + 36) / 512.
    self.assertIn("| bootstrap | NDCG@5 | Top-5 | 8 of 11 | 7 | 2 | 0.1797 |",
                  lines)
    self.assertIn("| both tests | NDCG@5 | Top-5 | 8 of 11 | 7 | 2 | 0.1797 |",
                  lines)

  def test_robustness_under_choose_on_seed_says_only_seed_0(self):
    def record(seed, rate, top1, ndcg):
      return {"run": f"softmax.dot.lr{rate}.seed{seed}", "loss": "softmax",
              "interaction": "dot", "seed": seed, "train_seconds": 60.,
              "validation": {"top1_accuracy": top1, "ndcg@5": ndcg,
                             "mrr": ndcg},
              "test": {"top1_accuracy": top1, "ndcg@5": ndcg, "mrr": ndcg}}
    records = [record(0, 1e-3, 0.5, 0.6), record(0, 1e-2, 0.4, 0.7),
               record(1, 1e-3, 0.5, 0.6), record(2, 1e-3, 0.5, 0.6)]
    lines = study_findings.robustness_lines(
        records, ["top1_accuracy", "ndcg@5", "mrr"], "top1_accuracy", [],
        choose_on_seed=0)
    self.assertEqual(lines[0], (
        "**Only seed 0 is reselected** (`--choose_on_seed`): the other seeds "
        "ran at its Top-1 choice only and are not rerun at another metric's "
        "choice, so a changed choice mixes seed 0's new run with the others' "
        "old ones. Seed 0's choice stays the same in 0 of 1 cells by "
        "NDCG@5, 0 of 1 cells by MRR. Rerunning them at a changed choice "
        "costs 2 runs a cell, a median 60 s of training each here (the "
        "followers' `train_seconds`)."))
    same = study_findings.robustness_lines(
        records[:1] + records[2:], ["top1_accuracy", "ndcg@5", "mrr"],
        "top1_accuracy", [], choose_on_seed=0)
    self.assertIn("Every choice is the same: this section compares the "
                  "study with itself and shows no robustness.", same[0])

  def test_peaked_in_the_last_two(self):
    curve = {"top1_accuracy": [[5, 0.1], [10, 0.2], [15, 0.3]]}
    self.assertTrue(study_findings.peaked_near_end(
        {"best_step": 10, "validation_curve": curve}))
    self.assertFalse(study_findings.peaked_near_end(
        {"best_step": 5, "validation_curve": curve}))
    self.assertFalse(study_findings.peaked_near_end({"best_step": 5}))

  def test_table_2_names_the_papers_cells_not_run(self):
    tables = [paper_tables.load("goemotions_bert")]
    cells = [study_selection.Cell(l, i, {}, {}) for l, i in (
        ("softmax", "dot"), ("approx_ndcg", "dot"), ("softmax", "lc_mlp"))]
    lines = study_paper_effects.missing_paper_cells(
        tables, cells, ["top1_accuracy", "top5_accuracy"])
    self.assertEqual(lines[1], (
        "The best of the 2 other cells run here; the paper's Table 2 takes "
        "the best of its 14. Not run here: Softmax CE + Concat+MLP, Pairwise "
        "logistic + Dot, Pairwise logistic + LC+MLP, Pairwise logistic + "
        "Concat+MLP, ApproxNDCG + LC+MLP, ApproxNDCG + Concat+MLP, "
        "Gumbel-ApproxNDCG + Dot, Gumbel-ApproxNDCG + LC+MLP, "
        "Gumbel-ApproxNDCG + Concat+MLP, MSE + Dot, MSE + LC+MLP, MSE + "
        "Concat+MLP."))
    self.assertEqual(lines[2], (
        "Among them the paper's best cell: ApproxNDCG + LC+MLP on Top-1 in "
        "Table 7 (+0.0035); Pairwise logistic + Concat+MLP on Top-5 in "
        "Table 7 (+0.0150)."))


class DeterminismTest(tf.test.TestCase):

  def test_report_twice_is_byte_identical(self):
    folder = make_study(lambda run: hits(0.5 + 0.1 * run.seed, run.seed),
                        dataset="goemotions")
    paths, _ = report(folder)
    def contents():
      out = {}
      for name in ("results", "tables"):
        with open(paths[name], "rb") as f:
          out[name] = f.read()
      for name in sorted(os.listdir(paths["figures"])):
        with open(os.path.join(paths["figures"], name), "rb") as f:
          out[name] = f.read()
      return out
    first = contents()
    report(folder)
    self.assertEqual(contents(), first)


if __name__ == "__main__":
  tf.test.main()
