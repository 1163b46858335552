"""A run's folder on another file system than the local disk.

`model_dir` and `feature_cache_dir` go through `fileio` (local paths through
`os`, anything else through `tf.io.gfile`), so a run can live in a bucket
(`gs://`). These tests use TensorFlow's in-memory `ram://`, which lives in
the process: a digits run trained, interrupted and resumed there, its
exports loaded and scored like those of the same run on the local disk; the
guards (`run_guard`), the log of `pipelines.train` and a feature cache
there.
"""

import hashlib
import logging as py_logging
import os
import tempfile
from unittest import mock
import uuid

import numpy as np
import pytest
import tensorflow as tf

from pipelines import console
from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.data import datasets
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_guard
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training
import helpers
import test_feature_cache
import test_text_pipelines


def ram_folder(name: str) -> str:
  """A new folder name on `ram://` (the file system lives as long as the
  process: each test takes its own)."""
  return f"ram://{name}-{uuid.uuid4().hex[:8]}"


def write(path: str, text: str = "x") -> None:
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(text)


def tree_digest(folder: str):
  """{relative path: sha256} of every file under folder (any storage)."""
  digests = {}
  for root, _, files in tf.io.gfile.walk(folder):
    for name in files:
      with tf.io.gfile.GFile(f"{root}/{name}", "rb") as f:
        digests[f"{root}/{name}"[len(folder) + 1:]] = hashlib.sha256(
            f.read()).hexdigest()
  return digests


class CopyFolderTest(tf.test.TestCase):
  """`fileio.copy_folder` between the local disk and `ram://`."""

  def test_copies_every_file_into_place(self):
    local = os.path.join(tempfile.mkdtemp(), "source")
    ram = ram_folder("source")
    for root in (local, ram):
      for name, text in (("a.txt", "a"), ("variables/v.data", "v" * 3000),
                         ("assets/vocab.txt", "x\ny")):
        fileio.makedirs(os.path.dirname(f"{root}/{name}"))
        fileio.write_text_atomically(f"{root}/{name}", text)
    want = tree_digest(local)
    self.assertEqual(tree_digest(ram), want)
    for source in (local, ram):
      for target in (os.path.join(tempfile.mkdtemp(), "t"),
                     ram_folder("target")):
        fileio.makedirs(target)
        fileio.write_text_atomically(f"{target}/a.txt", "old")
        fileio.write_text_atomically(f"{target}/kept.txt", "k")
        fileio.copy_folder(source, target)
        self.assertEqual(tree_digest(target), dict(
            want, **{"kept.txt": hashlib.sha256(b"k").hexdigest()}),
                         f"{source} -> {target}")


