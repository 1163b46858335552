"""The zero-shot remedies' results in docs/class_encoders.md are the
committed tables of results/zero_shot/ (issue 63).

Every table row the section "Results of the remedies" gives with a
mean ± std is a row of one of the committed tables (the outputs of
`results/zero_shot/commands.sh`), and every fitted constant it names is in
the fit's JSON: a rerun whose numbers move fails here until the docs
follow. No training, no scoring.
"""

import glob
import json
import os

from absl.testing import absltest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "results", "zero_shot")
SECTION = "### Results of the remedies"


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def _section():
  text = _read(os.path.join(REPO, "docs", "class_encoders.md"))
  start = text.index(SECTION)
  end = text.find("\n## ", start)
  return text[start:end if end >= 0 else None]


class ZeroShotResultsTest(absltest.TestCase):

  def test_rows_are_committed_rows(self):
    rows = set()
    for path in glob.glob(os.path.join(RESULTS, "*.md")):
      rows |= {line.strip() for line in _read(path).splitlines()
               if line.startswith("|")}
    quoted = [line.strip() for line in _section().splitlines()
              if line.startswith("|") and "±" in line]
    self.assertNotEmpty(quoted)
    for line in quoted:
      # The docs name the run group in the first cell; the rest is the
      # committed row's.
      cells = [cell.strip() for cell in line.split("|")[2:]]
      self.assertTrue(
          any([cell.strip() for cell in row.split("|")[2:]] == cells
              for row in rows),
          f"not a row of results/zero_shot/*.md: {line}")

  def test_fit_tables_are_their_json(self):
    fits = glob.glob(os.path.join(RESULTS, "*.fit.json"))
    self.assertNotEmpty(fits)
    for path in fits:
      fitted = json.loads(_read(path))["fitted"]
      table = _read(path[:-len(".json")] + ".md")
      for method, values in fitted.items():
        self.assertIn(
            f"| {method} | {values['seen_margin']:.4f} | "
            f"{values['cosine_fusion']:.4f} | {values['seen_top1']:.4f} | "
            f"{values['unseen_top5']:.4f} | {values['gzsl_h']:.4f} |", table)
        # The runs were trained with these constants (commands.sh reads
        # them from the JSON, never types them).
        self.assertIn(f"--seen_margin={values['seen_margin']:.6g} "
                      f"--cosine_fusion={values['cosine_fusion']:.6g}",
                      table)

if __name__ == "__main__":
  absltest.main()
