"""Tests of a user's image folders and tables, and of skipping bad rows
(`image_files`; text files' formats are in test_user_files.py)."""

import logging
import os
import tempfile
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

import helpers

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import inputs as inputs_lib
from rank4class_tf.data import user_files
from rank4class_tf.training import builders
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training


def write(folder, name, content):
  path = os.path.join(folder, name)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(content.encode("utf-8") if isinstance(content, str) else content)
  return path


def png(height, width, value, channels=3):
  image = np.full([height, width, channels], value, np.uint8)
  return tf.io.encode_png(image).numpy()


def jpeg(height, width, value):
  return tf.io.encode_jpeg(np.full([height, width, 3], value,
                                   np.uint8)).numpy()


def load(name, folder, image_size=None, **options):
  return datasets.get(name, folder, image_size=image_size,
                      options=user_files.Options(**options))


class ImageFolderTest(tf.test.TestCase):

  def folder(self):
    """train/{cat,dog}, test/{cat,dog}: sizes, grey, RGBA, JPEG, a stray
    file; no validation folder (cut from train)."""
    folder = tempfile.mkdtemp()
    for i in range(10):
      write(folder, f"train/cat/c{i}.png", png(5 + i, 7, 10 + i))
      write(folder, f"train/dog/d{i}.JPG", jpeg(9, 4 + i, 200))
    write(folder, "train/dog/grey.png", png(6, 6, 77, channels=1))
    write(folder, "train/cat/alpha.png", png(3, 3, 50, channels=4))
    write(folder, "train/cat/notes.txt", "not an image")
    write(folder, "test/cat/t.png", png(4, 4, 1))
    write(folder, "test/dog/t.png", png(4, 4, 2))
    return folder

  def test_layout_sizes_and_colour_modes(self):
    data = load("image_folder", self.folder(), image_size=16)
    self.assertEqual(data.class_names, ("cat", "dog"))
    self.assertEqual(data.instance_shape, (16, 16, 3))
    # 11 cats and 11 dogs; 10% of each cut for validation (1 each).
    self.assertEqual([data.size(s) for s in contract.SPLITS], [20, 2, 2])
    pairs = list(data.dataset("test").as_numpy_iterator())
    self.assertEqual([p[1] for p in pairs], [0, 1])
    self.assertAllEqual(pairs[0][0], np.full([4, 4, 3], 1, np.uint8))
    images = {img.shape[:2]: (img, label) for img, label in
              data.dataset("train").concatenate(
                  data.dataset("validation")).as_numpy_iterator()}
    grey, label = images[(6, 6)]
    self.assertEqual(label, 1)
    self.assertAllEqual(grey, np.full([6, 6, 3], 77, np.uint8))  # Grey->RGB.
    alpha, label = images[(3, 3)]
    self.assertEqual((alpha.shape, label), ((3, 3, 3), 0))  # RGBA -> RGB.
    batch = next(iter(datasets.ranking_dataset(data, "test", 2,
                                               training=False)))
    self.assertEqual(batch[0]["image"].shape, [2, 16, 16, 3])

  def test_training_stream_reshuffles_files_every_pass(self):
    data = load("image_folder", self.folder(), image_size=8)
    stream = data.dataset("train", shuffle_files=True, seed=3).map(
        lambda image, label: tf.shape(image)[0] * 100 + tf.shape(image)[1])
    epochs = list(stream.repeat(2).as_numpy_iterator())
    first, second = epochs[:20], epochs[20:]
    self.assertCountEqual(first, second)
    self.assertNotEqual(first, second)
    again = data.dataset("train", shuffle_files=True, seed=3).map(
        lambda image, label: tf.shape(image)[0] * 100 + tf.shape(image)[1])
    self.assertEqual(list(again.as_numpy_iterator()), first)

  def test_a_corrupt_image_is_refused_or_skipped(self):
    folder = self.folder()
    bad = write(folder, "train/dog/broken.png", b"\x89PNG\r\n\x1a\nnot png")
    with self.assertRaisesRegex(
        ValueError, "^" + bad + ": cannot be decoded as an image") as raised:
      load("image_folder", folder)
    self.assertNotIn("\n", str(raised.exception))
    with self.assertLogs(level=logging.WARNING) as logs:
      data = load("image_folder", folder, skip_bad_records=True)
    self.assertEqual(data.size("train") + data.size("validation"), 22)
    self.assertIn("skipped 1 bad row(s)", "\n".join(logs.output))

  def test_refusals(self):
    folder = self.folder()
    write(folder, "test/bird/b.png", png(4, 4, 3))
    with self.assertRaisesRegex(ValueError, r"test/bird/b\.png: label "
                                r"'bird' is not a class \(2 classes, named "
                                r"by the train labels\)\.$"):
      load("image_folder", folder)
    empty = tempfile.mkdtemp()
    os.makedirs(os.path.join(empty, "train", "cat"))
    with self.assertRaisesRegex(ValueError, r"train: no images \(\.jpg, "):
      load("image_folder", empty)
    with self.assertRaisesRegex(ValueError, r"holds no train/ folder"):
      load("image_folder", tempfile.mkdtemp())

  def test_checks_take_image_encoders_and_image_size(self):
    config = config_lib.TrainConfig.create(
        dataset="image_folder", data_dir="unused", encoder="resnet50",
        image_size=64, model_dir="unused")
    checks.validate(config)
    with self.assertRaisesRegex(ValueError, r"`encoder`='bert' cannot read "
                                "the numeric dataset 'image_folder'"):
      checks.validate(config.replace(encoder="bert"))


