"""The committed GoEmotions studies hold what their verdicts need.

docs/text.md and the README give the paper's claims a verdict from the
committed `results/study_goemotions_*` summaries. These tests read those
files (no training, no report) and check what a verdict rests on:

* every (loss, interaction) cell of the study has its chosen run in each of
  seeds 0, 1 and 2;
* no chosen run sits on an edge of the learning rates or widths tried, or
  peaked at its last validation, unless `tables.md` says why (the
  extension limit: "after N extension rounds", "peaked last, extension
  limit");
* `tables.md` puts the paper's Table 7 effects beside ours, with the sign
  agreement;
* every number the README, docs/text.md and docs/study.md give for the
  verdicts is the committed report's (`DocNumbersTest`, issue 59): each
  expected phrase is built here from the report (or from results.csv's
  unrounded values, for a difference of two means) and must appear in the
  doc, so a regenerated report whose numbers move fails until the docs
  follow; and every table row the docs copy from a report is in it. The
  frozen study trained to convergence is the claims tables' "converged"
  column, and what the docs say of its budget table
  (`results/long_studies/frozen_budgets.md`: verdicts that survive, how the
  others changed, the rates chosen) is read from that table.

* each chosen run's test metrics (which the seed t-test reads) are the
  means of its per-instance test arrays (which the bootstrap reads);
* issue 61's long studies, committed while they run (`LongStudyTest`): every
  run made by the one pinned commit, of the planned cells and seeds; once a
  study has ended, every cell with seeds 0, 1 and 2, every chosen run
  converged or its exception marked, the paper's effects placed; each
  committed budget table (`results/long_studies/*_budgets.md`) is what
  `pipelines.compare_budgets` makes of the summaries it names.

`make check-results` checks the other half: that each committed report is
the one the committed code makes of its runs (`--check_report`).
"""

import csv
import glob
import json
import os
import re
import statistics
import subprocess

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from rank4class_tf.study import budgets

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Study folder -> its cells, as `--cells` names them.
STUDIES = {
    "study_goemotions_frozen": [
        f"{loss}.{interaction}"
        for loss in ("softmax", "pairwise_logistic", "approx_ndcg",
                     "gumbel_approx_ndcg", "mse")
        for interaction in ("dot", "lc_mlp", "concat_mlp")],
    "study_goemotions_finetuned": [
        "softmax.dot", "pairwise_logistic.dot", "approx_ndcg.dot",
        "gumbel_approx_ndcg.dot", "mse.dot", "softmax.lc_mlp",
        "softmax.concat_mlp", "approx_ndcg.lc_mlp", "approx_ndcg.concat_mlp"],
}

CELL_TITLES = {"softmax": "Softmax CE", "pairwise_logistic":
               "Pairwise logistic", "approx_ndcg": "ApproxNDCG",
               "gumbel_approx_ndcg": "Gumbel-ApproxNDCG", "mse": "MSE",
               "dot": "Dot", "lc_mlp": "LC+MLP", "concat_mlp": "Concat+MLP"}


def _read(study, name):
  with open(os.path.join(REPO, "results", study, name), encoding="utf-8") as f:
    return f.read()


def _chosen_rows(study):
  """results.csv's chosen runs."""
  with open(os.path.join(REPO, "results", study, "results.csv"),
            encoding="utf-8", newline="") as f:
    return [row for row in csv.DictReader(f) if row["selected"] == "True"]


def _fairness_notes(tables):
  """(cell title, seed) -> the "fairness" column of tables.md's chosen
  runs."""
  lines = tables.split("## Chosen runs", 1)[1].splitlines()
  notes = {}
  for line in lines:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 7 and cells[1].isdigit():
      notes[(cells[0], int(cells[1]))] = cells[6]
  return notes


def _assert_three_seeds_a_cell(test, study, cells):
  """The study's chosen runs are of exactly `cells`, seeds 0, 1 and 2."""
  seeds = {}
  for row in _chosen_rows(study):
    seeds.setdefault(f"{row['loss']}.{row['interaction']}", []).append(
        int(row["seed"]))
  test.assertEqual(sorted(seeds), sorted(cells))
  for cell, found in seeds.items():
    test.assertEqual(sorted(found), [0, 1, 2], cell)


class CommittedStudyTest(parameterized.TestCase):

  @parameterized.named_parameters((study, study) for study in STUDIES)
  def test_every_cell_has_three_seeds(self, study):
    _assert_three_seeds_a_cell(self, study, STUDIES[study])

  @parameterized.named_parameters((study, study) for study in STUDIES)
  def test_edges_and_last_peaks_are_explained(self, study):
    notes = _fairness_notes(_read(study, "tables.md"))
    chosen = _chosen_rows(study)
    self.assertLen(notes, len(chosen))
    for row in chosen:
      title = (f"{CELL_TITLES[row['loss']]} + "
               f"{CELL_TITLES[row['interaction']]}")
      note = notes[(title, int(row["seed"]))]
      on_edge = row["lr_edge"] in ("low", "high") or row["units_edge"] in (
          "low", "high")
      self.assertEqual("edge" in note, on_edge, row["run"])
      if on_edge:
        self.assertIn("extension round", note, row["run"])
      self.assertEqual("peaked last" in note, row["best_is_last"] == "True",
                       row["run"])
      if row["best_is_last"] == "True":
        self.assertIn("peaked last, extension limit", note, row["run"])
      self.assertNotIn("not tuned", note, row["run"])

  @parameterized.named_parameters((study, study) for study in STUDIES)
  def test_paper_effects_beside_tables_7_and_8(self, study):
    tables = _read(study, "tables.md")
    header = next(line for line in tables.splitlines()
                  if "paper Δ (Table 7)" in line)
    # Both tables, each with its placement and sign; our Δ with both tests,
    # what this study detects and the single-run band.
    self.assertIn("| paper Δ (Table 7) | against ours | sign | paper Δ "
                  "(Table 8) | against ours | sign |", header)
    self.assertIn("| t-test Holm p | detectable | single run ± |", header)


class RecordsAndArraysTest(parameterized.TestCase):
  """The seed t-test reads each chosen run's test metric from its record,
  the bootstrap the run's per-instance test arrays: in every committed
  GoEmotions study they are the same numbers (the record's metric is its
  array's mean), so the two tests test one difference."""

  @parameterized.named_parameters(
      (s, s) for s in ("study_goemotions_frozen", "study_goemotions_finetuned",
                       "study_goemotions_frozen_long",
                       "study_goemotions_finetuned_long"))
  def test_record_metrics_are_the_arrays_means(self, study):
    folder = os.path.join(REPO, "results", study)
    if not os.path.exists(os.path.join(folder, "study.json")):
      self.skipTest(f"results/{study}: not committed yet.")
    cells, _ = budgets.chosen_cells(folder)
    compared = 0
    for runs in cells.values():
      for record in runs.values():
        for metric in ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr"):
          self.assertAlmostEqual(
              float(np.mean(record["test_arrays"][metric])),
              record["test"][metric], places=9, msg=(record["run"], metric))
          compared += 1
    self.assertGreater(compared, 0)


