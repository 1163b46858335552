"""Tests of `streamed_files`: a user's text files larger than memory.

`STREAM_BYTES` is set to 0 here, so that small files stream; the streamed
splits must hold what the in-memory reader gives for the same files.
"""

import glob
import gzip
import logging
import os
import tempfile
from unittest import mock

import tensorflow as tf

from rank4class_tf.data import datasets
from rank4class_tf.data import streamed_files
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


class StreamedTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    cache = tempfile.mkdtemp()
    self.enter_context(mock.patch.dict(os.environ,
                                       {streamed_files.CACHE_ENV: cache}))
    self.cache = cache

  def load(self, folder, stream=True, **options):
    with mock.patch.object(streamed_files, "STREAM_BYTES",
                           0 if stream else 1 << 40):
      return datasets.get("text_files", folder,
                          options=user_files.Options(**options))

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
    for split in datasets.SPLITS:
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
    got = {split: pairs(data, split) for split in datasets.SPLITS}
    for split in datasets.SPLITS:
      self.assertLen(got[split], data.size(split))
    everything = sorted(sum(got.values(), []))
    self.assertEqual(everything, sorted(
        (f"row {i}", i % 3) for i in range(300)))  # Disjoint, complete.
    # The same buckets the op gives, independently: record i (0-based).
    buckets = streamed_files.bucket(tf.range(300, dtype=tf.int64),
                                    20220128).numpy()
    self.assertEqual([t for t, _ in got["validation"]],
                     [f"row {i}" for i in range(300) if buckets[i] == 0])
    self.assertEqual([t for t, _ in got["test"]],
                     [f"row {i}" for i in range(300) if buckets[i] == 1])
    self.assertBetween(data.size("validation"), 15, 45)
    other = self.load(folder, split_seed=1)
    self.assertNotEqual(pairs(other, "validation"), got["validation"])

  def test_counts_are_cached_by_content(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "text,label\n" + "".join(
        f"t{i},{'pq'[i % 2]}\n" for i in range(40)))
    first = self.load(folder)
    # The counts (the files' hashes go to file_hashes/ beside them).
    self.assertLen(glob.glob(os.path.join(self.cache, "*.json")), 1)
    with mock.patch.object(streamed_files, "count",
                           side_effect=AssertionError("counted again")):
      again = self.load(folder)
    self.assertEqual(again.size("train"), first.size("train"))
    write(folder, "train.csv", "text,label\n" + "".join(
        f"t{i},{'pq'[i % 2]}\n" for i in range(50)))
    changed = self.load(folder)
    self.assertLen(glob.glob(os.path.join(self.cache, "*.json")), 2)
    self.assertEqual(sum(changed.size(s) for s in datasets.SPLITS), 50)

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


if __name__ == "__main__":
  tf.test.main()
