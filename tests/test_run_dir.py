"""Tests of rank4class_tf.run_dir: the run folder's paths and facts."""

import json
import os
import tempfile

import tensorflow as tf

from rank4class_tf import run_dir as run_dir_lib


class RunDirTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.path = tempfile.mkdtemp()
    self.run = run_dir_lib.RunDir(self.path)

  def test_paths(self):
    self.assertEqual(self.run.checkpoint(12),
                     os.path.join(self.path, "checkpoints", "ckpt-0012"))
    self.assertEqual(self.run.best_record,
                     os.path.join(self.path, "best_checkpoint", "best.json"))
    self.assertEqual(self.run.export(run_dir_lib.LATEST_EXPORT),
                     os.path.join(self.path, "export", "latest_model"))
    # Keras' `{epoch:04d}` pattern names the same file as `checkpoint`.
    self.assertEqual(run_dir_lib.CHECKPOINT_PATTERN.format(epoch=12),
                     "ckpt-0012")

  def test_facts_of_an_empty_folder(self):
    self.assertIsNone(self.run.best())
    self.assertIsNone(self.run.best_step(100))
    self.assertIsNone(self.run.best_checkpoint())
    self.assertEqual(self.run.resume_epoch(), 0)
    self.assertEqual(self.run.checkpoint_epochs(), [])
    self.assertFalse(self.run.has_exports())
    self.assertFalse(self.run.has_backup())
    self.assertEqual(self.run.validation_curves(), {})

  def test_best_step_and_checkpoints(self):
    os.makedirs(self.run.best_checkpoints)
    with open(self.run.best_record, "w") as f:
      json.dump({"epoch": 3, "monitor": "val_top1_accuracy", "value": 0.5},
                f)
    self.assertEqual(self.run.best_step(250), 750)
    os.makedirs(self.run.checkpoints)
    for name in ("ckpt-0002.index", "ckpt-0010.index", "ckpt-0001.index",
                 "ckpt-0002.data-00000-of-00001", "checkpoint"):
      open(os.path.join(self.run.checkpoints, name), "w").close()
    self.assertEqual(self.run.checkpoint_epochs(), [1, 2, 10])
    self.assertTrue(self.run.has_checkpoint(10))
    self.assertFalse(self.run.has_checkpoint(3))

  def test_prune_keeps_the_newest_and_the_best(self):
    def touch(folder, *names):
      os.makedirs(folder, exist_ok=True)
      for name in names:
        open(os.path.join(folder, name), "w").close()

    def files(ckpt):
      return (f"{ckpt}.index", f"{ckpt}.data-00000-of-00002",
              f"{ckpt}.data-00001-of-00002")

    for epoch in (1, 2, 3, 10):
      touch(self.run.checkpoints, *files(f"ckpt-{epoch:04d}"))
    touch(self.run.checkpoints, "checkpoint")
    for epoch in (1, 3):
      touch(self.run.best_checkpoints, *files(f"ckpt-{epoch:04d}"))
    touch(self.run.best_checkpoints, "best.json")
    with open(os.path.join(self.run.best_checkpoints, "checkpoint"),
              "w") as f:  # The state file `tf.train.latest_checkpoint` reads.
      f.write('model_checkpoint_path: "ckpt-0003"\n')
    deleted = self.run.prune_checkpoints(2)
    self.assertEqual(deleted, [
        self.run.checkpoint(1), self.run.checkpoint(2),
        os.path.join(self.run.best_checkpoints, "ckpt-0001")])
    self.assertEqual(sorted(os.listdir(self.run.checkpoints)),
                     sorted(["checkpoint", *files("ckpt-0003"),
                             *files("ckpt-0010")]))
    self.assertEqual(sorted(os.listdir(self.run.best_checkpoints)),
                     sorted(["best.json", "checkpoint", *files("ckpt-0003")]))
    self.assertEqual(self.run.prune_checkpoints(2), [])  # Nothing left.
    self.assertEqual(self.run.prune_checkpoints(1), [self.run.checkpoint(3)])
    with self.assertRaisesRegex(ValueError, "must be >= 1 to prune"):
      self.run.prune_checkpoints(0)

  def test_exports_need_both_saved_models(self):
    for name in run_dir_lib.EXPORTS:
      os.makedirs(self.run.export(name))
    self.assertTrue(self.run.has_export_folders())
    self.assertFalse(self.run.has_exports())
    for name in run_dir_lib.EXPORTS:
      open(os.path.join(self.run.export(name), "saved_model.pb"), "w").close()
    self.assertTrue(self.run.has_exports())

  def test_validation_curves_from_events(self):
    writer = tf.summary.create_file_writer(self.run.validation_events)
    with writer.as_default():
      for epoch, value in ((0, 0.25), (1, 0.5), (1, 0.75)):
        tf.summary.scalar("epoch_top1_accuracy", value, step=epoch)
    writer.close()
    # A resumed run may write an epoch twice: the later value wins.
    self.assertEqual(self.run.validation_curves(),
                     {"top1_accuracy": {0: 0.25, 1: 0.75}})


if __name__ == "__main__":
  tf.test.main()