# Issue 61's long studies (tools/long_studies.sh), committed as they run:
# folder -> its cells.
LONG_STUDIES = {
    "study_goemotions_frozen_long": STUDIES["study_goemotions_frozen"],
    "study_goemotions_finetuned_long": [
        "softmax.dot", "pairwise_logistic.dot", "approx_ndcg.dot",
        "gumbel_approx_ndcg.dot", "approx_ndcg.lc_mlp",
        "pairwise_logistic.concat_mlp"],
}


def _pinned_commit():
  with open(os.path.join(REPO, "tools", "long_studies.sh"),
            encoding="utf-8") as f:
    return re.search(r"^PINNED_COMMIT=([0-9a-f]{40})$", f.read(),
                     re.M).group(1)


class LongStudyTest(parameterized.TestCase):
  """The long studies' summaries: made by the one pinned commit, of the
  planned cells; once a study has ended (no run without a result), what
  `CommittedStudyTest` checks of the others plus convergence."""

  def test_the_planned_studies_are_the_script_s(self):
    # LONG_STUDIES is what tools/long_studies.sh runs (the studies it
    # prints, each with its --cells or, without, every loss x interaction),
    # and tools/commit_long_summaries.sh commits the same studies.
    printed = subprocess.run(
        ["bash", os.path.join(REPO, "tools", "long_studies.sh"), "--print"],
        check=True, capture_output=True, text=True).stdout.splitlines()
    planned = {}
    for line in printed:
      study = re.search(r"--study_dir=runs/(\S+)", line).group(1)
      cells = re.search(r"--cells=(\S+)", line)
      planned[study] = (cells.group(1).split(",") if cells else
                        STUDIES["study_goemotions_frozen"])
    self.assertEqual(planned, LONG_STUDIES)
    with open(os.path.join(REPO, "tools", "commit_long_summaries.sh"),
              encoding="utf-8") as f:
      self.assertIn("bash tools/long_studies.sh --print", f.read())

  def _tables(self, study):
    if not os.path.exists(os.path.join(REPO, "results", study, "tables.md")):
      self.skipTest(f"results/{study}: not started (no summary committed).")
    return _read(study, "tables.md")

  @parameterized.named_parameters((s, s) for s in LONG_STUDIES)
  def test_made_by_the_pinned_commit(self, study):
    code = self._tables(study).split("## Code", 1)[1].split("\n## ", 1)[0]
    lines = [l for l in code.splitlines() if l.startswith("- ")]
    self.assertNotEmpty(lines)
    for line in lines:
      self.assertIn(f", commit {_pinned_commit()[:12]}, TensorFlow 2.15.1",
                    line)

  @parameterized.named_parameters((s, s) for s in LONG_STUDIES)
  def test_chosen_runs_are_planned_cells_and_seeds(self, study):
    self._tables(study)
    for row in _chosen_rows(study):
      self.assertIn(f"{row['loss']}.{row['interaction']}",
                    LONG_STUDIES[study])
      self.assertIn(row["seed"], ("0", "1", "2"))

  @parameterized.named_parameters((s, s) for s in LONG_STUDIES)
  def test_an_ended_study_is_complete_and_converged(self, study):
    tables = self._tables(study)
    running = re.search(r"\*\*(\d+) of the grid's (\d+) runs have no "
                        r"result\*\*", tables)
    if running:
      self.skipTest(f"results/{study}: still running ({running.group(1)} "
                    f"of {running.group(2)} runs to go).")
    _assert_three_seeds_a_cell(self, study, LONG_STUDIES[study])
    chosen = _chosen_rows(study)
    open_runs = int(re.search(
        rf"\*\*(\d+) of {len(chosen)} chosen runs did not converge\*\*",
        tables).group(1))
    if open_runs:  # Each exception marked, with why.
      self.assertIn(f"{open_runs} of those {open_runs} did not converge "
                    "after `--extend_steps`", tables)
    self.assertIn("| paper Δ (Table 7) | against ours | sign | paper Δ "
                  "(Table 8) | against ours | sign |", tables)


class BudgetTablesTest(absltest.TestCase):
  """Each committed `results/long_studies/*_budgets.md` is what
  `pipelines.compare_budgets` makes of the committed summaries it names."""

  def test_budget_tables_are_the_committed_summaries(self):
    paths = sorted(glob.glob(os.path.join(REPO, "results", "long_studies",
                                          "*_budgets.md")))
    if not paths:
      self.skipTest("no budget table committed yet (the long studies run).")
    for path in paths:
      with open(path, encoding="utf-8") as f:
        text = f.read()
      long_study, short_study = re.match(r"Long: (\S+); short: (\S+)\.\n",
                                         text).groups()
      long_cells, _ = budgets.chosen_cells(os.path.join(REPO, long_study))
      short_cells, _ = budgets.chosen_cells(os.path.join(REPO, short_study))
      metrics = re.findall(r"^## (\S+)$", text, re.M)
      self.assertNotEmpty(metrics, path)
      self.assertEqual(text, budgets.tables(long_study, short_study,
                                            long_cells, short_cells, metrics),
                       path)


def _doc(path):
  """A doc's text with its whitespace collapsed (line wraps ignored)."""
  with open(os.path.join(REPO, path), encoding="utf-8") as f:
    return " ".join(f.read().split())


def _minus(text):
  """The docs' prose minus sign."""
  return text.replace("-", "\u2212")


def _rows(text, header_start):
  """The cells of each row of the first table whose header starts so."""
  lines = text.splitlines()
  start = next(i for i, l in enumerate(lines) if l.startswith(header_start))
  rows = []
  for line in lines[start + 2:]:
    if not line.startswith("|"):
      break
    rows.append([c.strip() for c in line.strip().strip("|").split("|")])
  return rows


