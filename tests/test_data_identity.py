"""A run's data record (`data.identity`) and the commands that check it.

Issue 58, case 12: a run records what it trained on (data.json) and every
later command that reads its data (evaluate, export, calibrate, a resumed
or extended run, a study, compare_runs) gets the same data or stops with
one line saying what changed, writing nothing; `--allow_changed_data`
proceeds and says so. Case 17: calibrate on NaN weights writes nothing.
"""

import hashlib
import json
import os
import shutil
import tempfile
import time
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.data import datasets
from rank4class_tf.data.sources import shipped_text
from rank4class_tf.data import file_hashes
from rank4class_tf.data import identity
from rank4class_tf.data import user_files
from rank4class_tf.training import builders
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training
from tests import helpers


def table(classes=("anger", "joy"), rows=60, seed=0):
  """A tabular train.csv: `width` far apart per class, `height` noise."""
  rng = np.random.RandomState(seed)
  lines = ["width,kind,height"]
  for i in range(rows):
    kind = classes[i % len(classes)]
    lines.append(f"{rng.normal(100 + 200 * (i % len(classes)), 10):.2f},"
                 f"{kind},{rng.normal(5, 1):.2f}")
  return "\n".join(lines) + "\n"


def sha256(text):
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed(old, new, name="train.csv"):
  """How the record names a file whose text went from `old` to `new`."""
  size = ("" if len(old) == len(new) else
          f", {len(old):,} -> {len(new):,} bytes")
  return (f"{name} changed (sha256 {sha256(old)[:12]} -> "
          f"{sha256(new)[:12]}{size})")


def tree_digest(folder):
  """{relative path: SHA-256} of every file under `folder`."""
  out = {}
  for root, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(root, name)
      out[os.path.relpath(path, folder)] = fileio.file_sha256(path)
  return out


def run_config(data_dir, model_dir, **kwargs):
  values = dict(dataset="tabular_files", data_dir=data_dir,
                label_column="kind", encoder="mlp", train_steps=20,
                eval_every=10, batch_size=8, learning_rate=0.01,
                model_dir=model_dir, export=False)
  values.update(kwargs)
  return config_lib.TrainConfig.create(**values)


def statistics(folder):
  """(mean, std) of a table's train split as the loader standardises."""
  data = datasets.get("tabular_files", folder,
                      options=user_files.Options(label="kind"))
  return data.feature_statistics


