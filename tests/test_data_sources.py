"""Every kind of data set the package loads, pinned: split sizes, class
names and the first training batch (issue 62).

The values were recorded from the code before the data layer became a
registry of sources (`data/sources/`); the restructure must leave them as
they were. Each case builds its data the way the format's own tests do
(tests/test_datasets.py, test_user_*.py, test_streaming.py,
test_images.py, test_multilabel_images.py), loads it through
`datasets.get`, and digests the first batch of
`datasets.ranking_dataset(data, "train", batch_size, training=True,
seed=SEED)`: sha256 over every feature's and the labels' dtype, shape and
bytes.

Run `python tests/test_data_sources.py --record` to print the values of
the current code (to paste into `EXPECTED` after a deliberate change).
"""

import contextlib
import gzip
import hashlib
import json
import os
import sys
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rank4class_tf.data import datasets
from rank4class_tf.data import streaming
from rank4class_tf.data import user_files

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_datasets  # pylint: disable=g-import-not-at-top,wrong-import-position
import test_user_records  # pylint: disable=g-import-not-at-top,wrong-import-position

SEED = 7


def write(folder, name, content):
  path = os.path.join(folder, name)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  raw = content.encode("utf-8") if isinstance(content, str) else content
  with (gzip.open if name.endswith(".gz") else open)(path, "wb") as f:
    f.write(raw)
  return path


def png(height, width, value, channels=3):
  return tf.io.encode_png(np.full([height, width, channels], value,
                                  np.uint8)).numpy()


def _update(h, name, value, values=True):
  value = np.asarray(value)
  h.update(f"{name}:{value.dtype}:{value.shape};".encode())
  if not values:
    return
  if value.dtype == object:  # Strings: their bytes, not the pointers.
    h.update(b"\x00".join(value.ravel().tolist()))
  else:
    h.update(value.tobytes())


def digest(batch, feature_values=True) -> str:
  """sha256 of a batch: every feature's name, dtype, shape and (unless not
  `feature_values`) values, and the labels'."""
  features, labels = batch
  h = hashlib.sha256()
  for key in sorted(features):
    _update(h, key, features[key], feature_values)
  _update(h, "labels", labels)
  return h.hexdigest()[:16]


# The cases: name -> (load() -> data, batch size, mocked TFDS examples).
# Images augmented in training (random ops in a parallel map, so not
# reproducible value by value): their training batch is digested by its
# labels and its features' shapes, and the first evaluation batch of
# `train` (training=False) by its values too.
AUGMENTED = ("digits32", "cifar10", "imagenet2012", "coco2017", "voc2007",
             "image_folder", "tfrecord_images", "tfds_images")

def _text_rows(n, offset=0):
  names = ("anger", "joy", "neutral")
  return [(f"text number {i}, {'x' * (i % 5)}", names[i % 3])
          for i in range(offset, offset + n)]


def _csv(rows):
  return "id,comment,emotion\n" + "".join(
      f'{i},"{t}",{y}\n' for i, (t, y) in enumerate(rows))


def _tsv(rows):
  return "comment\temotion\n" + "".join(f"{t}\t{y}\n" for t, y in rows)


def _jsonl(rows):
  return "".join(json.dumps({"comment": t, "emotion": y}) + "\n"
                 for t, y in rows)


def text_folder(missing_splits=False):
  folder = tempfile.mkdtemp()
  write(folder, "train.csv", _csv(_text_rows(40)))
  if not missing_splits:
    write(folder, "validation.tsv.gz", _tsv(_text_rows(6, 100)))
    write(folder, "test.jsonl", _jsonl(_text_rows(7, 200)))
  return folder


def text_files(missing_splits=False, stream=False, **options):
  folder = text_folder(missing_splits)
  with mock.patch.object(streaming, "STREAM_BYTES",
                         0 if stream else 1 << 40):
    return datasets.get("text_files", folder, options=user_files.Options(
        text="comment", label="emotion", **options))


def tables():
  folder = tempfile.mkdtemp()
  rows = [(i, (i * 7) % 11, ("x", "y")[i % 2]) for i in range(30)]
  write(folder, "train.csv", "a,b,kind\n" + "".join(
      f"{a},{b},{k}\n" for a, b, k in rows))
  write(folder, "test.tsv", "a\tb\tkind\n4\t9\tx\n5\t1\ty\n")
  return datasets.get("tabular_files", folder, options=user_files.Options(
      label="kind", feature_columns=("a", "b")))


def image_folder():
  folder = tempfile.mkdtemp()
  for i in range(10):
    write(folder, f"train/cat/c{i}.png", png(5 + i, 7, 10 + i))
    write(folder, f"train/dog/d{i}.png", png(9, 4 + i, 200 - i))
  write(folder, "test/cat/t.png", png(4, 4, 1))
  write(folder, "test/dog/t.png", png(4, 4, 2))
  return datasets.get("image_folder", folder, image_size=16,
                      options=user_files.Options())