class Report:
  """What the docs quote from one committed report."""

  def __init__(self, study):
    self.study = study
    self.text = _read(study, "tables.md")

  def family(self, title):
    """(tests, floor, bootstrap, t-test, both) of a family."""
    row = next(r for r in _rows(self.text, "| family | tests") if
               r[0].startswith(title))
    return tuple(row[1:])

  def contrasts(self, kind):
    """(number, better (b, t, both), worse (b, t, both)) of a kind."""
    row = next(r for r in _rows(self.text, "| contrasts | number") if
               r[0].startswith(kind))
    return (row[1], tuple(row[2].split(" / ")), tuple(row[3].split(" / ")))

  def contrast_effects(self):
    """[(contrast, metric, Δ text, bootstrap Holm, t-test Holm)]."""
    metrics = ["Top-1", "Top-5", "NDCG@5", "MRR"]
    out = []
    for row in _rows(self.text, "| contrast | Δ Top-1"):
      for metric, value in zip(metrics, row[1:]):
        found = re.fullmatch(
            r"(?:\*\*)?([+-]\d\.\d{4})(?:\*\*)? \(([^;]+); ([^;]+); "
            r"([^)]+)\)", value)
        out.append((row[0], metric, found.group(1), float(found.group(3)),
                    float(found.group(4))))
    return out

  def placements(self, metric, table):
    """The counts line of a paper table for a metric, parsed."""
    section = self.text.split(f"**{metric}**", 1)[1].split("\n**", 1)[0]
    line = next(l for l in section.splitlines()
                if l.startswith(f"{table}:"))
    gains = re.search(r"its (\d+) gains lie above our interval in (\d+), "
                      r"inside in (\d+), below in (\d+) \((\d+) outside", line)
    signs = re.search(r"Signs: (\d+) of the (\d+) cells", line)
    return {"gains": int(gains.group(1)), "above": int(gains.group(2)),
            "band": int(gains.group(5)), "agree": int(signs.group(1)),
            "known": int(signs.group(2))}

  def metric_claim(self, rule, ranking, accuracy):
    """(unresolved by accuracy, ranking separates of them, reverse, p)."""
    row = next(r for r in _rows(self.text, "| separated by") if
               r[:3] == [rule, ranking, accuracy])
    return row[3].split(" of ")[0], row[4], row[5], row[6]

  def informativeness(self, metric):
    """(raw, bootstrap Holm, share, t-test Holm, both) of a metric."""
    row = next(r for r in _rows(self.text, "| metric | pairs separated") if
               r[0] == metric)
    return tuple(row[1:])

  def table2(self, metric):
    return next(r for r in _rows(self.text, "| metric | MCC") if
                r[0] == metric)

  def power(self, metric, family="against softmax + dot"):
    """(detectable median, t-test median, paper median, paper largest)."""
    row = next(r for r in _rows(self.text, "| metric | family | m |") if
               r[:2] == [metric, family])
    paper = row[8].split(", ") if len(row) > 8 else ["—", "—"]
    return row[5].split()[0], row[7].split()[0], paper[0], paper[1]

  def line(self, pattern):
    """The first match of a regular expression in the report."""
    return re.search(pattern, self.text)

  def within_run(self):
    """Bruch's claim: (softmax runs, median ρ with MRR, with NDCG@5, runs
    negative on MRR, every run's ρ with MRR, with NDCG)."""
    rows = {r[0]: r for r in _rows(self.text, "| metric | median ρ")}
    every = next(r for r in _rows(self.text, "| runs | number") if
                 r[0] == "all")
    runs = int(rows["MRR"][2]) + int(rows["MRR"][3])
    return (runs, float(rows["MRR"][1]), float(rows["NDCG@5"][1]),
            int(rows["MRR"][2]), every[1], float(every[2]), float(every[3]))


def _base_means(study):
  """Unrounded means over seeds of softmax + dot's chosen runs."""
  rows = [r for r in _chosen_rows(study)
          if (r["loss"], r["interaction"]) == ("softmax", "dot")]
  return {m: statistics.mean(float(r[f"test_{m}"]) for r in rows)
          for m in ("top1_accuracy", "top5_accuracy", "ndcg@5")}, {
              m: statistics.stdev(float(r[f"test_{m}"]) for r in rows)
              for m in ("top1_accuracy", "top5_accuracy", "ndcg@5")}