class FingerprintTest(tf.test.TestCase):
  """The record's files and the hash cache, without training."""

  def setUp(self):
    super().setUp()
    self.enter_context(mock.patch.dict(
        os.environ, {file_hashes.CACHE_ENV: tempfile.mkdtemp()}))
    file_hashes.forget()

  def test_text_files_record_every_file(self):
    folder = tempfile.mkdtemp()
    train, test = "text,label\nhi,joy\nno,anger\n", "text,label\nyes,joy\n"
    for name, text in (("train.csv", train), ("test.csv", test)):
      with open(os.path.join(folder, name), "w") as f:
        f.write(text)
    got = identity.fingerprint(config_lib.DataConfig(
        dataset="text_files", data_dir=folder))
    self.assertEqual(got["data_dir"], folder)
    self.assertEqual(got["parts"], {"train": ["train.csv"],
                                    "test": ["test.csv"]})
    self.assertEqual({name: (e["bytes"], e["sha256"])
                      for name, e in got["files"].items()},
                     {"train.csv": (len(train), sha256(train)),
                      "test.csv": (len(test), sha256(test))})

  def test_a_file_is_hashed_once_per_version(self):
    path = os.path.join(tempfile.mkdtemp(), "train.csv")
    with open(path, "w") as f:
      f.write("a" * 1000)
    old = time.time() - 60  # Not "racily clean": its hash is cached.
    os.utime(path, (old, old))
    calls = []
    real = fileio.file_sha256

    def counted(p):
      calls.append(p)
      return real(p)

    with mock.patch.object(fileio, "file_sha256", counted):
      first = file_hashes.digest(path)
      file_hashes.forget()  # As a new process: the cache file is read.
      self.assertEqual(file_hashes.digest(path), first)
      self.assertLen(calls, 1)
      with open(path, "w") as f:  # The same size, another content.
        f.write("b" * 1000)
      os.utime(path, (old + 1, old + 1))
      self.assertEqual(file_hashes.digest(path).sha256, sha256("b" * 1000))
      self.assertLen(calls, 2)
    # A file just written is hashed each time until it is a few seconds old.
    with open(path, "w") as f:
      f.write("c")
    with mock.patch.object(fileio, "file_sha256", counted):
      file_hashes.digest(path)
      file_hashes.digest(path)
    self.assertLen(calls, 4)

  def test_a_large_folder_is_recorded_whole(self):
    folder = tempfile.mkdtemp()
    for name in ("a/1.png", "a/2.png", "b/3.png", "a/.DS_Store"):
      os.makedirs(os.path.dirname(os.path.join(folder, "train", name)),
                  exist_ok=True)
      with open(os.path.join(folder, "train", name), "w") as f:
        f.write(name)
    config = config_lib.DataConfig(dataset="image_folder", data_dir=folder)
    with mock.patch.object(identity, "LISTED_FILES", 2):
      old = identity.fingerprint(config)
      self.assertEqual(old["files"], {})
      self.assertEqual(old["folders"]["train"]["files"], 3)  # Not hidden.
      with open(os.path.join(folder, "train", "b", "4.png"), "w") as f:
        f.write("new")
      new = identity.fingerprint(config, like=old)
    change = identity.compare(old, new).line()
    self.assertRegex(change, r"^train/ changed \(sha256 [0-9a-f]{12} -> "
                     r"[0-9a-f]{12}, 3 -> 4 files\)$")
    # Listed file by file, the new file is named.
    small = identity.fingerprint(config)
    os.remove(os.path.join(folder, "train", "b", "4.png"))
    self.assertEqual(identity.compare(small, identity.fingerprint(
        config, like=small)).line(), "train/b/4.png removed")

  def test_shipped_data_sets_are_cheap(self):
    for name, count in (("digits", 1), ("goemotions", 4)):
      start = time.time()
      got = identity.fingerprint(config_lib.DataConfig(dataset=name))
      self.assertLess(time.time() - start, 5.0)
      self.assertLen(got["files"], count)
      self.assertIsNone(got["data_dir"])
    emotions = os.path.join(shipped_text.REPO_DATA_DIR, "goemotions",
                            "emotions.txt")
    self.assertEqual(got["files"]["emotions.txt"]["sha256"],
                     fileio.file_sha256(emotions))

  def test_class_changes(self):
    self.assertEqual(identity.compare(
        {"class_names": ["anger", "joy"], "files": {}},
        {"class_names": ["joy", "zzz"], "sizes": {}, "files": {}}).line(),
                     "class 'anger' renamed or removed; class 'zzz' added")
    self.assertEqual(identity.compare(
        {"class_names": ["a", "b"], "files": {}},
        {"class_names": ["b", "a"], "sizes": {}, "files": {}}).line(),
                     "the classes are in another order (other class ids)")


