"""Scale out and survive: strategies, crash-resume, atomic export, bad flags.

The binaries run as users run them (subprocesses) on digits.
"""

import functools
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from unittest import mock

import pytest
from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from pipelines import console
from pipelines import train as train_binary  # pylint: disable=unused-import
from pipelines import train_flags
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf import distribute
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.serving import saved_model
from rank4class_tf.training import builders
from rank4class_tf.training import callbacks as callbacks_lib
from rank4class_tf.training import run_guard
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training
import helpers

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

REPO = helpers.REPO
FLAGS = flags.FLAGS


def train_cmd(model_dir, *extra):
  return [sys.executable, "-m", "pipelines.train", "--dataset=digits",
          "--dropout=0", "--deterministic", f"--model_dir={model_dir}",
          *extra]



run = helpers.run_command


# `python -c CRASH_IN_BEST_EXPORT UMASK TRAIN_FLAGS... [--crash=no]`: the
# train binary under umask UMASK (octal) that, unless --crash=no, dies
# (os._exit(9), no clean-up) while writing the best export.
CRASH_IN_BEST_EXPORT = textwrap.dedent("""
    import os, runpy, sys
    from rank4class_tf.serving import saved_model
    os.umask(int(sys.argv[1], 8))
    crash = "--crash=no" not in sys.argv
    write = saved_model.export_saved_model
    def export(model, export_to, *args, **kwargs):
      if crash and export_to.endswith("best_model_by_metric"):
        os.makedirs(os.path.join(os.path.dirname(export_to), ".tmp-killed",
                                 "variables"))
        os._exit(9)
      write(model, export_to, *args, **kwargs)
    saved_model.export_saved_model = export
    sys.argv = ["pipelines.train"] + [a for a in sys.argv[2:]
                                      if a != "--crash=no"]
    runpy.run_module("pipelines.train", run_name="__main__", alter_sys=True)
""")


# `python -c FULL_DISK_AT_EPOCH_2 TRAIN_FLAGS...`: the train binary whose
# write of best.json fails at the second validation as on a full disk.
FULL_DISK_AT_EPOCH_2 = textwrap.dedent("""
    import errno, os, runpy, sys
    from rank4class_tf import fileio
    write = fileio.write_json_atomically
    def full(path, value):
      if isinstance(value, dict) and value.get("epoch") == 2:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
      write(path, value)
    fileio.write_json_atomically = full
    sys.argv = ["pipelines.train"] + sys.argv[1:]
    runpy.run_module("pipelines.train", run_name="__main__", alter_sys=True)
""")


# `python -c KILLED_AFTER_BACKUP EPOCH TRAIN_FLAGS...`: the train binary that
# dies (os._exit(9), no clean-up) once Keras' BackupAndRestore has backed up
# its (1-based) epoch EPOCH, the last callback of the epoch.
KILLED_AFTER_BACKUP = textwrap.dedent("""
    import os, runpy, sys
    import tensorflow as tf
    last = int(sys.argv[1])
    backup = tf.keras.callbacks.BackupAndRestore.on_epoch_end
    def on_epoch_end(self, epoch, logs=None):
      backup(self, epoch, logs)
      if epoch + 1 == last:
        os._exit(9)
    tf.keras.callbacks.BackupAndRestore.on_epoch_end = on_epoch_end
    sys.argv = ["pipelines.train"] + sys.argv[2:]
    runpy.run_module("pipelines.train", run_name="__main__", alter_sys=True)
""")


def tree_state(folder):
  """{relative path: (sha256 or "folder", mtime, ctime)} of every file and
  folder under folder, itself included: a file written, even with the same
  bytes, renamed, or created and removed again changes it."""
  state = {}
  for root, _, files in os.walk(folder):
    for path in [root] + [os.path.join(root, name) for name in files]:
      digest = "folder"
      if path != root:
        with open(path, "rb") as f:
          digest = hashlib.sha256(f.read()).hexdigest()
      info = os.stat(path)
      state[os.path.relpath(path, folder)] = (digest, info.st_mtime_ns,
                                             info.st_ctime_ns)
  return state


def tree_digest(folder):
  """{relative path: sha256} of every file under folder."""
  digests = {}
  for root, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        digests[os.path.relpath(path, folder)] = hashlib.sha256(
            f.read()).hexdigest()
  return digests