class DocNumbersTest(absltest.TestCase):
  """The verdicts' numbers in the docs are the committed reports'."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.frozen = Report("study_goemotions_frozen")
    cls.converged = Report("study_goemotions_frozen_long")
    cls.tuned = Report("study_goemotions_finetuned")
    cls.sodeep = Report("study_goemotions_sodeep")
    cls.digits = Report("study_digits")
    cls.readme = _doc("README.md")
    cls.text = _doc("docs/text.md")
    cls.study_md = _doc("docs/study.md")

  def claims_row(self, report):
    """The claims table's phrases for one regime, from its report."""
    number, better, worse = report.contrasts("ranking loss")
    top5 = {t: report.placements("Top-5", t) for t in ("Table 7", "Table 8")}
    ndcg = {t: report.placements("NDCG@5", t) for t in ("Table 7", "Table 8")}
    lead = ("none better by either test" if report is self.tuned else
            "none better at Holm p < 0.05 by either test")
    loss = (f"{lead}; {worse[0]} worse by the bootstrap, {worse[2]} "
            "resolved. The paper's Top-5 / NDCG@5 gains lie above our "
            "intervals in "
            f"{top5['Table 7']['above']} / {ndcg['Table 7']['above']} of its "
            f"{top5['Table 7']['gains']} / {ndcg['Table 7']['gains']} gains "
            f"in Table 7 ({top5['Table 8']['above']} / "
            f"{ndcg['Table 8']['above']} of {top5['Table 8']['gains']} / "
            f"{ndcg['Table 8']['gains']} in Table 8)")
    self.assertEqual(better, ("0", "0", "0"))
    claims = []
    for accuracy in ("Top-1", "Top-5"):
      _, gained, lost, p = report.metric_claim("bootstrap", "NDCG@5",
                                               accuracy)
      claims.append((gained, lost, p))
    return number, loss, claims

  def test_claims_tables(self):
    for report, regime in ((self.frozen, "frozen"), (self.tuned, "tuned"),
                           (self.converged, "converged")):
      number, loss, claims = self.claims_row(report)
      for doc in (self.readme, self.text):
        self.assertIn(f"of {number}" if regime == "tuned" else
                      f"of {number} loss contrasts", doc)
        self.assertIn(loss, doc)
      (g1, l1, p1), (g5, l5, p5) = claims
      self.assertIn(f"{g1} against {l1} the other way (sign test p {p1})"
                    if regime == "frozen" else
                    f"against Top-1, {g1} against {l1} (p {p1})", self.readme)
      self.assertIn(f"against Top-5, {g5} against {l5} (p {p5})",
                    self.readme)
    # Interactions, frozen: 7 better by the bootstrap, 1 resolved, 3 worse.
    number, better, worse = self.frozen.contrasts("interaction")
    phrase = (f"of {number} interaction contrasts {better[0]} better by the "
              "bootstrap, all under MSE")
    self.assertIn(phrase, self.readme)
    self.assertIn(phrase, self.text)
    self.assertIn(f"{worse[0]} worse by the bootstrap", self.readme)
    self.assertEqual(better[2], "1")
    resolved = [c for c in self.frozen.contrast_effects()
                if c[3] < 0.05 and c[4] < 0.05]
    self.assertEqual([c[:3] for c in resolved],
                     [("MSE + Concat+MLP vs MSE + Dot", "MRR", "+0.0364")])
    self.assertIn("1 resolved (MSE + Concat+MLP, MRR +0.0364)", self.readme)
    number, better, worse = self.tuned.contrasts("interaction")
    self.assertIn(f"of {number} none better by either test; {worse[0]} worse "
                  f"by the bootstrap, {worse[2]} resolved", self.readme)

  def test_converged_claims(self):
    # The converged column: the 3 resolved loss contrasts are MSE + Dot's;
    # the interactions better by the bootstrap are all MSE's, none
    # resolved.
    resolved = [c[:3] for c in self.converged.contrast_effects()
                if c[3] < 0.05 and c[4] < 0.05]
    self.assertEqual(resolved, [
        ("MSE + Dot vs Softmax CE + Dot", "Top-5", "-0.0327"),
        ("MSE + Dot vs Softmax CE + Dot", "NDCG@5", "-0.0371"),
        ("MSE + Dot vs Softmax CE + Dot", "MRR", "-0.0358")])
    for doc in (self.readme, self.text):
      self.assertIn("The 3 resolved: MSE + `dot`", doc)
    self.assertIn("3 resolved, all MSE + `dot` (Top-5 −0.0327, NDCG@5 "
                  "−0.0371, MRR −0.0358)", self.text)
    number, better, worse = self.converged.contrasts("interaction")
    self.assertEqual(better, ("6", "0", "0"))
    found = {c[0]: c[2] for c in self.converged.contrast_effects()
             if c[3] < 0.05 and c[2].startswith("+") and c[1] == "Top-1"}
    self.assertEqual(found, {"MSE + LC+MLP vs MSE + Dot": "+0.0299",
                             "MSE + Concat+MLP vs MSE + Dot": "+0.0497"})
    self.assertTrue(all(
        c[0].startswith("MSE + ") for c in self.converged.contrast_effects()
        if c[3] < 0.05 and c[2].startswith("+")))
    for doc in (self.readme, self.text):
      self.assertIn(f"of {number} interaction contrasts {better[0]} better "
                    "by the bootstrap, all under MSE (+0.0299 / +0.0497 "
                    f"Top-1), {better[2]} resolved", doc)
    self.assertIn(f"{better[2]} resolved; {worse[0]} worse by the bootstrap, "
                  f"{worse[2]} resolved", self.readme)
    mrr = next(c for c in self.converged.contrast_effects() if c[:2] == (
        "MSE + Concat+MLP vs MSE + Dot", "MRR"))
    self.assertIn(f"is {mrr[2]} here, t-test Holm p {mrr[4]:.4f}", self.text)
    power = [self.converged.power(m)[0] for m in ("Top-1", "Top-5",
                                                   "NDCG@5")]
    self.assertIn(f"effects of about {power[0]} Top-1, {power[1]} Top-5 and "
                  f"{power[2]} NDCG@5", self.text)
    fairness = self.converged.line(
        r"\*\*(\d+) of (\d+) chosen runs are on an edge.*\n\*\*(\d+) of "
        r"\d+ chosen runs did not converge")
    self.assertEqual(fairness.groups(), ("0", "45", "0"))
    self.assertIn("0 of 45 chosen runs on an edge or not converged",
                  self.readme)
    self.assertIn("0 of its 45 chosen runs sit on an edge of the rates or "
                  "widths tried, and 0 of 45 did not converge", self.text)

  def test_bruch_in_every_regime(self):
    for report in (self.frozen, self.tuned, self.converged):
      runs, mrr, ndcg, negative, every, every_mrr, every_ndcg = (
          report.within_run())
      self.assertIn(f"median within-run ρ = {_minus(f'{mrr:.2f}')} "
                    f"({negative} of {runs} softmax runs)", self.readme)
      rho = (f"{mrr:.2f}" if f"{mrr:.2f}" == f"{ndcg:.2f}" else
             f"{mrr:.2f} / {ndcg:.2f}").replace("-", "\u2212")
      self.assertIn(
          f"within each of the {runs} softmax runs, validation CE against "
          f"MRR and NDCG@5 median ρ = {rho} ({negative} of {runs} negative); "
          f"across all {every} runs ρ = {_minus(f'{every_mrr:.2f}')} / "
          f"{_minus(f'{every_ndcg:.2f}')}", self.text)

  def test_the_fine_tuned_seed_0_table(self):
    # What docs/text.md and the README say of the fine-tuned long study's
    # seed 0, from results/long_studies/finetuned_budgets.md's one-seed
    # tables (single runs, untested).
    with open(os.path.join(REPO, "results", "long_studies",
                           "finetuned_budgets.md"), encoding="utf-8") as f:
      table = f.read()
    self.assertNotIn("Verdicts against softmax", table)  # Nothing tested.
    rows = {}
    for metric in ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr"):
      rows[metric] = {r[0]: r for r in _rows(
          table.split(f"### {metric}: one seed only\n", 1)[1],
          "| cell | metric | seed")}
      self.assertEqual(list(rows[metric]), [
          "softmax.dot", "pairwise_logistic.dot", "approx_ndcg.dot",
          "gumbel_approx_ndcg.dot", "approx_ndcg.lc_mlp"])
      self.assertEqual({r[2] for r in rows[metric].values()}, {"0"})

    def first(cell):
      return float(cell.split()[0])

    ranking = [c for c in rows["ndcg@5"] if c != "softmax.dot"]
    ndcg = rows["ndcg@5"]
    changes = [first(ndcg[c][9]) for c in ranking]
    effects = [first(ndcg[c][8]) for c in ranking]
    self.assertTrue(all(v > 0 for v in changes))
    self.assertTrue(all(v < 0 for v in effects))
    quoted = f"+{min(changes):.4f} to +{max(changes):.4f}"
    self.assertIn(f"softmax + `dot` on NDCG@5 ({quoted}) and stayed below "
                  "it", self.readme)
    self.assertIn(f"on NDCG@5 (the effect's change {quoted}; ApproxNDCG + "
                  f"LC+MLP from {_minus(ndcg['approx_ndcg.lc_mlp'][7])} to "
                  f"{_minus(ndcg['approx_ndcg.lc_mlp'][8])}), and each still "
                  f"below it ({_minus(f'{min(effects):.4f}')} to "
                  f"{_minus(f'{max(effects):.4f}')})", self.text)
    top5 = rows["top5_accuracy"]["approx_ndcg.dot"]
    self.assertIn(f"On Top-5 ApproxNDCG + `dot` went from {_minus(top5[7])} "
                  f"to {_minus(top5[8])}", self.text)
    # No long effect above 0 by more than 1.4 x the short study's seed
    # spread of that effect.
    above = [(first(r[8]), first(r[10]), r[0], m) for m, by_cell in
             rows.items() for r in by_cell.values()
             if r[0] != "softmax.dot" and first(r[8]) > 0]
    self.assertLen(above, 4)
    self.assertTrue(all(effect < 1.4 * sd for effect, sd, _, _ in above))
    largest = max(above)
    self.assertEqual(largest[2:], ("gumbel_approx_ndcg.dot", "top1_accuracy"))
    self.assertIn(f"{len(above)} of the 16 long effects (4 ranking cells × 4 "
                  "metrics) are above 0, the largest Gumbel-ApproxNDCG + "
                  f"`dot` Top-1 +{largest[0]:.4f}, each within 1.4 times the "
                  "3,400-step study's seed spread of that effect "
                  f"({largest[1]:.4f} for that one)", self.text)
    base = rows["top1_accuracy"]["softmax.dot"]
    own = [first(r[5]) for c, r in rows["top1_accuracy"].items()
           if c != "softmax.dot"]
    self.assertIn(f"softmax + `dot` Top-1 {base[3]} to {base[4]} "
                  f"({_minus(base[5])}), the ranking cells "
                  f"+{min(own):.4f} to +{max(own):.4f}", self.text)
    # The price of what is left: the tool's lines in docs/text.md (checked
    # against the tool by tests/test_long_studies.py), in the README.
    steps = re.search(r"(\d+) to (\d+) steps at the ([\d.]+) steps a second "
                      r"of two workers \(training steps alone\): (\d+) h to "
                      r"(\d+) h", self.text).groups()
    self.assertIn(f"({int(steps[0]):,} to {int(steps[1]):,} steps, "
                  f"{steps[3]}-{steps[4]} h of two workers' training steps",
                  self.readme)

  def test_the_converged_budget_table(self):
    # What docs/text.md and the README say of the frozen budgets, from
    # results/long_studies/frozen_budgets.md.
    with open(os.path.join(REPO, "results", "long_studies",
                           "frozen_budgets.md"), encoding="utf-8") as f:
      table = f.read()
    survived = judged = 0
    changes = {}
    for found in re.finditer(r"^Verdicts against softmax \+ dot that survive "
                             r"the longer training: (\d+) of (\d+)\.(.*)$",
                             table, re.M):
      survived += int(found.group(1))
      judged += int(found.group(2))
      for change, count in re.findall(r"([a-z ]+ -> [a-z ]+) \((\d+)\)",
                                      found.group(3)):
        changes[change.strip()] = changes.get(change.strip(), 0) + int(count)
    self.assertEqual((survived, judged), (38, 56))
    self.assertEqual(changes, {
        "loss by the bootstrap -> none detected": 12,
        "loss by the bootstrap -> loss": 4,
        "loss -> loss by the bootstrap": 1,
        "none detected -> loss by the bootstrap": 1})
    rows = [r for r in _rows(table, "| cell | metric | seeds")]
    for metric in ("top5_accuracy", "ndcg@5", "mrr"):
      rows += _rows(table.split(f"## {metric}\n", 1)[1], "| cell | metric")
    self.assertLen(rows, 60)
    self.assertFalse([r for r in rows if "gain" in r[8] + r[9]])
    self.assertIn(f"of {judged} verdicts against softmax + `dot`, none a gain "
                  f"at either budget, {survived} the same, "
                  f"{changes['loss by the bootstrap -> none detected']} losses "
                  "by the bootstrap no longer detected", self.readme)
    self.assertIn(
        f"none is better by either test at either budget. {survived} of the "
        f"{judged} are the same at both. "
        f"{changes['loss by the bootstrap -> none detected']} losses the "
        "bootstrap found at 3,000 steps are not detected converged", self.text)
    self.assertIn(f"{changes['loss by the bootstrap -> loss']} become "
                  "resolved losses", self.text)
    t_min = min(float(r[6]) for r in rows)
    boot_min = min(float(r[7]) for r in rows)
    self.assertIn(f"own change (long − short) is resolved either (none of "
                  f"{len(rows)}; smallest Holm p: t-test {t_min:.4f}, "
                  f"bootstrap {boot_min:.4f})", self.text)
    self.assertGreater(min(t_min, boot_min), 0.05)
    # The effects' change (difference in differences), under each metric's
    # table.
    gaps = []
    for metric in ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr"):
      gaps += _rows(table.split(f"### {metric}: the effects' change\n", 1)[1],
                    "| cell | metric | seeds | effect, short")
    self.assertLen(gaps, 56)
    self.assertEqual({r[9] for r in gaps}, {"none detected"})
    detectable = {
        m: f"{statistics.median(float(r[8]) for r in gaps if r[1] == m):.4f}"
        for m in ("top1_accuracy", "top5_accuracy", "ndcg@5")}
    self.assertIn(f"a change of about {detectable['top1_accuracy']} Top-1, "
                  f"{detectable['top5_accuracy']} Top-5 and "
                  f"{detectable['ndcg@5']} NDCG@5", self.text)
    self.assertGreater(float(detectable["top1_accuracy"]), max(
        float(r[5].split()[0]) for r in gaps if r[1] == "top1_accuracy"))
    self.assertIn(f"none of the {len(gaps)} effects' changes resolved",
                  self.readme)
    self.assertIn(
        f"none of the {len(gaps)} changes is resolved by either test after "
        f"Holm (smallest Holm p: t-test {min(float(r[6]) for r in gaps):.4f}"
        f", bootstrap {min(float(r[7]) for r in gaps):.4f})", self.text)
    top1 = {r[0]: r[5] for r in gaps if r[1] == "top1_accuracy" and
            r[0].split(".")[0] in ("pairwise_logistic", "approx_ndcg",
                                   "gumbel_approx_ndcg")}
    signs = [float(v.split()[0]) for v in top1.values()]
    self.assertEqual((sum(v > 0 for v in signs), sum(v == 0 for v in signs),
                      sum(v < 0 for v in signs)), (7, 1, 1))
    self.assertEqual([c for c, v in top1.items() if float(v.split()[0]) <= 0],
                     ["pairwise_logistic.dot", "pairwise_logistic.concat_mlp"])
    self.assertIn("ranking losses' Top-1 effects moved up in 7 of their 9 "
                  "cells, not at all in 1 and down in 1", self.text)
    self.assertEqual(max(top1, key=lambda c: float(top1[c].split()[0])),
                     "approx_ndcg.lc_mlp")
    self.assertIn(f"ApproxNDCG + LC+MLP, {_minus(top1['approx_ndcg.lc_mlp'])}"
                  f"; the probe's cell, ApproxNDCG + `dot`, "
                  f"{_minus(top1['approx_ndcg.dot'])}", self.text)
    # The learning rates each budget chose.
    moved = {"lower": 0, "same": 0, "higher": 0}
    for row in _rows(table, "| cell | short: choice"):
      short, long_ = (float(row[i].split(",")[0]) for i in (1, 4))
      moved["lower" if long_ < short else "higher" if long_ > short else
            "same"] += 1
    self.assertEqual(moved, {"lower": 12, "same": 2, "higher": 1})
    self.assertIn("a lower learning rate in 12 of the 15 cells, the same in "
                  "2", self.text)
    # The changed verdicts docs/text.md names, with both budgets' effects;
    # each loss no longer detected is smaller converged.
    changed = {}
    for r in rows:
      if r[10] == "no":
        (short_kind, short_effect), (long_kind, long_effect) = (
            re.match(r"(.+?) \(([+-]\d\.\d{4});", v).groups()
            for v in (r[8], r[9]))
        changed[(r[0], r[1])] = (short_kind, long_kind, short_effect,
                                 long_effect, r[9])
        if (short_kind, long_kind) == ("loss by the bootstrap",
                                       "none detected"):
          self.assertLess(abs(float(long_effect)), abs(float(short_effect)),
                          r[:2])
    for cell, metric, kinds, phrase in (
        ("approx_ndcg.lc_mlp", "top1_accuracy", ("loss by the bootstrap",
         "none detected"), "ApproxNDCG + LC+MLP, Top-1 {s} at 3,000 steps, "
         "{l} converged"),
        ("approx_ndcg.concat_mlp", "top5_accuracy", ("loss by the bootstrap",
         "loss"), "ApproxNDCG + Concat+MLP on Top-5, {l}, t-test Holm p {t}"),
        ("approx_ndcg.lc_mlp", "ndcg@5", ("loss", "loss by the bootstrap"),
         "ApproxNDCG + LC+MLP, NDCG@5 {s} to {l}"),
        ("pairwise_logistic.concat_mlp", "mrr", ("none detected",
         "loss by the bootstrap"), "pairwise logistic + Concat+MLP, MRR {s} "
         "to {l}")):
      short_kind, long_kind, short_effect, long_effect, verdict = changed[
          (cell, metric)]
      self.assertEqual((short_kind, long_kind), kinds)
      t = re.search(r"Holm p t-test (\d\.\d{4})", verdict).group(1)
      self.assertIn(phrase.format(s=_minus(short_effect),
                                  l=_minus(long_effect), t=t), self.text)
    self.assertEqual(sorted(k for k, v in changed.items()
                            if v[:2] == ("loss by the bootstrap", "loss")),
                     [("approx_ndcg.concat_mlp", "top5_accuracy")] + [
                         ("mse.dot", m) for m in ("mrr", "ndcg@5",
                                                  "top5_accuracy")])
    # ApproxNDCG + Dot against softmax + Dot, converged (the report).
    effect = {}
    for metric in ("Top-1", "Top-5"):
      section = self.converged.text.split(f"**{metric}**\n", 1)[1]
      effect[metric] = next(r for r in _rows(section, "| cell | ours")
                            if r[0] == "ApproxNDCG + Dot")
    self.assertIn(
        f"is {_minus(effect['Top-1'][1])} Top-1 (Holm p {effect['Top-1'][3]}), "
        f"{_minus(effect['Top-5'][1])} Top-5 (bootstrap Holm p "
        f"{effect['Top-5'][3]})", self.text)
    # Where the chosen runs peaked, from "What each budget chose".
    bests = [int(best.replace(",", "")) for row in
             _rows(table, "| cell | short: choice")
             for best in re.findall(r"\d: ([\d,]+) / ", row[5])]
    self.assertLen(bests, 45)
    self.assertIn(f"best, which came at {min(bests):,} to {max(bests):,} "
                  "steps", self.text)
    # The test CE of the Gumbel-ApproxNDCG cells against softmax + dot's.
    ce = {r[0]: r[1] for r in _rows(self.converged.text,
                                    "| cell | softmax CE |")}
    gumbel = sorted(float(v) for k, v in ce.items()
                    if k.startswith("Gumbel-ApproxNDCG + "))
    self.assertIn(f"mean test CE of {gumbel[0]:.2f} to {gumbel[-1]:.2f}, "
                  f"against softmax + `dot`'s "
                  f"{float(ce['Softmax CE + Dot']):.2f}", self.text)

  def test_the_losses_the_bootstrap_finds(self):
    # docs/text.md names every loss contrast worse by the bootstrap, with
    # its Δ, and says the t-test resolves none.
    for report, count, paragraph in (
        (self.frozen, "16", "The bootstrap finds 16 negative"),
        (self.tuned, "11", "The bootstrap finds 11 negative")):
      worse = [c for c in report.contrast_effects()
               if c[3] < 0.05 and c[2].startswith("-") and
               " vs Softmax CE + " in c[0] and
               not c[0].startswith("Softmax CE + ")]
      self.assertLen(worse, int(count))
      self.assertFalse(any(c[4] < 0.05 for c in worse))
      section = self.text.split(paragraph, 1)[1].split("* *LC+MLP", 1)[0]
      for contrast, metric, delta, _, _ in worse:
        self.assertIn(_minus(delta), section, (contrast, metric))

  def test_power(self):
    values = {m: (self.frozen.power(m), self.tuned.power(m))
              for m in ("Top-1", "Top-5", "NDCG@5")}
    (f1, ft1, pm1, px1), (t1, tt1, _, _) = values["Top-1"]
    (f5, _, pm5, px5), (t5, _, _, _) = values["Top-5"]
    (fn, _, pmn, pxn), (tn, _, _, _) = values["NDCG@5"]
    phrase = (f"{f1} Top-1, {f5} Top-5 and {fn} NDCG@5 frozen, {t1}, {t5} "
              f"and {tn} fine-tuned (medians over the cells); the t-test over "
              f"3 seeds needs {ft1} / {tt1} Top-1. The paper's Table 7 effects "
              f"are smaller (median |Δ| {pm1} Top-1, {pm5} Top-5, {pmn} "
              f"NDCG@5; largest {px1}, {px5}, {pxn})")
    self.assertIn(phrase, self.readme)
    self.assertIn(f"{f1} / {t1} Top-1, {f5} / {t5} Top-5 and {fn} / {tn} "
                  "NDCG@5", self.text)

  def test_table_2(self):
    f = {m: self.frozen.table2(m) for m in ("Top-1", "Top-5", "NDCG@5",
                                             "MRR")}
    self.assertIn(
        f"Top-1 {_minus(f['Top-1'][4])} for MSE + Concat+MLP (bootstrap Holm "
        f"p {f['Top-1'][6]}, t-test Holm p {f['Top-1'][7]}), Top-5 "
        f"{_minus(f['Top-5'][4])}, NDCG@5 {_minus(f['NDCG@5'][4])}, MRR "
        f"{_minus(f['MRR'][4])}", self.readme)
    t = {m: self.tuned.table2(m) for m in ("Top-1", "Top-5", "NDCG@5", "MRR")}
    self.assertIn(
        f"Top-1 {_minus(t['Top-1'][4])} for MSE + `dot` (Holm p "
        f"{t['Top-1'][6]}), Top-5 {_minus(t['Top-5'][4])} for pairwise "
        f"logistic + `dot`, NDCG@5 {_minus(t['NDCG@5'][4])} and MRR "
        f"{_minus(t['MRR'][4])} for softmax CE + LC+MLP", self.readme)
    self.assertIn("The best of the 8 other cells run here; the paper's "
                  "Table 2 takes the best of its 14.", self.tuned.text)
    self.assertIn("Pairwise logistic + Concat+MLP on Top-5 in Table 7 "
                  "(+0.0150)", self.tuned.text)
    for doc in (self.readme, self.text):
      self.assertIn("the best of the 8 other cells run", doc.lower())

  def test_differences_from_unrounded_means(self):
    frozen, _ = _base_means("study_goemotions_frozen")
    tuned, sd = _base_means("study_goemotions_finetuned")
    lift = {m: f"+{tuned[m] - frozen[m]:.4f}" for m in tuned}
    self.assertEqual(lift["top1_accuracy"], "+0.0975")
    self.assertIn(f"by {lift['top1_accuracy']} Top-1", self.readme)
    self.assertIn(f"{lift['top1_accuracy']} Top-1, {lift['top5_accuracy']} "
                  f"Top-5, {lift['ndcg@5']} NDCG@5 over the frozen encoder",
                  self.text)
    self.assertIn(f"is {lift['top1_accuracy']} Top-1 over the frozen "
                  "encoder", self.text)
    # The PyTorch + Hugging Face reference run: 0.6129 / 0.9035 / 0.7719.
    gap = {m: tuned[m] - v for m, v in (("top1_accuracy", 0.6129),
                                        ("top5_accuracy", 0.9035),
                                        ("ndcg@5", 0.7719))}
    self.assertIn(
        f"level on Top-1 (+{gap['top1_accuracy']:.4f}, "
        f"{gap['top1_accuracy'] / sd['top1_accuracy']:.1f} times the cell's "
        f"seed standard deviation, {sd['top1_accuracy']:.4f}) but higher on "
        f"Top-5 by {gap['top5_accuracy']:.4f}, "
        f"{gap['top5_accuracy'] / sd['top5_accuracy']:.1f} times its seed "
        f"standard deviation ({sd['top5_accuracy']:.4f}), and on NDCG@5 by "
        f"{gap['ndcg@5']:.4f} ({gap['ndcg@5'] / sd['ndcg@5']:.1f} times "
        f"{sd['ndcg@5']:.4f})", self.text)

  def test_placements_signs_and_bands(self):
    f5 = self.frozen.placements("Top-5", "Table 7")
    fn = self.frozen.placements("NDCG@5", "Table 7")
    self.assertIn(f"all {f5['gains']} gains lie above our interval, and "
                  f"{f5['band']} of {f5['gains']} stay above it with the "
                  f"single-run band around them; on NDCG@5, {fn['above']} of "
                  f"its {fn['gains']} gains lie above ({fn['band']} with the "
                  "band)", self.text)
    signs = [self.frozen.placements(m, "Table 7")
             for m in ("Top-1", "Top-5", "NDCG@5")]
    self.assertIn(f"{signs[0]['agree']} of {signs[0]['known']} cells agree "
                  f"with Table 7 on Top-1, {signs[1]['agree']} of "
                  f"{signs[1]['known']} on Top-5, {signs[2]['agree']} of "
                  f"{signs[2]['known']} on NDCG@5", self.text)
    t5 = self.tuned.placements("Top-5", "Table 7")
    tn = self.tuned.placements("NDCG@5", "Table 7")
    self.assertIn(f"all {t5['gains']} of its Table 7 gains lie above our "
                  f"interval ({t5['band']} of {t5['gains']} with the "
                  f"single-run band), on NDCG@5 {tn['above']} of its "
                  f"{tn['gains']} gains ({tn['band']} with the band)",
                  self.text)
    t8 = [self.tuned.placements(m, "Table 8") for m in ("Top-5", "NDCG@5")]
    self.assertIn(f"in Table 8, {t8[0]['above']} of {t8[0]['gains']} and "
                  f"{t8[1]['above']} of {t8[1]['gains']}", self.text)
    self.assertIn(
        f"stay above our intervals in {f5['band']} of {f5['gains']} cells "
        f"frozen and {t5['band']} of {t5['gains']} fine-tuned (Table 7; "
        f"Table 8: {self.frozen.placements('Top-5', 'Table 8')['band']} of "
        f"{self.frozen.placements('Top-5', 'Table 8')['gains']} and "
        f"{t8[0]['band']} of {t8[0]['gains']})", self.text)

  def test_metric_informativeness(self):
    counts = {m: self.frozen.informativeness(m)
              for m in ("Top-1", "Top-5", "NDCG@5", "MRR")}
    self.assertIn(f"NDCG@5 separates {counts['NDCG@5'][1]} of the 105 pairs, "
                  f"MRR {counts['MRR'][1]}, Top-1 {counts['Top-1'][1]} and "
                  f"Top-5 {counts['Top-5'][1]}", self.text)
    counts = {m: self.tuned.informativeness(m)
              for m in ("Top-1", "Top-5", "NDCG@5", "MRR")}
    self.assertIn(f"NDCG@5 separates {counts['NDCG@5'][1]} of the 36 pairs, "
                  f"MRR {counts['MRR'][1]}, Top-1 {counts['Top-1'][1]} and "
                  f"Top-5 {counts['Top-5'][1]} (uncorrected: "
                  f"{counts['NDCG@5'][0].split()[0]}, "
                  f"{counts['MRR'][0].split()[0]}, "
                  f"{counts['Top-1'][0].split()[0]} and "
                  f"{counts['Top-5'][0].split()[0]})", self.text)
    for accuracy, ranking in (("Top-1", "NDCG@5"), ("Top-5", "NDCG@5"),
                              ("Top-5", "MRR")):
      _, gained, lost, p = self.frozen.metric_claim("bootstrap", ranking,
                                                    accuracy)
      self.assertIn(f"{gained} against {lost}", self.text)
      self.assertIn(p, self.text)

  def test_tests_and_floor(self):
    f = self.frozen.family("contrasts")
    t = self.tuned.family("contrasts")
    self.assertEqual((f[3], f[4], t[3], t[4]), ("1", "1", "0", "0"))
    self.assertIn(f"the t-test resolves {f[3]} of the frozen study's "
                  f"{f[0]} contrasts and none of the fine-tuned study's "
                  f"{t[0]}, where the bootstrap resolves {f[2]} and {t[2]}",
                  self.study_md)
    self.assertIn("B = 90,000 resamples", self.frozen.text)
    self.assertIn("B = 30,000 resamples", self.tuned.text)
    self.assertIn("B raised to 90,000 frozen and 30,000 fine-tuned",
                  self.readme)
    self.assertEqual(self.frozen.informativeness("Top-5")[1], "33")
    self.assertIn("28 pairs at B = 10,000 and 33 at 90,000".replace(
        "28 pairs", "Top-5 separated 28 pairs"), self.study_md)

  def test_fairness_numbers(self):
    frozen = self.frozen.line(r"(\d+) of 45 peaked at their last validation")
    self.assertIn(f"{frozen.group(1)} of its 45 chosen runs, all ApproxNDCG "
                  "or Gumbel-ApproxNDCG, still peaked", self.readme)
    near = self.tuned.line(r"(\d+) of 27 peaked at one of their last two")
    self.assertIn(f"{near.group(1)} of its 27 chosen runs peaked at one of "
                  "their last two validations", self.readme)
    self.assertIn(f"{near.group(1)} of the 27 chosen runs peaked at one of "
                  "their last two", self.text)
    near = self.frozen.line(r"(\d+) of 45 peaked at one of their last two")
    self.assertIn(f"{near.group(1)} of 45 peaked at one of their last two",
                  self.text)
    edge = self.digits.line(r"\*\*(\d+) of 45 chosen runs are on an edge.*?"
                            r"(\d+) of 45 peaked at their last validation")
    sides = self.digits.line(r"learning rate at the lowest tried in (\d+), "
                             r"at the highest in (\d+)")
    for doc in (self.readme, self.study_md):
      self.assertIn(f"{edge.group(1)} of the 45 chosen runs sit on an edge "
                    f"of the 3 learning rates tried ({sides.group(1)} at 1e-3, "
                    f"the lowest", doc)
      self.assertIn(f"{edge.group(2)} of 45 peaked at their last validation",
                    doc)
    self.assertIn("width not tuned", self.digits.text)
    edge = self.sodeep.line(r"\*\*(\d+) of (\d+) chosen runs are on an edge")
    self.assertIn(f"{edge.group(1)} of the {edge.group(2)} chosen runs sits "
                  "on an edge", self.text)

  def test_sodeep_and_robustness(self):
    rows = {c[0]: c for c in self.sodeep.contrast_effects()
            if c[1] == "Top-1" and c[0].endswith("vs Softmax CE + Dot")}
    lstm = rows["SoDeep Spearman (lstm) + Dot vs Softmax CE + Dot"]
    adaptive = rows["SoDeep Spearman (handcrafted_adaptive) + Dot vs "
                    "Softmax CE + Dot"]
    pairwise = rows["SoDeep Spearman (pairwise) + Dot vs Softmax CE + Dot"]
    hand = rows["SoDeep Spearman (handcrafted) + Dot vs Softmax CE + Dot"]
    self.assertIn(f"bootstrap Holm p {lstm[3]:.4f} over the study's 48 "
                  f"contrasts; the t-test resolves the LSTM's, Holm "
                  f"{lstm[4]:.4f}, and the adaptive handcrafted's, "
                  f"{adaptive[4]:.4f}, not the pairwise's, {pairwise[4]:.4f}, "
                  f"or the handcrafted's, {hand[4]:.4f})", self.text)
    self.assertIn(f"(Top-1 {_minus(pairwise[2])} to {_minus(adaptive[2])}, "
                  f"bootstrap Holm p {lstm[3]:.4f}; resolved by both tests "
                  "for the LSTM and the adaptive handcrafted sorters only",
                  self.readme)
    for report, phrase in (
        (self.tuned, "stays the same in 9 of 9 cells by NDCG@5 and 9 of 9 by "
                     "MRR"),
        (self.frozen, "in 11 of 15 and 14 of 15")):
      found = report.line(r"stays the same in (\d+) of (\d+) cells by "
                          r"NDCG@5, (\d+) of \d+ cells by MRR")
      self.assertIn(found.group(1) + " of " + found.group(2), phrase)
      self.assertIn(found.group(3) + " of " + found.group(2), phrase)
      self.assertIn(phrase, self.text)
    cost = self.tuned.line(r"a median ([\d,]+) s of training each")
    self.assertIn(f"{cost.group(1)} s fine-tuned", self.text)

  def test_frozen_run_times(self):
    # docs/text.md's cost line and the medians by width, from the records
    # (the command beside them prints the same).
    folder = os.path.join(REPO, "results", "study_goemotions_frozen", "runs")
    records = []
    for name in sorted(os.listdir(folder)):
      with open(os.path.join(folder, name, "study_result.json"),
                encoding="utf-8") as f:
        records.append(json.load(f))
    plain = [r for r in records if not r.get("extended_steps")]
    median = lambda rs: round(statistics.median(r["train_seconds"]
                                                for r in rs))
    by = lambda i, w: median([r for r in plain if r["interaction"] == i and
                              (r["mlp_units"] or 0) == w])
    self.assertIn(
        f"{round(sum(r['train_seconds'] for r in records) / 60)} min of "
        f"training for the {len(records)} runs (median {median(records)} s "
        f"a run)", self.text)
    self.assertIn(
        f"Of the {len(plain)} runs not lengthened by `--extend_steps`, the "
        f"median by width: `dot` {by('dot', 0)} s, LC+MLP " +
        " / ".join(str(by("lc_mlp", w)) for w in (64, 128, 256, 512)) +
        " s and Concat+MLP " +
        " / ".join(str(by("concat_mlp", w)) for w in (64, 128, 256, 512)) +
        " s at widths 64 / 128 / 256 / 512", self.text)

  def test_copied_tables_are_the_reports(self):
    # Every main-table, Table 2 and informativeness row the docs show is a
    # row of a committed report.
    reports = "\n".join(_read(study, "tables.md") for study in (
        "study_digits", "study_digits_sodeep", "study_goemotions_frozen",
        "study_goemotions_sodeep", "study_goemotions_finetuned"))
    shown = 0
    for path in ("README.md", "docs/text.md", "docs/study.md"):
      with open(os.path.join(REPO, path), encoding="utf-8") as f:
        for line in f:
          if re.match(r"\| (Top-1|Top-5|NDCG@5|MRR) \| ", line):
            shown += 1
            self.assertIn(line.rstrip("\n"), reports.splitlines(), path)
    self.assertGreater(shown, 40)


if __name__ == "__main__":
  absltest.main()
