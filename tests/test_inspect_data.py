"""Tests of `data/inspection.py` and `pipelines.inspect_data`.

Every expected number is computed here from the rows the test writes, not
read back from the library: class counts with `collections.Counter`,
duplicates and leakage with sets, token counts as words + 2 (every word of
these texts is one WordPiece token, or [UNK], in the vocabulary used).
"""

import collections
import csv
import json
import math
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import inspection
from rank4class_tf.data import text
from rank4class_tf.data import user_files
from rank4class_tf.modeling import pretrained
from tests import helpers

WORDS = ("the cat sat on mat a dog ran big red sun sky blue sea one two "
         "three four five six seven eight nine ten").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
# (text, label) per split: duplicates in train (one with another label) and
# in test, test and validation texts also in train, a test text also in
# validation, one `grief` train row (test has none), long texts; `qqq` and
# `zzz` are not in VOCAB.
SPLITS = {
    "train": [
        ("the cat sat", "joy"), ("the cat sat", "joy"),
        ("a dog ran", "joy"), ("a dog ran", "anger"),
        ("big red sun", "joy"), ("blue sky qqq", "joy"),
        ("one two three four five six seven eight", "joy"),
        ("the sea", "joy"), ("red dog zzz qqq", "joy"), ("sun sky", "joy"),
        ("big blue sea", "joy"), ("one two", "joy"), ("three four", "joy"),
        ("cat ran", "anger"), ("dog sat on mat", "anger"),
        ("qqq zzz", "anger"), ("the big dog", "anger"),
        ("one two three four five six seven", "anger"),
        ("sea qqq sun zzz", "grief"),
        ("the big red dog ran on", "anger"),  # 8 tokens: not truncated at 8.
    ],
    "validation": [
        ("the cat sat", "joy"), ("red sea qqq", "anger"),
        ("blue dog", "joy"), ("sky zzz", "grief"),
    ],
    "test": [
        ("a dog ran", "anger"), ("a dog ran", "anger"), ("blue dog", "joy"),
        ("ten nine eight seven six five four three two one", "joy"),
        ("mat qqq", "anger"),
    ],
}
CLASSES = ("anger", "grief", "joy")  # The train labels, sorted.
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_csv(path, rows, header=("text", "label")):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(rows)


def text_folder(splits):
  folder = tempfile.mkdtemp()
  for split, rows in splits.items():
    write_csv(os.path.join(folder, f"{split}.csv"), rows)
  return folder


def nearest_rank(values, q):
  """The smallest value that at least q% of `values` do not exceed."""
  ordered = sorted(values)
  return ordered[math.ceil(q / 100 * len(ordered)) - 1]


def expected_text(splits, vocab, seq_length):
  """The report's numbers, from the rows: per split and leakage."""
  out, seen = {}, {}
  for split, rows in splits.items():
    texts = [t for t, _ in rows]
    counts = collections.Counter(label for _, label in rows)
    first_label, conflicts = {}, 0
    for t, label in rows:
      if t in first_label and first_label[t] != label:
        conflicts += 1
      first_label.setdefault(t, label)
    lengths = [len(t.split()) + 2 for t in texts]
    present = [c for c in counts.values() if c]
    out[split] = {
        "size": len(rows),
        "class_counts": {c: counts.get(c, 0) for c in CLASSES},
        "missing_classes": [c for c in CLASSES if not counts.get(c)],
        "imbalance_ratio": max(present) / min(present),
        "duplicates": len(texts) - len(set(texts)),
        "distinct": sum(1 for n in collections.Counter(texts).values()
                        if n > 1),
        "conflicting_labels": conflicts,
        "tokens": {f"p{q}": nearest_rank(lengths, q)
                   for q in (50, 90, 95, 99)},
        "max": max(lengths),
        "total_tokens": sum(lengths),
        "unknown_tokens": sum(1 for t in texts for w in t.split()
                              if w not in vocab),
        "truncated": sum(1 for n in lengths if n > seq_length),
        "leaks": {earlier: sum(1 for t in texts if t in seen[earlier])
                  for earlier in seen},
    }
    seen[split] = set(texts)
  return out


class TextTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.folder = text_folder(SPLITS)
    cls.vocab_file = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    with open(cls.vocab_file, "w", encoding="utf-8") as f:
      f.write("\n".join(VOCAB) + "\n")
    cls.data = datasets.get("text_files", cls.folder)
    cls.report = inspection.inspect(
        cls.data, text.TextPreprocessor(cls.vocab_file, seq_length=8),
        batch_size=4)  # Several batches per split.
    cls.expected = expected_text(SPLITS, set(VOCAB), 8)

  def test_counts_duplicates_and_tokens(self):
    self.assertEqual(self.report["class_names"], list(CLASSES))
    self.assertEqual(self.report["kind"], "text")
    for split, want in self.expected.items():
      got = self.report["splits"][split]
      self.assertEqual(got["size"], want["size"])
      self.assertEqual(got["class_counts"], want["class_counts"])
      self.assertEqual(got["missing_classes"], want["missing_classes"])
      self.assertAllClose(got["imbalance_ratio"], want["imbalance_ratio"])
      self.assertEqual(got["duplicates"]["rows"], want["duplicates"])
      self.assertEqual(got["duplicates"]["distinct"], want["distinct"])
      self.assertEqual(got["duplicates"]["conflicting_labels"],
                       want["conflicting_labels"])
      self.assertEqual(got["tokens"], dict(want["tokens"], max=want["max"]))
      self.assertEqual(got["total_tokens"], want["total_tokens"])
      self.assertEqual(got["unknown_tokens"], want["unknown_tokens"])
      self.assertEqual(got["truncated"]["count"], want["truncated"])
      self.assertEqual(got["empty"], {"count": 0, "rows": []})
    # The data above says so too (a check of the expectations themselves).
    self.assertEqual(self.expected["train"]["duplicates"], 2)
    self.assertEqual(self.expected["train"]["conflicting_labels"], 1)
    self.assertEqual(self.expected["test"]["missing_classes"], ["grief"])
    self.assertEqual(self.report["splits"]["train"]["truncated"]["example"],
                     {"row": 6, "tokens": 10, "instance":
                      "one two three four five six seven eight"})

  def test_leakage(self):
    leaks = {(leak["split"], leak["in"]): leak
             for leak in self.report["leakage"]}
    self.assertEqual(set(leaks), {("validation", "train"), ("test", "train"),
                                  ("test", "validation")})
    for (split, earlier), leak in leaks.items():
      self.assertEqual(leak["count"],
                       self.expected[split]["leaks"][earlier])
    self.assertEqual(leaks[("test", "train")]["count"], 2)  # One text twice.
    self.assertEqual(leaks[("test", "train")]["distinct"], 1)
    self.assertEqual(leaks[("test", "train")]["example"],
                     {"row": 0, "row_in": 2, "instance": "a dog ran"})

  def test_warnings(self):
    tokens = sum(e["total_tokens"] for e in self.expected.values())
    unknown = sum(e["unknown_tokens"] for e in self.expected.values())
    size = sum(e["size"] for e in self.expected.values())
    truncated = sum(e["truncated"] for e in self.expected.values())
    # 6.37% and 10.3%: two significant digits below 10%, whole percents above.
    self.assertEqual((unknown, tokens, truncated, size), (10, 157, 3, 29))
    self.assertEqual(self.report["warnings"], [
        "class 'grief' has 1 train instance.",
        "train is imbalanced: class 'joy' has 12 instances, 'grief' 1 (12x).",
        "2 train texts repeat an earlier one (2 distinct, 1 with another "
        "label), e.g. train row 1 (= row 0): 'the cat sat'.",
        "test has no instance of class 'grief'.",
        "1 test text repeats an earlier one (1 distinct), e.g. test row 1 "
        "(= row 0): 'a dog ran'.",
        "1 validation text also appears in train (leakage), e.g. validation "
        "row 0 (= train row 0): 'the cat sat'.",
        "2 test texts also appear in train (leakage), e.g. test row 0 (= "
        "train row 2): 'a dog ran'.",
        "1 test text also appears in validation (leakage), e.g. test row 2 "
        "(= validation row 2): 'blue dog'.",
        "6.4% of tokens are [UNK] for this vocabulary (vocab.txt).",
        "10% of texts are longer than "
        "`max_seq_length`=8 tokens and will be truncated.",
    ])

  def test_summary_and_files(self):
    screen = inspection.summary(self.report)
    self.assertLessEqual(len(screen.splitlines()), 50)
    self.assertIn("tokens      p50  p90  p95  p99  max  truncated", screen)
    self.assertIn("  - class 'grief' has 1 train instance.", screen)
    out = os.path.join(tempfile.mkdtemp(), "new", "folder")
    paths = inspection.write(self.report, out)
    self.assertEqual(sorted(os.listdir(out)),
                     ["class_counts.png", "inspection.json"])  # No temp file.
    with open(paths[0], encoding="utf-8") as f:
      self.assertEqual(json.load(f), self.report)
    with open(paths[1], "rb") as f:
      png = f.read()
    self.assertEqual(png[:8], PNG_MAGIC)
    self.assertEqual(tf.io.decode_png(png).shape[:2], (480, 640))
    # A folder that cannot be made: one line, nothing written.
    with self.assertRaisesRegex(ValueError, r"^`output_dir`=.*inspection"
                                r"\.json/x: cannot be made"):
      inspection.write(self.report, os.path.join(paths[0], "x"))

  def test_empty_texts_and_multi_label(self):
    # text_files refuses blank texts; data held in memory may have them.
    data = contract.ClassificationData(
        name="memory", class_names=("a", "b", "c"), instance_key="text",
        instance_shape=(), instance_dtype=tf.string,
        splits={"train": (np.array(["x", " \t", "y", "\u3000"], object),
                          np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0],
                                    [1, 1, 1]], np.float32))})
    report = inspection.inspect(data)
    train = report["splits"]["train"]
    self.assertTrue(report["multi_label"])
    self.assertEqual(train["empty"], {"count": 2, "rows": [1, 3]})
    self.assertEqual(train["class_counts"], {"a": 3, "b": 2, "c": 1})
    self.assertEqual(train["labels_per_instance"],
                     {"0": 1, "1": 1, "2": 1, "3": 1})
    self.assertEqual(train["mean_labels_per_instance"], 1.5)
    self.assertNotIn("tokens", train)  # No tokenizer given.
    self.assertIn("2 train texts are empty or whitespace only (rows 1, 3).",
                  report["warnings"])
    self.assertIn("1 train instance has no label.", report["warnings"])


