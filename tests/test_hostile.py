"""The hostile probe's cases for training and serving (docs/testing.md;
`serving/exported_ranker.py`: damaged exports and configs, class names).

Each case ends correct, or with one line naming the file or flag and exit 1,
nothing lost or half-written: asserted on the message, the exit code (where
the binary is run) and the folder's contents (hashes where nothing may
change). Most cases call the library in-process (the binaries print the
ValueError's line after `train: ` and exit 1, which the binary cases check);
a tiny digits run is trained once for the serving cases.
"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import pytest
import numpy as np
import tensorflow as tf

from pipelines import console
from pipelines import line_input
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.serving import saved_model
from rank4class_tf.training import run_guard
from rank4class_tf.training import trainer as training
import helpers
from test_study_hostile import nobody_can_run_python


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


def digits_config(model_dir, **kwargs):
  values = dict(dataset="digits", train_steps=20, eval_every=10,
                dropout=0.0, deterministic=True, model_dir=model_dir)
  values.update(kwargs)
  return config_lib.TrainConfig.create(**values)


def can_mount() -> bool:
  if os.geteuid() != 0 or not shutil.which("mount"):
    return False
  folder = tempfile.mkdtemp()
  ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                       folder], capture_output=True).returncode == 0
  if ok:
    subprocess.run(["umount", folder], check=True)
  return ok


NOBODY = 65534
# Root without the capabilities that bypass file permissions.
_NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
           "--inh-caps=-dac_override,-dac_read_search"]


def without_write_permission():
  """How to run a command that may not write into a folder owned by
  `nobody` with mode 0755 (call as root): (command prefix, preexec_fn).

  As `nobody` where it can run this interpreter on the repository; else as
  root without CAP_DAC_OVERRIDE (`setpriv`), which leaves root the
  permissions of any other user on that folder. The reason, where neither
  works."""
  user = nobody_can_run_python()
  if not isinstance(user, str):
    return [], lambda: (os.setgid(user[1]), os.setuid(user[0]))
  if not shutil.which("setpriv"):
    return f"{user}; no setpriv to drop root's capabilities"
  folder = tempfile.mkdtemp()
  os.chown(folder, NOBODY, NOBODY)
  os.chmod(folder, 0o755)
  probe = subprocess.run([*_NO_DAC, sys.executable, "-c",
                          f"open({os.path.join(folder, 'x')!r}, 'w')"],
                         capture_output=True)
  if b"PermissionError" not in probe.stderr:
    return (f"{user}; setpriv does not take root's permissions away "
            f"({probe.stderr.decode(errors='replace').strip()[-200:]})")
  return _NO_DAC, None


class OverwriteTest(tf.test.TestCase):
  """Case 1: --overwrite removes only what a run of this package wrote."""

  def test_foreign_files_are_named_and_kept(self):
    folder = tempfile.mkdtemp()
    os.makedirs(os.path.join(folder, "train"))
    with open(os.path.join(folder, "train", "data.csv"), "w") as f:
      f.write("keep\n")
    with open(os.path.join(folder, "notes.txt"), "w") as f:
      f.write("mine\n")
    before = tree_digest(folder)
    self.assertEqual(run_guard.foreign_entries(folder),
                     ["notes.txt", "train/data.csv"])
    # No config.json: not a run's folder, with or without `overwrite`.
    for overwrite in (False, True):
      with self.assertRaisesRegex(
          ValueError, r"^`model_dir`=.* holds files no run of rank4class_tf "
          r"wrote \(notes.txt, train/data.csv\) and no run's config.json: "
          r"it is not a run's folder; choose an empty or new `model_dir`\.$"):
        training.train(digits_config(folder, overwrite=overwrite))
      self.assertEqual(tree_digest(folder), before)
    # A run's folder with the user's files in it: `overwrite` refuses.
    with open(os.path.join(folder, "config.json"), "w") as f:
      f.write(digits_config(folder).to_json())
    before = tree_digest(folder)
    with self.assertRaisesRegex(
        ValueError, r"^`model_dir`=.* holds files no run of rank4class_tf "
        r"wrote \(notes.txt, train/data.csv\); `overwrite` removes a run's "
        r"own files only: move them, or choose another `model_dir`\.$"):
      training.train(digits_config(folder, overwrite=True))
    self.assertEqual(tree_digest(folder), before)

  def test_a_run_folder_holds_nothing_foreign(self):
    folder = tempfile.mkdtemp()
    for name in ("train/events.out.tfevents.1.host.v2",
                 "validation/events.out.tfevents.2.host.v2",
                 "checkpoints/checkpoint", "checkpoints/ckpt-0001.index",
                 "best_checkpoint/best.json", "backup/chief/anything",
                 "export/latest_model/saved_model.pb", "export/.tmp-x/a",
                 "config.json", "classes.json", "serving.json", "log.txt",
                 "data.json",
                 ".lock", "study.log", "study_result.json",
                 "study_test.npz", "study_result.json.damaged",
                 "events.out.tfevents.3.host.study_hparams",
                 "feature_cache/k/train.features.npy"):
      path = os.path.join(folder, name)
      os.makedirs(os.path.dirname(path), exist_ok=True)
      open(path, "w").close()
    self.assertEqual(run_guard.foreign_entries(folder), [])
    open(os.path.join(folder, "checkpoints", "my.txt"), "w").close()
    self.assertEqual(run_guard.foreign_entries(folder),
                     ["checkpoints/my.txt"])
    # A file where a run keeps a folder, and a file beside Keras' backups.
    shutil.rmtree(os.path.join(folder, "validation"))
    open(os.path.join(folder, "validation"), "w").close()
    open(os.path.join(folder, "backup", "mine.csv"), "w").close()
    self.assertEqual(run_guard.foreign_entries(folder),
                     ["backup/mine.csv", "checkpoints/my.txt", "validation"])

  def test_binary(self):
    folder = tempfile.mkdtemp()
    os.makedirs(os.path.join(folder, "train"))
    with open(os.path.join(folder, "train", "data.csv"), "w") as f:
      f.write("keep\n")
    proc = helpers.run_module(
        "pipelines.train", "--dataset=digits", "--train_steps=100",
        "--eval_every=100", f"--model_dir={folder}", "--overwrite",
        check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     f"train: --model_dir={folder} holds files no run of "
                     "rank4class_tf wrote (train/data.csv) and no run's "
                     "config.json: it is not a run's folder; choose an empty "
                     "or new --model_dir.")
    self.assertNotIn("Traceback", proc.stderr)
    self.assertEqual(tree_digest(folder), {
        "train/data.csv": hashlib.sha256(b"keep\n").hexdigest()})


class ModelDirTest(tf.test.TestCase):
  """Cases 4, 7 and 10: refused before the first write, in one line."""

  def assert_refused(self, config, pattern, folder):
    parent = os.path.dirname(folder)
    before = tree_digest(parent)
    with self.assertRaisesRegex(ValueError, pattern):
      training.train(config)
    self.assertEqual(tree_digest(parent), before)

  def test_a_file_or_under_one(self):
    parent = tempfile.mkdtemp()
    path = os.path.join(parent, "afile")
    with open(path, "w") as f:
      f.write("x")
    self.assert_refused(digits_config(path),
                        r"^`model_dir`=.*/afile is a file, not a folder\.$",
                        path)
    self.assert_refused(digits_config(os.path.join(path, "sub", "run")),
                        r"^`model_dir`=.*/afile/sub/run lies under .*/afile, "
                        r"which is a file\.$", path)

  def test_permission_denied(self):
    # Root passes every permission check, so `os.access` is what a user
    # without write permission gets; the read-only mount below is real.
    folder = os.path.join(tempfile.mkdtemp(), "run")
    with mock.patch.object(os, "access", return_value=False):
      self.assert_refused(digits_config(folder),
                          r"^`model_dir`=.*/run cannot be written: "
                          r"permission denied on .*\.$", folder)

  def test_as_a_user_without_write_permission(self):
    if os.getuid() != 0:
      self.skipTest("needs root to take write permission away")
    how = without_write_permission()
    if isinstance(how, str):
      self.skipTest(how)
    prefix, preexec_fn = how
    parent = tempfile.mkdtemp()
    os.chown(parent, NOBODY, NOBODY)
    os.chmod(parent, 0o755)  # Readable, not writable, by anyone but nobody.
    folder = os.path.join(parent, "run")
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "pipelines.train", "--dataset=digits",
         "--train_steps=10", "--eval_every=10", f"--model_dir={folder}"],
        cwd=helpers.REPO, capture_output=True, text=True,
        preexec_fn=preexec_fn)
    self.assertEqual(proc.returncode, 1, proc.stderr[-2000:])
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     f"train: --model_dir={folder} cannot be written: "
                     f"permission denied on {parent}.")
    self.assertNotIn("Traceback", proc.stderr)
    self.assertEqual(os.listdir(parent), [])

  @pytest.mark.skipif(not can_mount(), reason="needs root and mount")
  def test_read_only_file_system(self):
    parent = tempfile.mkdtemp()
    os.makedirs(os.path.join(parent, "old"))
    subprocess.run(["mount", "--bind", "-o", "ro", parent, parent],
                   check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", parent], check=True)
    try:
      folder = os.path.join(parent, "run")
      self.assert_refused(digits_config(folder),
                          r"^`model_dir`=.*/run cannot be written: .* is on "
                          r"a read-only file system\.$", folder)
    finally:
      subprocess.run(["umount", parent], check=True)

  def test_batch_larger_than_the_split(self):
    folder = os.path.join(tempfile.mkdtemp(), "run")
    self.assert_refused(digits_config(folder, batch_size=1_000_000),
                        r"^`batch_size`=1000000 is larger than the 1257 "
                        r"training instances of `dataset`=digits; give at "
                        r"most 1257\.$", folder)
    self.assertFalse(os.path.exists(folder))

  def test_batch_larger_than_the_memory(self):
    folder = os.path.join(tempfile.mkdtemp(), "run")
    # Per digits instance: 8 x 8 x 1 values, 10 labels and 10 scores of 4
    # bytes, twice (the batch in use and the prefetched one): 672 bytes.
    with mock.patch.object(checks, "available_memory",
                           return_value=500_000):
      self.assert_refused(
          digits_config(folder, batch_size=1000),
          r"^`batch_size`=1000 needs at least 0\.00 GB of memory for its "
          r"batches of `dataset`=digits \(672 bytes per instance\); 0\.00 GB "
          r"is available: give at most 744\.$", folder)
    self.assertFalse(os.path.exists(folder))
    self.assertGreater(checks.available_memory(), 0)  # Read from /proc.

  def test_seed_out_of_range(self):
    for seed in (-1, 2**32):
      with self.assertRaisesRegex(ValueError, rf"^`seed`={seed} must be "
                                  r"between 0 and 2\*\*32 - 1\.$"):
        checks.validate(digits_config("unused", seed=seed))
    checks.validate(digits_config("unused", seed=2**32 - 1))

  def test_binary_batch_size(self):
    folder = os.path.join(tempfile.mkdtemp(), "f7")
    proc = helpers.run_module(
        "pipelines.train", "--dataset=digits", "--train_steps=100",
        "--eval_every=100", "--batch_size=1000000", f"--model_dir={folder}",
        check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     "train: --batch_size=1000000 is larger than the 1257 "
                     "training instances of --dataset=digits; give at most "
                     "1257.")
    self.assertFalse(os.path.exists(folder))


class FullDiskTest(tf.test.TestCase):
  """Case 7: a real full disk during a checkpoint (a small tmpfs)."""

  @pytest.mark.skipif(not can_mount(), reason="needs root and mount")
  def test_checkpoint_on_a_full_disk(self):
    mount = tempfile.mkdtemp()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs",
                    mount], check=True)
    try:
      folder = os.path.join(mount, "run")
      with self.assertRaisesRegex(
          ValueError, r"^training stopped in .*/run: ResourceExhaustedError: "
          r".*No space left on device \[Op:SaveV2\]; the checkpoints and "
          r"exports written before are intact\.$"):
        training.train(digits_config(folder, train_steps=40))
      left = [os.path.relpath(os.path.join(root, name), folder)
              for root, dirs, files in os.walk(folder)
              for name in dirs + files]
      self.assertEmpty([p for p in left if "_temp" in p])
      self.assertFalse(os.path.exists(os.path.join(folder, "export")))
      self.assertFalse(os.path.exists(os.path.join(folder, ".lock")))
    finally:
      subprocess.run(["umount", mount], check=True)


class ServingTest(tf.test.TestCase):
  """Cases 3 and 7: class names from the export; damaged files named."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.run_dir = os.path.join(tempfile.mkdtemp(), "run")
    training.train(digits_config(cls.run_dir))
    with open(os.path.join(cls.run_dir, run_dir_lib.CLASSES_FILE)) as f:
      cls.names = json.load(f)

  def copy(self):
    folder = os.path.join(tempfile.mkdtemp(), "run")
    shutil.copytree(self.run_dir, folder)
    return folder

  def write_classes(self, folder, names):
    with open(os.path.join(folder, run_dir_lib.CLASSES_FILE), "w") as f:
      json.dump(names, f)

  def test_names_come_from_the_export(self):
    folder = self.copy()
    self.write_classes(folder, self.names[::-1])
    ranker = exported_ranker.ExportedRanker(folder)
    self.assertEqual(ranker.class_names, self.names)
    self.write_classes(folder, self.names[:3])
    self.assertEqual(exported_ranker.ExportedRanker(folder).class_names, self.names)
    # The ranking itself names the export's classes.
    image = np.zeros((1, 8, 8, 1), np.float32)
    ranked = ranker.rank(image, top_k=10)[0]
    self.assertCountEqual([name for name, _ in ranked], self.names)

  def test_an_export_without_names_is_checked_against_classes_json(self):
    # An export written before exports carried their names: only
    # `serving_default`.
    folder = self.copy()
    best = os.path.join(folder, "export", run_dir_lib.BEST_EXPORT)
    loaded = tf.saved_model.load(best)
    old = os.path.join(folder, "old")
    tf.saved_model.save(loaded, old, signatures={
        saved_model.SERVING_KEY: loaded.signatures[saved_model.SERVING_KEY]})
    shutil.rmtree(best)
    os.rename(old, best)
    self.assertEqual(exported_ranker.ExportedRanker(folder).class_names, self.names)
    self.write_classes(folder, self.names[::-1])
    with self.assertRaisesRegex(ValueError, r"^.*/classes.json does not "
                                r"match the export's class names \(class "):
      exported_ranker.ExportedRanker(folder)
    self.write_classes(folder, self.names[:9])
    with self.assertRaisesRegex(ValueError, r"^.*/classes.json names 9 "
                                r"classes; the export ranks 10\.$"):
      exported_ranker.ExportedRanker(folder)

  def test_old_export_names_come_from_its_graph(self):
    # The constant the old export's serving_default names its top classes
    # from: two names swapped outside the probe's top classes are found.
    folder = self.copy()
    best = os.path.join(folder, "export", run_dir_lib.BEST_EXPORT)
    loaded = tf.saved_model.load(best)
    serve = loaded.signatures[saved_model.SERVING_KEY]
    old = os.path.join(folder, "old")
    tf.saved_model.save(loaded, old, signatures={saved_model.SERVING_KEY: serve})
    shutil.rmtree(best)
    os.rename(old, best)
    top = set(serve(image=tf.zeros([1, 8, 8, 1]))["top_k_ids"].numpy()[0])
    a, b = [i for i in range(10) if i not in top][:2]
    names = list(self.names)
    names[a], names[b] = names[b], names[a]
    self.write_classes(folder, names)
    with self.assertRaisesRegex(
        ValueError, rf"^.*/classes.json does not match the export's class "
        rf"names \(class {a} is '{self.names[a]}' in the export, "
        rf"'{self.names[b]}' in the file\)\.$"):
      exported_ranker.ExportedRanker(folder)
    os.remove(os.path.join(folder, run_dir_lib.CLASSES_FILE))
    self.assertEqual(exported_ranker.ExportedRanker(folder).class_names, self.names)

  def test_overwrite_replaces_an_unreadable_config(self):
    folder = self.copy()
    path = os.path.join(folder, run_dir_lib.CONFIG_FILE)
    with open(path, "w") as f:
      f.write('{"data": {"dataset": "dig')
    before = tree_digest(folder)
    with self.assertRaisesRegex(
        ValueError, r"^.*/config.json cannot be read as a run's config "
        r"\(Unterminated string starting at: .*\); restore it to resume or "
        r"keep the run, or pass `overwrite` to delete the run and start "
        r"afresh\.$"):
      training.train(digits_config(folder))
    self.assertEqual(tree_digest(folder), before)
    training.train(digits_config(folder, overwrite=True))
    self.assertEqual(exported_ranker.load_config(folder).data.dataset, "digits")
    self.assertEqual(exported_ranker.ExportedRanker(folder).class_names, self.names)

  def test_damaged_exports(self):
    folder = self.copy()
    best = os.path.join(folder, "export", run_dir_lib.BEST_EXPORT)
    pb = os.path.join(best, "saved_model.pb")
    with open(pb, "rb") as f:
      head = f.read(1000)
    with open(pb, "wb") as f:
      f.write(head)
    with self.assertRaisesRegex(ValueError, r"^.*/best_model_by_metric cannot "
                                r"be loaded \(.*\): the export is damaged; "
                                r"remove it and write it again with "
                                r"pipelines.export `model_dir`=.*\.$"):
      exported_ranker.ExportedRanker(folder)
    for name in os.listdir(best):  # An emptied export folder.
      path = os.path.join(best, name)
      (shutil.rmtree if os.path.isdir(path) else os.remove)(path)
    with self.assertRaisesRegex(ValueError, r"cannot be loaded \(SavedModel "
                                r"file does not exist"):
      exported_ranker.ExportedRanker(folder)

  def test_damaged_config(self):
    folder = self.copy()
    path = os.path.join(folder, run_dir_lib.CONFIG_FILE)
    with open(path) as f:
      text = f.read()
    with open(path, "w") as f:
      f.write(text[:100])
    with self.assertRaisesRegex(ValueError, r"^.*/config.json cannot be read "
                                r"as a run's config \(Unterminated string"):
      exported_ranker.load_config(folder)
    raw = json.loads(text)
    raw["model"]["bogus"] = 1
    with open(path, "w") as f:
      json.dump(raw, f)
    with self.assertRaisesRegex(ValueError, r"^.*/config.json cannot be read "
                                r"as a run's config \(.*unexpected keyword "
                                r"argument 'bogus'\)\.$"):
      exported_ranker.load_config(folder)

  def test_binary_evaluate_damaged_export(self):
    folder = self.copy()
    shutil.rmtree(os.path.join(folder, "export", run_dir_lib.BEST_EXPORT,
                               "variables"))
    os.remove(os.path.join(folder, "export", run_dir_lib.BEST_EXPORT,
                           "saved_model.pb"))
    before = tree_digest(folder)
    proc = helpers.run_module("pipelines.evaluate", f"--model_dir={folder}",
                              check=False)
    self.assertEqual(proc.returncode, 1)
    lines = proc.stderr.strip().splitlines()
    self.assertRegex(lines[-1], r"^evaluate: .*/best_model_by_metric cannot "
                     r"be loaded \(SavedModel file does not exist at: .*\): "
                     r"the export is damaged")
    self.assertNotIn("Traceback", proc.stderr)
    self.assertEqual(tree_digest(folder), before)


