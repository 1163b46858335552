"""Tests of rank4class_tf.study.paper_tables: the shipped Tables 7-12, pinned."""

import json
import os
import tempfile

import tensorflow as tf

from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_tables

# Cells read off the paper's PDF (Appendix C), percentages / 100.
PINS = [
    ("goemotions_bert", "top1_accuracy", "dot", "softmax", 0.59),
    ("goemotions_bert", "ndcg@5", "lc_mlp", "approx_ndcg", 0.7462),
    ("goemotions_electra", "top1_accuracy", "dot", "softmax", 0.6155),
    ("mind_bert", "top1_accuracy", "dot", "mse", 0.6929),
    ("mind_electra", "top1_accuracy", "concat_mlp", "approx_ndcg", None),
    ("imagenet_resnet50", "top1_accuracy", "dot", "mse", 0.7354),
    ("cifar10_vgg16", "top1_accuracy", "dot", "softmax", 0.9344),
]
# The starred best of every table, as printed.
STARRED = {
    "goemotions_bert": {"top1_accuracy": [("lc_mlp", "approx_ndcg")],
                        "top5_accuracy": [("concat_mlp",
                                           "pairwise_logistic")],
                        "ndcg@5": [("lc_mlp", "approx_ndcg")]},
    "goemotions_electra": {"top1_accuracy": [("lc_mlp", "mse")],
                           "top5_accuracy": [("lc_mlp", "approx_ndcg")],
                           "ndcg@5": [("lc_mlp", "approx_ndcg")]},
    "mind_bert": {"top1_accuracy": [("lc_mlp", "softmax")],
                  "ndcg@5": [("lc_mlp", "softmax")]},
    "mind_electra": {"top1_accuracy": [("concat_mlp", "approx_ndcg")],
                     "ndcg@5": [("lc_mlp", "approx_ndcg")]},
    "imagenet_resnet50": {"top1_accuracy": [("concat_mlp",
                                             "gumbel_approx_ndcg")],
                          "ndcg@5": [("concat_mlp", "gumbel_approx_ndcg")]},
    "cifar10_vgg16": {"ndcg@5": [("dot", "approx_ndcg"),
                                 ("concat_mlp", "softmax")]},
}


class ShippedTablesTest(tf.test.TestCase):

  def test_every_named_table_is_shipped_with_the_whole_grid(self):
    for name in paper_tables.NAMES:
      table = paper_tables.load(name)
      self.assertEqual(sorted(table.values),
                       ["ndcg@5", "top1_accuracy", "top5_accuracy"], name)
      for rows in table.values.values():
        self.assertEqual(sorted(rows), sorted(study_grid.PAPER_INTERACTIONS))
        for row in rows.values():
          self.assertEqual(sorted(row), sorted(study_grid.PAPER_LOSSES))
      self.assertEqual(paper_tables.dataset_of(name), table.dataset)

  def test_pinned_cells(self):
    for name, metric, interaction, loss, value in PINS:
      if value is None:  # Pinned by its table: MIND ELECTRA's Top-1 best.
        value = max(v for _, v in paper_tables.load(name).cells(metric))
      self.assertEqual(paper_tables.load(name).value(metric,
                                                     (interaction, loss)),
                       value, (name, metric, interaction, loss))

  def test_starred_best_of_each_table(self):
    for name, stars in STARRED.items():
      table = paper_tables.load(name)
      for metric, cells in stars.items():
        self.assertEqual(list(table.marked_best[metric]), cells,
                         (name, metric))

  def test_stars_are_maxima_except_where_the_note_says(self):
    # The paper's stars mark each metric's maximum; the two tables whose
    # notes record an odd star are the exceptions.
    for name in paper_tables.NAMES:
      table = paper_tables.load(name)
      for metric, cells in table.marked_best.items():
        best = max(v for _, v in table.cells(metric))
        starred = {table.value(metric, cell) for cell in cells}
        if starred != {best}:
          self.assertIn("As printed", table.note, (name, metric))

  def test_effects_are_differences_from_softmax_dot(self):
    table = paper_tables.load("goemotions_bert")
    effects = table.effects("top1_accuracy")
    self.assertLen(effects, 14)
    self.assertNotIn(("dot", "softmax"), effects)
    self.assertAlmostEqual(effects[("dot", "pairwise_logistic")],
                           0.5821 - 0.59, places=12)
    self.assertEqual(table.effects("mrr"), {})

  def test_datasets(self):
    self.assertEqual(paper_tables.DATASET_TABLES["goemotions"][0],
                     "goemotions_bert")
    self.assertTrue(paper_tables.load("goemotions_bert").source
                    .endswith("Table 7"))
    self.assertTrue(paper_tables.load("goemotions_electra").source
                    .endswith("Table 8"))
    self.assertIsNone(paper_tables.dataset_of("digits"))


class UserTablesTest(tf.test.TestCase):

  def _write(self, raw):
    path = os.path.join(tempfile.mkdtemp(), "mine.json")
    with open(path, "w") as f:
      json.dump(raw, f)
    return path

  def test_template_has_the_paper_grid_and_no_number(self):
    table = paper_tables.load(os.path.join(paper_tables.FOLDER,
                                           "template.json"))
    self.assertEqual(table.cells("top1_accuracy"), [])
    self.assertIsNone(table.dataset)

  def test_a_user_table_names_its_dataset(self):
    table = paper_tables.load(self._write({
        "title": "t", "source": "s", "dataset": "digits",
        "values": {"mrr": {"dot": {"softmax": 0.5, "mse": 0.75}}}}))
    self.assertEqual(table.dataset, "digits")
    self.assertEqual(table.effects("mrr"), {("dot", "mse"): 0.25})

  def test_bad_tables(self):
    with self.assertRaisesRegex(ValueError, "neither a JSON file nor"):
      paper_tables.load("goemotions")
    with self.assertRaisesRegex(ValueError, "not a fraction"):
      paper_tables.load(self._write({
          "title": "t", "source": "s",
          "values": {"mrr": {"dot": {"softmax": 61.2}}}}))
    with self.assertRaisesRegex(ValueError, "marked_best mrr/dot/mse has no "
                                "value"):
      paper_tables.load(self._write({
          "title": "t", "source": "s",
          "values": {"mrr": {"dot": {"softmax": 0.6}}},
          "marked_best": {"mrr": [["dot", "mse"]]}}))
    with self.assertRaisesRegex(ValueError, "^`paper_table`=.*cannot read"):
      paper_tables.load("/nonexistent/table.json")


if __name__ == "__main__":
  tf.test.main()
