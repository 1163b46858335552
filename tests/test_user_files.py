"""Tests of `--dataset=text_files`: a user's own CSV / TSV / JSONL files."""

import csv
import gzip
import json
import os
import tempfile
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

import helpers
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import trainer as training
from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import streaming
from rank4class_tf.data import user_files


def write(folder, name, content, encoding="utf-8"):
  path = os.path.join(folder, name)
  raw = content.encode(encoding) if isinstance(content, str) else content
  opener = gzip.open if name.endswith(".gz") else open
  with opener(path, "wb") as f:
    f.write(raw)
  return path


def load(folder, **columns):
  return datasets.get("text_files", folder,
                      options=user_files.Options(**columns))


class FormatsTest(tf.test.TestCase):

  def test_csv_tsv_and_gzipped_jsonl(self):
    folder = tempfile.mkdtemp()
    # A byte-order mark, CRLF line ends, quotes, an embedded comma and line
    # break, Unicode; columns in another order, and one more column.
    write(folder, "train.csv",
          "\ufeffid,emotion,comment\r\n"
          '1,joy,"Great, ""really"" great"\r\n'
          '2,anger,"two\r\nlines"\r\n'
          "3,joy,café ☕\r\n"
          "4,anger,no\r\n")
    write(folder, "validation.tsv", "comment\temotion\nfine\tjoy\n")
    write(folder, "test.jsonl.gz",
          '{"comment": "x", "emotion": "anger"}\n\n'
          '{"comment": "y", "emotion": "joy"}\n')
    data = load(folder, text="comment", label="emotion")
    self.assertEqual(data.class_names, ("anger", "joy"))  # Sorted.
    texts, labels = data.splits["train"]
    self.assertEqual(list(texts), ['Great, "really" great', "two\r\nlines",
                                   "café ☕", "no"])
    self.assertAllEqual(labels, [1, 0, 1, 0])
    self.assertEqual(labels.dtype, np.int64)
    self.assertEqual(list(data.splits["validation"][0]), ["fine"])
    self.assertAllEqual(data.splits["test"][1], [0, 1])
    self.assertTrue(data.is_text)
    self.assertFalse(data.multi_label)

  def test_multi_label_lists_and_separator(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.jsonl",
          '{"text": "a", "label": ["joy", "love"]}\n'
          '{"text": "b", "label": ["anger"]}\n'
          '{"text": "c", "label": ["love"]}\n')
    write(folder, "validation.csv", 'text,label\nd,joy|anger\n')
    write(folder, "test.csv", 'text,label\ne,"[""love""]"\n')
    data = load(folder, label_separator="|")
    self.assertEqual(data.class_names, ("anger", "joy", "love"))
    self.assertTrue(data.multi_label)
    self.assertAllEqual(data.splits["train"][1],
                        [[0, 1, 1], [1, 0, 0], [0, 0, 1]])
    self.assertAllEqual(data.splits["validation"][1], [[1, 1, 0]])
    self.assertAllEqual(data.splits["test"][1], [[0, 0, 1]])
    self.assertEqual(data.splits["test"][1].dtype, np.float32)

  def test_keras_folder_layout(self):
    folder = tempfile.mkdtemp()
    for path, content in (("train/joy/a.txt", "happy"),
                          ("train/joy/b.txt", "\ufeffglad\nreally"),
                          ("train/joy/notes.md", "not a text"),
                          ("train/anger/c.txt", "mad"),
                          ("test/anger/d.txt", "cross")):
      os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
      write(folder, path, content)
    write(folder, "validation.csv", "text,label\nfine,joy\n")
    data = load(folder)
    self.assertEqual(data.class_names, ("anger", "joy"))
    self.assertEqual(list(data.splits["train"][0]),
                     ["mad", "happy", "glad\nreally"])
    self.assertAllEqual(data.splits["train"][1], [0, 1, 1])
    self.assertAllEqual(data.splits["validation"][1], [1])
    self.assertEqual(list(data.splits["test"][0]), ["cross"])
    # A class folder train never has is named by its file.
    os.makedirs(os.path.join(folder, "test", "calm"))
    write(folder, "test/calm/e.txt", "zen")
    with self.assertRaisesRegex(ValueError, r"test/calm/e\.txt: label "
                                r"'calm' is not a class \(2 classes"):
      load(folder)
    write(folder, "test/calm/e.txt", " ")
    with self.assertRaisesRegex(ValueError, r"test/calm/e\.txt: empty "
                                r"text\.$"):
      load(folder)

  def test_ids_with_a_class_names_file(self):
    folder = tempfile.mkdtemp()
    names = write(folder, "classes.txt", "sad\nhappy\n")
    write(folder, "train.csv", "text,label\na,1\nb,0\nc,happy\n")
    write(folder, "validation.csv", "text,label\nd,0\n")
    write(folder, "test.csv", "text,label\ne,1\n")
    data = load(folder, class_names_file=names)
    self.assertEqual(data.class_names, ("sad", "happy"))
    self.assertAllEqual(data.splits["train"][1], [1, 0, 1])

  def test_columns_without_a_header_and_fields_unquoted(self):
    # GoEmotions' layout (`shipped_text`): no header row, quotes as written.
    folder = tempfile.mkdtemp()
    write(folder, "train.tsv", '"yes" she said\tjoy\tid1\n'
          'a "b\tanger\tid2\n')
    write(folder, "validation.tsv", "c\tjoy\tid3\n")
    write(folder, "test.tsv", "c\tjoy\tid3\n")
    data = load(folder, columns=("text", "label", "id"), quoted=False)
    self.assertEqual(list(data.splits["train"][0]), ['"yes" she said',
                                                     'a "b'])
    self.assertAllEqual(data.splits["train"][1], [1, 0])
    self.assertEqual(list(data.splits["test"][0]), ["c"])
    # Quoted (the default), the same file is read as CSV quoting says.
    write(folder, "train.tsv", '"x\ty"\tjoy\tid1\nz\tanger\tid2\n')
    self.assertEqual(list(load(folder, columns=("text", "label", "id"))
                          .splits["train"][0]), ["x\ty", "z"])
    write(folder, "train.tsv", "x\tjoy\n")
    with self.assertRaisesRegex(ValueError, r"train\.tsv:1: 2 fields, "
                                r"expected 3 \(text, label, id\)\.$"):
      load(folder, columns=("text", "label", "id"))
    with self.assertRaisesRegex(ValueError, r"train\.tsv:1: columns 1 and 2 "
                                "are both named 'text'"):
      load(folder, columns=("text", "text"))
    with mock.patch.object(streaming, "STREAM_BYTES", 0):
      with self.assertRaisesRegex(ValueError, "stream, read with a header "
                                  "row and CSV quoting only"):
        load(folder, columns=("text", "label"))

  def test_missing_splits_are_cut_from_train_seeded_and_stratified(self):
    folder = tempfile.mkdtemp()
    rows = ["text,label"] + [f"t{i},{'ab'[i % 2]}" for i in range(40)]
    rows.append("lonely,c")  # One row: kept in train.
    write(folder, "train.csv", "\n".join(rows) + "\n")
    data = load(folder, split_seed=3)
    sizes = {s: len(data.splits[s][1]) for s in contract.SPLITS}
    self.assertEqual(sizes, {"train": 33, "validation": 4, "test": 4})
    for split in ("validation", "test"):  # 2 of each class.
      self.assertAllEqual(np.bincount(data.splits[split][1], minlength=3),
                          [2, 2, 0])
    self.assertIn("lonely", list(data.splits["train"][0]))
    everything = sorted(t for s in contract.SPLITS
                        for t in data.splits[s][0])
    self.assertEqual(everything, sorted(r.split(",")[0] for r in rows[1:]))
    again = load(folder, split_seed=3)
    other = load(folder, split_seed=4)
    self.assertAllEqual(again.splits["test"][0], data.splits["test"][0])
    self.assertNotAllEqual(other.splits["test"][0], data.splits["test"][0])