class PredictInputTest(tf.test.TestCase):
  """predict's stdin line ends and --classes duplicates."""

  def lines(self, data, chunk_size):
    return list(line_input.lines(io.BufferedReader(io.BytesIO(data)),
                              chunk_size))

  def test_every_line_end(self):
    data = b"one\rtwo\r\nthree\nfour\r"
    for chunk_size in (1, 2, 3, 64):
      self.assertEqual(self.lines(data, chunk_size),
                       [b"one", b"two", b"three", b"four"], chunk_size)
    self.assertEqual(self.lines(b"a\r\n\r\nb", 1), [b"a", b"", b"b"])
    self.assertEqual(self.lines(b"", 4), [])
    batches = list(line_input.batches(io.BufferedReader(io.BytesIO(
        b"a\rb\rc")), 2))
    self.assertEqual(batches, [(1, [b"a", b"b"]), (3, [b"c"])])

  def test_duplicate_classes(self):
    proc = helpers.run_module(
        "pipelines.predict", "--model_dir=/nonexistent", "--text=x",
        "--classes=joy,fear,joy", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     "predict: --classes: 'joy' is given twice (classes 1 "
                     "and 3).")


class ClassNameLinesTest(tf.test.TestCase):
  """Issue 58 case 4: predict prints one `name<TAB>score` line per class."""

  def test_one_line_per_class(self):
    names = ["joy", "an\tger", "fe\nar", "sad\r", "calm\u2028ly", "café"]
    lines = "\n".join(line_input.one_line(n) + "\t0.5000" for n in names)
    self.assertLen(lines.splitlines(), 6)
    self.assertEqual(lines.splitlines()[1:3],
                     ["an\\tger\t0.5000", "fe\\nar\t0.5000"])
    self.assertEqual([line_input.one_line(n) for n in names[3:]],
                     ["sad\\r", "calm\\u2028ly", "café"])

  def test_classes_flag_with_a_tab(self):
    proc = helpers.run_module(
        "pipelines.predict", "--model_dir=/nonexistent", "--text=x",
        "--classes=joy,an\tger", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     "predict: --classes: class 2 'an\\tger' holds a control "
                     "character ('\\t'): a class name is one printable line.")


