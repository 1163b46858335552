"""Tests of `--dataset=tfrecord` and `--dataset=tfds:<name>` (`records`).

TFRecord files of `tf.train.Example`s are written here (text and PNG
instances, bytes names and int64 ids, multi-label lists, GZIP, shards, bad
records); the TFDS data sets are tiny `GeneratorBasedBuilder`s defined here
and prepared offline into a temporary folder. Every split is read back
through `data.dataset(split)` and compared value by value.
"""

import glob
import os
import socket
import tempfile
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from rank4class_tf import config as config_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import tfds_download
from rank4class_tf.data import user_files
from rank4class_tf.data import record_streams
from rank4class_tf.data import records
from rank4class_tf.data import streaming
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training
import helpers


def example(**features) -> bytes:
  """A serialized tf.train.Example: lists of ints, floats or bytes."""
  out = {}
  for name, values in features.items():
    if values and isinstance(values[0], int):
      out[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    elif values and isinstance(values[0], float):
      out[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    else:
      out[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
  return tf.train.Example(
      features=tf.train.Features(feature=out)).SerializeToString()


def write(folder: str, name: str, records) -> str:
  """Writes `records` as TFRecord file `name` (GZIP if it ends in .gz)."""
  path = os.path.join(folder, name)
  with tf.io.TFRecordWriter(
      path, options="GZIP" if name.endswith(".gz") else None) as writer:
    for record in records:
      writer.write(record)
  return path


def texts(pairs):
  """Text records: (text, label) with a bytes (str) or int64 (int) label,
  or a list of labels."""
  out = []
  for text, label in pairs:
    labels = label if isinstance(label, list) else [label]
    labels = [l.encode() if isinstance(l, str) else l for l in labels]
    out.append(example(text=[text.encode()], label=labels))
  return out


def load(folder, image_size=None, **options):
  return datasets.get("tfrecord", folder, image_size=image_size,
                      options=user_files.Options(**options))


def read(data, split, **kwargs):
  """[(instance, label)] of `split`, texts decoded, labels as Python."""
  out = []
  for x, y in data.dataset(split, **kwargs).as_numpy_iterator():
    if data.is_text:
      x = x.decode()
    out.append((x, y.tolist()))
  return out


def png(pixels) -> bytes:
  return tf.io.encode_png(np.asarray(pixels, np.uint8)).numpy()


class TextRecordsTest(tf.test.TestCase):

  def test_counts_are_cached_by_content(self):
    # The checking pass is cached as streamed text's is (issue 62): by the
    # files' SHA-256, the layout and the options; a second load only hashes.
    cache = tempfile.mkdtemp()
    self.enter_context(mock.patch.dict(os.environ,
                                       {streaming.CACHE_ENV: cache}))
    folder = tempfile.mkdtemp()
    write(folder, "train.tfrecord", texts(
        [(f"text {i}", "ab"[i % 2]) for i in range(30)]))
    write(folder, "test.tfrecord", texts([("x", "a"), ("y", "b")]))
    first = load(folder)
    self.assertLen(glob.glob(os.path.join(cache, "*.json")), 2)  # 2 splits.
    with mock.patch.object(record_streams, "tally",
                           side_effect=AssertionError("counted again")):
      again = load(folder)
    self.assertEqual({s: again.size(s) for s in contract.SPLITS},
                     {s: first.size(s) for s in contract.SPLITS})
    self.assertEqual(again.class_names, first.class_names)
    self.assertEqual(read(again, "validation"), read(first, "validation"))
    with self.assertRaises(AssertionError):  # Other options: counted.
      with mock.patch.object(record_streams, "tally",
                             side_effect=AssertionError("counted again")):
        load(folder, split_seed=1)

  def test_bytes_names_every_split_given(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.tfrecord", texts(
        [("so happy", "joy"), ("awful day", "anger"), ("the bus", "neutral"),
         ("love it", "joy")]))
    write(folder, "validation.tfrecord", texts([("grr", "anger")]))
    write(folder, "test.tfrecord", texts([("nice", "joy"), ("ok", "neutral")]))
    with self.assertLogs(level="INFO") as logs:
      data = load(folder)
    self.assertEqual(data.class_names, ("anger", "joy", "neutral"))
    self.assertEqual(read(data, "train"), [("so happy", 1), ("awful day", 0),
                                           ("the bus", 2), ("love it", 1)])
    self.assertEqual(read(data, "validation"), [("grr", 0)])
    self.assertEqual(read(data, "test"), [("nice", 1), ("ok", 2)])
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 4, "validation": 1, "test": 2})
    self.assertTrue(data.is_text)
    self.assertFalse(data.multi_label)
    self.assertEqual((data.instance_key, data.instance_shape),
                     ("text", ()))
    self.assertIsInstance(data.shuffle_buffer, int)
    self.assertEqual(data.dataset("train").cardinality(), 4)
    # Training order: the same records, shuffled, the same for one seed.
    shuffled = read(data, "train", shuffle_files=True, seed=3)
    self.assertCountEqual(shuffled, read(data, "train"))
    self.assertEqual(shuffled, read(data, "train", shuffle_files=True,
                                    seed=3))
    self.assertTrue(any("the instances are text (feature 'text')" in line
                        for line in logs.output), logs.output)
    self.assertTrue(any("3 classes named by the train labels, sorted: "
                        "anger, joy, neutral." in line
                        for line in logs.output), logs.output)

  def test_int64_ids_with_and_without_class_names_file(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.tfrecord", texts(
        [("a", 5), ("b", 0), ("c", 2), ("d", 5)]))
    write(folder, "validation.tfrecord", texts([("e", 2)]))
    write(folder, "test.tfrecord", texts([("f", 0)]))
    data = load(folder)
    self.assertEqual(data.class_names, ("0", "2", "5"))  # Sorted values.
    self.assertEqual(read(data, "train"),
                     [("a", 2), ("b", 0), ("c", 1), ("d", 2)])
    self.assertEqual(read(data, "validation"), [("e", 1)])
    self.assertEqual(read(data, "test"), [("f", 0)])

    names = os.path.join(folder, "names.txt")
    with open(names, "w") as f:
      f.write("zero\none\ntwo\nthree\nfour\nfive\n")
    with self.assertRaisesRegex(
        ValueError, r"train.tfrecord: no train record has the class\(es\) "
        "one, three, four of `class_names_file`="):
      load(folder, class_names_file=names)
    with open(names, "w") as f:
      f.write("zero\ntwo\nfive\n")  # Ids 0, 1, 2: 5 is no id.
    with self.assertRaises(ValueError) as refused:
      load(folder, class_names_file=names)
    self.assertEqual(str(refused.exception),
                     f"{folder}/train.tfrecord: record 1: feature 'label': "
                     "label 5 is not a class (3 classes, "
                     f"`class_names_file`={names}).")
    write(folder, "train.tfrecord", texts([("a", 1), ("b", 0), ("c", 2)]))
    data = load(folder, class_names_file=names)
    self.assertEqual(data.class_names, ("zero", "two", "five"))
    self.assertEqual(read(data, "train"), [("a", 1), ("b", 0), ("c", 2)])
    self.assertEqual(read(data, "validation"), [("e", 2)])

  def test_multi_label_lists(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.tfrecord", texts(
        [("x", ["b", "a"]), ("y", ["c"]), ("z", ["a", "c", "a"])]))
    write(folder, "validation.tfrecord", texts([("v", ["c", "b"])]))
    write(folder, "test.tfrecord", texts([("w", "a")]))
    data = load(folder)
    self.assertTrue(data.multi_label)
    self.assertEqual(data.class_names, ("a", "b", "c"))
    self.assertEqual(read(data, "train"), [("x", [1., 1., 0.]),
                                           ("y", [0., 0., 1.]),
                                           ("z", [1., 0., 1.])])
    self.assertEqual(read(data, "validation"), [("v", [0., 1., 1.])])
    self.assertEqual(read(data, "test"), [("w", [1., 0., 0.])])
    self.assertEqual(data.dataset("test").element_spec[1].dtype, tf.float32)
    # Single-label train: a list in validation is a bad record.
    write(folder, "train.tfrecord", texts([("x", "a"), ("y", "b"),
                                           ("z", "c")]))
    with self.assertRaisesRegex(
        ValueError, r"^.*/validation.tfrecord: record 1: feature 'label' "
        r"holds 2 labels, but .*/train.tfrecord is single-label\.$"):
      load(folder)

  def test_gzip_and_shards_in_name_order(self):
    folder = tempfile.mkdtemp()
    write(folder, "train-00001-of-00002.tfrecord.gz",
          texts([("c", "q"), ("d", "p")]))
    write(folder, "train-00000-of-00002.tfrecord", texts([("a", "p"),
                                                          ("b", "q")]))
    write(folder, "validation.tfrecords.gz", texts([("v", "q")]))
    write(folder, "test.tfrecord-00000-of-00001", texts([("t", "p")]))
    write(folder, "notes.tfrecord", texts([("ignored", "zzz")]))
    data = load(folder)
    self.assertEqual(data.class_names, ("p", "q"))
    self.assertEqual(read(data, "train"),
                     [("a", 0), ("b", 1), ("c", 1), ("d", 0)])
    self.assertEqual(read(data, "validation"), [("v", 1)])
    self.assertEqual(read(data, "test"), [("t", 0)])
    self.assertCountEqual(read(data, "train", shuffle_files=True, seed=1),
                          read(data, "train"))
    # A GZIP file not named .gz is refused naming it.
    os.rename(os.path.join(folder, "validation.tfrecords.gz"),
              os.path.join(folder, "validation.tfrecords"))
    with self.assertRaisesRegex(
        ValueError, r"^.*/validation.tfrecords: cannot be read as a TFRecord "
        r"file \(.*\); a GZIP file's name ends in .gz\.$"):
      load(folder)

  def test_missing_splits_cut_by_a_seeded_hash(self):
    folder = tempfile.mkdtemp()
    rows = [(f"text {i}", "pq"[i % 2]) for i in range(300)]
    write(folder, "train.tfrecord", texts(rows))

    def expected(seed, name="train.tfrecord", parts=2):
      # The module doc's rule, written independently: FarmHash of
      # "seed:file:number" mod 1000, < 100 validation, < 200 test.
      keys = [f"{seed}:{name}:{n}" for n in range(len(rows))]
      buckets = tf.strings.to_hash_bucket_fast(keys, 1000).numpy()
      out = {split: [] for split in contract.SPLITS}
      for n, bucket in enumerate(buckets):
        split = ("validation" if bucket < 100 else
                 "test" if bucket < 200 and parts == 2 else "train")
        out[split].append((rows[n][0], "pq".index(rows[n][1])))
      return out

    with self.assertLogs(level="INFO") as logs:
      data = load(folder, split_seed=7)
    want = expected(7)
    for split in contract.SPLITS:
      self.assertEqual(read(data, split), want[split])
      self.assertEqual(data.size(split), len(want[split]))
    self.assertBetween(len(want["validation"]), 15, 45)
    self.assertBetween(len(want["test"]), 15, 45)
    self.assertTrue(any("validation and test cut from" in line and
                        "not stratified" in line for line in logs.output))
    # Deterministic: loaded again, the same; another seed, another cut.
    self.assertEqual(read(load(folder, split_seed=7), "validation"),
                     want["validation"])
    other = load(folder, split_seed=8)
    self.assertEqual(read(other, "validation"), expected(8)["validation"])
    self.assertNotEqual(expected(8)["validation"], want["validation"])
    # Only validation missing: 10% cut, the test file kept.
    write(folder, "test.tfrecord", texts([("t", "q")]))
    data = load(folder, split_seed=7)
    want = expected(7, parts=1)
    self.assertEqual(read(data, "validation"), want["validation"])
    self.assertEqual(read(data, "train"), want["train"])
    self.assertEqual(read(data, "test"), [("t", 1)])