def test_metrics(model_dir, export="latest_model"):
  return helpers.evaluate(model_dir, "test", export)


test_metrics.__test__ = False  # Not a pytest test.


def checkpoint_values(model_dir):
  """name -> value of the model weights in the last per-epoch checkpoint."""
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(
      os.path.join(model_dir, "checkpoints")))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
          if n.startswith("layer_with_weights") and "OPTIMIZER" not in n}


# The 20-step run of RunIntegrityTest and FinishedRunTest.
STEPS_20 = ("--train_steps=20", "--eval_every=10")


@functools.lru_cache(maxsize=None)
def finished_run():
  """A finished run of `train_cmd(..., *STEPS_20)` (softmax, dot), trained
  once per pytest process for the classes that start from one; read only:
  a test that changes it works on a copy."""
  model_dir = os.path.join(helpers.process_tempdir(), "finished")
  run(train_cmd(model_dir, *STEPS_20))
  return model_dir


def copy_of(folder):
  """A copy of `folder` in a new temporary folder."""
  copy = os.path.join(tempfile.mkdtemp(), "run")
  shutil.copytree(folder, copy)
  return copy


class ResumeTest(tf.test.TestCase):
  """Interrupted runs, restarted with the same command, end as the run that
  was never interrupted (deterministic ops, no dropout)."""

  # 8 epochs: stopped after the third, the run has five to go.
  EVAL_EVERY = 25
  STEPS = ("--train_steps=200", f"--eval_every={EVAL_EVERY}")

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.whole = os.path.join(tempfile.mkdtemp(), "whole")  # Read only.
    run(train_cmd(cls.whole, *cls.STEPS))
    cls.whole_metrics = test_metrics(cls.whole)
    cls.killed = None  # (folder, epochs backed up) of `killed_copy`.

  def killed_copy(self):
    """A copy of one run SIGKILLed after 3 epochs (killed once per class,
    read only), and the epochs its backup holds."""
    cls = type(self)
    if cls.killed is None:
      folder = os.path.join(tempfile.mkdtemp(), "killed")
      _, killed_after = self.interrupt(folder, signal.SIGKILL)
      cls.killed = (folder, killed_after)
    return copy_of(cls.killed[0]), cls.killed[1]

  def interrupt(self, model_dir, sig, after_epochs=3):
    """Starts the run, sends `sig` once it backed up `after_epochs` epochs;
    returns (the ended process, with its stderr as `stderr_text`, and the
    epochs its backup holds)."""
    proc = subprocess.Popen(train_cmd(model_dir, *self.STEPS), cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 300
    while run_dir_lib.RunDir(model_dir).resume_epoch() < after_epochs:
      self.assertIsNone(proc.poll(), "the run ended before it was stopped")
      self.assertLess(time.time(), deadline)
      time.sleep(0.05)
    proc.send_signal(sig)
    _, proc.stderr_text = proc.communicate(timeout=300)
    return proc, run_dir_lib.RunDir(model_dir).resume_epoch()

  def assert_equals_whole(self, model_dir):
    want, got = checkpoint_values(self.whole), checkpoint_values(model_dir)
    self.assertEqual(set(want), set(got))
    for name in want:
      self.assertAllClose(got[name], want[name], rtol=1e-6, atol=1e-7)
    self.assertEqual(test_metrics(model_dir), self.whole_metrics)

  def test_sigkill_then_restart_equals_uninterrupted_run(self):
    broken, killed_after = self.killed_copy()
    self.assertBetween(killed_after, 3, 7)
    self.assertFalse(os.path.exists(os.path.join(broken, "export")))
    # The kernel dropped the dead run's lock: the restart takes it.
    self.assertTrue(os.path.exists(os.path.join(broken, ".lock")))

    restarted = run(train_cmd(broken, *self.STEPS))
    self.assertIn(f"resuming after epoch {killed_after}.", restarted.stderr)
    self.assertNotIn("Epoch 1/8", restarted.stdout + restarted.stderr)
    self.assert_equals_whole(broken)
    # The best checkpoint survived the restart: best.json holds the best
    # validation value of both halves.
    with open(os.path.join(broken, "best_checkpoint", "best.json")) as f:
      best_broken = json.load(f)
    with open(os.path.join(self.whole, "best_checkpoint", "best.json")) as f:
      best_whole = json.load(f)
    self.assertEqual(best_broken, best_whole)
    self.assertFalse(os.path.exists(os.path.join(broken, ".lock")))

  def test_sigterm_stops_with_one_line_and_resumes(self):
    stopped = os.path.join(tempfile.mkdtemp(), "stopped")
    proc, epochs = self.interrupt(stopped, signal.SIGTERM)
    self.assertEqual(proc.returncode, 1)
    last = proc.stderr_text.strip().splitlines()[-1]
    self.assertRegex(last, r"^train: stopped by SIGTERM at step \d+; the "
                     r"backup of step \d+ \(the last validation\) resumes "
                     r"the run: start the same command again\.$")
    self.assertEqual(int(re.search(r"backup of step (\d+)", last)[1]),
                     epochs * self.EVAL_EVERY)
    self.assertFalse(os.path.exists(os.path.join(stopped, "export")))
    run(train_cmd(stopped, *self.STEPS))
    self.assert_equals_whole(stopped)

  def test_truncated_backup_resumes_from_the_last_intact_checkpoint(self):
    broken, epochs = self.killed_copy()
    # A crash during the backup's write (or a full disk) leaves it short.
    # The backup's newest checkpoint (a kill during a save may leave an
    # older or a temporary one beside it).
    data = tf.train.latest_checkpoint(os.path.join(
        broken, "backup", "chief")) + ".data-00000-of-00001"
    with open(data, "r+b") as f:
      f.truncate(os.path.getsize(data) // 2)
    restarted = run(train_cmd(broken, *self.STEPS))
    self.assertIn("cannot be read", restarted.stderr)
    resumed = re.search(re.escape(f"resuming from {broken}/checkpoints/") +
                        r"ckpt-(\d{4}) \(epoch (\d+)\)", restarted.stderr)
    self.assertIsNotNone(resumed, restarted.stderr[-2000:])
    # The backup's epoch, or the next one when the kill fell between that
    # epoch's checkpoint and its backup.
    self.assertIn(int(resumed[2]), (epochs, epochs + 1))
    self.assertEqual(int(resumed[1]), int(resumed[2]))
    self.assertTrue(os.path.isdir(os.path.join(broken, "backup.unreadable")))
    self.assert_equals_whole(broken)


class RunIntegrityTest(tf.test.TestCase):
  """One configuration per model_dir, one training at a time, no export of
  a diverged model, a full disk reported in one line."""

  STEPS = STEPS_20

  def test_other_flags_refused_until_overwrite_starts_afresh(self):
    model_dir = copy_of(finished_run())  # --loss=softmax.
    shutil.rmtree(os.path.join(model_dir, "export"))  # "Unfinished" again.
    before = tree_digest(model_dir)
    proc = run(train_cmd(model_dir, *self.STEPS, "--loss=approx_ndcg",
                         "--interaction=lc_mlp", "--top_k=3"), check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        f"train: --model_dir={model_dir} holds a run with other settings: "
        "--interaction='lc_mlp' (was 'dot'); --loss='approx_ndcg' (was "
        "'softmax'). Its own flags resume it (or, finished, leave it as it "
        "is); --overwrite deletes it and starts afresh under these.")
    self.assertEqual(tree_digest(model_dir), before)  # Nothing touched.
    # --overwrite: the old run's state goes, not half of it.
    run(train_cmd(model_dir, *self.STEPS, "--loss=approx_ndcg",
                  "--interaction=lc_mlp", "--overwrite"))
    self.assertLen(glob.glob(os.path.join(model_dir, "train", "events.*")),
                   1)
    self.assertEqual(exported_ranker.load_config(model_dir).loss.name, "approx_ndcg")

    # A second training into the same folder while one holds it.
    with run_guard.RunLock(model_dir):
      proc = run(train_cmd(model_dir, *self.STEPS, "--loss=approx_ndcg",
                           "--interaction=lc_mlp", "--overwrite"),
                 check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        f"train: --model_dir={model_dir} is in use by another training (pid "
        f"{os.getpid()}, {model_dir}/.lock); wait for it to end or pass "
        "another --model_dir.")
    self.assertFalse(os.path.exists(os.path.join(model_dir, ".lock")))

    # An export whose scores are not finite is not evaluated.
    data = datasets.get("digits")
    nan_scores = lambda ranker, data, split, batch_size: (
        np.zeros(3, np.int64), np.full([3, 10], np.nan, np.float32))
    with mock.patch.object(exported_ranker, "split_scores", nan_scores):
      with self.assertRaisesRegex(
          ValueError, r"best_model_by_metric gives non-finite scores \(NaN "
          r"or Inf\) to 3 of 3 test instances: the model diverged"):
        exported_ranker.evaluate(model_dir, data, "test")

  def test_diverged_run_stops_without_export(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "nan")
    proc = run(train_cmd(model_dir, *self.STEPS, "--learning_rate=1e9"),
               check=False)
    self.assertEqual(proc.returncode, 1)
    # One step per call: the loss is checked after every step, so the run
    # stops at its first non-finite loss (step 2 here), long before its
    # first validation (step 10).
    self.assertRegex(
        proc.stderr.strip().splitlines()[-1],
        r"^train: training diverged: non-finite loss \((nan|inf)\) by step "
        r"[1-9]; no export written; no validation had passed, so no "
        r"checkpoint was written\. Start again with a lower --learning_rate "
        r"and --overwrite\.$")
    self.assertFalse(os.path.exists(os.path.join(model_dir, "export")))
    self.assertFalse(os.path.exists(os.path.join(model_dir, "checkpoints")))

  def test_full_disk_is_one_line_and_keeps_the_last_checkpoint(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "full")
    proc = run([sys.executable, "-c", FULL_DISK_AT_EPOCH_2,
                *train_cmd(model_dir, *self.STEPS)[3:]], check=False)
    self.assertEqual(proc.returncode, 1, proc.stderr[-2000:])
    record = os.path.join(model_dir, "best_checkpoint", "best.json")
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     f"train: cannot write {record}: No space left on device; "
                     "the checkpoints and exports written before are intact.")
    self.assertIsNone(run_guard.unreadable(
        os.path.join(model_dir, "checkpoints", "ckpt-0001")))
    self.assertFalse(os.path.exists(os.path.join(model_dir, "export")))


class FinishedRunTest(tf.test.TestCase):
  """A scheduler may start a job again after it ended: the same command on
  a finished run exits 0 and changes nothing; only other settings need
  --overwrite; more --train_steps extend the run, and an interrupted
  extension resumes."""

  STEPS = STEPS_20

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.finished = finished_run()  # Read only.

  def copy(self, folder=None):
    return copy_of(folder or self.finished)

  def test_same_command_exits_0_and_touches_nothing(self):
    before = tree_state(self.finished)
    proc = run(train_cmd(self.finished, *self.STEPS))
    with open(os.path.join(self.finished, "best_checkpoint",
                           "best.json")) as f:
      best = json.load(f)
    self.assertEqual(proc.stdout.splitlines(), [
        f"already finished: --model_dir={self.finished} trained its 20 "
        f"steps (best top1_accuracy {best['value']:.4f} at step "
        f"{best['epoch'] * 10}, exported to {self.finished}/export/"
        "best_model_by_metric); nothing changed."])
    # No file written, renamed or removed: not config.json, log.txt, the
    # events, nor a `.lock` made and removed again.
    self.assertEqual(tree_state(self.finished), before)

  def test_other_settings_are_refused_naming_them(self):
    before = tree_state(self.finished)
    proc = run(train_cmd(self.finished, *self.STEPS, "--learning_rate=0.5"),
               check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        f"train: --model_dir={self.finished} holds a run with other "
        "settings: --learning_rate=0.5 (was 0.001). Its own flags resume it "
        "(or, finished, leave it as it is); --overwrite deletes it and "
        "starts afresh under these.")
    self.assertEqual(tree_state(self.finished), before)

  def test_keep_checkpoints_prunes_as_the_extension_trains(self):
    # A finished run with every checkpoint, extended under
    # --keep_checkpoints=1 (a setting that may change): it starts from
    # ckpt-0002 and keeps only the newest and the best.
    extended = self.copy()
    proc = run(train_cmd(extended, "--train_steps=50", "--eval_every=10",
                         "--keep_checkpoints=1"))
    self.assertIn(f"Extending the finished run from {extended}/checkpoints/"
                  "ckpt-0002 (epoch 2) to 50 steps.", proc.stderr)
    self.assertEqual(sorted(os.listdir(os.path.join(extended,
                                                    "checkpoints"))),
                     ["checkpoint", "ckpt-0005.data-00000-of-00001",
                      "ckpt-0005.index"])
    with open(os.path.join(extended, "best_checkpoint", "best.json")) as f:
      best = f"ckpt-{json.load(f)['epoch']:04d}"
    self.assertEqual(sorted(os.listdir(os.path.join(extended,
                                                    "best_checkpoint"))),
                     ["best.json", "checkpoint", f"{best}.data-00000-of-00001",
                      f"{best}.index"])
    self.assertStartsWith(training.already_finished(
        exported_ranker.load_config(extended)), "already finished: ")
    # The best export is the best checkpoint's.
    config = exported_ranker.load_config(extended).replace(model_dir=extended)
    scored = training.checkpoint_scores(config, builders.load_data(config),
                                        ("test",))
    labels, scores = exported_ranker.split_scores(
        exported_ranker.ExportedRanker(extended), builders.load_data(config), "test")
    self.assertAllClose(scored["test"][1], scores, atol=1e-5)
    # A bad value: one line naming the flag, nothing written.
    bad = os.path.join(tempfile.mkdtemp(), "bad")
    proc = run(train_cmd(bad, "--keep_checkpoints=-1"), check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     "train: --keep_checkpoints=-1 must be an integer >= 0 "
                     "(0: keep every checkpoint).")
    self.assertFalse(os.path.exists(bad))

  def test_more_steps_extend_and_an_interrupted_extension_resumes(self):
    steps = ("--train_steps=40", "--eval_every=10")
    # The extension (as before), killed after its first validation's backup.
    killed = self.copy()
    proc = run([sys.executable, "-c", KILLED_AFTER_BACKUP, "3",
                *train_cmd(killed, *steps)[3:]], check=False)
    self.assertEqual(proc.returncode, 9, proc.stderr[-2000:])
    self.assertIn(f"Extending the finished run from {killed}/checkpoints/"
                  "ckpt-0002 (epoch 2) to 40 steps.", proc.stderr)
    # Killed after that epoch's checkpoint, before its backup (the first of
    # an extension): config.json says 40 steps, the exports are the 20-step
    # run's and no backup is there; it goes on from the newest checkpoint.
    unbacked = self.copy(killed)
    shutil.rmtree(os.path.join(unbacked, "backup"))
    config = exported_ranker.load_config(unbacked).replace(model_dir=unbacked)
    self.assertEqual(run_state.extension_start(config),
                     (os.path.join(unbacked, "checkpoints", "ckpt-0003"), 3))
    # The same command resumes the killed extension (it used to be refused).
    proc = run(train_cmd(killed, *steps))
    self.assertIn("resuming after epoch 3.", proc.stderr)
    self.assertIn("Epoch 4/4", proc.stdout)
    self.assertNotIn("Epoch 3/4", proc.stdout)
    self.assertFalse(os.path.exists(os.path.join(killed, "backup")))
    self.assertEqual(exported_ranker.load_config(killed).trainer.train_steps, 40)
    self.assertStartsWith(training.already_finished(
        exported_ranker.load_config(killed)), "already finished: ")


class ExportTest(tf.test.TestCase):

  def test_killed_during_export_rerun_finishes_without_training(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    steps = ["--train_steps=20", "--eval_every=10"]
    # Dies (no clean-up, as SIGKILL) while writing the second export, with
    # a half-written temporary export folder beside the first.
    proc = run([sys.executable, "-c", CRASH_IN_BEST_EXPORT, "022",
                *train_cmd(model_dir, *steps)[3:]], check=False)
    self.assertEqual(proc.returncode, 9, proc.stderr[-2000:])
    export = os.path.join(model_dir, "export")
    self.assertEqual(sorted(os.listdir(export)), [".tmp-killed",
                                                  "latest_model"])
    self.assertTrue(os.path.isdir(os.path.join(model_dir, "backup")))
    latest = test_metrics(model_dir)

    # The same command finishes the exports from the backup: no epoch runs.
    again = run([sys.executable, "-c", CRASH_IN_BEST_EXPORT, "027",
                 *train_cmd(model_dir, *steps)[3:], "--crash=no"])
    self.assertNotIn("Epoch 1/2", again.stdout)
    # Exported from the final checkpoint, not by a `fit` of no epoch over
    # the backup (whose unrestored optimizer slots TensorFlow warns about
    # at exit), and no log line is lost to a closed log file.
    self.assertIn("Training finished before; exporting from", again.stderr)
    self.assertNotIn("Logging error", again.stderr)
    # TensorFlow's warnings once (absl's line), not twice.
    self.assertNotIn("WARNING:tensorflow:", again.stderr)
    self.assertNotIn("Value in checkpoint could not be found", again.stderr)
    self.assertNotIn("Epoch 2/2", again.stdout)
    self.assertEqual(sorted(os.listdir(export)),
                     ["best_model_by_metric", "latest_model"])
    self.assertFalse(os.path.exists(os.path.join(model_dir, "backup")))
    self.assertEqual(test_metrics(model_dir), latest)
    record = os.path.join(model_dir, "best_checkpoint", "best.json")
    with open(record) as f:
      value = json.load(f)["value"]
    # The best export holds the best checkpoint: its validation top-1 is
    # the best validation value.
    best_validation = lambda: helpers.evaluate(
        model_dir, "validation", "best_model_by_metric")["top1_accuracy"]
    self.assertAllClose(best_validation(), value, atol=1e-6)
    # Exports get the user's umask (027 here), not mkdtemp's 0700.
    for name in ("best_model_by_metric", "latest_model"):
      self.assertEqual(
          os.stat(os.path.join(export, name)).st_mode & 0o777, 0o750, name)

    # Backup gone too (a run of release 0.1): exported from the final
    # checkpoint, again without training.
    shutil.rmtree(os.path.join(export, "best_model_by_metric"))
    again = run(train_cmd(model_dir, *steps))
    self.assertIn("Training finished before; exporting from", again.stderr)
    self.assertNotIn("Epoch 1/2", again.stdout)
    self.assertEqual(test_metrics(model_dir), latest)
    self.assertAllClose(best_validation(), value, atol=1e-6)

    # best.json lost or emptied: rebuilt from the validation logs.
    for content in (None, ""):
      if content is None:
        os.remove(record)
      else:
        with open(record, "w") as f:
          f.write(content)
      self.assertEqual(callbacks_lib.read_best(record, "val_top1_accuracy",
                                          model_dir, 2), value)
    os.rename(os.path.join(model_dir, "validation"),
              os.path.join(model_dir, "validation.away"))
    with self.assertRaisesRegex(ValueError, "^" + re.escape(record) +
                                " is missing or unreadable"):
      callbacks_lib.read_best(record, "val_top1_accuracy", model_dir, 2)

  def test_an_export_of_the_same_weights_is_a_copy(self):
    config = config_lib.TrainConfig.create(model_dir=tempfile.mkdtemp(),
                                           train_steps=1, eval_every=1)
    pipeline = builders.build_pipeline(config, datasets.get("digits"))
    model = pipeline.model_builder.build()
    scorers = []
    scoring_function = saved_model.scoring_function
    self.enter_context(mock.patch.object(
        saved_model, "scoring_function",
        lambda *args: scorers.append(scoring_function(*args)) or scorers[-1]))
    saved = []
    save = model.save
    model.save = lambda path, **kwargs: (saved.append(path),
                                         save(path, **kwargs))
    export = lambda name: os.path.join(config.trainer.model_dir, "export",
                                       name)
    pipeline.export_saved_model(model, export("first"))
    pipeline.export_saved_model(model, export("same"))
    self.assertLen(saved, 1)  # Copied, not saved again.
    self.assertEqual(tree_digest(export("same")), tree_digest(export("first")))
    self.assertIn("calibration.json", os.listdir(export("same")))
    # One weight one float apart: saved, and it serves other scores.
    kernel = model.weights[0]
    value = kernel.numpy()
    value.flat[0] = np.nextafter(value.flat[0], np.float32(np.inf))
    kernel.assign(value)
    pipeline.export_saved_model(model, export("other"))
    self.assertLen(saved, 2)
    images = tf.constant(datasets.get("digits").splits["test"][0][:8])
    scores = {name: tf.saved_model.load(export(name)).signatures[
        "serving_default"](image=images)["scores"].numpy()
              for name in ("first", "same", "other")}
    self.assertAllEqual(scores["same"], scores["first"])
    self.assertNotAllEqual(scores["other"], scores["first"])
    # The other weights' export reused the model's one trace (issue 60).
    self.assertLen(scorers, 1)
    self.assertEqual(scorers[0].experimental_get_tracing_count(), 1)

  def test_interrupted_export_leaves_no_loadable_folder(self):
    config = config_lib.TrainConfig.create(model_dir=tempfile.mkdtemp(),
                                           train_steps=1, eval_every=1)
    data = datasets.get("digits")
    pipeline = builders.build_pipeline(config, data)
    model = pipeline.model_builder.build()
    export_to = os.path.join(config.trainer.model_dir, "export", "latest_model")

    def crash(path, **kwargs):
      os.makedirs(os.path.join(path, "variables"))
      with open(os.path.join(path, "saved_model.pb"), "wb") as f:
        f.write(b"half")
      raise KeyboardInterrupt("killed during export")

    model.save = crash
    with self.assertRaises(KeyboardInterrupt):
      pipeline.export_saved_model(model, export_to)
    self.assertFalse(os.path.exists(export_to))
    self.assertEqual(os.listdir(os.path.dirname(export_to)), [])


class StrategyTest(tf.test.TestCase):

  STEPS = ("--train_steps=40", "--eval_every=20", "--batch_size=64")

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # The single-device run both strategies are compared with (read only).
    cls.single = os.path.join(tempfile.mkdtemp(), "single")
    run(train_cmd(cls.single, *cls.STEPS))

  def test_mirrored_on_two_cpu_devices_matches_default(self):
    mirrored = os.path.join(tempfile.mkdtemp(), "mirrored")
    proc = run(train_cmd(mirrored, *self.STEPS, "--strategy=mirrored",
                         "--cpu_devices=2"))
    self.assertIn("2 replica(s); global batch 64 = 32 per replica",
                  proc.stderr)
    a, b = test_metrics(self.single), test_metrics(mirrored)
    for name in ("top1_accuracy", "ndcg@5", "mrr"):
      self.assertAllClose(a[name], b[name], atol=0.02, msg=name)

  def test_multi_worker_mirrored_two_processes(self):
    ports = []
    for _ in range(2):
      with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ports.append(s.getsockname()[1])
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
               "worker": [f"127.0.0.1:{ports[1]}"]}
    model_dir = os.path.join(tempfile.mkdtemp(), "mwms")
    steps = [*self.STEPS, "--strategy=multi_worker_mirrored"]
    procs = []
    for task in ("chief", "worker"):
      env = dict(os.environ, TF_CONFIG=json.dumps(
          {"cluster": cluster, "task": {"type": task, "index": 0}}))
      procs.append(subprocess.Popen(
          train_cmd(model_dir, *steps), cwd=REPO, env=env, text=True,
          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outputs):
      self.assertEqual(p.returncode, 0, err[-3000:])
      self.assertIn("2 replica(s); global batch 64 = 32 per replica", err)
    # The chief wrote the run; the worker left nothing behind; both saw the
    # same metrics.
    for name in ("config.json", "classes.json",
                 "export/best_model_by_metric/saved_model.pb",
                 "export/latest_model/saved_model.pb"):
      self.assertTrue(os.path.exists(os.path.join(model_dir, name)), name)
    self.assertCountEqual(
        os.listdir(model_dir),
        ["best_checkpoint", "checkpoints", "classes.json", "config.json",
         "data.json", "export", "log.txt", "serving.json", "train",
         "validation"])
    last = [[l for l in out.splitlines() if "val_top1_accuracy" in l][-1]
            for out, _ in outputs]
    value = lambda line: float(line.split("val_top1_accuracy: ")[1].split()[0])
    self.assertEqual(value(last[0]), value(last[1]))
    a, b = test_metrics(self.single), test_metrics(model_dir)
    self.assertAllClose(a["top1_accuracy"], b["top1_accuracy"], atol=0.05)

  def test_tpu_and_parameter_server_resolvers(self):
    resolver = distribute.cluster_resolver("tpu", "grpc://10.240.1.2:8470")
    self.assertIsInstance(resolver,
                          tf.distribute.cluster_resolver.TPUClusterResolver)
    self.assertEqual(resolver.master(), "grpc://10.240.1.2:8470")
    tf_config = {"cluster": {"chief": ["127.0.0.1:2000"],
                             "worker": ["127.0.0.1:2001", "127.0.0.1:2002"],
                             "ps": ["127.0.0.1:2003"]},
                 "task": {"type": "chief", "index": 0}}
    with flagsaver.flagsaver():
      old = os.environ.get("TF_CONFIG")
      os.environ["TF_CONFIG"] = json.dumps(tf_config)
      try:
        resolver = distribute.cluster_resolver("parameter_server")
        spec = resolver.cluster_spec().as_dict()
        task_type = resolver.task_type
      finally:
        if old is None:
          del os.environ["TF_CONFIG"]
        else:
          os.environ["TF_CONFIG"] = old
    self.assertEqual(spec["ps"], ["127.0.0.1:2003"])
    self.assertLen(spec["worker"], 2)
    self.assertEqual(task_type, "chief")
    self.assertIsNone(distribute.cluster_resolver("mirrored"))
    with flagsaver.flagsaver():
      os.environ["TF_CONFIG"] = json.dumps(
          {"cluster": {"worker": ["127.0.0.1:2001", "127.0.0.1:2002"]},
           "task": {"type": "worker", "index": 0}})
      try:
        with self.assertRaisesRegex(ValueError, "needs TF_CONFIG to describe "
                                    "the cluster with a 'chief' task"):
          distribute.cluster_resolver("multi_worker_mirrored")
      finally:
        del os.environ["TF_CONFIG"]


class EveryFlagTest(tf.test.TestCase, parameterized.TestCase):
  """Every flag with a bad value fails before anything is written."""

  @parameterized.parameters(
      "--batch_size=-1", "--batch_size=0", "--train_steps=0",
      "--eval_every=-5", "--learning_rate=0", "--learning_rate=-1e-3",
      "--mlp_units=0", "--encoder_dim=0", "--top_k=0", "--cpu_devices=0",
      "--sample_size=0", "--temperature=0", "--gumbel_temperature=-1",
      "--rescaled_mse_k=0", "--dropout=1.5", "--dropout=-0.1",
      "--max_seq_length=2", "--optimizer=sgd", "--strategy=gpu",
      "--loss=hinge", "--interaction=bilinear", "--encoder=vit",
      "--dataset=mnist", "--metrics=top0_accuracy", "--best_metric=map",
      "--encoder_size=huge", "--model_dir=", "--seed=-1",
      "--seed=4294967296", "--patience=-1", "--lr_schedule=step",
      "--warmup_steps=-1", "--warmup_steps=2000", "--split_rule=hash",
      "--cosine_fusion=1.5", "--seen_margin=inf", "--class_projection=sparse",
  )
  def test_bad_value(self, flag):
    argv = ["train", "--model_dir=/tmp/never_written", flag]
    if flag == "--encoder_size=huge":
      argv += ["--dataset=goemotions", "--encoder=bert"]
    name = flag.split("=")[0]
    with flagsaver.flagsaver():
      FLAGS.unparse_flags()
      FLAGS(argv)
      # One line naming the setting (argument terms), which the binary
      # words as the flag.
      with self.assertRaisesRegex(ValueError,
                                  "^[^\n]*" + re.escape(f"`{name[2:]}`")
                                  + "[^\n]*$") as raised:
        checks.validate(train_flags.config_from_flags())
      self.assertIn(name, console.flag_terms(str(raised.exception)))
    self.assertFalse(os.path.exists("/tmp/never_written"))

  @parameterized.parameters("--batch_size=abc", "--learning_rate=fast",
                            "--deterministic=maybe", "--train_steps=1.5")
  def test_wrong_type(self, flag):
    with flagsaver.flagsaver():
      FLAGS.unparse_flags()
      with self.assertRaises(flags.IllegalFlagValueError):
        FLAGS(["train", flag])

  def test_binary_exits_one_and_writes_nothing(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    proc = run(train_cmd(model_dir, "--batch_size=abc"), check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertIn("flag --batch_size=abc", proc.stderr)
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()