class CheckColumnsTest(tf.test.TestCase):
  """The one place that words a missing column (rows, tables, streams)."""

  def test_first_missing_column_and_its_flag(self):
    user_files.check_columns("a.csv:3", [("text", "text_column")],
                             ["text", "label"])
    with self.assertRaisesRegex(ValueError, r"^a\.csv:3: no column 'y' "
                                r"\(columns: text, 7\); name it with "
                                r"`label_column`\.$"):
      user_files.check_columns(
          "a.csv:3", [("text", "text_column"), ("y", "label_column"),
                      ("z", "feature_columns")], {"text": "a", 7: "b"})


class BadFilesTest(tf.test.TestCase):
  """One line naming the file, line and column; nothing guessed."""

  def assert_refused(self, files, pattern, **columns):
    folder = tempfile.mkdtemp()
    for name, content in files.items():
      os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
      write(folder, name, content)
    with self.assertRaisesRegex(ValueError, pattern) as raised:
      load(folder, **columns)
    self.assertNotIn("\n", str(raised.exception))
    return folder

  def test_refusals(self):
    good = "text,label\na,x\nb,y\n"
    cases = [
        ({"validation.csv": good}, r"holds no train file \(train\.csv, "),
        ({"train.csv": good, "train/x.txt": "a"},
         r"holds train and train\.csv: one file per split\."),
        ({"train.csv": good, "train.jsonl": '{"text": "a", "label": "x"}'},
         r"holds train\.csv and train\.jsonl: one file per split\."),
        ({"train.csv": "words,label\na,x\n"},
         r"train\.csv:2: no column 'text' \(columns: words, label\); name "
         r"it with `text_column`\.$"),
        ({"train.csv": "text,label\n ,x\n"},
         r"train\.csv:2: column 'text': empty text\.$"),
        ({"train.csv": "text,label\na,\n"},
         r"train\.csv:2: column 'label' is empty\.$"),
        ({"train.csv": good, "test.csv": "text,label\nc,z\n"},
         r"test\.csv:2: label 'z' is not a class \(2 classes, named by the "
         r"train labels\)\.$"),
        ({"train.jsonl": '{"text": "a", "label": "x"}\n'
                         '{"text": "b", "label": ["x", "y"]}\n'},
         r"train\.jsonl:2: a list among single labels: a data set is "
         r"single- or multi-label\.$"),
        ({"train.csv": "text,label\na,x\n", "test.jsonl":
          '{"text": "b", "label": ["x"]}\n'},
         r"test\.jsonl:1: multi-label rows, but .*train\.csv is "
         r"single-label\.$"),
        ({"train.csv": b"text,label\na,x\n\xff,y\n"},
         r"train\.csv:3: not valid UTF-8\.$"),
        ({"train.csv": 'text,label\n"a"b,x\n'},
         r"train\.csv:2: CSV quoting error"),
        ({"train.csv": "text,label\na,x,extra\n"},
         r"train\.csv:2: 3 fields, expected 2 \(text, label\)\.$"),
        ({"train.jsonl": "[1, 2]\n"}, r"train\.jsonl:1: not a JSON object"),
        ({"train.csv": "text,label\n"}, r"train\.csv: no rows\.$"),
        ({"train.csv": "text,label\na,x\n"},
         r"train\.csv: 1 rows are too few to cut a validation split from"),
    ]
    for files, pattern in cases:
      with self.subTest(pattern=pattern):
        self.assert_refused(files, pattern)

  def test_a_class_without_train_rows(self):
    folder = tempfile.mkdtemp()
    names = write(folder, "classes.txt", "x\ny\nz\n")
    write(folder, "train.csv", "text,label\na,x\nb,y\n")
    with self.assertRaisesRegex(ValueError, r"train\.csv: no train row has "
                                r"the class\(es\) z of `class_names_file`="):
      load(folder, class_names_file=names)

  def test_no_folder(self):
    with self.assertRaisesRegex(ValueError, r"^`data_dir` must name the "
                                "folder"):
      datasets.get("text_files")
    with self.assertRaisesRegex(ValueError, r"^`data_dir`=/no/such: not a "
                                "folder\\.$"):
      datasets.get("text_files", "/no/such")