def write_png(path, image):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tf.io.write_file(path, tf.io.encode_png(image))


class ImageTest(tf.test.TestCase):

  def test_image_folder(self):
    folder = tempfile.mkdtemp()
    rng = np.random.RandomState(0)
    small = lambda: rng.randint(0, 256, [4, 6, 3]).astype(np.uint8)
    tall = lambda: rng.randint(0, 256, [8, 5, 3]).astype(np.uint8)
    first = small()
    files = {"train/cat/a.png": first, "train/cat/b.png": tall(),
             "train/dog/c.png": small(), "train/dog/d.png": tall(),
             "train/dog/e.png": tall(), "validation/cat/f.png": small(),
             "validation/dog/g.png": tall(),
             "test/cat/same_as_a.png": first, "test/dog/h.png": small()}
    for path, image in files.items():
      write_png(os.path.join(folder, path), image)
    bad = os.path.join(folder, "train", "dog", "bad.png")
    with open(bad, "wb") as f:
      f.write(b"not a png")
    data = datasets.get("image_folder", folder, options=user_files.Options(
        skip_bad_records=True))
    report = inspection.inspect(data, data_dir=folder)
    self.assertEqual(report["kind"], "image")
    train = report["splits"]["train"]
    self.assertEqual(train["class_counts"], {"cat": 2, "dog": 3})
    heights = [files[p].shape[0] for p in files if p.startswith("train/")]
    widths = [files[p].shape[1] for p in files if p.startswith("train/")]
    self.assertEqual(train["image_height"],
                     {"p50": nearest_rank(heights, 50), "p90": 8, "p95": 8,
                      "p99": 8, "max": 8})
    self.assertEqual(train["image_width"]["p50"], nearest_rank(widths, 50))
    self.assertEqual((nearest_rank(heights, 50), nearest_rank(widths, 50)),
                     (8, 5))
    self.assertEqual(train["image_width"]["max"], 6)
    files = dict(report["image_files"])
    self.assertTrue(files.pop("first_problem").startswith(
        "cannot be decoded as an image"))
    self.assertEqual(files, {"files": 10, "loaded": 9, "skipped": 1,
                             "undecodable": 1, "undecodable_paths": [bad]})
    leaks = {(leak["split"], leak["in"]): leak["count"]
             for leak in report["leakage"]}
    self.assertEqual(leaks, {("validation", "train"): 0,
                             ("test", "train"): 1,
                             ("test", "validation"): 0})
    self.assertIn("1 test image also appears in train (leakage), e.g. test "
                  "row 0 (= train row 0).", report["warnings"])
    self.assertIn(f"1 image cannot be decoded and was left out: {bad}.",
                  report["warnings"])
    self.assertIn("image height x width  p50  p90  p95  p99  max  duplicates\n"
                  "train                 8x5  8x6  8x6  8x6  8x6           0",
                  inspection.summary(report))


