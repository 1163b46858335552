"""Tests of rank4class_tf.data.datasets."""

import os
import re
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import splits
from rank4class_tf.data import features as features_lib
from rank4class_tf.data import inputs as inputs_lib


class DigitsTest(tf.test.TestCase):

  def test_split_sizes_and_stratification(self):
    data = datasets.get("digits")
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 1257, "validation": 270, "test": 270})
    self.assertEqual(data.num_classes, 10)
    for split in contract.SPLITS:
      counts = np.bincount(data.splits[split][1], minlength=10)
      share = counts / counts.sum()
      self.assertAllClose(share, np.full(10, 0.1), atol=0.012)

  def test_split_is_fixed_and_disjoint(self):
    a, b = datasets.get("digits"), datasets.get("digits")
    for split in contract.SPLITS:
      self.assertAllEqual(a.splits[split][0], b.splits[split][0])
    flat = {s: {x.tobytes() for x in a.splits[s][0]} for s in contract.SPLITS}
    # Digits has a few duplicate images; the splits share almost none.
    self.assertLess(len(flat["train"] & flat["test"]), 5)
    self.assertEqual(a.splits["train"][0].dtype, np.float32)
    self.assertLessEqual(a.splits["train"][0].max(), 1.0)

  def test_ranking_dataset_shapes(self):
    data = datasets.get("digits")
    features, labels = next(iter(
        datasets.ranking_dataset(data, "train", 16, training=True, seed=3)))
    self.assertEqual(features["image"].shape, (16, 8, 8, 1))
    self.assertEqual(features[features_lib.CLASS_ID].shape, (16, 10, 1))
    self.assertAllEqual(features[features_lib.CLASS_ID][5, :, 0], np.arange(10))
    self.assertAllEqual(features[features_lib.MASK], np.ones((16, 10), bool))
    self.assertAllEqual(tf.reduce_sum(labels, axis=1), np.ones(16))

  def test_training_shuffle_is_seeded(self):
    data = datasets.get("digits")
    def first_labels(seed):
      ds = datasets.ranking_dataset(data, "train", 32, training=True,
                                    seed=seed)
      return next(iter(ds))[1].numpy()
    self.assertAllEqual(first_labels(7), first_labels(7))
    self.assertNotAllEqual(first_labels(7), first_labels(8))

  def test_eval_dataset_reads_every_example_once_in_order(self):
    data = datasets.get("digits")
    labels = np.concatenate([
        np.argmax(l, axis=1) for _, l in
        datasets.ranking_dataset(data, "test", 64, training=False)])
    self.assertAllEqual(labels, data.splits["test"][1])

  def test_unknown_name_and_split(self):
    with self.assertRaisesRegex(ValueError, "valid names: digits"):
      datasets.get("mnist")
    with self.assertRaisesRegex(ValueError, "valid splits: train"):
      datasets.get("digits").dataset("dev")



def write(path, lines, mode="w"):
  with open(path, mode) as f:
    f.write(lines)
  return path


MIND_ROWS = [
    ("N1", "sports", "football", 'Team "A" wins', "A match report."),
    ("N2", "news", "politics", "Vote today", ""),
    ("N3", "sports", "tennis", "Final set", "Five sets."),
    ("N4", "news", "world", 'He said "no"', "Quotes \"inside\" too"),
    ("N5", "sports", "golf", "Hole in one", ""),
    ("N6", "news", "us", "Storm", "Rain."),
    ("N7", "sports", "nba", "Dunk", "High."),
    ("N8", "news", "local", "Fair", "Fun."),
    ("N9", "sports", "nfl", "Kick", ""),
    ("N10", "news", "tech", "Chips", "Fast."),
    ("N11", "lifestyle", "food", "Soup", "Hot."),
    ("N12", "lifestyle", "food", "Bread", ""),
    ("N13", "lifestyle", "home", "Chair", "Wood."),
    ("N14", "lifestyle", "home", "Lamp", "Light."),
    ("N15", "lifestyle", "home", "Rug", "Soft."),
]


def mind_fixture(rows=MIND_ROWS):
  """news.tsv in MIND's own format: 8 tab-separated fields, no header."""
  folder = tempfile.mkdtemp()
  lines = []
  for news_id, category, sub, title, abstract in rows:
    url = f"https://assets.msn.com/labs/mind/{news_id}.html"
    entities = '[{"Label": "X", "Type": "P", "WikidataId": "Q1"}]'
    lines.append("\t".join([news_id, category, sub, title, abstract, url,
                            entities, "[]"]))
  write(os.path.join(folder, "news.tsv"), "\n".join(lines) + "\n")
  return folder