class HostileProbeTest(tf.test.TestCase):
  """Issue 58's cases 1-4, 7 and 8 (docs/testing.md's hostile table), with
  the probe's data: correct, or one line naming file, line and column."""

  def folder(self, **files):
    folder = tempfile.mkdtemp()
    for name, content in files.items():
      write(folder, name.replace("_", "."), content)
    return folder

  def assert_refused(self, folder, pattern, **options):
    with self.assertRaisesRegex(ValueError, "^" + folder + "/" + pattern +
                                "$") as raised:
      load(folder, **options)
    self.assertNotIn("\n", str(raised.exception))

  def test_case1_a_row_with_one_label_is_a_list_of_one(self):
    folder = self.folder(
        train_csv="text,label\nso sweet,joy|love\nhow dare you,anger\n",
        validation_csv="text,label\nfine,anger\n",
        test_csv="text,label\nlovely,love|joy\n")
    config = config_lib.TrainConfig.create(
        dataset="text_files", data_dir=folder, label_separator="|",
        loss="sigmoid_cross_entropy", encoder="bert", model_dir="unused")
    checks.validate(config)
    data = datasets.from_config(config.data)
    self.assertTrue(data.multi_label)
    self.assertEqual(data.class_names, ("anger", "joy", "love"))
    self.assertAllEqual(data.splits["train"][1], [[0, 1, 1], [1, 0, 0]])
    self.assertAllEqual(data.splits["validation"][1], [[1, 0, 0]])
    self.assertAllEqual(data.splits["test"][1], [[0, 1, 1]])

  def test_case2_numeric_class_names_one_reading(self):
    # Classes 3, 2, 1 and integer labels 0/1/2: `0` is no class name, so
    # every label is an id (never `1` the name and `0` the id).
    rows = "text,label\na,0\nb,1\nc,2\nd,1\n"
    folder = self.folder(classes_txt="3\n2\n1\n", train_csv=rows,
                         validation_csv="text,label\nv,2\n",
                         test_csv="text,label\nw,0\n")
    names = os.path.join(folder, "classes.txt")
    data = load(folder, class_names_file=names)
    self.assertEqual(data.class_names, ("3", "2", "1"))
    self.assertAllEqual(data.splits["train"][1], [0, 1, 2, 1])
    self.assertAllEqual(data.splits["validation"][1], [2])
    self.assertAllEqual(data.splits["test"][1], [0])
    # Every label a name (`3` is no id of 3 classes): read as names.
    write(folder, "train.csv", "text,label\na,3\nb,2\nc,1\n")
    write(folder, "validation.csv", "text,label\nv,1\n")
    write(folder, "test.csv", "text,label\nw,3\n")
    data = load(folder, class_names_file=names)
    self.assertAllEqual(data.splits["train"][1], [0, 1, 2])
    self.assertAllEqual(data.splits["validation"][1], [2])
    # Every label both a name and an id of another class: refused.
    write(folder, "classes.txt", "2\n0\n1\n")
    write(folder, "train.csv", "text,label\na,0\nb,1\nc,2\n")
    self.assert_refused(
        folder, r"train\.csv:2: label '0' is ambiguous: the class named '0' "
        r"\(.*/classes\.txt:2\) or the class id 0 \('2'\); with class names "
        r"that are numbers, write every label as a name, or every label as "
        r"an id\.", class_names_file=names)
    # Names and ids mixed where one label reads both ways: refused.
    write(folder, "classes.txt", "3\n2\n1\n")
    write(folder, "train.csv", "text,label\na,0\nb,3\nc,2\n")
    self.assert_refused(
        folder, r"train\.csv:4: label '2' is ambiguous: the class named '2' "
        r"\(.*classes\.txt:2\) or the class id 2 \('1'\); .*",
        class_names_file=names)

  def test_case3_a_column_named_twice(self):
    for header, columns in (("text,label,text", "1 and 3 are both named "
                             "'text'"),
                            ("text,label,label", "2 and 3 are both named "
                             "'label'")):
      folder = self.folder(train_csv=header + "\na,x,b\nc,y,d\n")
      self.assert_refused(folder, r"train\.csv:1: columns " + columns +
                          "; name every column once\.")
    folder = self.folder(train_csv="a,a,c,species\n1,2,3,x\n4,5,6,y\n")
    with self.assertRaisesRegex(ValueError, "^" + folder + r"/train\.csv:1: "
                                r"columns 1 and 2 are both named 'a'; name "
                                r"every column once\.$"):
      datasets.get("tabular_files", folder,
                   options=user_files.Options(label="species"))
    folder = self.folder(train_jsonl='{"text": "a", "label": "x", '
                         '"text": "b"}\n')
    self.assert_refused(folder, r"train\.jsonl:1: not a JSON object \(key "
                        r"'text' given twice\)\.")

  def test_case4_class_names_as_written(self):
    train = "text,label\na,joy\nb,anger\n"
    folder = self.folder(classes_txt="joy\nan\tger\n", train_csv=train)
    names = os.path.join(folder, "classes.txt")
    self.assert_refused(folder, r"classes\.txt:2: class name 'an\\tger' "
                        r"holds a control character \('\\t'\): a class "
                        r"name is one printable line\.",
                        class_names_file=names)
    folder = self.folder(train_csv='text,label\na,joy\nb,"an\nger"\n')
    self.assert_refused(folder, r"train\.csv:3: label 'an\\nger' holds a "
                        r"control character \('\\n'\): .*")
    folder = self.folder(train_jsonl='{"text": "a", "label": "joy"}\n'
                         '{"text": "b", "label": "fe\\u2028ar"}\n')
    self.assert_refused(folder, r"train\.jsonl:2: label 'fe\\u2028ar' "
                        r"holds a control character .*")
    for first, second in (("  lead", "lead"), ("joy", "joy ")):
      folder = self.folder(train_csv=f"text,label\na,{first}\nb,{second}\n"
                           "c,x\n", test_csv="text,label\nd,x\n")
      self.assert_refused(
          folder, fr"train\.csv:3: label '{second}' and '{first}' \("
          fr".*/train\.csv:2\) differ only in surrounding whitespace: one "
          r"class or two\? Write them alike\.")
    # Across splits too; spelled one way everywhere, the name is stripped.
    folder = self.folder(train_csv="text,label\na, joy\nb,x\n",
                         validation_csv="text,label\nc,joy\n",
                         test_csv="text,label\nd,x\n")
    self.assert_refused(folder, r"validation\.csv:2: label 'joy' and ' joy' "
                        r"\(.*/train\.csv:2\) differ only in surrounding "
                        r"whitespace: .*")
    write(folder, "validation.csv", "text,label\nc, joy\n")
    self.assertEqual(load(folder).class_names, ("joy", "x"))

  def test_case7_a_field_over_128_kib(self):
    big = "word " * (200 * 1024 // 5)  # 200 KiB.
    folder = self.folder(train_csv=f'text,label\n"{big}",joy\nb,x\n',
                         validation_tsv=f"text\tlabel\n{big}\tx\n",
                         test_jsonl=json.dumps({"text": big, "label": "joy"}))
    data = load(folder)
    self.assertEqual(list(data.splits["train"][0]), [big, "b"])
    self.assertEqual(list(data.splits["validation"][0]), [big])
    self.assertEqual(list(data.splits["test"][0]), [big])
    self.assertEqual(csv.field_size_limit(), 128 * 1024)  # Restored.

  def test_case8_odd_label_and_text_values(self):
    good = "\n".join(json.dumps({"text": t, "label": l}) for t, l in
                     (("a", "joy"), ("b", "anger"))) + "\n"
    cases = [
        ('{"text": "c", "label": []}',
         r"train\.jsonl:3: column 'label': an empty list; a row has at least "
         r"one class\."),
        ('{"text": "c \\ud83d", "label": "joy"}',
         r"train\.jsonl:3: column 'text': a lone surrogate \(\\ud83d, "
         r"half of a UTF-16 pair\) is not text\."),
        ('{"text": 42, "label": "joy"}',
         r"train\.jsonl:3: column 'text' is a number \(42\), not a "
         r"string\."),
        ('{"text": ["a", "b"], "label": "joy"}',
         r"train\.jsonl:3: column 'text' is a list \(\[\"a\", \"b\"\]\), "
         r"not a string\."),
        ('{"text": null, "label": "joy"}',
         r"train\.jsonl:3: column 'text' is null, not a string\."),
    ]
    for line, pattern in cases:
      with self.subTest(line=line):
        self.assert_refused(self.folder(train_jsonl=good + line + "\n"),
                            pattern)
    folder = self.folder(train_csv="text,label\na,joy|love\nb,anger|\n")
    self.assert_refused(folder, r"train\.csv:3: column 'label': 'anger\|' "
                        r"holds an empty class name \(joined by "
                        r"`label_separator`='\|'\)\.", label_separator="|")
    # A label starting with `[` is a class name unless it looks like a list.
    folder = self.folder(
        train_csv="text,label\na,[urgent]\nb,[draft] notes\nc,plain\n",
        validation_csv="text,label\nv,plain\n",
        test_csv="text,label\nd,[urgent]\n")
    data = load(folder)
    self.assertEqual(data.class_names, ("[draft] notes", "[urgent]", "plain"))
    self.assertFalse(data.multi_label)
    self.assertAllEqual(data.splits["test"][1], [1])
    folder = self.folder(train_csv="text,label\na,\"['joy', 'love']\"\n")
    self.assert_refused(
        folder, r"train\.csv:2: column 'label': \"\['joy', 'love'\]\" starts "
        r"like a list of classes but is not JSON \(write \[\"joy\", "
        r"\"love\"\], double quotes; or name the classes joined by "
        r"`label_separator`\)\.")


class SameAsShippedTest(tf.test.TestCase):
  """GoEmotions converted to a user's CSV loads as `goemotions` does."""

  def test_identical_splits_and_batches(self):
    shipped = datasets.get("goemotions")
    folder = tempfile.mkdtemp()
    names = write(folder, "emotions.txt",
                  "".join(n + "\n" for n in shipped.class_names))
    for split, out in (("train", "train.csv"), ("validation", "validation.csv"),
                       ("test", "test.csv")):
      texts, labels = shipped.splits[split]
      with open(os.path.join(folder, out), "w", newline="",
                encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["comment", "emotion_id"])
        writer.writerows(zip(texts, labels.tolist()))
    mine = load(folder, text="comment", label="emotion_id",
                class_names_file=names)
    self.assertEqual(mine.class_names, shipped.class_names)
    for split in contract.SPLITS:
      self.assertEqual(list(mine.splits[split][0]),
                       list(shipped.splits[split][0]))
      self.assertAllEqual(mine.splits[split][1], shipped.splits[split][1])
    batches = [next(iter(datasets.ranking_dataset(
        d, "train", 8, training=True, seed=5))) for d in (shipped, mine)]
    for key in batches[0][0]:
      self.assertAllEqual(batches[0][0][key], batches[1][0][key])
    self.assertAllEqual(batches[0][1], batches[1][1])


class ConfigTest(tf.test.TestCase):

  def test_flags_reach_the_loader_and_the_checks(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.tsv", "t\tl\n" + "".join(
        f"row {i}\t{'pq'[i % 2]}\n" for i in range(20)))
    config = config_lib.TrainConfig.create(
        dataset="text_files", data_dir=folder, text_column="t",
        label_column="l", split_seed=7, encoder="bert", model_dir="unused")
    checks.validate(config)
    data = datasets.from_config(config.data)
    self.assertEqual(data.class_names, ("p", "q"))
    self.assertEqual(config.flat()["split_seed"], 7)