class TabularFilesTest(tf.test.TestCase):

  def test_columns_standardised_in_the_model_input(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "a,b,kind,note\n"
          "1,10,x,7\n3,10,y,7\n5,10,x,7\n7,10,y,7\n")
    write(folder, "validation.csv", "a,b,kind,note\n2,11,y,0\n")
    write(folder, "test.tsv", "a\tb\tkind\tnote\n4\t9\tx\t0\n")
    data = load("tabular_files", folder, label="kind",
                feature_columns=("a", "b"))
    self.assertEqual(data.class_names, ("x", "y"))
    self.assertEqual(data.feature_names, ("a", "b"))
    self.assertEqual(data.instance_shape, (2,))
    x, y = data.splits["train"]
    self.assertAllEqual(x, [[1, 10], [3, 10], [5, 10], [7, 10]])
    self.assertAllEqual(y, [0, 1, 0, 1])
    mean, std = data.feature_statistics
    self.assertAllClose(mean, [4.0, 10.0])
    self.assertAllClose(std, [np.sqrt(5.0), 1.0])  # A constant column: 1.
    inputs = inputs_lib.default_inputs(data)
    features = inputs(tf.constant(data.splits["validation"][0]))
    self.assertAllClose(features["features"], [[-2 / np.sqrt(5.0), 1.0]])
    # The served model reads raw vectors the same way.
    self.assertAllClose(inputs.serving_features(tf.constant([[4., 9.]])
                                               )["features"], [[0.0, -1.0]])

  def test_every_column_but_the_label_by_default(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "label,f1,f2\n" + "".join(
        f"{'pq'[i % 2]},{i},{-i}\n" for i in range(20)))
    data = load("tabular_files", folder)
    self.assertEqual(data.feature_names, ("f1", "f2"))
    self.assertEqual([data.size(s) for s in contract.SPLITS], [16, 2, 2])

  def test_bad_values_are_refused_or_skipped(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "f,label\n1,p\nnan,q\nabc,p\n2,q\n3,p\n4,q\n")
    write(folder, "validation.csv", "f,label\n1,p\n")
    write(folder, "test.csv", "f,label\n1,q\n")
    with self.assertRaisesRegex(ValueError, r"train\.csv:3: column 'f': "
                                r"'nan' is not a finite number\.$"):
      load("tabular_files", folder)
    with self.assertLogs(level=logging.WARNING) as logs:
      data = load("tabular_files", folder, skip_bad_records=True)
    self.assertAllEqual(data.splits["train"][0][:, 0], [1, 2, 3, 4])
    self.assertIn("skipped 2 bad row(s) (`skip_bad_records`); the first: "
                  + os.path.join(folder, "train.csv") + ":3:",
                  "\n".join(logs.output))
    write(folder, "train.csv", "f,label\n1,p\n2,q\n")
    write(folder, "test.csv", "g,label\n1,q\n")
    with self.assertRaisesRegex(ValueError, r"test\.csv:2: no column 'f' "
                                r"\(columns: g, label\); name it with "
                                "`feature_columns`"):
      load("tabular_files", folder)

  def test_checks_take_the_mlp_encoder_only(self):
    config = config_lib.TrainConfig.create(
        dataset="tabular_files", data_dir="unused", encoder="mlp",
        model_dir="unused")
    checks.validate(config)
    with self.assertRaisesRegex(ValueError, r"`encoder`='small_cnn' cannot "
                                "read the feature vectors of "
                                r"`dataset`=tabular_files; use `encoder`=mlp"):
      checks.validate(config.replace(encoder="small_cnn"))