class TabularTest(tf.test.TestCase):

  def test_feature_statistics(self):
    folder = tempfile.mkdtemp()
    header = ("x", "y", "z", "label")
    train = [(1.0, 10.0, 3.0, "a"), (2.0, -4.0, 3.0, "b"),
             (1.0, 10.0, 3.0, "a"), (4.5, 0.5, 3.0, "b"),
             (0.0, 2.0, 3.0, "a")]
    write_csv(os.path.join(folder, "train.csv"), train, header)
    write_csv(os.path.join(folder, "validation.csv"),
              [(9.0, 9.0, 9.0, "a"), (8.0, 8.0, 8.0, "b")], header)
    write_csv(os.path.join(folder, "test.csv"),
              [(2.0, -4.0, 3.0, "b"), (7.0, 7.0, 7.0, "a")], header)
    report = inspection.inspect(datasets.get("tabular_files", folder),
                                batch_size=2)  # Merged over 3 batches.
    self.assertEqual(report["kind"], "numeric")
    values = np.array([row[:3] for row in train])
    got = report["splits"]["train"]
    for i, name in enumerate("xyz"):
      want = {"mean": values[:, i].mean(), "std": values[:, i].std(),
              "min": values[:, i].min(), "max": values[:, i].max()}
      self.assertAllClose(got["features"][name], want)
    self.assertEqual(got["constant_features"], ["z"])
    self.assertEqual(got["duplicates"]["rows"], 1)
    self.assertEqual(report["splits"]["validation"]["constant_features"], [])
    self.assertEqual([leak["count"] for leak in report["leakage"]], [0, 1, 0])
    self.assertIn("feature 'z' is constant in train: no information for the "
                  "model.", report["warnings"])
    self.assertIn("1 test row also appears in train (leakage), e.g. test "
                  "row 0 (= train row 1).", report["warnings"])


class BinaryTest(tf.test.TestCase):
  """The module docstring's command, on a small folder, with the default
  (MiniLM) vocabulary."""

  def test_command_and_bad_data_dir(self):
    _, vocab_file = pretrained.minilm_files()
    with open(vocab_file, encoding="utf-8") as f:
      vocab = {line.rstrip("\n") for line in f}
    self.assertTrue(set(WORDS) <= vocab)  # One token each: words + 2.
    long_text = " ".join(WORDS[i % len(WORDS)] for i in range(40))
    # The words MiniLM's vocabulary lacks become one it has.
    splits = {split: [(" ".join(w if w in WORDS else "nine"
                                for w in t.split()), label)
                      for t, label in rows]
              for split, rows in SPLITS.items()}
    splits["train"] += [(long_text, "joy"), (long_text + " sky", "anger")]
    folder = text_folder(splits)
    expected = expected_text(splits, vocab, 32)
    out = os.path.join(tempfile.mkdtemp(), "inspect")
    proc = helpers.run_module(
        "pipelines.inspect_data", "--dataset=text_files",
        f"--data_dir={folder}", "--max_seq_length=32", f"--output_dir={out}")
    with open(os.path.join(out, "inspection.json"), encoding="utf-8") as f:
      report = json.load(f)
    for split, want in expected.items():
      got = report["splits"][split]
      self.assertEqual(got["class_counts"], want["class_counts"])
      self.assertEqual(got["tokens"], dict(want["tokens"], max=want["max"]))
      self.assertEqual(got["unknown_tokens"], 0)
      self.assertEqual(got["truncated"]["count"], want["truncated"])
      self.assertEqual(got["duplicates"]["rows"], want["duplicates"])
    self.assertEqual(expected["train"]["max"], 43)
    self.assertEqual(report["tokenizer"]["max_seq_length"], 32)
    with open(os.path.join(out, "class_counts.png"), "rb") as f:
      self.assertEqual(f.read(8), PNG_MAGIC)
    lines = proc.stdout.splitlines()
    for warning in (
        "  - class 'grief' has 1 train instance.",
        "  - 2 test texts also appear in train (leakage), e.g. test row 0 (= "
        "train row 2): 'a dog ran'.",
        "  - 6.5% of texts are longer than --max_seq_length=32 tokens and "
        "will be truncated."):
      self.assertIn(warning, lines)
    truncated = sum(e["truncated"] for e in expected.values())
    self.assertEqual((truncated, sum(e["size"] for e in expected.values())),
                     (2, 31))  # The warning's 6.5%.
    self.assertIn(f"Wrote {out}/inspection.json and {out}/class_counts.png",
                  lines)
    self.assertEqual(report["warnings"][0], "class 'grief' has 1 train "
                     "instance.")
    # A bad --data_dir: one line, status 1, nothing written.
    missing = os.path.join(folder, "missing")
    out2 = os.path.join(tempfile.mkdtemp(), "never")
    proc = helpers.run_command(
        [sys.executable, "-m", "pipelines.inspect_data",
         "--dataset=text_files", f"--data_dir={missing}",
         f"--output_dir={out2}"], check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     f"inspect_data: --data_dir={missing}: not a folder.")
    self.assertNotIn("Traceback", proc.stderr)
    self.assertFalse(os.path.exists(out2))


  def test_one_class(self):
    # Issue 58 case 5: inspect_data showed a one-class train split without
    # a word; it now refuses it as training does, writing nothing.
    folder = tempfile.mkdtemp()
    for i in range(20):
      os.makedirs(os.path.join(folder, "train", "joy"), exist_ok=True)
      with open(os.path.join(folder, "train", "joy", f"{i:03d}.txt"), "w",
                encoding="utf-8") as f:
        f.write(f"so happy {i}")
    out = os.path.join(tempfile.mkdtemp(), "never")
    proc = helpers.run_module(
        "pipelines.inspect_data", "--dataset=text_files",
        f"--data_dir={folder}", f"--output_dir={out}", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     f"inspect_data: {folder}/train: 1 class (joy) in train; "
                     "a classifier needs two or more: give train instances "
                     "of another class.")
    self.assertNotIn("Traceback", proc.stderr)
    self.assertFalse(os.path.exists(out))


