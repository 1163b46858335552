"""Hostile input to the study (issue 32): nothing lost, nothing silently wrong.

Each case ends either correct or with one line naming the file or flag, and
the folder's contents are checked afterwards. The report cases run on
hand-made studies (`test_study.fake_run`); the cases that need a trained run
share one tiny digits study (`TrainedStudyTest`).
"""

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf import config as config_lib
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import hparams as study_hparams
from rank4class_tf.study import report as study_report
from rank4class_tf.study import runner as study
from rank4class_tf.study import settings as study_settings
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
from rank4class_tf.training import run_guard
from rank4class_tf.training import trainer as training
import helpers
from test_study import base_config
from test_study import fake_run
from test_study import N

SAMPLES = 10_000


def hashes(folder):
  """{relative path: sha256} of every file under `folder`."""
  out = {}
  for root, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = hashlib.sha256(
            f.read()).hexdigest()
  return out


def truncate(path):
  """Cuts a file as a crash mid-write does: a JSON file inside its first
  string (`Unterminated string ...`), any other file at half its length."""
  with open(path, "rb") as f:
    content = f.read()
  end = (content.index(b'"') + 4 if content.startswith(b"{")
         else len(content) // 2)
  with open(path, "wb") as f:
    f.write(content[:end])


class RunNameTest(parameterized.TestCase):

  def test_close_rates_get_their_own_exact_folders(self):
    grid = study_grid.Grid(losses=("softmax",), interactions=("dot",), seeds=(0,),
                      learning_rates=(0.0012345678, 0.0012345679))
    names = [r.name for r in grid.runs()]
    self.assertEqual(names, ["softmax.dot.lr0.0012345678.seed0",
                             "softmax.dot.lr0.0012345679.seed0"])
    for run, name in zip(grid.runs(), names):
      rate = name.split(".lr", 1)[1].rsplit(".seed", 1)[0]
      self.assertEqual(float(rate), run.learning_rate)

  def test_exact_rates_keep_their_names(self):
    # The committed studies' folders (results/study_*/runs/) keep loading.
    self.assertEqual(study_grid.Run("mse", "lc_mlp", 3e-05, 128, 1).name,
                     "mse.lc_mlp.lr3e-05.u128.seed1")
    self.assertEqual(study_grid.Run("softmax", "dot", 0.001, None, 0).name,
                     "softmax.dot.lr0.001.seed0")
    self.assertEqual(study_grid.rate_text(0.1 + 0.2), "0.30000000000000004")

  def test_paper_rates_are_the_floats_of_their_names(self):
    rates = study_grid.PAPER_LEARNING_RATES
    self.assertEqual([study_grid.rate_text(r) for r in rates], [
        "1e-07", "3e-07", "1e-06", "3e-06", "1e-05", "3e-05", "0.0001",
        "0.0003", "0.001", "0.003", "0.01", "0.03", "0.1"])
    for rate in rates:
      self.assertEqual(float(f"{rate:g}"), rate)

  @parameterized.parameters(-1, 2**32)
  def test_seed_out_of_range_names_the_flag_and_writes_nothing(self, seed):
    folder = os.path.join(tempfile.mkdtemp(), "study")
    grid = study_grid.Grid(losses=("softmax",), interactions=("dot",),
                      seeds=(0, seed))
    with self.assertRaisesRegex(ValueError, rf"^`seeds`: {seed} must be "
                                r"between 0 and 2\*\*32 - 1\.$"):
      study_settings.open_study(folder, base_config(), grid)
    self.assertFalse(os.path.exists(folder))
    study_grid.Grid(seeds=(0, 2**32 - 1)).validate()  # The ends are seeds.


class DamagedReportTest(tf.test.TestCase):
  """--report_only on damaged study files: each named, its run missing."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.source = os.path.join(tempfile.mkdtemp(), "study")
    grid = study_grid.Grid(losses=("softmax", "mse"), interactions=("dot",),
                      seeds=(0, 1), learning_rates=(1e-3, 1e-2))
    study_settings.open_study(cls.source, base_config(), grid)
    rng = np.random.default_rng(0)
    for run in grid.runs():
      # 1e-3 is chosen (validation 0.9) over 1e-2 (0.5).
      fake_run(cls.source, run, (rng.random(N) < 0.7).astype(float),
               0.9 if run.learning_rate == 1e-3 else 0.5)
    cls.grid = grid

  def setUp(self):
    super().setUp()
    self.dir = os.path.join(tempfile.mkdtemp(), "study")
    shutil.copytree(self.source, self.dir)
    self.lines = []

  def report(self):
    paths = study_report.write_report(self.dir, num_samples=SAMPLES,
                                      progress=self.lines.append)
    with open(paths["tables"]) as f:
      tables = f.read()
    with open(paths["results"]) as f:
      rows = f.read().splitlines()[1:]
    return tables, rows

  def path(self, name, file=study_folder.RESULT_FILE):
    return os.path.join(self.dir, study_folder.RUNS_DIR, name, file)

  def test_whole_study_reports_nothing_missing(self):
    tables, rows = self.report()
    self.assertLen(rows, 8)
    self.assertEqual(self.lines, [])
    self.assertNotIn("Runs without a result", tables)

  def test_truncated_record_is_named_and_its_run_missing(self):
    name = "softmax.dot.lr0.001.seed0"
    truncate(self.path(name))
    before = hashes(os.path.join(self.dir, study_folder.RUNS_DIR))
    tables, rows = self.report()
    self.assertLen(rows, 7)
    self.assertNotIn(name, "".join(rows))
    self.assertRegex(self.lines[0], rf"^{self.path(name)} is damaged "
                     r"\(Unterminated string .*\): run " + name +
                     " is reported as missing; the study command")
    self.assertEqual(self.lines[1], "1 of the grid's 8 runs have no result "
                     f"and are reported as missing: {name}.")
    self.assertIn("**1 of the grid's 8 runs have no result**", tables)
    self.assertIn(f"## Runs without a result\n\n1 of the 8 runs of the grid "
                  f"in study.json have no whole record (not run yet, or their "
                  f"study file is unreadable): `{name}` (unreadable: "
                  f"`runs/{name}/study_result.json`).", tables)
    # Seed 0 of softmax + dot now chooses its other learning rate.
    self.assertIn("| Softmax CE + Dot | 0 | 0.01 |", tables)
    # --report_only reads: the damaged file is where it was.
    after = hashes(os.path.join(self.dir, study_folder.RUNS_DIR))
    self.assertEqual({k: v for k, v in after.items()
                      if not k.endswith(study_hparams.HPARAMS_SUFFIX)},
                     {k: v for k, v in before.items()
                      if not k.endswith(study_hparams.HPARAMS_SUFFIX)})

  def test_record_without_test_and_record_of_another_run(self):
    a, b = "mse.dot.lr0.001.seed1", "mse.dot.lr0.01.seed1"
    with open(self.path(a)) as f:
      record = json.load(f)
    del record["test"]
    with open(self.path(a), "w") as f:
      json.dump(record, f)
    with open(self.path(b)) as f:
      record = json.load(f)
    record["learning_rate"] = 0.001
    with open(self.path(b), "w") as f:
      json.dump(record, f)
    _, rows = self.report()
    self.assertLen(rows, 6)
    self.assertEqual(self.lines[:2], [
        f"{self.path(a)} is damaged (no test): run {a} is reported as "
        "missing; the study command (without `report_only`) moves the file "
        "aside and evaluates the run again.",
        f"{self.path(b)} is damaged (its learning_rate is 0.001, not 0.01: "
        f"another run's record): run {b} is reported as missing; the study "
        "command (without `report_only`) moves the file aside and evaluates "
        "the run again."])
    self.assertEqual(self.lines[2], "2 of the grid's 8 runs have no result "
                     f"and are reported as missing: {a}, {b}.")

  def test_truncated_arrays_of_a_chosen_run(self):
    name = "mse.dot.lr0.001.seed0"
    truncate(self.path(name, study_folder.TEST_FILE))
    tables, rows = self.report()
    self.assertLen(rows, 7)
    self.assertRegex(self.lines[0], rf"^{self.path(name, study_folder.TEST_FILE)}: "
                     r"damaged \(BadZipFile: .*\): run " + name +
                     " is chosen but its test arrays cannot be read")
    self.assertIn("| MSE + Dot | 0 | 0.01 |", tables)
    # An intact record without arrays (a summary's unchosen run) is fine;
    # chosen, it is missing too.
    os.remove(self.path("mse.dot.lr0.01.seed0", study_folder.TEST_FILE))
    self.lines.clear()
    tables, rows = self.report()
    self.assertLen(rows, 6)
    self.assertIn(f"{self.path('mse.dot.lr0.01.seed0', study_folder.TEST_FILE)}: "
                  "not found: run mse.dot.lr0.01.seed0 is chosen",
                  self.lines[1])
    self.assertNotIn("| MSE + Dot | 0 |", tables)  # No run left for seed 0.
    self.assertIn("| MSE + Dot | 1 | 0.001 |", tables)

  def test_truncated_study_json_is_named(self):
    path = os.path.join(self.dir, study_folder.STUDY_FILE)
    truncate(path)
    before = hashes(self.dir)
    with self.assertRaisesRegex(
        ValueError, rf"^{path} cannot be read \(Unterminated string .*\); it "
        r"holds the study's shared settings and grid: restore it, or start "
        r"another `study_dir`\.$"):
      self.report()
    self.assertEqual(hashes(self.dir), before)

  def test_report_in_progress_names_the_claimed_runs(self):
    # A study in progress: two runs unfinished, one of them claimed.
    for name in ("softmax.dot.lr0.001.seed0", "mse.dot.lr0.01.seed1"):
      shutil.rmtree(os.path.join(self.dir, study_folder.RUNS_DIR, name))
    claims = study_claims.Claims(self.dir,
                                 study_claims.Worker(name="node7:42"))
    self.assertTrue(claims.claim("mse.dot.lr0.01.seed1"))
    _, rows = self.report()
    self.assertLen(rows, 6)
    self.assertEqual(self.lines, [
        "2 of the grid's 8 runs have no result and are reported as missing: "
        "softmax.dot.lr0.001.seed0, mse.dot.lr0.01.seed1.",
        "1 of them are being trained (claimed by a worker, with its "
        "heartbeat count): mse.dot.lr0.01.seed1 (node7:42, heartbeat 0)."])

  def test_report_from_the_same_runs_is_written_once(self):
    paths = study_report.write_report(self.dir, num_samples=SAMPLES,
                                      progress=self.lines.append)
    self.assertNotIn("current", paths)
    before = hashes(self.dir)
    again = study_report.write_report(self.dir, num_samples=SAMPLES,
                                      progress=self.lines.append,
                                      unless_current=True)
    self.assertTrue(again["current"])
    self.assertEqual(hashes(self.dir), before)  # Nothing written.
    # Another option (or another record) is another report.
    other = study_report.write_report(self.dir, num_samples=SAMPLES + 1,
                                      progress=self.lines.append,
                                      unless_current=True)
    self.assertNotIn("current", other)

  def test_runs_the_grid_no_longer_names(self):
    self.report()  # Every run folder gets its HParams session.
    self.lines.clear()
    path = os.path.join(self.dir, study_folder.STUDY_FILE)
    with open(path) as f:
      saved = json.load(f)
    saved["grid"]["losses"] = ["softmax"]
    saved["grid"]["seeds"] = [0, 1, 2]
    with open(path, "w") as f:
      json.dump(saved, f)
    tables, rows = self.report()
    self.assertLen(rows, 4)
    strays = ["mse.dot.lr0.001.seed0", "mse.dot.lr0.001.seed1",
              "mse.dot.lr0.01.seed0", "mse.dot.lr0.01.seed1"]
    self.assertEqual(self.lines, [
        "2 of the grid's 6 runs have no result and are reported as missing: "
        "softmax.dot.lr0.001.seed2, softmax.dot.lr0.01.seed2.",
        f"{self.dir}/runs holds 4 folders that name no run of the grid in "
        f"study.json (not in the report): {', '.join(strays)}."])
    self.assertIn("## Run folders the grid does not name\n\nruns/ holds 4 "
                  "folders that name no run of the grid in study.json; they "
                  "are not in this report: " +
                  ", ".join(f"`{s}`" for s in strays) + ".", tables)
    # Their HParams sessions are gone too: TensorBoard shows the report.
    for stray in strays:
      self.assertEmpty(tf.io.gfile.glob(os.path.join(
          self.dir, "runs", stray, "*" + study_hparams.HPARAMS_SUFFIX)))

  def test_reports_together_take_turns(self):
    # Two --report_only at once, three times: all whole, one HParams file
    # per folder (before the lock, about one in ten failed).
    outcomes = []

    def report():
      try:
        study_report.write_report(self.dir, num_samples=SAMPLES,
                                  progress=lambda line: None)
        outcomes.append("ok")
      except Exception as e:  # pylint: disable=broad-except
        outcomes.append(repr(e))

    for _ in range(3):
      threads = [threading.Thread(target=report) for _ in range(2)]
      for t in threads:
        t.start()
      for t in threads:
        t.join()
    self.assertEqual(outcomes, ["ok"] * 6)
    folders = [self.dir] + [os.path.join(self.dir, "runs", r.name)
                            for r in self.grid.runs()]
    for folder in folders:
      self.assertLen(tf.io.gfile.glob(os.path.join(
          folder, "*" + study_hparams.HPARAMS_SUFFIX)), 1, folder)
    self.assertEqual([n for n in os.listdir(self.dir)
                      if study.fileio.TMP_MARK in n], [])

  def test_full_disk_names_the_file_and_keeps_the_report(self):
    self.report()
    mount = os.path.join(tempfile.mkdtemp(), "small")
    os.makedirs(mount)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m",
                              "tmpfs", mount], capture_output=True).returncode
    if mounted == 0:
      self.addCleanup(subprocess.run, ["umount", mount])
      folder = os.path.join(mount, "study")
      shutil.copytree(self.dir, folder,
                      ignore=shutil.ignore_patterns("figures", "*.study_"
                                                    "hparams"))
      # Fill the disk: what is left is less than results.csv.
      with open(os.path.join(mount, "filler"), "wb", buffering=0) as f:
        try:
          while True:
            f.write(b"\0" * 4096)
        except OSError as e:
          self.assertEqual(e.errno, errno.ENOSPC)
      failing = contextlib.nullcontext()  # A real full disk.
    else:  # No tmpfs here: the first write fails as a full disk does.
      folder = self.dir
      failing = mock.patch.object(
          study.fileio.os, "fsync",
          side_effect=OSError(errno.ENOSPC, "No space left on device"))
    before = hashes(folder)
    with failing, self.assertRaisesRegex(
        ValueError, rf"^cannot write {folder}/results\.csv: No space left on "
        r"device; the report files written before it are whole\.$"):
      study_report.write_report(folder, num_samples=SAMPLES,
                                progress=lambda line: None)
    self.assertEqual(hashes(folder), before)  # No temporary file left.


class StudyFolderTest(tf.test.TestCase):
  """Creating and merging study.json, without training."""

  def test_workers_started_together_agree_on_one_grid(self):
    # Two workers into one new folder at once, 20 times: with one grid both
    # go on; with seeds 0 and 1 (neither holds the other) the second is
    # refused and study.json holds the first's (threads: each has its own
    # lock).
    root = tempfile.mkdtemp()
    for attempt in range(20):
      folder = os.path.join(root, str(attempt))
      barrier = threading.Barrier(2)
      errors = []
      seeds = (0, 0) if attempt % 2 else (0, 1)

      def start(seed, folder=folder, barrier=barrier, errors=errors):
        barrier.wait()
        try:
          study_settings.open_study(folder, base_config(), study_grid.Grid(
              losses=("softmax",), interactions=("dot",), seeds=(seed,)))
        except ValueError as e:
          errors.append(str(e))

      threads = [threading.Thread(target=start, args=(s,)) for s in seeds]
      for t in threads:
        t.start()
      for t in threads:
        t.join()
      recorded = study_folder.load_study(folder)[1].seeds
      if seeds == (0, 0):
        self.assertEqual(errors, [])
        self.assertEqual(recorded, (0,))
      else:
        other = 1 - recorded[0]
        self.assertEqual(errors, [
            f"`seeds`={other} differs from the study in {folder} "
            f"(seeds={recorded[0]}): with it the study would hold 1 run(s) "
            f"this grid lacks (softmax.dot.lr0.001.seed{recorded[0]}), which "
            "this worker would leave unfinished. Pass the study's grid (or "
            "one that holds all of it, to grow the study), or another "
            "`study_dir`."])
      self.assertEqual(sorted(os.listdir(folder)), ["runs", "study.json"])

  def test_worker_with_another_grid_is_refused(self):
    # Issue 58 case 15: workers on softmax, approx_ndcg x seeds 0, 1 and
    # one on softmax, mse x seeds 0, 2 merged into 9 runs, 2 of them asked
    # for by nobody; the first command then printed "2 ... missing", exit 0.
    folder = os.path.join(tempfile.mkdtemp(), "study")
    first = study_grid.Grid(losses=("softmax", "approx_ndcg"),
                            interactions=("dot",), seeds=(0, 1))
    other = study_grid.Grid(losses=("softmax", "mse"), interactions=("dot",),
                            seeds=(0, 2))
    study_settings.open_study(folder, base_config(), first)
    before = hashes(folder)
    with self.assertRaisesRegex(ValueError, "^" + re.escape(
        f"`losses`=softmax,mse and `seeds`=0,2 differ from the study in "
        f"{folder} (losses=softmax,approx_ndcg; seeds=0,1): with it the "
        "study would hold 5 run(s) this grid lacks (approx_ndcg.dot.lr0.001."
        "seed0, softmax.dot.lr0.001.seed1, approx_ndcg.dot.lr0.001.seed1, "
        "...), which this worker would leave unfinished. Pass the study's "
        "grid (or one that holds all of it, to grow the study), or another "
        "`study_dir`.") + "$"):
      study.run_study(folder, base_config(), other, progress=print)
    self.assertEqual(hashes(folder), before)
    # A study.json merged so by earlier code: the first grid lacks 5 of its
    # 9 runs (2 of which nobody asked for), and is refused too.
    path = os.path.join(folder, study_folder.STUDY_FILE)
    with open(path) as f:
      saved = json.load(f)
    saved["grid"] = dataclasses.asdict(first.union(other))
    with open(path, "w") as f:
      json.dump(saved, f)
    self.assertLen(first.union(other).runs(), 9)
    before = hashes(folder)
    with self.assertRaisesRegex(ValueError, "^" + re.escape(
        "`losses`=softmax,approx_ndcg and `seeds`=0,1 differ from the study "
        f"in {folder} (losses=softmax,approx_ndcg,mse; seeds=0,1,2): with it "
        "the study would hold 5 run(s) this grid lacks (mse.dot.lr0.001.seed0,"
        " mse.dot.lr0.001.seed1, softmax.dot.lr0.001.seed2, ...)")):
      study.run_study(folder, base_config(), first, progress=print)
    self.assertEqual(hashes(folder), before)
    # The study's whole grid goes on.
    self.assertEqual(study_settings.open_study(folder, base_config(),
                                      first.union(other)), first.union(other))

  def test_unwritable_folder_is_one_line(self):
    # Injected (as root, a read-only folder is writable); NobodyTest runs
    # the real thing where it can.
    parent = tempfile.mkdtemp()
    folder = os.path.join(parent, "study")
    denied = OSError(errno.EACCES, "Permission denied", folder)
    with mock.patch.object(study_settings.os, "makedirs", side_effect=denied):
      with self.assertRaisesRegex(ValueError, rf"^cannot write {folder}: "
                                  r"Permission denied\.$"):
        study_settings.open_study(folder, base_config(), study_grid.Grid(
            losses=("softmax",), interactions=("dot",), seeds=(0,)))
    self.assertEqual(os.listdir(parent), [])


def nobody_can_run_python():
  """(uid, gid) of `nobody` if it can run this interpreter on the
  repository, else the reason it cannot."""
  try:
    entry = pwd.getpwnam("nobody")
  except KeyError:
    return "no user 'nobody'"
  try:
    probe = subprocess.run(
        [sys.executable, "-c", "import rank4class_tf.fileio"],
        cwd=helpers.REPO, capture_output=True,
        preexec_fn=lambda: (os.setgid(entry.pw_gid), os.setuid(entry.pw_uid)))
  except OSError as e:  # The interpreter itself cannot be run.
    return f"user 'nobody' cannot run {sys.executable}: {e}"
  if probe.returncode:
    return (f"user 'nobody' cannot run {sys.executable} on {helpers.REPO} "
            f"({probe.stderr.decode(errors='replace').strip()[-200:]})")
  return entry.pw_uid, entry.pw_gid


class ReadOnlyMountTest(tf.test.TestCase):
  """A read-only --study_dir that binds root too: a read-only bind mount."""

  def test_read_only_study_dir(self):
    root = tempfile.mkdtemp()
    existing = os.path.join(root, "existing")
    grid = study_grid.Grid(losses=("softmax",), interactions=("dot",), seeds=(0,))
    study_settings.open_study(existing, base_config(), grid)
    fake_run(existing, grid.runs()[0], np.ones(N), 0.9)
    if subprocess.run(["mount", "--bind", "-o", "ro", root, root],
                      capture_output=True).returncode:
      self.skipTest("no read-only bind mount here (mount --bind -o ro)")
    self.addCleanup(subprocess.run, ["umount", root])
    before = hashes(root)
    with self.assertRaisesRegex(ValueError, rf"^cannot write {root}/new: "
                                r"Read-only file system\.$"):
      study_settings.open_study(os.path.join(root, "new"), base_config(), grid)
    with self.assertRaisesRegex(ValueError, rf"^cannot write {existing}/"
                                r"study\.json: Read-only file system\.$"):
      study_settings.open_study(existing, base_config(), grid)
    with self.assertRaisesRegex(
        ValueError, rf"^cannot write {existing}/results\.csv: Read-only file "
        r"system; the report files written before it are whole\.$"):
      study_report.write_report(existing, num_samples=SAMPLES,
                                progress=lambda line: None)
    self.assertEqual(hashes(root), before)


@pytest.mark.slow
class NobodyTest(tf.test.TestCase):
  """A read-only --study_dir as a user without root's rights."""

  def test_read_only_study_dir(self):
    if os.getuid() != 0:
      self.skipTest("needs root to drop to 'nobody'")
    user = nobody_can_run_python()
    if isinstance(user, str):
      self.skipTest(user)
    root = tempfile.mkdtemp()
    os.chmod(root, 0o755)  # Readable, not writable, by nobody.
    existing = os.path.join(root, "existing")
    grid = study_grid.Grid(losses=("softmax",), interactions=("dot",), seeds=(0,))
    study_settings.open_study(existing, base_config(dataset="digits"), grid)
    fake_run(existing, grid.runs()[0], np.ones(N), 0.9)
    for path in (root, existing):
      os.chmod(path, 0o755)
    before = hashes(root)
    script = textwrap.dedent("""
        import sys
        from absl import flags
        from pipelines import study
        flags.FLAGS(["study"] + sys.argv[1:])
        study.main(["study"])
        """)
    cases = {
        os.path.join(root, "new"): (
            ["--dataset=digits", "--train_steps=10", "--eval_every=5",
             "--losses=softmax", "--interactions=dot", "--seeds=0"],
            f"study: cannot write {root}/new: Permission denied."),
        existing: (["--report_only"],
                   f"study: cannot write {existing}/results.csv: Permission "
                   "denied; the report files written before it are whole."),
    }
    for folder, (argv, message) in cases.items():
      proc = subprocess.run(
          [sys.executable, "-c", script, f"--study_dir={folder}", *argv],
          cwd=helpers.REPO, capture_output=True, text=True,
          env=dict(os.environ, HOME=root, MPLCONFIGDIR=root),
          preexec_fn=lambda: (os.setgid(user[1]), os.setuid(user[0])))
      self.assertEqual(proc.returncode, 1, proc.stderr[-2000:])
      self.assertEqual(proc.stderr.strip().splitlines()[-1], message)
      self.assertNotIn("Traceback", proc.stderr)
    self.assertEqual(hashes(root), before)


@pytest.mark.slow
class TrainedStudyTest(tf.test.TestCase):
  """One tiny trained digits run, copied per test: damaged files redone by
  evaluation only, a folder of other settings refused, a run in use."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.base = config_lib.TrainConfig.create(
        model_dir="unused", dataset="digits", train_steps=20, eval_every=10,
        export=False, deterministic=True)
    cls.grid = study_grid.Grid(losses=("softmax",), interactions=("dot",),
                          seeds=(0,), learning_rates=(1e-2,))
    cls.source = os.path.join(tempfile.mkdtemp(), "study")
    study.run_study(cls.source, cls.base, cls.grid, progress=lambda l: None)
    cls.study_run = cls.grid.runs()[0]

  def setUp(self):
    super().setUp()
    self.dir = os.path.join(tempfile.mkdtemp(), "study")
    shutil.copytree(self.source, self.dir)
    self.folder = study_folder.run_dir(self.dir, self.study_run)
    self.lines = []

  def record(self):
    with open(os.path.join(self.folder, study_folder.RESULT_FILE)) as f:
      return json.load(f)

  def training_files(self):
    """Hashes of what training wrote (checkpoints, config, logs)."""
    return {k: v for k, v in hashes(self.folder).items()
            if not k.startswith(("study", ".")) and
            study_folder.DAMAGED_SUFFIX not in k}

  def test_damaged_files_are_moved_aside_and_only_evaluated_again(self):
    want = self.record()
    trained = self.training_files()
    for file in (study_folder.TEST_FILE, study_folder.RESULT_FILE):
      path = os.path.join(self.folder, file)
      truncate(path)
      with open(path, "rb") as f:
        damaged = f.read()
      self.lines.clear()
      study.run_study(self.dir, self.base, self.grid,
                      progress=self.lines.append)
      self.assertRegex(self.lines[0], rf"^{path} is damaged \(.+\): moved "
                       rf"to {file}\.damaged; the run is evaluated again\.$")
      self.assertRegex(self.lines[1], r"^\[1/1\] " + self.study_run.name)
      with open(path + study_folder.DAMAGED_SUFFIX, "rb") as f:
        self.assertEqual(f.read(), damaged)  # Kept, not lost.
      os.remove(path + study_folder.DAMAGED_SUFFIX)
      # Not trained again: the checkpoints are untouched.
      self.assertEqual(self.training_files(), trained)
      got = self.record()
      for key in ("validation", "test", "test_softmax_ce", "best_step"):
        self.assertEqual(got[key], want[key], key)
      arrays = study_folder.read_test_arrays(self.dir, self.study_run.name,
                                      self.base.trainer.metrics,
                                      got["num_test"])
      self.assertLen(arrays["labels"], got["num_test"])
      # The training time is kept from a whole record, lost with a damaged
      # one (the run was not trained again).
      self.assertEqual(got["train_seconds"],
                       want["train_seconds"] if file == study_folder.TEST_FILE
                       else None)
    self.lines.clear()
    study.run_study(self.dir, self.base, self.grid, progress=self.lines.append)
    self.assertEqual(self.lines, [f"1 of 1 runs already finished in "
                                  f"{self.dir}: skipped."])

  def test_folder_with_other_settings_is_refused(self):
    path = os.path.join(self.folder, "config.json")
    with open(path) as f:
      config = json.load(f)
    config["trainer"]["learning_rate"] = 0.02
    with open(path, "w") as f:
      json.dump(config, f)
    # Its record is whole: the folder is still not taken as the run's.
    before = hashes(self.dir)
    with self.assertRaisesRegex(
        ValueError, rf"^{self.folder} holds a run with other settings than "
        rf"the study's run {self.study_run.name}: `learning_rate`=0\.01 \(was "
        r"0\.02\)\. Move the folder out of runs/ \(the study then trains the "
        r"run afresh\)\.$"):
      study.run_study(self.dir, self.base, self.grid, progress=print)
    self.assertEqual(hashes(self.dir), before)

  def test_run_in_use_waits_for_its_process(self):
    shutil.rmtree(self.folder)  # Not trained yet: the study trains it.
    lock = run_guard.RunLock(self.folder).__enter__()
    lines, slept = [], []

    def sleep(seconds):  # The other process ends while this worker waits.
      slept.append(seconds)
      lock.__exit__(None, None, None)

    study.run_study(self.dir, self.base, self.grid, progress=lines.append,
                    sleep=sleep)
    self.assertEqual(lines[0], (
        f"run {self.study_run.name} of `study_dir`={self.dir} is being "
        f"trained by another process (pid {os.getpid()}) that holds no "
        "claim on it; this worker waits for it to end."))
    self.assertLen(slept, 1)
    self.assertIsNotNone(self.record())  # Then trained by this worker.

  def test_report_only_binary_names_the_damaged_file(self):
    path = os.path.join(self.folder, study_folder.RESULT_FILE)
    truncate(path)
    proc = helpers.run_module("pipelines.study", f"--study_dir={self.dir}",
                              "--report_only", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertNotIn("Traceback", proc.stderr)
    self.assertRegex(proc.stdout.splitlines()[0],
                     rf"^{path} is damaged \(Unterminated string")
    self.assertEqual(proc.stderr.strip().splitlines()[-1],
                     f"study: --study_dir={self.dir} has no finished run "
                     "yet.")



@pytest.mark.slow
class WorkerGridBinaryTest(tf.test.TestCase):
  """Issue 58 case 15 through `pipelines.study`: one line, exit 1, nothing
  written."""

  def test_worker_with_another_grid_is_one_line(self):
    folder = os.path.join(tempfile.mkdtemp(), "study")
    shared = ["--dataset=digits", "--train_steps=10", "--eval_every=5",
              "--interactions=dot"]
    study_settings.open_study(folder, base_config(), study_grid.Grid(
        losses=("softmax", "approx_ndcg"), interactions=("dot",),
        seeds=(0, 1)))
    before = hashes(folder)
    proc = helpers.run_module("pipelines.study", f"--study_dir={folder}",
                              *shared, "--losses=softmax,mse", "--seeds=0,2",
                              check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertNotIn("Traceback", proc.stderr)
    self.assertEqual(proc.stderr.strip().splitlines()[-1], (
        f"study: --losses=softmax,mse and --seeds=0,2 differ from the study "
        f"in {folder} (losses=softmax,approx_ndcg; seeds=0,1): with it the "
        "study would hold 5 run(s) this grid lacks (approx_ndcg.dot.lr0.001."
        "seed0, softmax.dot.lr0.001.seed1, approx_ndcg.dot.lr0.001.seed1, "
        "...), which this worker would leave unfinished. Pass the study's "
        "grid (or one that holds all of it, to grow the study), or another "
        "--study_dir."))
    self.assertEqual(hashes(folder), before)


def image_folder(folder, per_class=30):
  """train/{dark,grey,light}/*.png, `per_class` small images each of one
  shade (varied a little): validation and test are cut from train, 10%
  each."""
  for c, (name, shade) in enumerate((("dark", 30), ("grey", 128),
                                     ("light", 225))):
    os.makedirs(os.path.join(folder, "train", name))
    for i in range(per_class):
      image = np.full([10 + i % 5, 12, 3], shade + (i % 7) - 3, np.uint8)
      with open(os.path.join(folder, "train", name, f"{c}{i:02d}.png"),
                "wb") as f:
        f.write(tf.io.encode_png(image).numpy())
  return folder


@pytest.mark.slow
class StreamedDataStudyTest(tf.test.TestCase):
  """Issue 58 case 14: a study on streamed data (an image folder) with
  `--export=false` scores each run's best checkpoint from the streamed
  validation and test files; it ended in `KeyError: 'validation'`."""

  def test_image_folder_without_exports(self):
    root = tempfile.mkdtemp()
    data_dir = image_folder(os.path.join(root, "images"))  # 72 train images.
    study_dir = os.path.join(root, "study")
    # The command as written (the default --batch_size=64).
    proc = helpers.run_module(
        "pipelines.study", f"--study_dir={study_dir}",
        "--dataset=image_folder", f"--data_dir={data_dir}", "--image_size=32",
        "--encoder=small_cnn", "--losses=softmax", "--interactions=dot",
        "--seeds=0", "--learning_rates=0.003", "--train_steps=20",
        "--eval_every=10", "--export=false", check=False)
    self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
    self.assertEqual(proc.stdout.strip().splitlines()[-1],
                     f"Wrote {study_dir}/results.csv, {study_dir}/tables.md "
                     f"and {study_dir}/figures/.")
    run = "softmax.dot.lr0.003.seed0"
    folder = os.path.join(study_dir, "runs", run)
    self.assertFalse(os.path.exists(os.path.join(folder, "export")))
    with open(os.path.join(folder, study_folder.RESULT_FILE)) as f:
      record = json.load(f)
    arrays = study_folder.load_test_arrays(study_dir, run)
    # The test split's labels in its order: 3 images of each class.
    data = builders.load_data(exported_ranker.load_config(folder))
    labels = [int(y) for _, y in data.dataset("test").as_numpy_iterator()]
    self.assertEqual(sorted(labels), [0, 0, 0, 1, 1, 1, 2, 2, 2])
    self.assertEqual(arrays["labels"].tolist(), labels)
    self.assertEqual(record["num_test"], 9)
    # The best checkpoint's metrics are those its export gives (written
    # now, from the same checkpoint).
    training.export_run(folder)
    for split in ("validation", "test"):
      exported = exported_ranker.evaluate(folder, data, split)
      for name in ("top1_accuracy", "mrr"):
        self.assertAllClose(record[split][name], exported[name], atol=1e-6)


if __name__ == "__main__":
  tf.test.main()