class ConsoleTest(tf.test.TestCase):
  """Case 9: lines logged after the log file was closed (objects deleted at
  exit) are appended, never an `I/O operation on closed file` error."""

  def test_emit_after_close(self):
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, console.LOG_FILE)
    handler = console._RunFolderHandler(path)  # pylint: disable=protected-access
    import logging  # pylint: disable=g-import-not-at-top
    record = lambda msg: logging.LogRecord("tf", logging.WARNING, __file__,
                                           1, msg, None, None)
    handler.emit(record("before"))
    handler.close()
    with mock.patch.object(handler, "handleError") as error:
      handler.emit(record("after"))
    error.assert_not_called()
    with open(path) as f:
      self.assertEqual(f.read(), "before\nafter\n")


  def test_tensorflow_warnings_printed_once(self):
    # Under absl's `app.run`, TensorFlow's records reach both its own
    # handler and absl's: after `quiet`, only absl's prints them.
    script = (
        "from absl import app\n"
        "import tensorflow as tf\n"
        "from pipelines import console\n"
        "def main(argv):\n"
        "  console.quiet()\n"
        "  tf.get_logger().warning('the one warning')\n"
        "  tf.get_logger().info('chatter')\n"
        "app.run(main)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=helpers.REPO,
                          capture_output=True, text=True, check=True)
    lines = [l for l in proc.stderr.splitlines() if "the one warning" in l]
    self.assertLen(lines, 1, proc.stderr)
    self.assertRegex(lines[0], r"^W\d{4} .*\] the one warning$")
    self.assertNotIn("chatter", proc.stderr)


if __name__ == "__main__":
  tf.test.main()