class GoEmotionsTest(tf.test.TestCase):

  def test_single_label_view(self):
    data = datasets.get("goemotions")
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 36308, "validation": 4548, "test": 4590})
    self.assertEqual(data.num_classes, 28)
    self.assertEqual(data.class_names[0], "admiration")
    self.assertEqual(data.class_names[27], "neutral")
    self.assertFalse(data.multi_label)
    for split in contract.SPLITS:
      self.assertLen(np.unique(data.splits[split][1]), 28)
    self.assertEqual(data.splits["train"][0][0],
                     "My favourite food is anything I didn't have to cook "
                     "myself.")
    self.assertEqual(data.splits["train"][1][0], 27)

  def test_multi_label_view(self):
    data = datasets.get("goemotions_multilabel")
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 43410, "validation": 5426, "test": 5427})
    self.assertTrue(data.multi_label)
    y = data.splits["train"][1]
    self.assertEqual(y.shape, (43410, 28))
    self.assertEqual(int((y.sum(axis=1) == 1).sum()), 36308)
    _, labels = next(iter(datasets.ranking_dataset(
        data, "validation", 8, training=False,
        instance_inputs=inputs_lib.RawInputs("text", (), tf.string))))
    self.assertAllEqual(labels, data.splits["validation"][1][:8])

  def test_bad_files_name_file_and_line(self):
    folder = tempfile.mkdtemp()
    write(os.path.join(folder, "emotions.txt"), "a\nb\nc")
    good = "hi\t0\tid1\nyo\t1,2\tid2\n"
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
      write(os.path.join(folder, name), good)
    self.assertEqual(datasets.get("goemotions", folder).size("train"), 1)
    cases = [
        ("hi\t0\tid1\nbad line\n", r"train.tsv:2: 1 fields, expected 3 "
         r"\(text, labels, id\)"),
        ("hi\t0\tid1\nyo\t3\tid2\n", r"train.tsv:2: label '3' is not a "
         r"class \(3 classes\)"),
        ("hi\tx\tid1\n", r"train.tsv:1: label 'x' is not a class"),
        ("hi\t0,\tid1\n", r"train.tsv:1: column 'labels': '0,' holds an "
         r"empty class name"),
        ("\t0\tid1\n", "train.tsv:1: column 'text': empty text"),
        ("", "train.tsv: no rows"),
    ]
    for content, message in cases:
      write(os.path.join(folder, "train.tsv"), content)
      with self.assertRaisesRegex(ValueError, message):
        datasets.get("goemotions", folder)
    write(os.path.join(folder, "train.tsv"), b"ok\t0\tid\n\xff\t1\tid\n",
          mode="wb")
    with self.assertRaisesRegex(ValueError, "train.tsv:2: not valid UTF-8"):
      datasets.get("goemotions", folder)
    os.remove(os.path.join(folder, "train.tsv"))
    with self.assertRaisesRegex(ValueError, "train.tsv: file not found"):
      datasets.get("goemotions", folder)
    os.mkdir(os.path.join(folder, "train.tsv"))
    with self.assertRaisesRegex(ValueError, "train.tsv: is a directory"):
      datasets.get("goemotions", folder)


  def test_class_file_blank_duplicate_bom_and_empty(self):
    folder = tempfile.mkdtemp()
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
      write(os.path.join(folder, name), "hi\t0\tid1\nyo\t1\tid2\n")
    classes = os.path.join(folder, "emotions.txt")
    # An editor's UTF-8 signature is not part of the first name.
    write(classes, "\ufeffjoy\r\nanger \r\n", mode="w")
    self.assertEqual(datasets.get("goemotions", folder).class_names,
                     ("joy", "anger"))
    cases = [
        ("joy\nanger\n\n", r"emotions.txt:3: blank class name"),
        ("joy\n  \nanger\n", r"emotions.txt:2: blank class name"),
        ("joy\nanger\njoy\n", r"emotions.txt:3: duplicate class name 'joy' "
         r"\(first on line 1\)"),
        ("", r"emotions.txt: no class names"),
    ]
    for content, message in cases:
      write(classes, content)
      with self.assertRaisesRegex(ValueError, "^" + re.escape(classes)[:-len(
          "emotions\\.txt")] + message):
        datasets.get("goemotions", folder)


class MindTest(tf.test.TestCase):

  def test_reads_news_tsv(self):
    data = datasets.get("mind", mind_fixture())
    self.assertEqual(data.class_names, ("lifestyle", "news", "sports"))
    self.assertEqual(data.instance_shape, (2,))
    everything = np.concatenate([data.splits[s][0] for s in contract.SPLITS])
    self.assertLen(everything, 15)
    titles = {tuple(x) for x in everything}
    self.assertIn(('Team "A" wins', "A match report."), titles)
    self.assertIn(("Vote today", ""), titles)
    self.assertIn(('He said "no"', 'Quotes "inside" too'), titles)

  def test_split_is_stratified_seeded_and_deterministic(self):
    a = datasets.get("mind", mind_fixture())
    b = datasets.get("mind", mind_fixture())
    for split in contract.SPLITS:
      self.assertAllEqual(a.splits[split][1], b.splits[split][1])
      self.assertAllEqual(a.splits[split][0], b.splits[split][0])
    # 5 per class -> 3 / 1 / 1 in every class.
    for split, count in (("train", 3), ("validation", 1), ("test", 1)):
      self.assertAllEqual(np.bincount(a.splits[split][1]), [count] * 3)

  def test_stratified_split_proportions(self):
    labels = np.repeat(np.arange(4), [100, 50, 10, 5])
    train, val, test = splits.stratified_split(labels, (0.6, 0.2, 0.2), 1)
    self.assertAllEqual(np.bincount(labels[train]), [60, 30, 6, 3])
    self.assertAllEqual(np.bincount(labels[val]), [20, 10, 2, 1])
    self.assertAllEqual(np.bincount(labels[test]), [20, 10, 2, 1])
    self.assertEmpty(np.intersect1d(train, test))

  def test_bad_input(self):
    with self.assertRaisesRegex(ValueError, "`data_dir` must name the folder"):
      datasets.get("mind")
    folder = mind_fixture()
    path = os.path.join(folder, "news.tsv")
    with open(path, "a") as f:
      f.write("N99\tsports\tgolf\tTitle only\n")
    with self.assertRaisesRegex(ValueError, "news.tsv:16: expected 8 "
                                "tab-separated fields"):
      datasets.get("mind", folder)
    with self.assertRaisesRegex(ValueError, "news.tsv: file not found"):
      datasets.get("mind", tempfile.mkdtemp())


if __name__ == "__main__":
  tf.test.main()