@pytest.mark.slow
class RamRunTest(tf.test.TestCase):
  """A digits run on `ram://`, stopped after its first validation and
  started again, against the same run trained whole on the local disk."""

  @classmethod
  def config(cls, model_dir):
    return config_lib.TrainConfig.create(
        dataset="digits", dropout=0.0, deterministic=True, train_steps=10,
        eval_every=5, model_dir=model_dir)

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.local = cls.config(os.path.join(tempfile.mkdtemp(), "run"))
    training.train(cls.local)
    cls.ram = cls.config(ram_folder("run"))

    helpers.train_killed_after_first_validation(cls.ram)
    run = run_dir_lib.RunDir(cls.ram.trainer.model_dir)
    cls.killed = (run.resume_epoch(), run.has_backup(),
                  training.already_finished(cls.ram))
    cls.exported = training.train(cls.ram)  # Resumes after epoch 1.
    cls.data = builders.load_data(cls.local)

  def test_the_run_folder_is_on_ram(self):
    model_dir = self.ram.trainer.model_dir
    run = run_dir_lib.RunDir(model_dir)
    self.assertEqual(self.exported, run.export(run_dir_lib.BEST_EXPORT))
    files = set(tree_digest(model_dir))
    for name in ("config.json", "classes.json", "serving.json",
                 "checkpoints/ckpt-0002.index", "best_checkpoint/best.json",
                 "export/best_model_by_metric/saved_model.pb",
                 "export/best_model_by_metric/calibration.json",
                 "export/latest_model/saved_model.pb",
                 "export/latest_model/calibration.json"):
      self.assertIn(name, files)
    self.assertTrue(any(name.startswith("validation/events.out.tfevents")
                        for name in files))
    # Nothing left of the backup, the exports' temporary folders or a lock.
    self.assertEmpty([name for name in files if name.startswith("backup")
                      or fileio.TMP_MARK in name or name == ".lock"])
    self.assertFalse(run.has_backup())
    self.assertEqual(exported_ranker.load_config(model_dir).flat(),
                     builders.resolve_defaults(self.ram).flat())
    self.assertEqual(run.best()["epoch"], 2)
    # The best checkpoint is the final one: the best export, a copy of the
    # latest (`fileio.copy_folder` on ram://), holds the same files.
    self.assertEqual(tree_digest(run.export(run_dir_lib.BEST_EXPORT)),
                     tree_digest(run.export(run_dir_lib.LATEST_EXPORT)))
    # And nothing on the local disk (a `ram:` folder in the working folder).
    self.assertFalse(os.path.exists("ram:"))

  def test_stopped_run_resumed_from_its_backup_on_ram(self):
    resume_epoch, had_backup, finished = self.killed
    self.assertEqual(resume_epoch, 1)
    self.assertTrue(had_backup)
    self.assertIsNone(finished)

  def test_finished_run_is_left_as_it_is(self):
    self.assertTrue(run_state.is_trained(self.ram))
    line = training.already_finished(self.ram)
    self.assertStartsWith(line, "already finished: `model_dir`=ram://")
    before = tree_digest(self.ram.trainer.model_dir)
    self.assertEqual(training.train(self.ram), self.exported)
    self.assertEqual(tree_digest(self.ram.trainer.model_dir), before)

  def test_exports_score_as_the_local_runs(self):
    for export in run_dir_lib.EXPORTS:
      on_ram = exported_ranker.ExportedRanker(self.ram.trainer.model_dir, export)
      local = exported_ranker.ExportedRanker(self.local.trainer.model_dir, export)
      self.assertIsNotNone(on_ram.calibration)
      self.assertEqual(on_ram.class_names, local.class_names)
      _, ram_scores = exported_ranker.split_scores(on_ram, self.data, "test")
      _, local_scores = exported_ranker.split_scores(local, self.data, "test")
      self.assertAllEqual(ram_scores, local_scores)
    # As pipelines.evaluate reads a run: its config, then its export.
    model_dir = self.ram.trainer.model_dir
    data = datasets.from_config(exported_ranker.load_config(model_dir).data)
    self.assertEqual(exported_ranker.evaluate(model_dir, data, "test"),
                     exported_ranker.evaluate(self.local.trainer.model_dir, data,
                                      "test"))


class RunGuardTest(tf.test.TestCase):
  """`run_guard` on `ram://`: the model_dir checks, `--overwrite`'s clean-up,
  the lock that is not taken and an unreadable backup moved aside."""

  def test_check_model_dir(self):
    folder = ram_folder("guard")
    run_guard.check_model_dir(folder, overwrite=False)  # New: fine.
    write(f"{folder}/notes.txt")
    with self.assertRaisesRegex(ValueError, r"holds files no run of "
                                r"rank4class_tf wrote \(notes.txt\) and no "
                                "run's config.json"):
      run_guard.check_model_dir(folder, overwrite=False)
    write(f"{folder}/config.json", "{}")
    with self.assertRaisesRegex(ValueError, r"\(notes.txt\); `overwrite` "
                                "removes a run's own files only"):
      run_guard.check_model_dir(folder, overwrite=True)
    with self.assertRaisesRegex(ValueError, r"^`model_dir`=ram://.*/notes.txt "
                                "is a file, not a folder.$"):
      run_guard.check_model_dir(f"{folder}/notes.txt", overwrite=False)
    with self.assertRaisesRegex(ValueError, r"^`model_dir`=nofs://bucket/run "
                                "cannot be reached: File system scheme "
                                "'nofs' not implemented"):
      run_guard.check_model_dir("nofs://bucket/run", overwrite=False)

  def test_clear_state_removes_the_runs_files_only(self):
    folder = ram_folder("clear")
    for name in ("config.json", "checkpoints/ckpt-0001.index",
                 "export/latest_model/saved_model.pb", "backup/chief/x",
                 "log.txt", "feature_cache/key/key.json"):
      write(f"{folder}/{name}")
    self.assertEqual(run_guard.foreign_entries(folder), [])
    run_guard.clear_state(folder)
    self.assertCountEqual(tree_digest(folder),
                          ["log.txt", "feature_cache/key/key.json"])
    self.assertFalse(run_dir_lib.RunDir(folder).has_backup())

  def test_is_trained_on_ram_needs_the_backup_gone(self):
    # An export folder there is copied into place file by file: whole only
    # once the backup, deleted after both exports, is gone.
    for folder in (ram_folder("trained"),
                   os.path.join(tempfile.mkdtemp(), "trained")):
      config = RamRunTest.config(folder)
      run = run_dir_lib.RunDir(folder)
      for name in ("checkpoints/ckpt-0002.index", "backup/chief/checkpoint",
                   "export/latest_model/saved_model.pb",
                   "export/best_model_by_metric/saved_model.pb"):
        write(os.path.join(folder, name))
      self.assertEqual(run_state.is_trained(config), fileio.is_local(folder))
      fileio.rmtree(run.backup)
      self.assertTrue(run_state.is_trained(config))

  def test_no_lock_on_ram(self):
    folder = ram_folder("lock")
    with run_guard.RunLock(folder), run_guard.RunLock(folder):
      self.assertFalse(fileio.exists(run_dir_lib.RunDir(folder).lock_file))
    self.assertFalse(os.path.exists("ram:"))

  def test_unreadable_backup_is_moved_aside(self):
    folder = ram_folder("backup")
    run = run_dir_lib.RunDir(folder)
    write(f"{run.chief_backup}/checkpoint",
          'model_checkpoint_path: "ckpt-3"\n')
    write(f"{run.chief_backup}/ckpt-3.index", "not a checkpoint")
    write(f"{run.chief_backup}/ckpt-3.data-00000-of-00001", "")
    tf.train.Checkpoint(v=tf.Variable(1.0)).write(run.checkpoint(2))
    self.assertEqual(run_guard.recover_backup(folder),
                     (run.checkpoint(2), 2))
    self.assertFalse(run.has_backup())
    self.assertCountEqual(
        tree_digest(run.unreadable_backup),
        ["chief/checkpoint", "chief/ckpt-3.index",
         "chief/ckpt-3.data-00000-of-00001"])