def emotions_csv():
  """A user's small CSV: 3 classes, 12 rows each, no validation or test."""
  folder = tempfile.mkdtemp()
  words = {"joy": "so happy and glad", "anger": "so angry and mad",
           "neutral": "the bus at nine"}
  write(folder, "train.csv", "comment,feeling\n" + "".join(
      f"{text} {i},{name}\n" for i in range(12)
      for name, text in words.items()))
  return folder


@pytest.mark.slow
class DownstreamTest(tf.test.TestCase):
  """What reads a shipped data set reads a user's: the feature cache, a
  text class encoder with a held-out class."""

  def test_frozen_cached_zero_shot_run(self):
    root = tempfile.mkdtemp()
    config = config_lib.TrainConfig.create(
        dataset="text_files", data_dir=emotions_csv(), text_column="comment",
        label_column="feeling", encoder="bert", init_checkpoint="minilm",
        freeze_encoder=True, feature_cache_dir=os.path.join(root, "cache"),
        class_encoder="text", holdout_classes=("anger",), interaction="dot",
        batch_size=4, max_seq_length=12, train_steps=4, eval_every=2,
        learning_rate=1e-2, model_dir=os.path.join(root, "run"))
    training.train(config)
    self.assertLen(os.listdir(os.path.join(root, "cache")), 1)
    ranker = exported_ranker.ExportedRanker(config.trainer.model_dir)
    self.assertEqual(ranker.class_names, ["anger", "joy", "neutral"])
    ranked = ranker.rank_class_list(["so angry"], ["fury", "calm"], top_k=2)
    self.assertCountEqual([name for name, _ in ranked[0]], ["fury", "calm"])
    results = helpers.evaluate(config.trainer.model_dir, "test")
    self.assertEqual(results["num_examples"], 3)  # 10% of 12 a class: 1.


@pytest.mark.slow
class MirroredTest(tf.test.TestCase):
  """A user's texts under MirroredStrategy on two CPU devices."""

  def test_mirrored_binary(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    helpers.run_module(
        "pipelines.train", "--dataset=text_files",
        f"--data_dir={emotions_csv()}", "--text_column=comment",
        "--label_column=feeling", "--encoder=bert", "--encoder_size=tiny",
        "--max_seq_length=12", "--batch_size=4", "--train_steps=2",
        "--eval_every=1", "--learning_rate=1e-4", "--strategy=mirrored",
        "--cpu_devices=2", f"--model_dir={model_dir}")
    ranked = exported_ranker.ExportedRanker(model_dir).rank(["so happy"], top_k=3)
    self.assertCountEqual([name for name, _ in ranked[0]],
                          ["anger", "joy", "neutral"])


if __name__ == "__main__":
  tf.test.main()