class SkipBadRowsTest(tf.test.TestCase):

  def test_text_rows_skipped_and_counted(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "text,label\na,x\n ,y\nb,y\nc,x,extra\nd,x\n"
          "e,y\n")
    write(folder, "validation.jsonl", '{"text": "f", "label": "x"}\n[1]\n'
          '{"text": "g", "label": "z"}\n')
    write(folder, "test.csv", "text,label\nh,y\n")
    with self.assertRaisesRegex(ValueError, r"train\.csv:3: column 'text': "
                                r"empty text\.$"):
      load("text_files", folder)
    with self.assertLogs(level=logging.WARNING) as logs:
      data = load("text_files", folder, skip_bad_records=True)
    self.assertEqual(list(data.splits["train"][0]), ["a", "b", "d", "e"])
    self.assertEqual(list(data.splits["validation"][0]), ["f"])
    output = "\n".join(logs.output)
    self.assertIn("train.csv: skipped 2 bad row(s)", output)
    self.assertIn("validation.jsonl: skipped 2 bad row(s)", output)
    self.assertIn("validation.jsonl:2: not a JSON object.", output)

  def test_all_rows_bad(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "text,label\n ,x\n")
    with self.assertRaisesRegex(ValueError, r"train\.csv: no rows \(1 bad, "
                                r"skipped\)\.$"):
      load("text_files", folder, skip_bad_records=True)


if __name__ == "__main__":
  tf.test.main()


