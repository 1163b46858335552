"""Tests of rank4class_tf.study.budgets and pipelines.compare_budgets: one
grid at two budgets, on hand-made studies (`test_study_report.make_study`:
known per-instance hits, no training)."""

import math
import os
import shutil
import tempfile

import numpy as np
from scipy import stats as scipy_stats
import tensorflow as tf

from rank4class_tf.study import budgets
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import significance
import helpers
from test_study import N
from test_study_report import hits
from test_study_report import make_study

# Top-1 hit rates (loss, seed) -> p at each budget: at the short budget
# approx_ndcg is far below softmax; trained longer, it catches up.
SHORT = {"softmax": (0.60, 0.62, 0.61), "approx_ndcg": (0.30, 0.31, 0.29)}
LONG = {"softmax": (0.70, 0.71, 0.69), "approx_ndcg": (0.70, 0.72, 0.69)}


def study(rates, salt):
  return make_study(lambda run: hits(rates[run.loss][run.seed],
                                     salt + 10 * run.seed +
                                     (run.loss == "softmax")))


def top1(folder, loss, seeds=(0, 1, 2)):
  """The chosen (1e-3) runs' test Top-1, read independently of budgets."""
  records = {r["run"]: r for r in study_folder.load_records(folder)}
  return np.array([records[f"{loss}.dot.lr0.001.seed{s}"]["test"]
                   ["top1_accuracy"] for s in seeds])


class BudgetsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.short, cls.long = study(SHORT, 1000), study(LONG, 2000)

  def test_rows_are_the_paired_seed_statistics(self):
    long_cells, metrics = budgets.chosen_cells(self.long)
    short_cells, _ = budgets.chosen_cells(self.short)
    self.assertEqual(metrics, ("top1_accuracy", "top5_accuracy", "ndcg@5",
                               "mrr"))
    rows, left_out = budgets.compare_budgets(long_cells, short_cells,
                                             ["top1_accuracy"])
    self.assertEqual(left_out, [])
    self.assertEqual([r.cell for r in rows],
                     [("softmax", "dot"), ("approx_ndcg", "dot")])
    base, ranking = rows
    change = top1(self.long, "approx_ndcg") - top1(self.short, "approx_ndcg")
    self.assertAllClose(ranking.short, top1(self.short, "approx_ndcg").mean())
    self.assertAllClose(ranking.long, top1(self.long, "approx_ndcg").mean())
    # The change's 95% t interval, by scipy.
    low, high = scipy_stats.t.interval(
        0.95, 2, loc=change.mean(), scale=change.std(ddof=1) / math.sqrt(3))
    self.assertAllClose(ranking.change, (change.mean(), change.std(ddof=1),
                                         low, high))
    # Paired t-test p, Holm over the two rows' changes.
    p = [scipy_stats.ttest_rel(top1(self.long, loss), top1(self.short, loss)
                               ).pvalue for loss in ("softmax", "approx_ndcg")]
    self.assertAllClose([base.change_p, ranking.change_p], p)
    self.assertAllClose([base.change_p_holm, ranking.change_p_holm],
                        significance.holm(p))
    # Against softmax at each budget: a loss short, none detected long (one
    # test per budget, so Holm leaves p as it is).
    for name in ("short", "long"):
      folder = getattr(self, name)
      d = top1(folder, "approx_ndcg") - top1(folder, "softmax")
      self.assertAllClose(getattr(ranking, f"{name}_effect"), d.mean())
      self.assertAllClose(getattr(ranking, f"{name}_p_holm"),
                          scipy_stats.ttest_1samp(d, 0.).pvalue)
    # The hierarchical bootstrap, paired by seed and instance, on the hits
    # the studies were made of (B = 10,000: a family of 2 rows, or of 1
    # effect a budget). Short, approx_ndcg is far below softmax, and its
    # change is far from 0: no resample reaches 0, p = 1 / 10,001.
    made = {(name, loss): np.stack([
        hits(rates[loss][s], salt + 10 * s + (loss == "softmax"))
        for s in range(3)]) for name, rates, salt in (
            ("short", SHORT, 1000), ("long", LONG, 2000)) for loss in rates}
    floor = 1. / 10_001
    base_p = significance.hierarchical_bootstrap(
        made["long", "softmax"] - made["short", "softmax"], 10_000)
    self.assertGreater(base_p, 0.05)  # 120 instances: hits of 0.61, 0.70.
    self.assertAllClose([base.change_boot_p, ranking.change_boot_p],
                        [base_p, floor])
    self.assertAllClose([base.change_boot_p_holm, ranking.change_boot_p_holm],
                        significance.holm([base_p, floor]))
    self.assertAllClose(ranking.short_boot_p_holm, floor)
    long_p = significance.hierarchical_bootstrap(
        made["long", "approx_ndcg"] - made["long", "softmax"], 10_000)
    self.assertGreater(long_p, 0.05)
    self.assertAllClose(ranking.long_boot_p_holm, long_p)
    self.assertEqual(ranking.verdicts(), ("loss", "none detected"))
    self.assertTrue(math.isnan(base.short_effect))
    self.assertTrue(math.isnan(base.short_boot_p_holm))
    # The effect's change (difference in differences): seed level by scipy,
    # instance level by the bootstrap on the hits (one test: Holm keeps p).
    gap = ((top1(self.long, "approx_ndcg") - top1(self.long, "softmax")) -
           (top1(self.short, "approx_ndcg") - top1(self.short, "softmax")))
    low, high = scipy_stats.t.interval(
        0.95, 2, loc=gap.mean(), scale=gap.std(ddof=1) / math.sqrt(3))
    self.assertAllClose(ranking.gap_change, (gap.mean(), gap.std(ddof=1),
                                             low, high))
    self.assertAllClose(ranking.gap_change[0],
                        ranking.long_effect - ranking.short_effect)
    self.assertAllClose(ranking.gap_p_holm,
                        scipy_stats.ttest_1samp(gap, 0.).pvalue)
    gap_p = significance.hierarchical_bootstrap(
        (made["long", "approx_ndcg"] - made["long", "softmax"]) -
        (made["short", "approx_ndcg"] - made["short", "softmax"]), 10_000)
    self.assertLess(gap_p, 0.05)  # approx_ndcg caught up: a real change.
    self.assertAllClose(ranking.gap_boot_p_holm, gap_p)
    # Detectable: (z(1 - 0.05 / 2) + z(0.8)) x the bootstrap's standard
    # error (a family of 1).
    se = significance.hierarchical_means(
        ((made["long", "approx_ndcg"] - made["long", "softmax"]) -
         (made["short", "approx_ndcg"] - made["short", "softmax"]))[None],
        10_000).std()
    self.assertAllClose(ranking.gap_detectable,
                        (scipy_stats.norm.ppf(0.975) +
                         scipy_stats.norm.ppf(0.8)) * se)
    self.assertTrue(math.isnan(base.gap_p_holm))
    lines = budgets.gap_lines(rows, "top1_accuracy")
    self.assertEqual(lines[2], "| cell | metric | seeds | effect, short | "
                     "effect, long | change [95% t] | t-test Holm p | "
                     "bootstrap Holm p | detectable | the longer budget, for "
                     "the cell |")
    self.assertEqual(
        lines[4],
        f"| approx_ndcg.dot | top1_accuracy | 0,1,2 | "
        f"{ranking.short_effect:+.4f} | {ranking.long_effect:+.4f} | "
        f"{gap.mean():+.4f} [{low:+.4f}, {high:+.4f}] | "
        f"{ranking.gap_p_holm:.4f} | {gap_p:.4f} | "
        f"{ranking.gap_detectable:.4f} | "
        f"{budgets.verdict(gap.mean(), ranking.gap_p_holm, gap_p)} |")
    self.assertLen(lines, 7)
    self.assertStartsWith(lines[-1], "Effects the longer training changed, "
                          "of 1: ")
    self.assertEqual(budgets.gap_lines(rows, "top5_accuracy"), [])

  def test_verdict_names_the_tests_that_find_it(self):
    for effect, p_t, p_boot, expected in (
        (+0.01, 0.01, 0.02, "gain"), (-0.01, 0.049, 0.001, "loss"),
        (-0.01, 0.2, 0.001, "loss by the bootstrap"),
        (+0.01, 0.01, 0.06, "gain by the t-test"),
        (+0.01, 0.05, 0.05, "none detected"),
        (+0.01, math.nan, math.nan, "none detected")):
      self.assertEqual(budgets.verdict(effect, p_t, p_boot), expected)

  def test_other_test_instances_are_refused(self):
    long_cells, _ = budgets.chosen_cells(self.long)
    short_cells, _ = budgets.chosen_cells(self.short)
    record = short_cells[("approx_ndcg", "dot")][2]
    arrays = dict(record["test_arrays"])
    arrays["labels"] = arrays["labels"][::-1].copy() + 1
    short_cells[("approx_ndcg", "dot")][2] = dict(record, test_arrays=arrays)
    with self.assertRaisesRegex(
        ValueError, r"^the short study's approx_ndcg.dot.lr0.001.seed2 was "
        r"tested on other instances than the long softmax.dot.lr0.001.seed0 "
        r"\(120 against 120 labels, not the same\): the budgets compare one "
        r"test set.$"):
      budgets.compare_budgets(long_cells, short_cells, ["top1_accuracy"])

  def test_missing_test_arrays_are_named(self):
    folder = os.path.join(tempfile.mkdtemp(), "study")
    shutil.copytree(self.long, folder)
    path = os.path.join(folder, study_folder.RUNS_DIR,
                        "softmax.dot.lr0.001.seed1", study_folder.TEST_FILE)
    os.remove(path)
    with self.assertRaisesRegex(ValueError, "^" + path + ": not found "):
      budgets.chosen_cells(folder)

  def test_markdown_counts_the_verdicts_that_survive(self):
    long_cells, _ = budgets.chosen_cells(self.long)
    short_cells, _ = budgets.chosen_cells(self.short)
    rows, _ = budgets.compare_budgets(long_cells, short_cells,
                                      ["top1_accuracy", "top5_accuracy"])
    lines = budgets.markdown(rows, "3,000 steps", "converged",
                             "top1_accuracy")
    self.assertEqual(lines[0], "| cell | metric | seeds | 3,000 steps | "
                     "converged | long - short [95% t] | t-test Holm p | "
                     "bootstrap Holm p | verdict, short | verdict, long | "
                     "survives |")
    self.assertEqual(lines[2].split(" | ")[-3:],
                     ["(baseline)", "(baseline)", "(baseline) |"])
    self.assertStartsWith(lines[3].split(" | ")[8], "loss (-")
    self.assertStartsWith(lines[3].split(" | ")[9], "none detected (")
    self.assertEndsWith(lines[3], " | no |")
    self.assertEqual(lines[-1], "Verdicts against softmax + dot that survive "
                     "the longer training: 0 of 1. The others, short -> "
                     "long: loss -> none detected (1).")
    # Top-5 is 1 everywhere: no change, no effect; the verdict survives.
    top5 = budgets.markdown(rows, "s", "l", "top5_accuracy")
    self.assertIn("| approx_ndcg.dot | top5_accuracy | 0,1,2 | 1.0000 | "
                  "1.0000 | +0.0000 [+0.0000, +0.0000] | 1.0000 | 1.0000 | "
                  "none detected (+0.0000; Holm p t-test 1.0000, bootstrap "
                  "1.0000) | none detected (+0.0000; Holm p t-test 1.0000, "
                  "bootstrap 1.0000) | yes |", top5)

  def test_markdown_counts_each_change_most_frequent_first(self):
    def row(name, short, long_):
      # (effect, t-test Holm p, bootstrap Holm p) at each budget.
      return budgets.Row(
          cell=(name, "dot"), metric="top1_accuracy", seeds=(0, 1, 2),
          short=0.5, long=0.5, change=(0.0, 0.0, 0.0, 0.0), change_p=1.0,
          change_p_holm=1.0, change_boot_p_holm=1.0,
          short_effect=short[0], short_p_holm=short[1],
          short_boot_p_holm=short[2], long_effect=long_[0],
          long_p_holm=long_[1], long_boot_p_holm=long_[2])
    boot_loss, none, loss = (-0.02, 0.3, 0.01), (-0.01, 1.0, 0.2), (
        -0.03, 0.02, 0.01)
    rows = [row("a", boot_loss, none), row("b", boot_loss, loss),
            row("c", boot_loss, none), row("d", none, none),
            row("e", loss, boot_loss)]
    self.assertEqual(
        budgets.markdown(rows, "s", "l")[-1],
        "Verdicts against softmax + dot that survive the longer training: 1 "
        "of 5. The others, short -> long: loss by the bootstrap -> none "
        "detected (2); loss -> loss by the bootstrap (1); loss by the "
        "bootstrap -> loss (1).")

  def test_a_running_study_compares_the_cells_it_has(self):
    # The long study has only seed 0 of approx_ndcg so far.
    partial = os.path.join(tempfile.mkdtemp(), "partial")
    shutil.copytree(self.long, partial)
    for seed in (1, 2):
      for rate in ("0.001", "0.01"):
        shutil.rmtree(os.path.join(partial, study_folder.RUNS_DIR,
                                   f"approx_ndcg.dot.lr{rate}.seed{seed}"))
    rows, left_out = budgets.compare_budgets(
        budgets.chosen_cells(partial)[0], budgets.chosen_cells(self.short)[0],
        ["top1_accuracy"])
    self.assertEqual([r.cell for r in rows], [("softmax", "dot")])
    self.assertEqual(left_out, [("approx_ndcg", "dot")])

  def test_cells_on_one_seed_are_set_out_untested(self):
    # The long study has only seed 0 so far (it chooses on seed 0 first).
    partial = os.path.join(tempfile.mkdtemp(), "seed0")
    shutil.copytree(self.long, partial)
    for loss in ("softmax", "approx_ndcg"):
      for seed in (1, 2):
        for rate in ("0.001", "0.01"):
          shutil.rmtree(os.path.join(partial, study_folder.RUNS_DIR,
                                     f"{loss}.dot.lr{rate}.seed{seed}"))
    long_cells, _ = budgets.chosen_cells(partial)
    short_cells, _ = budgets.chosen_cells(self.short)
    with self.assertRaisesRegex(ValueError, "no .loss, interaction. cell has "
                                "2 seeds chosen in both studies"):
      budgets.compare_budgets(long_cells, short_cells, ["top1_accuracy"])
    text = budgets.tables("L", "S", long_cells, short_cells,
                          ["top1_accuracy"])
    self.assertIn("Not compared (2 cells with fewer than 2 seeds chosen in "
                  "both: their followers not trained): softmax.dot, "
                  "approx_ndcg.dot.\n", text)
    self.assertIn(budgets.one_seed.INTRO, text)
    self.assertNotIn("Verdicts against softmax", text)  # No test, no verdict.
    table = text.split("### top1_accuracy: one seed only\n\n")[1]
    rows = [line.split(" | ") for line in table.splitlines()[2:4]]
    # The per-instance hits the studies were made of, seed 0.
    made = {(name, loss): hits(rates[loss][0], salt + (loss == "softmax"))
            for name, rates, salt in (("short", SHORT, 1000),
                                      ("long", LONG, 2000))
            for loss in rates}
    short, long_ = top1(self.short, "approx_ndcg"), top1(partial,
                                                        "approx_ndcg", (0,))
    self.assertAllClose([short[0], long_[0]],
                        [made["short", "approx_ndcg"].mean(),
                         made["long", "approx_ndcg"].mean()])
    change = made["long", "approx_ndcg"] - made["short", "approx_ndcg"]
    low, high = significance.bootstrap_interval(change)
    # The percentile interval is about the normal one (120 instances).
    half = 1.96 * change.std() / math.sqrt(change.size)
    self.assertAllClose([low, high], [change.mean() - half,
                                      change.mean() + half], atol=0.25 * half)
    effect = {name: made[name, "approx_ndcg"] - made[name, "softmax"]
              for name in ("short", "long")}
    e_low, e_high = significance.bootstrap_interval(effect["long"] -
                                                    effect["short"])
    short_effects = (top1(self.short, "approx_ndcg") -
                     top1(self.short, "softmax"))
    self.assertEqual(rows[1], [
        "| approx_ndcg.dot", "top1_accuracy", "0", f"{short[0]:.4f}",
        f"{long_[0]:.4f}",
        f"{change.mean():+.4f} [{low:+.4f}, {high:+.4f}]",
        f"{short.std(ddof=1):.4f} (3)",
        f"{effect['short'].mean():+.4f}", f"{effect['long'].mean():+.4f}",
        f"{(effect['long'] - effect['short']).mean():+.4f} "
        f"[{e_low:+.4f}, {e_high:+.4f}]",
        f"{short_effects.std(ddof=1):.4f} (3) |"])
    self.assertEqual(rows[0][0], "| softmax.dot")
    self.assertEqual(rows[0][-4:], ["(baseline)"] * 3 + ["(baseline) |"])
    # No common seed at all: refused, as before.
    other = os.path.join(tempfile.mkdtemp(), "seeds12")
    shutil.copytree(self.short, other)
    for loss in ("softmax", "approx_ndcg"):
      for rate in ("0.001", "0.01"):
        shutil.rmtree(os.path.join(other, study_folder.RUNS_DIR,
                                   f"{loss}.dot.lr{rate}.seed0"))
    with self.assertRaisesRegex(ValueError, "2 cell.s. in both, with 0 "
                                "common seed"):
      budgets.tables("L", "S", long_cells, budgets.chosen_cells(other)[0],
                     ["top1_accuracy"])

  def test_cells_of_one_study_alone_are_named(self):
    long_cells, _ = budgets.chosen_cells(self.long)
    short_cells, _ = budgets.chosen_cells(self.short)
    long_cells[("mse", "dot")] = long_cells[("approx_ndcg", "dot")]
    del short_cells[("approx_ndcg", "dot")]
    text = budgets.tables("L", "S", long_cells, short_cells,
                          ["top1_accuracy"])
    self.assertEqual(text.split("## What each budget chose")[0], (
        "Long: L; short: S.\n\n"
        "Only in the long study (2 cells, no counterpart to compare): "
        "approx_ndcg.dot, mse.dot.\n\n"))
    compared = text.split("## top1_accuracy")[1]
    self.assertNotIn("| approx_ndcg.dot |", compared)
    self.assertIn("| softmax.dot | top1_accuracy |", compared)
    # The choices name every cell, with dashes for the budget without it.
    self.assertIn("| approx_ndcg.dot | — | — | — | 0.001 |", text)

  def test_choices_name_each_budget_s_rate_steps_and_convergence(self):
    def long_record(run):  # Seed s: best at 5,000 + 1,000 s, of 10,000 + ...
      return {"best_step": 1000 * (run.seed + 5),
              "converged": (run.loss, run.seed) != ("approx_ndcg", 2),
              "validation_curve": {"top1_accuracy": [
                  [1000, 0.1], [1000 * (run.seed + 10), 0.9]]}}

    def long_validation(run):  # ApproxNDCG's seed 1 chooses 1e-2.
      high = (run.loss, run.seed) == ("approx_ndcg", 1)
      return 0.9 if (run.learning_rate == 1e-2) == high else 0.5

    long = make_study(lambda run: hits(0.7, run.seed),
                      interactions=("dot", "lc_mlp"), val_of=long_validation,
                      record_of=long_record)
    lines = budgets.choices_lines(budgets.chosen_cells(long)[0],
                                  budgets.chosen_cells(self.short)[0])
    self.assertEqual(lines[0], "## What each budget chose")
    self.assertEqual(lines[4:], [
        "| cell | short: choice | short: best / last step, by seed | "
        "short: converged | long: choice | long: best / last step, by seed "
        "| long: converged |",
        "|---|---|---|---|---|---|---|",
        # The short study: make_study's runs (best at 10 of 10), no patience.
        "| softmax.dot | 0.001 | 0: 10 / 10; 1: 10 / 10; 2: 10 / 10 | — | "
        "0.001 | 0: 5,000 / 10,000; 1: 6,000 / 11,000; 2: 7,000 / 12,000 | "
        "3 of 3 |",
        "| softmax.lc_mlp | — | — | — | 0.001, 8 wide | 0: 5,000 / 10,000; "
        "1: 6,000 / 11,000; 2: 7,000 / 12,000 | 3 of 3 |",
        "| approx_ndcg.dot | 0.001 | 0: 10 / 10; 1: 10 / 10; 2: 10 / 10 | — "
        "| 0: 0.001; 1: 0.01; 2: 0.001 | 0: 5,000 / 10,000; 1: 6,000 / "
        "11,000; 2: 7,000 / 12,000 | 2 of 3 |",
        "| approx_ndcg.lc_mlp | — | — | — | 0: 0.001, 8 wide; 1: 0.01, 8 "
        "wide; 2: 0.001, 8 wide | 0: 5,000 / 10,000; 1: 6,000 / 11,000; "
        "2: 7,000 / 12,000 | 2 of 3 |",
        ""])

  def test_binary_writes_the_tables_and_refuses_in_one_line(self):
    output = os.path.join(tempfile.mkdtemp(), "budgets.md")
    result = helpers.run_module(
        "pipelines.compare_budgets", f"--long_study={self.long}",
        f"--short_study={self.short}", "--metrics=top1_accuracy",
        f"--output={output}")
    self.assertEqual(result.returncode, 0, result.stderr)
    with open(output) as f:
      text = f.read()
    self.assertIn(text, result.stdout)
    self.assertIn("## top1_accuracy", text)
    self.assertIn("survive the longer training: 0 of 1. The others", text)
    empty = tempfile.mkdtemp()
    for argv, line in (
        ([f"--long_study={self.long}"], "compare_budgets: --short_study must "
         "be set."),
        ([f"--long_study={empty}", f"--short_study={self.short}"],
         f"compare_budgets: --long_study: {empty} holds no study or "
         "summary (study.json not found)."),
        ([f"--long_study={self.long}", f"--short_study={self.short}",
          "--metrics=map"], "compare_budgets: --metrics: 'map' is not "
         "recorded by both studies (long: top1_accuracy, top5_accuracy, "
         "ndcg@5, mrr; short: top1_accuracy, top5_accuracy, ndcg@5, mrr).")):
      bad = helpers.run_module("pipelines.compare_budgets", *argv,
                               check=False)
      self.assertEqual(bad.returncode, 1)
      self.assertEqual(bad.stderr.strip().splitlines()[-1], line)


