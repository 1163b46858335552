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
  agreement.

`make check-results` checks the other half: that each committed report is
the one the committed code makes of its runs (`--check_report`).
"""

import csv
import os

from absl.testing import absltest
from absl.testing import parameterized

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


class CommittedStudyTest(parameterized.TestCase):

  @parameterized.named_parameters((study, study) for study in STUDIES)
  def test_every_cell_has_three_seeds(self, study):
    chosen = _chosen_rows(study)
    seeds = {}
    for row in chosen:
      seeds.setdefault(f"{row['loss']}.{row['interaction']}", []).append(
          int(row["seed"]))
    self.assertEqual(sorted(seeds), sorted(STUDIES[study]))
    for cell, found in seeds.items():
      self.assertEqual(sorted(found), [0, 1, 2], cell)

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
  def test_paper_effects_beside_ours(self, study):
    tables = _read(study, "tables.md")
    header = next(line for line in tables.splitlines()
                  if "paper Δ (Table 7)" in line)
    self.assertIn("| signs agree |", header)
    self.assertIn("| paper Δ against our interval |", header)


if __name__ == "__main__":
  absltest.main()