class ImageRecordsTest(tf.test.TestCase):

  def test_png_images(self):
    folder = tempfile.mkdtemp()
    red = np.zeros([5, 7, 3], np.uint8)
    red[..., 0] = 200
    grey = np.arange(12, dtype=np.uint8).reshape([3, 4, 1]) * 20
    blue = np.zeros([4, 4, 3], np.uint8)
    blue[..., 2] = 99
    write(folder, "train.tfrecord", [
        example(image=[png(red)], id=[b"r"], label=[1], other=[0.5]),
        example(image=[png(grey)], id=[b"g"], label=[0], other=[0.5])])
    write(folder, "validation.tfrecord", [
        example(image=[png(blue)], id=[b"b"], label=[1], other=[0.5])])
    write(folder, "test.tfrecord", [
        example(image=[png(grey)], id=[b"g"], label=[0], other=[0.5]),
        example(image=[png(blue)], id=[b"b"], label=[1], other=[0.5])])
    with self.assertRaisesRegex(
        ValueError, r"train.tfrecord: record 1: 2 bytes features besides "
        r"'label' \(id, image\): name the text or image one with "
        r"`instance_feature`\.$"):
      load(folder)
    with self.assertLogs(level="INFO") as logs:
      data = load(folder, image_size=32, instance_feature="image")
    self.assertTrue(any("the instances are image (feature 'image')" in line
                        for line in logs.output), logs.output)
    self.assertEqual(data.class_names, ("0", "1"))
    self.assertEqual((data.instance_key, data.instance_shape),
                     ("image", (32, 32, 3)))
    self.assertFalse(data.is_text)
    self.assertIsInstance(data.shuffle_buffer, int)
    want = {"train": [(red, 1), (np.repeat(grey, 3, axis=-1), 0)],
            "validation": [(blue, 1)],
            "test": [(np.repeat(grey, 3, axis=-1), 0), (blue, 1)]}
    for split, pairs in want.items():
      got = list(data.dataset(split).as_numpy_iterator())
      self.assertLen(got, len(pairs))
      self.assertEqual(data.size(split), len(pairs))
      for (x, y), (image, label) in zip(got, pairs):
        self.assertEqual(x.dtype, np.uint8)
        self.assertAllEqual(x, image)  # Grey PNG: its value in R, G and B.
        self.assertEqual(y, label)
    image = data.preprocessing(tf.constant(red), training=False)
    self.assertEqual(image.shape, (32, 32, 3))
    self.assertEqual(image.dtype, tf.float32)

  def test_not_an_image_is_a_bad_record(self):
    folder = tempfile.mkdtemp()
    pixels = np.full([2, 2, 3], 7, np.uint8)
    path = write(folder, "train.tfrecord", [
        example(image=[png(pixels)], label=[b"a"]),
        example(image=[b"plain text"], label=[b"b"]),
        example(image=[png(pixels)], label=[b"b"])])
    write(folder, "validation.tfrecord",
          [example(image=[png(pixels)], label=[b"a"])])
    write(folder, "test.tfrecord",
          [example(image=[png(pixels)], label=[b"b"])])
    with self.assertRaises(ValueError) as refused:
      load(folder)
    self.assertEqual(str(refused.exception), f"{path}: record 2: feature "
                     "'image': not a JPEG, PNG, GIF or BMP image.")
    data = load(folder, skip_bad_records=True)
    self.assertEqual(data.size("train"), 2)
    self.assertEqual([int(y) for _, y in data.dataset("train")], [0, 1])


class BadRecordsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = tempfile.mkdtemp()
    self.train = write(self.folder, "train.tfrecord", [
        example(text=[b"one"], label=[b"a"]),
        example(text=[b"two"], label=[b"b"]),
        example(text=[b"three"]),                      # 3: no label.
        example(text=[b"four"], label=[b"a"]),
        example(text=[b"five"], label=[4]),            # 5: int64, not bytes.
        b"not an example at all",                      # 6.
        example(text=[b"\xff\xfe"], label=[b"b"]),     # 7: not UTF-8.
        example(text=[b"eight"], label=[b"b"])])
    write(self.folder, "validation.tfrecord", [
        example(text=[b"v1"], label=[b"a"]),
        example(text=[b"v2"], label=[b"c"]),           # 2: not a class.
        example(text=[b"v3", b"v4"], label=[b"b"])])   # 3: two texts.
    write(self.folder, "test.tfrecord", [example(text=[b"t"], label=[b"b"])])

  def test_refused_with_file_and_record(self):
    with self.assertRaises(ValueError) as refused:
      load(self.folder)
    self.assertEqual(str(refused.exception),
                     f"{self.train}: record 3: no feature 'label' "
                     "(features: text).")
    # Each reason in turn, the earlier records mended.
    cases = [
        (example(text=[b"five"], label=[4]),
         f"{self.train}: record 1: feature 'label' holds int64 values, not "
         f"bytes as in {self.train}'s first record."),
        (b"not an example at all",
         f"{self.train}: record 1: not a tf.train.Example."),
        (example(text=[b"\xff\xfe"], label=[b"b"]),
         f"{self.train}: record 1: feature 'text': not valid UTF-8 text."),
        (example(text=[b"  "], label=[b"b"]),
         f"{self.train}: record 1: feature 'text': empty text."),
        (example(text=[], label=[b"b"]),
         f"{self.train}: record 1: feature 'text' is empty."),
    ]
    for record, message in cases:
      write(self.folder, "train.tfrecord",
            [example(text=[b"ok"], label=[b"a"]), record])
      with self.assertRaises(ValueError) as refused:
        load(self.folder)
      self.assertEqual(str(refused.exception),
                       message.replace("record 1", "record 2"))

  def test_skipped_and_counted(self):
    with self.assertLogs(level="WARNING") as logs:
      data = load(self.folder, skip_bad_records=True)
    self.assertEqual(
        logs.output,
        [f"WARNING:root:tfrecord train: skipped 4 bad record(s) "
         f"(`skip_bad_records`); the first: {self.train}: record 3: no "
         "feature 'label' (features: text).",
         f"WARNING:root:tfrecord validation: skipped 2 bad record(s) "
         f"(`skip_bad_records`); the first: {self.folder}/"
         "validation.tfrecord: record 2: feature 'label': label 'c' is not "
         "a class (2 classes, named by the train labels)."])
    self.assertEqual(data.class_names, ("a", "b"))
    want = [("one", 0), ("two", 1), ("four", 0), ("eight", 1)]
    self.assertEqual(read(data, "train"), want)
    self.assertEqual(data.size("train"), 4)
    self.assertCountEqual(read(data, "train", shuffle_files=True, seed=2),
                          want)
    self.assertEqual(read(data, "validation"), [("v1", 0)])
    self.assertEqual(data.size("validation"), 1)