class OutputDirTest(tf.test.TestCase):
  """Issue 58, case 16: `--output_dir` replaced inspection.json in a folder
  holding a user's files; now it is refused as `evaluate --report_dir`
  refuses one, before the data is read."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp()
    header = ("x", "label")
    write_csv(os.path.join(cls.data_dir, "train.csv"),
              [(float(i), "ab"[i % 2]) for i in range(20)], header)
    cls.report = inspection.inspect(datasets.get("tabular_files",
                                                 cls.data_dir))

  def test_a_folder_of_other_files_is_refused(self):
    folder = tempfile.mkdtemp()
    for name, text in (("notes.txt", "mine"),
                       ("inspection.json", '{"mine": 1}')):
      with open(os.path.join(folder, name), "w") as f:
        f.write(text)
      with self.assertRaises(ValueError) as caught:
        inspection.write(self.report, folder)
      self.assertEqual(
          str(caught.exception),
          f"`output_dir`={folder} exists and holds other files than a "
          "previous inspection (inspection.json, class_counts.png): give a "
          "new or empty folder (a previous inspection's folder is "
          "replaced).")
    with open(os.path.join(folder, "inspection.json")) as f:
      self.assertEqual(f.read(), '{"mine": 1}')  # Untouched.
    self.assertEqual(sorted(os.listdir(folder)),
                     ["inspection.json", "notes.txt"])
    path = os.path.join(folder, "notes.txt")
    with self.assertRaisesRegex(ValueError, f"^`output_dir`={path} is a "
                                "file, not a folder.$"):
      inspection.write(self.report, path)

  def test_an_empty_or_previous_inspection_folder_is_written(self):
    folder = tempfile.mkdtemp()
    inspection.write(self.report, folder)  # Empty.
    report, chart = inspection.write(self.report, folder)  # Its own.
    self.assertEqual(sorted(os.listdir(folder)),
                     ["class_counts.png", "inspection.json"])
    with open(report, encoding="utf-8") as f:
      self.assertEqual(json.load(f), self.report)
    self.assertEqual(chart, os.path.join(folder, "class_counts.png"))

  def test_binary_refuses_before_reading(self):
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "keep.csv"), "w") as f:
      f.write("a user's file\n")
    proc = helpers.run_module(
        "pipelines.inspect_data", "--dataset=tabular_files",
        f"--data_dir={self.data_dir}", f"--output_dir={folder}", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        f"inspect_data: --output_dir={folder} exists and holds other files "
        "than a previous inspection (inspection.json, class_counts.png): "
        "give a new or empty folder (a previous inspection's folder is "
        "replaced).")
    self.assertEqual(proc.stdout, "")  # Refused before the data was read.
    self.assertEqual(os.listdir(folder), ["keep.csv"])


if __name__ == "__main__":
  tf.test.main()