def tfrecord_texts(missing_splits=False, **options):
  folder = tempfile.mkdtemp()
  test_user_records.write(folder, "train.tfrecord",
                          test_user_records.texts(_text_rows(40)))
  if not missing_splits:
    test_user_records.write(folder, "validation.tfrecord.gz",
                            test_user_records.texts(_text_rows(6, 100)))
    test_user_records.write(folder, "test.tfrecord",
                            test_user_records.texts(_text_rows(7, 200)))
  return datasets.get("tfrecord", folder,
                      options=user_files.Options(**options))


def tfrecord_images():
  folder = tempfile.mkdtemp()
  ex = test_user_records.example
  train = [ex(image=[png(3 + i % 3, 4, 10 * i)], label=[i % 2])
           for i in range(12)]
  test_user_records.write(folder, "train.tfrecord", train)
  test_user_records.write(folder, "test.tfrecord", train[:3])
  return datasets.get("tfrecord", folder, image_size=8,
                      options=user_files.Options())


_TFDS_DIR = []


def tfds_texts():
  if not _TFDS_DIR:
    _TFDS_DIR.append(tempfile.mkdtemp())
    for builder in (test_user_records.TinyTexts,
                    test_user_records.TinyImages):
      builder(data_dir=_TFDS_DIR[0]).download_and_prepare(
          download_config=tfds.download.DownloadConfig(
              compute_stats=tfds.download.ComputeStatsMode.SKIP))
  return datasets.get("tfds:tiny_texts", _TFDS_DIR[0],
                      options=user_files.Options())


def tfds_images():
  tfds_texts()
  return datasets.get("tfds:tiny_images", _TFDS_DIR[0], image_size=8,
                      options=user_files.Options(label="fine"))


def mocked(name, **kwargs):
  return lambda: datasets.get(name, "/unused", **kwargs)


CASES = {
    "digits": (lambda: datasets.get("digits"), 16, None),
    "digits32": (lambda: datasets.get("digits32"), 4, None),
    "goemotions": (lambda: datasets.get("goemotions"), 8, None),
    "goemotions_multilabel": (lambda: datasets.get("goemotions_multilabel"),
                              8, None),
    "mind": (lambda: datasets.get("mind", test_datasets.mind_fixture()), 4,
             None),
    "text_files": (text_files, 8, None),
    "text_files_cut": (lambda: text_files(missing_splits=True), 8, None),
    "text_files_streamed": (lambda: text_files(stream=True), 8, None),
    # Streamed text cut by the rule of runs before issue 62 (`split_rule`
    # by_format: `split_seed:row` in 10 buckets), as recorded then, and by
    # the one rule of every streamed format (`splits.cut_parts`).
    "text_files_streamed_cut": (
        lambda: text_files(missing_splits=True, stream=True,
                           split_rule="by_format"), 8, None),
    "text_files_streamed_cut_one_rule": (
        lambda: text_files(missing_splits=True, stream=True), 8, None),
    "tabular_files": (tables, 4, None),
    "image_folder": (image_folder, 4, None),
    "tfrecord_texts": (tfrecord_texts, 8, None),
    "tfrecord_texts_cut": (lambda: tfrecord_texts(missing_splits=True), 8,
                           None),
    "tfrecord_texts_cut_by_format": (
        lambda: tfrecord_texts(missing_splits=True, split_rule="by_format"),
        8, None),
    "tfrecord_images": (tfrecord_images, 4, None),
    "tfds_texts": (tfds_texts, 4, None),
    "tfds_images": (tfds_images, 2, None),
    "cifar10": (mocked("cifar10"), 2, 6),
    "imagenet2012": (mocked("imagenet2012", image_size=40), 2, 4),
    "coco2017": (mocked("coco2017", image_size=40), 2, 4),
    "voc2007": (mocked("voc2007", image_size=40), 2, 4),
}


def values(case):
  """(split sizes, class names digest, first training batch digest)."""
  load, batch_size, mock_examples = CASES[case]
  with contextlib.ExitStack() as stack:
    stack.enter_context(mock.patch.dict(
        os.environ, {streaming.CACHE_ENV: tempfile.mkdtemp()}))
    if mock_examples:
      stack.enter_context(tfds.testing.mock_data(num_examples=mock_examples))
    data = load()
    tf.random.set_seed(1234)
    batch = next(iter(datasets.ranking_dataset(
        data, "train", batch_size, training=True, seed=SEED)))
    batches = digest(batch, feature_values=case not in AUGMENTED)
    if case in AUGMENTED:
      batches += " " + digest(next(iter(datasets.ranking_dataset(
          data, "train", batch_size, training=False))))
  sizes = {split: data.size(split) for split in data.split_names}
  names = hashlib.sha256("\n".join(data.class_names).encode()).hexdigest()
  return sizes, (data.num_classes, names[:16]), batches