class LayoutTest(tf.test.TestCase):

  def test_refusals(self):
    with self.assertRaisesRegex(ValueError, r"^`data_dir` must name"):
      load(None)
    folder = tempfile.mkdtemp()
    with self.assertRaisesRegex(
        ValueError, f"^`data_dir`={folder} holds no train TFRecord file"):
      load(folder)
    path = write(folder, "train.tfrecord",
                 [example(review=[b"good"], stars=[3])])
    with self.assertRaises(ValueError) as refused:
      load(folder)
    self.assertEqual(str(refused.exception),
                     f"{path}: record 1: no feature 'label' (features: "
                     "review, stars); name the label with `label_column`.")
    with self.assertRaisesRegex(ValueError, "no feature 'body' .* with "
                                "`instance_feature`"):
      load(folder, label="stars", instance_feature="body")
    write(folder, "train.tfrecord", [example(review=[b"\xff"], stars=[3])])
    with self.assertRaises(ValueError) as refused:
      load(folder, label="stars")
    self.assertEqual(str(refused.exception),
                     f"{path}: record 1: feature 'review' is neither an "
                     "image (JPEG, PNG, GIF, BMP) nor UTF-8 text.")
    write(folder, "train.tfrecord", [example(review=[b"x"], stars=[0.5])])
    with self.assertRaisesRegex(ValueError, r"record 1: feature 'stars' "
                                "holds float values; a label is int64"):
      load(folder, label="stars")
    write(folder, "train.tfrecord", [example(review=[b"x"], stars=[1])])
    with self.assertRaisesRegex(ValueError, r"`image_size`=64: .* holds "
                                "text, not images"):
      load(folder, image_size=64, label="stars")


