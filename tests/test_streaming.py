"""Tests of `streaming`: a user's text files larger than memory.

`STREAM_BYTES` is set to 0 here, so that small files stream; the streamed
splits must hold what the in-memory reader gives for the same files.
"""

import glob
import gzip
import json
import logging
import os
import tempfile
from unittest import mock

import tensorflow as tf

from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import streaming
from rank4class_tf.data import user_files


def write(folder, name, content):
  path = os.path.join(folder, name)
  raw = content.encode("utf-8") if isinstance(content, str) else content
  with (gzip.open if name.endswith(".gz") else open)(path, "wb") as f:
    f.write(raw)
  return path


def pairs(data, split):
  return [(t.decode("utf-8"), int(y)) for t, y in
          data.dataset(split).as_numpy_iterator()]


class Streaming(tf.test.TestCase):
  """A private counts cache, and `load` streaming or in memory."""

  def setUp(self):
    super().setUp()
    cache = tempfile.mkdtemp()
    self.enter_context(mock.patch.dict(os.environ,
                                       {streaming.CACHE_ENV: cache}))
    self.cache = cache

  def load(self, folder, stream=True, **options):
    with mock.patch.object(streaming, "STREAM_BYTES",
                           0 if stream else 1 << 40):
      return datasets.get("text_files", folder,
                          options=user_files.Options(**options))


class StreamedTest(Streaming):

  def test_streams_what_memory_holds(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "\ufeffid,emotion,comment\r\n"
          '1,joy,"Great, ""really"" great"\r\n'
          '2,anger,"two\r\nlines"\r\n3,joy,café ☕\r\n4,anger,no\r\n')
    write(folder, "validation.tsv.gz", "comment\temotion\nfine\tjoy\n")
    write(folder, "test.jsonl", '{"comment": "x", "emotion": "anger"}\n\n'
          '{"comment": "y", "emotion": "joy", "more": 1}\n')
    streamed = self.load(folder, text="comment", label="emotion")
    memory = self.load(folder, stream=False, text="comment", label="emotion")
    self.assertEqual(streamed.class_names, ("anger", "joy"))
    self.assertEqual(streamed.class_names, memory.class_names)
    self.assertFalse(streamed.splits)
    for split in contract.SPLITS:
      texts, labels = memory.splits[split]
      self.assertEqual(pairs(streamed, split),
                       [(t, int(y)) for t, y in zip(texts, labels)])
      self.assertEqual(streamed.size(split), len(labels))
    self.assertEqual(
        pairs(streamed, "train")[1], ("two\r\nlines", 0))  # Kept as written.
    features, labels = next(iter(datasets.ranking_dataset(
        streamed, "train", 2, training=True, seed=1)))
    self.assertEqual(labels.shape, [2, 2])
    self.assertEqual(features["text"].shape, [2])

  def test_missing_splits_cut_by_a_seeded_hash(self):
    folder = tempfile.mkdtemp()
    rows = [f"row {i},{'abc'[i % 3]}" for i in range(300)]
    write(folder, "train.csv", "text,label\n" + "\n".join(rows) + "\n")
    data = self.load(folder)
    got = {split: pairs(data, split) for split in contract.SPLITS}
    for split in contract.SPLITS:
      self.assertLen(got[split], data.size(split))
    everything = sorted(sum(got.values(), []))
    self.assertEqual(everything, sorted(
        (f"row {i}", i % 3) for i in range(300)))  # Disjoint, complete.
    # The one rule of every streamed format (TFRecords' too), computed
    # independently: FarmHash of `seed:file name:record i` (0-based) mod
    # 1000, the first tenth to validation, the second to test.
    buckets = tf.strings.to_hash_bucket_fast(
        [f"20220128:train.csv:{i}" for i in range(300)], 1000).numpy()
    self.assertEqual([t for t, _ in got["validation"]],
                     [f"row {i}" for i in range(300) if buckets[i] < 100])
    self.assertEqual([t for t, _ in got["test"]],
                     [f"row {i}" for i in range(300)
                      if 100 <= buckets[i] < 200])
    self.assertBetween(data.size("validation"), 15, 45)
    other = self.load(folder, split_seed=1)
    self.assertNotEqual(pairs(other, "validation"), got["validation"])
    # A run made before the one rule (`split_rule`=by_format, its config's
    # legacy value) keeps streamed text's own: `seed:record i` in 10 buckets.
    legacy = self.load(folder, split_rule="by_format")
    buckets = streaming.bucket(tf.range(300, dtype=tf.int64),
                               20220128).numpy()
    self.assertEqual([t for t, _ in pairs(legacy, "validation")],
                     [f"row {i}" for i in range(300) if buckets[i] == 0])
    self.assertEqual([t for t, _ in pairs(legacy, "test")],
                     [f"row {i}" for i in range(300) if buckets[i] == 1])

  def test_counts_are_cached_by_content(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "text,label\n" + "".join(
        f"t{i},{'pq'[i % 2]}\n" for i in range(40)))
    first = self.load(folder)
    # The counts (the files' hashes go to file_hashes/ beside them).
    self.assertLen(glob.glob(os.path.join(self.cache, "*.json")), 1)
    with mock.patch.object(streaming, "count",
                           side_effect=AssertionError("counted again")):
      again = self.load(folder)
    self.assertEqual(again.size("train"), first.size("train"))
    write(folder, "train.csv", "text,label\n" + "".join(
        f"t{i},{'pq'[i % 2]}\n" for i in range(50)))
    changed = self.load(folder)
    self.assertLen(glob.glob(os.path.join(self.cache, "*.json")), 2)
    self.assertEqual(sum(changed.size(s) for s in contract.SPLITS), 50)

  def test_bad_rows_refused_or_skipped(self):
    folder = tempfile.mkdtemp()
    train = write(folder, "train.csv", "text,label\na,x\n ,y\nb,y\n"
                  + "".join(f"r{i},{'xy'[i % 2]}\n" for i in range(8)))
    write(folder, "validation.csv", "text,label\nc,x\nd,z\n")
    test = write(folder, "test.csv", "text,label\ne,y\n")
    with self.assertRaisesRegex(ValueError, "^" + train + r": record 2: "
                                r"column 'text': empty text\.$"):
      self.load(folder)
    with self.assertLogs(level=logging.WARNING) as logs:
      data = self.load(folder, skip_bad_records=True)
    self.assertEqual([t for t, _ in pairs(data, "train")][:2], ["a", "b"])
    self.assertEqual(data.size("train"), 10)
    self.assertEqual(pairs(data, "validation"), [("c", 0)])
    self.assertEqual(data.size("validation"), 1)
    self.assertIn("train.csv: skipped 1 bad row(s)", "\n".join(logs.output))
    write(folder, "train.csv", "text,label\na,x\nb,y\n")
    with self.assertRaisesRegex(ValueError, r"validation\.csv: label 'z': "
                                r"no train row has this class\.$"):
      self.load(folder)
    write(folder, "validation.csv", "text,label\nc,x\n")
    write(folder, "test.csv", 'text,label\ne,y\ng,y\n"e"f,y\n')
    with self.assertRaisesRegex(ValueError, "^" + test + r": record 3: "
                                r"cannot be read \("):
      self.load(folder)
    write(folder, "test.csv", 'text,label\ne,"[""x"", ""y""]"\n')
    with self.assertRaisesRegex(ValueError, r"record 1: column 'label': .* "
                                "is a list of classes; files larger than "
                                "memory stream single-label rows only"):
      self.load(folder)
    write(folder, "test.csv", "words,label\ne,y\n")
    with self.assertRaisesRegex(ValueError, r"test\.csv:1: no column 'text' "
                                r"\(columns: words, label\); name it with "
                                "`text_column`"):
      self.load(folder)

  def test_jsonl_records_are_checked(self):
    folder = tempfile.mkdtemp()
    path = write(folder, "train.jsonl", '{"text": "a", "label": "x"}\n'
                 '{"text": "b"}\n{"text": "c", "label": "y"}\n')
    write(folder, "validation.jsonl", '{"text": "v", "label": "x"}\n')
    write(folder, "test.jsonl", '{"text": "w", "label": "y"}\n')
    with self.assertRaisesRegex(ValueError, "^" + path + r": record 2: not "
                                "a JSON object with a text 'text' and a "
                                "label 'label'"):
      self.load(folder)
    data = self.load(folder, skip_bad_records=True)
    self.assertEqual(pairs(data, "train"), [("a", 0), ("c", 1)])