@pytest.mark.slow
class EndToEndTest(tf.test.TestCase):
  """train, evaluate and predict on an image folder and a table."""

  def test_image_folder(self):
    folder = tempfile.mkdtemp()
    for i in range(12):
      write(folder, f"train/dark/{i}.png", png(10 + i, 12, 20 + i))
      write(folder, f"train/light/{i}.jpg", jpeg(14, 9 + i, 230 - i))
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    helpers.run_module(
        "pipelines.train", "--dataset=image_folder", f"--data_dir={folder}",
        "--image_size=32", "--encoder=small_cnn", "--train_steps=4",
        "--eval_every=2", "--batch_size=8", "--learning_rate=0.01",
        f"--model_dir={model_dir}")
    results = helpers.evaluate(model_dir, "test")
    self.assertEqual(results["num_examples"], 2)
    out = helpers.run_module(
        "pipelines.predict", f"--model_dir={model_dir}", "--top_k=2",
        f"--image={folder}/train/dark/0.png,{folder}/train/light/3.jpg")
    rankings = [block.splitlines() for block in out.stdout.split("\n\n")]
    self.assertLen(rankings, 2)
    for ranking in rankings:
      self.assertCountEqual([line.split("\t")[0] for line in ranking],
                            ["dark", "light"])

  def test_tabular_files(self):
    folder = tempfile.mkdtemp()
    rng = np.random.RandomState(0)
    rows = ["width,kind,height"]
    for i in range(60):
      kind = "pq"[i % 2]
      rows.append(f"{rng.normal(100 if kind == 'p' else 300, 10):.2f},{kind},"
                  f"{rng.normal(5, 1):.2f}")
    write(folder, "train.csv", "\n".join(rows) + "\n")
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    helpers.run_module(
        "pipelines.train", "--dataset=tabular_files", f"--data_dir={folder}",
        "--label_column=kind", "--encoder=mlp", "--train_steps=60",
        "--eval_every=30", "--batch_size=8", "--learning_rate=0.01",
        f"--model_dir={model_dir}")
    results = helpers.evaluate(model_dir, "test")
    self.assertEqual(results["num_examples"], 6)
    self.assertEqual(results["top1_accuracy"], 1.0)  # Far apart classes.
    # Raw values: the served model standardises them itself.
    # Rows ranked as read; the bad third row stops it after them.
    out = helpers.run_module("pipelines.predict", f"--model_dir={model_dir}",
                             "--top_k=1", "--batch_size=2",
                             stdin="98.0,5.1\n305,4.0\n1,2,3\n", check=False)
    self.assertEqual([block.split("\t")[0] for block in
                      out.stdout.strip().split("\n\n")], ["p", "q"])
    self.assertEqual(out.returncode, 1)
    self.assertEqual(out.stderr.strip().splitlines()[-1],
                     "predict: <stdin>:3: expected 2 comma-separated "
                     "finite numbers, got '1,2,3'.")


class OneClassTest(tf.test.TestCase):
  """Issue 58 case 5: train data of one class is refused (it trained to
  loss 0 and Top-1 1.0, exit 0), in every user format."""

  def test_text_folder_image_folder_and_csv(self):
    texts = tempfile.mkdtemp()
    for i in range(20):
      write(texts, f"train/joy/{i:03d}.txt", f"so happy {i}")
    with self.assertRaises(ValueError) as refused:
      load("text_files", texts)
    self.assertEqual(str(refused.exception),
                     f"{texts}/train: 1 class (joy) in train; a classifier "
                     "needs two or more: give train instances of another "
                     "class.")
    images = tempfile.mkdtemp()
    for i in range(20):
      write(images, f"train/cat/{i}.png", png(4, 4, i))
    with self.assertRaises(ValueError) as refused:
      load("image_folder", images)
    self.assertEqual(str(refused.exception),
                     f"{images}/train: 1 class (cat) in train; a classifier "
                     "needs two or more: give train instances of another "
                     "class.")
    table = tempfile.mkdtemp()
    write(table, "train.csv", "f,label\n" + "1,x\n" * 20)
    with self.assertRaisesRegex(ValueError, r"/train\.csv: 1 class \(x\) in "
                                "train; a classifier needs two or more"):
      load("tabular_files", table)
    names = write(table, "names.txt", "only\n")
    write(table, "train.csv", "f,label\n" + "1,0\n" * 20)
    with self.assertRaisesRegex(ValueError, r"/train\.csv: 1 class \(only\) "
                                "in train"):
      load("tabular_files", table, class_names_file=names)