class TinyTexts(tfds.core.GeneratorBasedBuilder):
  """Text + two ClassLabels (`label` and `topic`); train and test only."""
  VERSION = tfds.core.Version("1.0.0")

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self, features=tfds.features.FeaturesDict({
            "text": tfds.features.Text(),
            "label": tfds.features.ClassLabel(names=["neg", "pos"]),
            "topic": tfds.features.ClassLabel(names=["x", "y", "z"])}))

  def _split_generators(self, dl_manager):
    del dl_manager  # Nothing to download.
    return {"train": self._generate_examples(0, 10),
            "test": self._generate_examples(10, 14)}

  def _generate_examples(self, start, stop):
    for i in range(start, stop):
      yield i, {"text": f"text {i}", "label": i % 2, "topic": i % 3}


class TinyImages(tfds.core.GeneratorBasedBuilder):
  """An image and two ClassLabels, none named `label`."""
  VERSION = tfds.core.Version("1.0.0")

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self, features=tfds.features.FeaturesDict({
            "picture": tfds.features.Image(shape=(None, None, 3)),
            "coarse": tfds.features.ClassLabel(names=["c0", "c1"]),
            "fine": tfds.features.ClassLabel(names=["f0", "f1", "f2"])}))

  def _split_generators(self, dl_manager):
    del dl_manager  # Nothing to download.
    return {"train": self._generate_examples(0, 6),
            "validation": self._generate_examples(6, 8),
            "test": self._generate_examples(8, 10)}

  def _generate_examples(self, start, stop):
    for i in range(start, stop):
      yield i, {"picture": tiny_image(i), "coarse": i % 2, "fine": i % 3}


class TinyReviews(tfds.core.GeneratorBasedBuilder):
  """Two Text features and one ClassLabel (`stars`)."""
  VERSION = tfds.core.Version("1.0.0")

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self, features=tfds.features.FeaturesDict({
            "review": tfds.features.Text(),
            "summary": tfds.features.Text(),
            "stars": tfds.features.ClassLabel(names=["1", "2", "3"])}))

  def _split_generators(self, dl_manager):
    del dl_manager  # Nothing to download.
    return {"train": self._generate_examples(0, 20)}

  def _generate_examples(self, start, stop):
    for i in range(start, stop):
      yield i, {"review": f"review {i}", "summary": f"summary {i}",
                "stars": i % 3}


def tiny_image(i):
  """A 3x(2 + i % 3) uint8 image whose every pixel says i."""
  return np.full([3, 2 + i % 3, 3], 10 * i, np.uint8)


def tfds_get(name, data_dir, download=False, **options):
  return datasets.get(f"tfds:{name}", data_dir, download=download,
                      options=user_files.Options(**options))


class TfdsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp()
    for builder in (TinyTexts, TinyImages, TinyReviews):
      builder(data_dir=cls.data_dir).download_and_prepare(
          download_config=tfds.download.DownloadConfig(
              compute_stats=tfds.download.ComputeStatsMode.SKIP))

  def as_set(self, data, split):
    return sorted(read(data, split))

  def test_text_with_validation_cut_from_train(self):
    with self.assertLogs(level="INFO") as logs:
      data = tfds_get("tiny_texts", self.data_dir)
    self.assertTrue(any("tfds:tiny_texts: validation cut from the end of "
                        "train: train=train[:90%], validation=train[90%:], "
                        "test=test." in line
                        for line in logs.output), logs.output)
    self.assertEqual(data.class_names, ("neg", "pos"))  # `label`, of two.
    self.assertTrue(data.is_text)
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 9, "validation": 1, "test": 4})
    everything = [(f"text {i}", i % 2) for i in range(10)]
    self.assertCountEqual(read(data, "train") + read(data, "validation"),
                          everything)
    builder = TinyTexts(data_dir=self.data_dir)
    last = [(x["text"].decode(), int(x["label"])) for x in
            builder.as_dataset(split="train[90%:]").as_numpy_iterator()]
    self.assertEqual(read(data, "validation"), last)
    self.assertEqual(self.as_set(data, "test"),
                     sorted((f"text {i}", i % 2) for i in range(10, 14)))
    # The other ClassLabel, by name.
    data = tfds_get("tiny_texts", self.data_dir, label="topic")
    self.assertEqual(data.class_names, ("x", "y", "z"))
    self.assertEqual(self.as_set(data, "test"),
                     sorted((f"text {i}", i % 3) for i in range(10, 14)))

  def test_tfds_splits_mapping(self):
    data = tfds_get("tiny_texts", self.data_dir, tfds_splits=(
        "train=train[:50%]", "validation=train[50%:]", "test=test[:2]"))
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 5, "validation": 5, "test": 2})
    self.assertCountEqual(read(data, "train") + read(data, "validation"),
                          [(f"text {i}", i % 2) for i in range(10)])
    self.assertEqual(data.dataset("validation").cardinality(), 5)
    with self.assertRaisesRegex(ValueError, r"^`tfds_splits` must map test "
                                "too"):
      tfds_get("tiny_texts", self.data_dir, tfds_splits=(
          "train=train[:50%]", "validation=train[50%:]"))
    with self.assertRaisesRegex(ValueError, r"^`tfds_splits`: 'dev=test' is "
                                "not split=expression"):
      tfds_get("tiny_texts", self.data_dir, tfds_splits=("dev=test",))
    with self.assertRaisesRegex(ValueError, r"^tfds:tiny_texts: "
                                r"test=dev: .*dev"):
      tfds_get("tiny_texts", self.data_dir, tfds_splits=(
          "train=train", "validation=test", "test=dev"))

  def test_images_and_an_ambiguous_label(self):
    with self.assertRaises(ValueError) as refused:
      tfds_get("tiny_images", self.data_dir)
    self.assertEqual(str(refused.exception),
                     "tfds:tiny_images: 2 ClassLabel features (coarse, fine): "
                     "name the label with `label_column`.")
    data = tfds_get("tiny_images", self.data_dir, label="fine")
    self.assertEqual(data.class_names, ("f0", "f1", "f2"))
    self.assertEqual((data.instance_key, data.instance_shape),
                     ("image", (224, 224, 3)))
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 6, "validation": 2, "test": 2})
    for split, numbers in (("train", range(6)), ("validation", (6, 7)),
                           ("test", (8, 9))):
      got = sorted(((int(x[0, 0, 0]) // 10, int(y), x.shape, x.dtype)
                    for x, y in data.dataset(split).as_numpy_iterator()),
                   key=lambda t: t[0])
      self.assertEqual(got, [(i, i % 3, tiny_image(i).shape, np.uint8)
                             for i in numbers])
      for x, _ in data.dataset(split).as_numpy_iterator():
        self.assertAllEqual(x, tiny_image(int(x[0, 0, 0]) // 10))

  def test_one_classlabel_and_an_ambiguous_instance(self):
    with self.assertRaises(ValueError) as refused:
      tfds_get("tiny_reviews", self.data_dir)
    self.assertEqual(str(refused.exception),
                     "tfds:tiny_reviews: 2 Text or Image features (review, "
                     "summary): name the text or image with "
                     "`instance_feature`.")
    with self.assertLogs(level="INFO") as logs:
      data = tfds_get("tiny_reviews", self.data_dir,
                      instance_feature="summary")
    self.assertEqual(data.class_names, ("1", "2", "3"))  # `stars`.
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 16, "validation": 2, "test": 2})
    self.assertTrue(any("train=train[:80%], validation=train[80%:90%], "
                        "test=train[90%:]" in line for line in logs.output),
                    logs.output)
    self.assertCountEqual(
        read(data, "train") + read(data, "validation") + read(data, "test"),
        [(f"summary {i}", i % 3) for i in range(20)])

  def test_unprepared_and_unknown(self):
    empty = tempfile.mkdtemp()
    with self.assertRaises(ValueError) as refused:
      tfds_get("tiny_texts", empty)
    self.assertEqual(str(refused.exception),
                     f"tiny_texts is not prepared in {empty}: prepare it "
                     "there with TFDS (`tfds build tiny_texts "
                     "--data_dir=DIR`) and pass `data_dir`=DIR, or pass "
                     "`download`.")
    # `download` prepares it (nothing to fetch for this builder; the
    # network check is not the test's).
    with mock.patch.object(tfds_download, "network_problem",
                           return_value=None):
      data = tfds_get("tiny_texts", empty, download=True)
    self.assertEqual(data.size("test"), 4)
    with self.assertRaisesRegex(ValueError, r"^tfds:no_such_set_r4c: not a "
                                r"TFDS data set \([^\n]*\)\.$"):
      tfds_get("no_such_set_r4c", empty)


class BrokenDownload(tfds.core.GeneratorBasedBuilder):
  """A download that fails midway, as one offline does: a temporary file
  written, then requests' ConnectionError."""
  VERSION = tfds.core.Version("1.0.0")

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self, features=tfds.features.FeaturesDict({
            "text": tfds.features.Text(),
            "label": tfds.features.ClassLabel(names=["a", "b"])}))

  def _split_generators(self, dl_manager):
    import requests  # pylint: disable=g-import-not-at-top
    os.makedirs(dl_manager.download_dir, exist_ok=True)
    with open(os.path.join(dl_manager.download_dir,
                           "data.zip.tmp.0123abcd"), "wb") as f:
      f.write(b"half")
    raise requests.exceptions.ConnectionError(
        "HTTPSConnectionPool(host='example.invalid', port=443): Max retries "
        "exceeded")

  def _generate_examples(self):
    yield 0, {"text": "x", "label": 0}