class ChangedDataTest(tf.test.TestCase):
  """One tabular run (`--export=false`) and its exported copy; each test
  changes the data in its own way, and puts it back."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp()
    cls.csv = table()
    cls.train_csv = os.path.join(cls.data_dir, "train.csv")
    with open(cls.train_csv, "w") as f:
      f.write(cls.csv)
    cls.trained = os.path.join(tempfile.mkdtemp(), "run")
    training.train(run_config(cls.data_dir, cls.trained))
    cls.exported = cls.copy_of(cls.trained)
    training.export_run(cls.exported)

  @staticmethod
  def copy_of(run):
    copy = os.path.join(tempfile.mkdtemp(), "run")
    shutil.copytree(run, copy)
    return copy

  def edit(self, text):
    """Writes train.csv (restored after the test)."""
    def restore():
      with open(self.train_csv, "w") as f:
        f.write(self.csv)
    self.addCleanup(restore)
    with open(self.train_csv, "w") as f:
      f.write(text)

  def test_the_record(self):
    record = identity.read(self.trained)
    self.assertEqual(record["data_dir"], self.data_dir)
    self.assertEqual(record["files"]["train.csv"]["sha256"],
                     sha256(self.csv))
    self.assertEqual(record["class_names"], ["anger", "joy"])
    self.assertEqual(record["sizes"], {"train": 48, "validation": 6,
                                       "test": 6})
    self.assertEqual(record["cut"], ["validation", "test"])
    self.assertEqual(record["split_seed"], 20220128)
    mean, std = statistics(self.data_dir)
    self.assertEqual(record["feature_statistics"],
                     {"names": ["width", "height"],
                      "mean": [float(v) for v in mean],
                      "std": [float(v) for v in std]})
    # `--overwrite` removes it with the run's other files.
    self.assertIn(run_dir_lib.DATA_FILE, run_dir_lib.STATE)

  def test_unchanged_data_passes(self):
    data, changes = builders.load_run_data(self.trained)
    self.assertFalse(changes)
    self.assertEqual(data.size("validation"), 6)
    out = helpers.run_module("pipelines.evaluate",
                             f"--model_dir={self.exported}")
    results = json.loads(out.stdout.splitlines()[0])
    self.assertEqual(results["num_examples"], 6)
    self.assertNotIn("data_changed", results)

  def test_edited_row_then_export(self):
    # The first case: the export recomputed the standardisation
    # from the edited file and its predictions changed, exit 0.
    run = self.copy_of(self.trained)
    before = tree_digest(run)
    (old_mean, _), edited = statistics(self.data_dir), self.csv.replace(
        "\n" + self.csv.splitlines()[1].split(",")[0] + ",",
        "\n999.00,", 1)
    self.edit(edited)
    new_mean, _ = statistics(self.data_dir)
    out = helpers.run_module("pipelines.export", f"--model_dir={run}",
                             check=False)
    self.assertEqual(out.returncode, 1)
    self.assertEqual(
        out.stderr.strip().splitlines()[-1],
        f"export: the data changed since --model_dir={run} trained: "
        f"{changed(self.csv, edited)}, and validation and test are cut from "
        "it; the "
        f"standardisation mean of feature 'width' is {new_mean[0]:.6g}, "
        f"{old_mean[0]:.6g} when the run trained. Pass --allow_changed_data "
        "to use it anyway.")
    self.assertEqual(tree_digest(run), before)  # Nothing written.
    helpers.run_module("pipelines.export", f"--model_dir={run}",
                       "--allow_changed_data")
    # Standardised as the run trained: the export of the unchanged data.
    vector = np.array([[150.0, 5.0], [320.0, 4.0]], np.float32)
    self.assertEqual(
        exported_ranker.ExportedRanker(run).rank(vector, top_k=2),
        exported_ranker.ExportedRanker(self.exported).rank(vector, top_k=2))
    with open(os.path.join(run, run_dir_lib.LOG_FILE)) as f:
      last = f.read().splitlines()[-1]
    self.assertRegex(last, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d export: the "
                     r"data changed since the run trained, used anyway "
                     r"\(`allow_changed_data`\): train\.csv changed ")

  def test_renamed_class_evaluate(self):
    run = self.copy_of(self.exported)
    before = tree_digest(run)
    renamed = self.csv.replace(",anger,", ",zzz,")
    self.edit(renamed)
    out = helpers.run_module("pipelines.evaluate", f"--model_dir={run}",
                             "--allow_changed_data", check=False)
    self.assertEqual(out.returncode, 1)
    self.assertEqual(
        out.stderr.strip().splitlines()[-1],
        f"evaluate: the data changed since --model_dir={run} trained: class "
        "'anger' renamed or removed; class 'zzz' added; "
        f"{changed(self.csv, renamed)}, and validation and test are cut from "
        # The mean: the stratified cut goes by class id, now another.
        "it; and 1 more. A model scores the classes it was trained on "
        "(by id): another class list is refused, whatever "
        "--allow_changed_data says.")
    self.assertEqual(tree_digest(run), before)

  def test_validation_split_recut(self):
    # 20 rows fewer: validation is cut again from the edited train file.
    lines = self.csv.splitlines()
    shorter = "\n".join(lines[:41]) + "\n"
    self.edit(shorter)
    with self.assertRaises(ValueError) as caught:
      builders.load_run_data(self.exported)
    self.assertEqual(
        str(caught.exception),
        f"the data changed since `model_dir`={self.exported} trained: "
        f"{changed(self.csv, shorter)}, and validation and test are cut from "
        "it; train: 32 "
        "instances, 48 when the run trained; validation: 4 instances, 6 "
        "when the run trained; and 2 more. Pass `allow_changed_data` to use "
        "it anyway.")
    data, changes = builders.load_run_data(self.exported,
                                           allow_changed_data=True)
    self.assertEqual(data.size("validation"), 4)
    self.assertLen(changes.files, 5)  # Sizes of 3 splits, the mean.
    results = exported_ranker.evaluate(self.exported, data, "validation")
    self.assertEqual(results["num_examples"], 4)

  def test_added_class_calibrate(self):
    # Once 16 checkpoint warnings, then "written by another model".
    run = self.copy_of(self.exported)
    before = tree_digest(run)
    added = self.csv + "".join(f"{500 + i}.0,rage,5.0\n" for i in range(10))
    self.edit(added)
    out = helpers.run_module("pipelines.calibrate", f"--model_dir={run}",
                             check=False)
    self.assertEqual(out.returncode, 1)
    sizes = datasets.get("tabular_files", self.data_dir, options=(
        user_files.Options(label="kind"))).size("train")
    self.assertEqual(sizes, 56)  # 24 anger, 24 joy, 8 rage.
    self.assertEqual(
        out.stderr.strip().splitlines()[-1],
        f"calibrate: the data changed since --model_dir={run} trained: class "
        f"'rage' added; {changed(self.csv, added)}, and validation and test "
        "are cut from it; train: 56 instances, 48 when the run trained; and "
        "3 more. A model scores the classes it was trained on (by id): "
        "another class list is refused, whatever --allow_changed_data says.")
    self.assertNotIn("checkpoint", out.stderr.lower())
    self.assertEqual(tree_digest(run), before)

  def test_moved_data_dir(self):
    moved = self.data_dir + "_moved"
    os.rename(self.data_dir, moved)
    self.addCleanup(os.rename, moved, self.data_dir)
    with self.assertRaisesRegex(ValueError, "^" + (
        f"`data_dir`={self.data_dir}, where `model_dir`={self.trained} "
        "trained, is gone (moved or deleted): put the data back there.").replace(
            "(", r"\(").replace(")", r"\)") + "$"):
      builders.load_run_data(self.trained, allow_changed_data=True)
    # config.json edited to the new place: the same files, another folder.
    run = self.copy_of(self.trained)
    config = exported_ranker.load_config(run)
    fileio.write_text_atomically(
        run_dir_lib.RunDir(run).config_file,
        config.replace(data_dir=moved).to_json())
    with self.assertRaisesRegex(
        ValueError, f": `data_dir`={moved}, the run trained on "
        f"{self.data_dir}. Pass `allow_changed_data`"):
      builders.load_run_data(run)
    data, changes = builders.load_run_data(run, allow_changed_data=True)
    self.assertEqual(changes.files, (f"`data_dir`={moved}, the run trained "
                                     f"on {self.data_dir}",))
    self.assertEqual(data.size("validation"), 6)

  def test_relative_data_dir_from_another_folder(self):
    # The case: stored as given, read from another folder it was
    # another data set.
    here, there = tempfile.mkdtemp(), tempfile.mkdtemp()
    for folder, text in ((here, self.csv),
                         (there, table(("x", "y", "z"), seed=1))):
      os.makedirs(os.path.join(folder, "data"))
      with open(os.path.join(folder, "data", "train.csv"), "w") as f:
        f.write(text)
    run = os.path.join(tempfile.mkdtemp(), "run")
    cwd = os.getcwd()
    self.addCleanup(os.chdir, cwd)
    os.chdir(here)
    training.train(run_config("data", run, train_steps=10))
    os.chdir(there)
    self.assertEqual(exported_ranker.load_config(run).data.data_dir,
                     os.path.join(here, "data"))
    data, changes = builders.load_run_data(run)
    self.assertFalse(changes)
    self.assertEqual(data.class_names, ("anger", "joy"))
    # A run of an older release: config.json relative, no record. Read from
    # the current folder, as then, and said.
    with open(os.path.join(run, "config.json")) as f:
      raw = json.load(f)
    raw["data"]["data_dir"] = "data"
    with open(os.path.join(run, "config.json"), "w") as f:
      json.dump(raw, f)
    os.remove(os.path.join(run, run_dir_lib.DATA_FILE))
    with self.assertLogs(level="WARNING") as logs:
      data, _ = builders.load_run_data(run)
    self.assertEqual(data.class_names, ("x", "y", "z"))
    self.assertEqual([r.getMessage() for r in logs.records
                      if "data record" in r.getMessage()], [(
        f"`model_dir`={run} has no data record (data.json: the run was "
        "trained before records existed): its data is read unchecked, and "
        "its `data_dir`=data is relative: read from "
        f"{os.path.join(os.path.realpath(there), 'data')}.")])

  def test_extending_on_changed_data(self):
    run = self.copy_of(self.trained)
    before = tree_digest(run)
    edited = self.csv + "450.0,joy,5.0\n"
    self.edit(edited)
    with self.assertRaisesRegex(
        ValueError, r"^the data changed since `model_dir`=.* trained: "
        r"train\.csv changed .*`overwrite` deletes the run and trains afresh "
        r"on it\.$"):
      training.train(run_config(self.data_dir, run, train_steps=40))
    self.assertEqual(tree_digest(run), before)

  def test_a_study_and_compare_runs_check_it(self):
    self.edit(self.csv + "450.0,joy,5.0\n")
    config = exported_ranker.load_config(self.trained)
    data = builders.load_data(config)
    with self.assertRaisesRegex(
        ValueError, r"^the data changed since `model_dir`=.* trained: "
        r"train\.csv changed .* The study's runs must share their data"):
      identity.check_runs([self.trained], config.data, data)

  def test_calibrate_on_nan_weights_writes_nothing(self):
    # Case 17: it left two NaN exports, and `export` then said "already
    # holds an export".
    for source in (self.trained, self.exported):
      run = self.copy_of(source)
      for prefix in (run_state.final_checkpoint(
          exported_ranker.load_config(run).replace(model_dir=run)),
                     run_dir_lib.RunDir(run).best_checkpoint()):
        nan_checkpoint(prefix)
      before = tree_digest(run)
      with self.assertRaisesRegex(
          ValueError, rf"^{run}/export/latest_model: no calibration "
          r"\(non-finite scores \(NaN or Inf\): the model diverged; nothing "
          r"to calibrate\); nothing was written\.$"):
        training.recalibrate(run)
      self.assertEqual(tree_digest(run), before)


def nan_checkpoint(prefix):
  """Rewrites a checkpoint with every float variable NaN (its keys, object
  graph and integers kept)."""
  reader = tf.train.load_checkpoint(prefix)
  names = sorted(reader.get_variable_to_dtype_map())
  tensors = []
  for name in names:
    value = reader.get_tensor(name)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
      value = np.full_like(value, np.nan)
    tensors.append(tf.constant(value))
  for path in tf.io.gfile.glob(prefix + ".*"):
    tf.io.gfile.remove(path)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names), tensors=tensors)


if __name__ == "__main__":
  tf.test.main()