class HiddenEntriesTest(tf.test.TestCase):
  """Issue 58 case 6: hidden folders and files (a name starting with '.')
  are skipped and counted: `.ipynb_checkpoints/` and `.thumbnails/` were
  classes, AppleDouble `._001.txt` / `._000.png` stopped the run."""

  APPLE_DOUBLE = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \xff\xfe"

  def test_text_folders(self):
    folder = tempfile.mkdtemp()
    write(folder, "train/joy/001.txt", "so happy")
    write(folder, "train/joy/._001.txt", self.APPLE_DOUBLE)
    write(folder, "train/anger/002.txt", "so cross")
    write(folder, "train/.ipynb_checkpoints/003-checkpoint.txt", "so happy")
    write(folder, "test/joy/004.txt", "glad")
    write(folder, "test/anger/005.txt", "mad")
    write(folder, "validation/joy/006.txt", "merry")
    write(folder, "validation/anger/007.txt", "furious")
    with self.assertLogs(level=logging.INFO) as logs:
      data = load("text_files", folder)
    self.assertEqual(data.class_names, ("anger", "joy"))
    self.assertEqual(sorted(data.splits["train"][0]), ["so cross", "so happy"])
    self.assertIn(f"{folder}/train: skipped 2 hidden entries (a name "
                  "starting with '.'): .ipynb_checkpoints/, joy/._001.txt",
                  "\n".join(logs.output))

  def test_image_folders(self):
    folder = tempfile.mkdtemp()
    for split in ("train", "validation", "test"):
      write(folder, f"{split}/cat/000.png", png(4, 4, 10))
      write(folder, f"{split}/dog/001.png", png(4, 4, 200))
    write(folder, "train/cat/._000.png", self.APPLE_DOUBLE)
    write(folder, "train/.thumbnails/000.png", png(2, 2, 10))
    write(folder, "train/cat/002.png", png(5, 4, 30))
    write(folder, "train/dog/003.png", png(4, 5, 220))
    with self.assertLogs(level=logging.INFO) as logs:
      data = load("image_folder", folder, image_size=8)
    self.assertEqual(data.class_names, ("cat", "dog"))
    self.assertEqual([data.size(s) for s in contract.SPLITS], [4, 2, 2])
    self.assertIn(f"{folder}/train: skipped 2 hidden entries (a name "
                  "starting with '.'): .thumbnails/, cat/._000.png",
                  "\n".join(logs.output))
    only_hidden = tempfile.mkdtemp()
    write(only_hidden, "train/.thumbnails/000.png", png(2, 2, 10))
    with self.assertRaises(ValueError) as refused:
      load("image_folder", only_hidden)
    self.assertEqual(str(refused.exception),
                     f"{only_hidden}/train: no class folders "
                     "(<split>/<class>/*.jpg); 1 hidden entries (a name "
                     "starting with '.') skipped.")


def table_config(folder, model_dir, **kwargs):
  return config_lib.TrainConfig.create(
      dataset="tabular_files", data_dir=folder, encoder="mlp",
      train_steps=2, eval_every=2, batch_size=2, model_dir=model_dir,
      **kwargs)


class BeyondFloat32Test(tf.test.TestCase):
  """Issue 58 case 9: a value beyond float32 (`1e39`) is refused as `inf`
  is, naming file, line and column, before anything is written; so is one
  given to `predict --features`."""

  def test_refused_before_anything_is_written(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "a,b,c,label\n1,2,3,x\n1,1e39,2,y\n"
          "4,5,6,x\n7,8,9,y\n")
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    with self.assertRaises(ValueError) as refused:
      training.train(table_config(folder, model_dir))
    self.assertEqual(str(refused.exception),
                     f"{folder}/train.csv:3: column 'b': '1e39' is beyond "
                     "float32's range (+-3.4028235e38), in which the model "
                     "reads features.")
    self.assertFalse(os.path.exists(model_dir))
    # The largest float32 as written is one (rounded), -1e39 is not.
    write(folder, "train.csv", "a,b,c,label\n1,3.4028235e38,3,x\n"
          "1,-1e39,2,y\n")
    with self.assertRaisesRegex(ValueError, r"train\.csv:3: column 'b': "
                                "'-1e39' is beyond float32's range"):
      load("tabular_files", folder)

  @pytest.mark.slow
  def test_predict_features(self):
    folder = tempfile.mkdtemp()
    write(folder, "train.csv", "a,b,c,label\n" + "".join(
        f"{i},{i % 2},{-i},{'xy'[i % 2]}\n" for i in range(20)))
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    training.train(table_config(folder, model_dir))
    proc = helpers.run_module("pipelines.predict", f"--model_dir={model_dir}",
                              "--features=1,1e39,2", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     "predict: --features:1: '1e39' is beyond float32's "
                     "range (+-3.4028235e38), in which the model reads "
                     "features.")
    self.assertNotIn("Traceback", proc.stderr)