def keras_stop(values, patience):
  """(kept, last) 0-based, as `training.callbacks.EarlyStopping` (the
  callback `--patience` trains with) stops on the validations `values`."""
  from rank4class_tf.training import callbacks  # pylint: disable=g-import-not-at-top

  class Model:
    stop_training = False

  callback = callbacks.EarlyStopping("", "val_top1_accuracy", patience,
                                     steps_per_epoch=10)
  callback.set_model(Model())
  callback.on_train_begin()
  last = len(values) - 1
  for epoch, value in enumerate(values):
    callback.on_epoch_end(epoch, {"val_top1_accuracy": value})
    if callback.model.stop_training:
      last = epoch
      break
  # The checkpoint kept: the first maximum of what it trained.
  trained = values[:last + 1]
  return trained.index(max(trained)), last


class PatienceStopTest(tf.test.TestCase):

  def test_hand_made_curves(self):
    # Plateau, then a later best: patience 2 stops at the tie's second
    # step and keeps the first 0.5; patience 3 reaches the 0.9.
    curve = [0.2, 0.5, 0.5, 0.45, 0.9, 0.9, 0.9]
    self.assertEqual(budgets.patience_stop(curve, 2), (1, 3))
    self.assertEqual(budgets.patience_stop(curve, 3), (4, 6))
    # Still improving at the ceiling: the last validation, kept.
    self.assertEqual(budgets.patience_stop([0.1, 0.2, 0.3], 1), (2, 2))
    self.assertEqual(budgets.patience_stop([0.4, 0.3, 0.2, 0.1], 1), (0, 1))
    self.assertEqual(budgets.patience_stop([0.7], 5), (0, 0))

  def test_equals_the_training_callback(self):
    rng = np.random.default_rng(61)
    for _ in range(300):
      # Few distinct values: ties and plateaus are common.
      values = [float(v) for v in rng.integers(0, 5, rng.integers(1, 15))]
      patience = int(rng.integers(1, 6))
      self.assertEqual(budgets.patience_stop(values, patience),
                       keras_stop(values, patience), (values, patience))

  def test_refuses_what_is_no_curve(self):
    for values, patience, match in (([0.1], 0, "patience=0"),
                                    ([], 3, "at least one"),
                                    ([0.1, math.nan], 3, "all finite")):
      with self.assertRaisesRegex(ValueError, match):
        budgets.patience_stop(values, patience)


if __name__ == "__main__":
  tf.test.main()