class RunLogTest(tf.test.TestCase):
  """`pipelines.train`'s log.txt on `ram://`: rewritten whole (no append on
  a bucket), nothing before the run has started."""

  def test_log_on_ram(self):
    folder = ram_folder("log")
    run = run_dir_lib.RunDir(folder)
    write(run.log_file, "an earlier start\n")
    handler = console._RunFolderHandler(  # pylint: disable=protected-access
        run.log_file, started_by=run.config_file)
    handler.setFormatter(py_logging.Formatter("%(message)s"))

    def log(message):
      handler.handle(py_logging.LogRecord("t", py_logging.INFO, "f", 1,
                                          message, None, None))

    with mock.patch.object(console, "REMOTE_WRITE_SECONDS", 0.0):
      log("refused?")
      self.assertEqual(fileio.read_text(run.log_file), "an earlier start\n")
      write(run.config_file, "{}")  # The run has started.
      log("started")
      self.assertEqual(fileio.read_text(run.log_file),
                       "an earlier start\nrefused?\nstarted\n")
    log("within the interval")
    handler.close()
    self.assertEqual(fileio.read_text(run.log_file),
                     "an earlier start\nrefused?\nstarted\n"
                     "within the interval\n")


@pytest.mark.slow
class FeatureCacheTest(tf.test.TestCase):
  """A frozen MiniLM's feature cache built on `ram://` holds the values of
  the same cache built on the local disk, and is read back, not rebuilt."""

  def test_cache_on_ram(self):
    data = datasets.get("goemotions",
                        test_text_pipelines.goemotions_fixture())
    spec = test_feature_cache.spec()
    cache_dir = ram_folder("cache")
    lines = []
    cache = feature_cache.load(cache_dir, spec, data, progress=lines.append)
    self.assertLen(lines, 3)  # One line per split built.
    self.assertStartsWith(cache.folder, cache_dir)
    self.assertCountEqual(
        fileio.listdir(cache.folder),
        [feature_cache.KEY_FILE] + [f"{split}.features.npy"
                                    for split in data.splits])
    again = feature_cache.load(cache_dir, spec, data, progress=lines.append)
    self.assertLen(lines, 3)  # Read back.
    local = feature_cache.load(tempfile.mkdtemp(), spec, data)
    for split in data.splits:
      for built in (cache, again):
        values, labels = built.data.splits[split]
        self.assertAllClose(values, local.data.splits[split][0], atol=1e-6)
        self.assertAllEqual(labels, local.data.splits[split][1])
    self.assertEqual(os.path.basename(cache.folder),
                     os.path.basename(local.folder))
    self.assertIsInstance(cache.data.splits["test"][0], np.ndarray)


if __name__ == "__main__":
  tf.test.main()