def train_broken(config, path, empty=False):
  """`training.train(config)` with `path` deleted (or with `empty`, left
  empty) once the data is loaded: as if it broke while the run trained
  (the load decoded every image), at the first read, whatever tf.data
  has read ahead."""
  load_data = builders.load_data

  def load_then_break(config):
    data = load_data(config)
    if empty:
      open(path, "wb").close()
    else:
      os.remove(path)
    return data

  with mock.patch.object(builders, "load_data", load_then_break):
    training.train(config)


class BreaksDuringTrainingTest(tf.test.TestCase):
  """Issue 58 case 10: an image deleted or emptied while the run trains
  (the load had decoded it) stops training with one line naming it, and
  the run resumes; with `skip_bad_records` it is skipped and counted."""

  def folder(self):
    folder = tempfile.mkdtemp()
    for i in range(6):
      write(folder, f"train/dark/{i}.png", png(6, 6, 20 + i))
      write(folder, f"train/light/{i}.png", png(6, 6, 230 - i))
    for split in ("validation", "test"):
      write(folder, f"{split}/dark/0.png", png(6, 6, 25))
      write(folder, f"{split}/light/0.png", png(6, 6, 225))
    return folder

  def config(self, folder, **kwargs):
    return config_lib.TrainConfig.create(
        dataset="image_folder", data_dir=folder, image_size=32,
        encoder="small_cnn", train_steps=4, eval_every=2, batch_size=4,
        export=False, model_dir=os.path.join(tempfile.mkdtemp(), "run"),
        **kwargs)

  def test_deleted_then_resumed(self):
    folder = self.folder()
    victim = os.path.join(folder, "train", "dark", "3.png")
    config = self.config(folder)
    with open(victim, "rb") as f:
      original = f.read()
    helpers.train_killed_after_first_validation(config)
    with self.assertRaises(ValueError) as stopped:
      train_broken(config, victim)
    self.assertEqual(str(stopped.exception),
                     f"training stopped: {victim}: no such file. Restore it "
                     "and start the same command again: the run resumes "
                     "from step 2, its last validation. Data without it, or "
                     "with it changed, is not the data the run trained on "
                     "(its data record): train a new run on it, with "
                     "`skip_bad_records` to skip such files.")
    # Left out, the data is not the run's (issue 58 case 12): refused.
    with self.assertRaisesRegex(ValueError, "train/dark/3.png removed"):
      training.train(config)
    # Restored (the user's fix): the same command resumes and finishes.
    with open(victim, "wb") as f:
      f.write(original)
    with self.assertLogs("absl", level=logging.INFO) as logs:
      training.train(config)  # The trainer logs through absl.
    self.assertIn("resuming after epoch 1", "\n".join(logs.output))
    self.assertTrue(run_state.is_trained(config))

  def test_emptied(self):
    folder = self.folder()
    victim = os.path.join(folder, "train", "light", "2.png")
    with self.assertRaises(ValueError) as stopped:
      train_broken(self.config(folder), victim, empty=True)
    self.assertEqual(str(stopped.exception),
                     f"training stopped: {victim}: cannot be decoded as an "
                     "image (Input is empty.). Restore it and start the "
                     "same command again: no validation had passed, so the "
                     "run starts afresh. Data without it, or with it "
                     "changed, is not the data the run trained on (its data "
                     "record): train a new run on it, with "
                     "`skip_bad_records` to skip such files.")

  def test_skipped_and_counted(self):
    folder = self.folder()
    victim = os.path.join(folder, "train", "dark", "3.png")
    config = self.config(folder, skip_bad_records=True)
    with self.assertLogs("absl", level=logging.WARNING) as logs:
      train_broken(config, victim)
    self.assertTrue(run_state.is_trained(config))
    self.assertIn("train: skipped 1 instance(s) that could not be read when "
                  f"training read them (`skip_bad_records`): {victim}",
                  "\n".join(logs.output))