EXPECTED = {
    'digits': ({'train': 1257, 'validation': 270, 'test': 270}, (10, '29dd21f55e4611d4'), '3b522055f6ceca12'),
    'digits32': ({'train': 1257, 'validation': 270, 'test': 270}, (10, '29dd21f55e4611d4'), '000fb0226f8e9801 3106f97fedad6ee6'),
    'goemotions': ({'train': 36308, 'validation': 4548, 'test': 4590}, (28, '45c3ef86782d2a4d'), '2ca35eb15e6ad3b4'),
    'goemotions_multilabel': ({'train': 43410, 'validation': 5426, 'test': 5427}, (28, '45c3ef86782d2a4d'), '93789ac25e9a5390'),
    'mind': ({'train': 9, 'validation': 3, 'test': 3}, (3, '4af562d9bce39e63'), 'a35dbee926ca987b'),
    'text_files': ({'train': 40, 'validation': 6, 'test': 7}, (3, 'a9624787210b2d17'), '6c7cba698148e26b'),
    'text_files_cut': ({'train': 34, 'validation': 3, 'test': 3}, (3, 'a9624787210b2d17'), '84277066a8b526d0'),
    'text_files_streamed': ({'train': 40, 'validation': 6, 'test': 7}, (3, 'a9624787210b2d17'), '6c7cba698148e26b'),
    'text_files_streamed_cut': ({'train': 32, 'validation': 5, 'test': 3}, (3, 'a9624787210b2d17'), 'd15213674b1b780e'),
    'text_files_streamed_cut_one_rule': ({'train': 34, 'validation': 3, 'test': 3}, (3, 'a9624787210b2d17'), '78d36172f450fdcd'),
    'tabular_files': ({'train': 28, 'validation': 2, 'test': 2}, (2, '9ab9de25768ac172'), '7e4da4a85648e7b9'),
    'image_folder': ({'train': 18, 'validation': 2, 'test': 2}, (2, '3a450eb155d6a4c6'), 'a8110b776be73a1a 96cecf9cc1229d04'),
    'tfrecord_texts': ({'train': 40, 'validation': 6, 'test': 7}, (3, 'a9624787210b2d17'), 'e16e0a69ad66ea79'),
    'tfrecord_texts_cut': ({'train': 35, 'validation': 2, 'test': 3}, (3, 'a9624787210b2d17'), '287b776b03a14294'),
    'tfrecord_texts_cut_by_format': ({'train': 35, 'validation': 2, 'test': 3}, (3, 'a9624787210b2d17'), '287b776b03a14294'),
    'tfrecord_images': ({'train': 10, 'validation': 2, 'test': 3}, (2, '1e9987e996a1c529'), 'c2ab6e120c88c603 00afadf95103f08a'),
    'tfds_texts': ({'train': 9, 'validation': 1, 'test': 4}, (2, '0b367b51d92bac8e'), 'e7dab5e5de1ad937'),
    'tfds_images': ({'train': 6, 'validation': 2, 'test': 2}, (3, '3e597bc8d8992bd8'), 'a3e6710701a47834 87609f11f2a15c85'),
    'cifar10': ({'train': 6, 'validation': 6, 'test': 6}, (10, '29dd21f55e4611d4'), 'd7c53729390b6938 e9e79bcf0856e93b'),
    'imagenet2012': ({'train': 4, 'validation': 4, 'test': 4}, (1000, '385e0240499426c0'), '2b19f7a26b58fef9 69f8cc2a637286e2'),
    'coco2017': ({'train': 4, 'validation': 4, 'test': 4}, (80, 'f147b582c08ffede'), '7b8d6c7fe21a73ed f7ff91efddc32c61'),
    'voc2007': ({'train': 4, 'validation': 4, 'test': 4}, (20, '7d877f185c807bc5'), '8bc63ab6b22bba60 19813f01d0856ae3'),
}


class DataSourcesTest(tf.test.TestCase):
  """Each case's sizes, classes and first batch are as recorded."""

  def test_every_kind_is_recorded(self):
    self.assertEqual(sorted(EXPECTED), sorted(CASES))


def _add(case):
  def test(self):
    self.assertEqual(values(case), EXPECTED[case])
  setattr(DataSourcesTest, f"test_{case}", test)


for _case in CASES:
  _add(_case)


if __name__ == "__main__":
  if "--record" in sys.argv:
    for _case in CASES:
      print(f"    {_case!r}: {values(_case)!r},", flush=True)
  else:
    tf.test.main()