class StreamedProbeTest(Streaming):
  """Issue 58's cases 1-4, 7 and 8 on files that stream: what the in-memory
  reader accepts reads the same, what it refuses is refused in one line
  naming the file and record."""

  def folder(self, **files):
    folder = tempfile.mkdtemp()
    for name, content in files.items():
      write(folder, name.replace("_", "."), content)
    return folder

  def assert_refused(self, folder, pattern, **options):
    with self.assertRaisesRegex(ValueError, "^" + pattern + "$"):
      self.load(folder, **options)

  def test_case1_label_separator(self):
    folder = self.folder(
        train_csv="text,label\nso sweet,joy|love\nhow dare you,anger\n")
    self.assert_refused(
        folder, r"`label_separator`='\|' makes every label a list of "
        r"classes; .*/train\.csv: files larger than memory stream "
        r"single-label rows only\.", label_separator="|")

  def test_case2_numeric_class_names(self):
    folder = self.folder(classes_txt="3\n2\n1\n",
                         train_csv="text,label\na,3\nb,2\nc,1\nd,2\n",
                         test_csv="text,label\nw,1\n",
                         validation_csv="text,label\nv,3\n")
    names = os.path.join(folder, "classes.txt")
    streamed = self.load(folder, class_names_file=names)
    memory = self.load(folder, stream=False, class_names_file=names)
    for split in contract.SPLITS:
      self.assertEqual(pairs(streamed, split), [
          (t, int(y)) for t, y in zip(*memory.splits[split])])
    self.assertEqual(pairs(streamed, "train"),
                     [("a", 0), ("b", 1), ("c", 2), ("d", 1)])
    # Labels 0/1/2 are ids: a streamed file's labels are names.
    write(folder, "train.csv", "text,label\na,0\nb,1\nc,2\n")
    write(folder, "validation.csv", "text,label\nv,2\n")
    write(folder, "test.csv", "text,label\nw,0\n")
    self.assert_refused(folder, ".*/train\\.csv: integer class ids \\('0'\\) "
                        "in a file larger than memory: name the classes in "
                        "the file\\.", class_names_file=names)
    write(folder, "classes.txt", "2\n0\n1\n")
    write(folder, "train.csv", "text,label\na,2\nb, 0\nc,1\n")
    write(folder, "test.csv", "text,label\nw,2\n")
    write(folder, "validation.csv", "text,label\nv,1\n")
    self.assert_refused(
        folder, r".*/train\.csv: record 2: label '0' is ambiguous: the class "
        r"named '0' \(.*/classes\.txt:2\) or the class id 0 \('2'\); .*",
        class_names_file=names)

  def test_case3_a_column_named_twice(self):
    folder = self.folder(train_csv="text,label,text\na,x,b\nc,y,d\n")
    self.assert_refused(folder, r".*/train\.csv:1: columns 1 and 3 are both "
                        r"named 'text'; name every column once\.")
    folder = self.folder(train_jsonl='{"text": "a", "label": "x"}\n'
                         '{"text": "a", "label": "x", "label": "y"}\n')
    self.assert_refused(folder, r".*/train\.jsonl: record 2: not a JSON "
                        r"object with a text 'text' and a label 'label'\.")

  def test_case4_class_names_as_written(self):
    folder = self.folder(train_csv="text,label\na,  lead\nb,lead\nc,x\n")
    self.assert_refused(
        folder, r".*/train\.csv: record 2: label 'lead' and '  lead' \("
        r".*/train\.csv: record 1\) differ only in surrounding whitespace: "
        r"one class or two\? Write them alike\.")
    folder = self.folder(train_csv='text,label\na,joy\nb,"an\tger"\n')
    self.assert_refused(folder, r".*/train\.csv: record 2: label 'an\\tger' "
                        r"holds a control character \('\\t'\): a class name "
                        r"is one printable line\.")
    # Spelled one way everywhere: stripped, as in memory.
    folder = self.folder(train_csv="text,label\na, joy\nb,x\n",
                         validation_csv="text,label\nc, joy\n",
                         test_csv="text,label\nd,x\n")
    self.assertEqual(pairs(self.load(folder), "validation"), [("c", 0)])

  def test_case7_a_field_over_128_kib(self):
    big = "word " * (200 * 1024 // 5)
    folder = self.folder(train_csv=f'text,label\n"{big}",joy\nb,x\n',
                         validation_tsv=f"text\tlabel\n{big}\tx\n",
                         test_jsonl=json.dumps({"text": big, "label": "joy"}))
    streamed, memory = self.load(folder), self.load(folder, stream=False)
    for split in contract.SPLITS:
      self.assertEqual(pairs(streamed, split), [
          (t, int(y)) for t, y in zip(*memory.splits[split])])
    self.assertEqual(pairs(streamed, "train"), [(big, 0), ("b", 1)])

  def test_case8_odd_label_and_text_values(self):
    good = ('{"text": "a", "label": "joy"}\n'
            '{"text": "b", "label": "anger"}\n')
    cases = [
        ('{"text": "c", "label": []}', r"column 'label': an empty list; a row "
         r"has at least one class\."),
        ('{"text": "c \\ud83d", "label": "joy"}', r"column 'text': a lone "
         r"surrogate \(\\ud83d, half of a UTF-16 pair\) is not text\."),
        ('{"text": 42, "label": "joy"}', r"column 'text' is a number \(42\), "
         r"not a string\."),
        ('{"text": "c", "label": ["joy"]}', r"column 'label': \['joy'\] is a "
         r"list of classes; files larger than memory stream single-label "
         r"rows only\."),
    ]
    for line, pattern in cases:
      with self.subTest(line=line):
        self.assert_refused(self.folder(train_jsonl=good + line + "\n"),
                            r".*/train\.jsonl: record 3: " + pattern)
    folder = self.folder(
        train_csv="text,label\na,[urgent]\nb,[draft] notes\nc,plain\n",
        validation_csv="text,label\nv,plain\n",
        test_csv="text,label\nd,[urgent]\n")
    streamed = self.load(folder)
    self.assertEqual(streamed.class_names,
                     ("[draft] notes", "[urgent]", "plain"))
    self.assertEqual(pairs(streamed, "test"), [("d", 1)])
    folder = self.folder(train_csv="text,label\na,\"['joy', 'love']\"\n")
    self.assert_refused(folder, r".*/train\.csv: record 1: column 'label': "
                        r"\"\['joy', 'love'\]\" is a list of classes; .*")


if __name__ == "__main__":
  tf.test.main()