def closed_port() -> int:
  """A local TCP port nothing listens on (bound, then released)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class TfdsFailuresTest(tf.test.TestCase):
  """Issue 58 case 11: an unknown TFDS version gave a 48-line AssertionError;
  an offline `--download` retried for 3 min 20 s (213 lines) and left
  `downloads/*.tmp.*` behind. One line each now, fast, nothing left."""

  def test_unknown_version(self):
    with self.assertRaises(ValueError) as refused:
      tfds_get("tiny_texts:9.9.9", tempfile.mkdtemp())
    self.assertEqual(str(refused.exception),
                     "tfds:tiny_texts:9.9.9: Dataset tiny_texts cannot be "
                     "loaded at version 9.9.9, only: 1.0.0.")

  def test_offline_download_fails_fast_writing_nothing(self):
    data_dir = os.path.join(tempfile.mkdtemp(), "tfds")
    offline = socket.gaierror(-2, "Name or service not known")
    start = time.time()
    with mock.patch.object(tfds_download.socket, "create_connection",
                           side_effect=offline):
      with self.assertRaises(ValueError) as refused:
        tfds_get("tiny_texts", data_dir, download=True)
    self.assertLess(time.time() - start, 30)
    self.assertEqual(str(refused.exception),
                     "tfds:tiny_texts: `download` needs the network, and "
                     "storage.googleapis.com:443 does not answer (Name or "
                     "service not known); prepare it where the network is "
                     "(`tfds build tiny_texts --data_dir=DIR`) and pass "
                     "`data_dir`=DIR without `download`. Nothing was "
                     "written.")
    self.assertFalse(os.path.exists(data_dir))

  def test_a_failed_download_leaves_nothing(self):
    data_dir = tempfile.mkdtemp()
    keep = os.path.join(data_dir, "downloads", "kept.zip")
    os.makedirs(os.path.dirname(keep))
    with open(keep, "w") as f:
      f.write("a download of another data set")
    before = sorted(os.path.relpath(os.path.join(root, name), data_dir)
                    for root, dirs, files in os.walk(data_dir)
                    for name in dirs + files)
    with mock.patch.object(tfds_download, "network_problem",
                           return_value=None):
      with self.assertRaises(ValueError) as refused:
        tfds_get("broken_download", data_dir, download=True)
    self.assertEqual(str(refused.exception),
                     "tfds:broken_download: the download failed "
                     "(HTTPSConnectionPool(host='example.invalid', port=443): "
                     f"Max retries exceeded); what it had written in "
                     f"{data_dir} is removed.")
    after = sorted(os.path.relpath(os.path.join(root, name), data_dir)
                   for root, dirs, files in os.walk(data_dir)
                   for name in dirs + files)
    self.assertEqual(after, before)

  @pytest.mark.slow
  def test_binaries(self):
    version = helpers.run_module(
        "pipelines.inspect_data", "--dataset=tfds:mnist:99.0.0",
        f"--data_dir={tempfile.mkdtemp()}", check=False)
    self.assertEqual(version.returncode, 1)
    self.assertRegex(version.stderr.strip().splitlines()[-1],
                     r"^inspect_data: tfds:mnist:99\.0\.0: Dataset mnist "
                     r"cannot be loaded at version 99\.0\.0, only: [0-9.]+\.$")
    self.assertNotIn("Traceback", version.stderr)
    # Offline (a proxy that does not answer: no test needs the network).
    folder = tempfile.mkdtemp()
    data_dir = os.path.join(folder, "tfds")
    model_dir = os.path.join(folder, "run")
    port = closed_port()
    start = time.time()
    proc = helpers.run_module(
        "pipelines.train", "--dataset=tfds:mnist", "--download",
        f"--data_dir={data_dir}", f"--model_dir={model_dir}", check=False,
        env=dict(os.environ, HTTPS_PROXY=f"http://127.0.0.1:{port}"))
    self.assertLess(time.time() - start, 60)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     "train: tfds:mnist: --download needs the network, and "
                     f"127.0.0.1:{port} does not answer (Connection "
                     "refused); prepare it where the network is (`tfds "
                     "build mnist --data_dir=DIR`) and pass --data_dir=DIR "
                     "without --download. Nothing was written.")
    self.assertNotIn("Traceback", proc.stderr)
    self.assertEqual(os.listdir(folder), [])


class TrainingTest(tf.test.TestCase):

  def test_trains_on_tfrecord_text(self):
    # Int64 ids into a class names file, validation and test cut from train.
    folder = tempfile.mkdtemp()
    words = {0: "sad awful hate", 1: "happy joy love"}
    write(folder, "train.tfrecord", [
        example(review=[f"{words[i % 2]} {i}".encode()], stars=[i % 2])
        for i in range(40)])
    names = os.path.join(folder, "names.txt")
    with open(names, "w") as f:
      f.write("bad\ngood\n")
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    training.train(config_lib.TrainConfig.create(
        dataset="tfrecord", data_dir=folder, label_column="stars",
        class_names_file=names, encoder="bert", encoder_size="tiny",
        max_seq_length=8, batch_size=4, train_steps=2, eval_every=2,
        model_dir=model_dir))
    self.assertEqual(exported_ranker.load_class_names(model_dir), ["bad", "good"])
    scores = exported_ranker.ExportedRanker(model_dir).scores(
        np.array(["happy joy", "awful"], object))
    self.assertEqual(scores.shape, (2, 2))
    self.assertTrue(np.all(np.isfinite(scores)))


class CorruptImageRecordTest(tf.test.TestCase):
  """Issue 58 case 10: a record whose image starts like a PNG but whose body
  is garbage passes the load's pass (which checks the first bytes only) and
  stopped training with a 36-line `Invalid PNG` traceback: one line naming
  the file and record now, or with `skip_bad_records` skipped and counted."""

  def config(self, **kwargs):
    folder = tempfile.mkdtemp()
    records = [example(image=[png(np.full([4, 4, 3], 40 * i, np.uint8))],
                       label=[b"ab"[i % 2:i % 2 + 1]]) for i in range(8)]
    records[4] = example(image=[b"\x89PNG\r\n\x1a\n" + b"garbage" * 9],
                         label=[b"a"])
    self.train_file = write(folder, "train.tfrecord", records)
    write(folder, "validation.tfrecord", records[:2])
    write(folder, "test.tfrecord", records[2:4])
    # Every epoch is one pass over the 8 train records.
    return config_lib.TrainConfig.create(
        dataset="tfrecord", data_dir=folder, image_size=32,
        encoder="small_cnn", batch_size=4, train_steps=4, eval_every=2,
        export=False, model_dir=os.path.join(tempfile.mkdtemp(), "run"),
        **kwargs)

  def test_one_line_naming_the_record(self):
    config = self.config()
    with self.assertRaises(ValueError) as stopped:
      training.train(config)
    self.assertEqual(str(stopped.exception),
                     f"training stopped: {self.train_file}: record 5: "
                     "feature 'image' cannot be decoded as an image (Invalid "
                     "PNG. Failed to initialize decoder.). Restore it and "
                     "start the same command again: no validation had "
                     "passed, so the run starts afresh. Data without it, or "
                     "with it changed, is not the data the run trained on "
                     "(its data record): train a new run on it, with "
                     "`skip_bad_records` to skip such files.")

  def test_skipped_and_counted(self):
    config = self.config(skip_bad_records=True)
    with self.assertLogs("absl", level="WARNING") as logs:
      training.train(config)
    self.assertTrue(run_state.is_trained(config))
    self.assertIn("train: skipped 1 instance(s) that could not be read when "
                  "training read them (`skip_bad_records`): "
                  f"{self.train_file}: record 5", "\n".join(logs.output))


class CheckerTest(tf.test.TestCase):

  def test_looks_like_image_in_python_and_in_the_graph(self):
    samples = [png(np.zeros([1, 1, 3])), b"\xff\xd8\xff\xe0rest", b"GIF89a..",
               b"BM\x10\x00\x00\x00\x00\x00\x00\x00\x36", b"BMW is a car",
               b"GIF", b"", b"plain"]
    want = [True, True, True, True, False, False, False, False]
    self.assertEqual([records.looks_like_image(s) for s in samples],
                     want)
    self.assertEqual(
        records.looks_like_images(tf.constant(samples)).numpy().tolist(),
        want)


if __name__ == "__main__":
  tf.test.main()
