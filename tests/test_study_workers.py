"""End-to-end tests of study workers (docs/distributed.md): several
`pipelines.study` processes on one --study_dir, a worker SIGKILLed and its
claim taken over, and a whole study on TensorFlow's in-memory `ram://` file
system. Shards under Slurm and Kubernetes: test_distributed_recipes."""

import csv
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest
import pytest

from rank4class_tf import fileio
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import report as study_report
from rank4class_tf.study import runner as study
import helpers
import test_study

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

# No export: the study scores the best checkpoint (cheaper, the same
# claims and decisions).
SHARED = ["--dataset=digits", "--mlp_units=8", "--train_steps=20",
          "--eval_every=10", "--export=false", "--deterministic"]
# 2 runs: 2 losses, dot, seed 0, one learning rate. Started together, two
# of the three workers train one each; the third finds both claimed (and
# later the report current).
GRID = ["--losses=softmax,approx_ndcg", "--interactions=dot",
        "--seeds=0", "--learning_rates=1e-2"]
# Columns that differ between workers and between runs of one command.
UNSTABLE = ("train_seconds", "resumed_at_step",
            # A commit landing between the two studies changes these alone.
            "git_commit", "git_dirty")
TRAINS = re.compile(r"study: worker (.+) (trains|resumes at step \d+) (\S+)$")


def command(study_dir, *flags):
  return [sys.executable, "-m", "pipelines.study", f"--study_dir={study_dir}",
          *SHARED, *flags]


def start(cmd):
  return subprocess.Popen(cmd, cwd=helpers.REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def rows(study_dir):
  with open(os.path.join(study_dir, "results.csv")) as f:
    return {r["run"]: {k: v for k, v in r.items() if k not in UNSTABLE}
            for r in csv.DictReader(f)}


def trainings(study_dir):
  """{run: [(worker, "trains" | "resumes at step N")]} from the runs'
  study.log files."""
  out = {}
  for path in glob.glob(os.path.join(study_dir, "runs", "*",
                                     study_folder.LOG_FILE)):
    with open(path) as f:
      for line in f:
        found = TRAINS.search(line.strip())
        if found:
          out.setdefault(found.group(3), []).append(found.group(1, 2))
  return out


class ThreeWorkersTest(absltest.TestCase):
  """One worker, then three on another folder: the same results."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tempfile.mkdtemp()
    cls.one = os.path.join(root, "one")
    helpers.run_command(command(cls.one, *GRID))
    cls.three = os.path.join(root, "three")
    procs = [start(command(cls.three, *GRID, f"--worker_name=w{i}"))
             for i in range(3)]
    cls.outputs = [p.communicate(timeout=900) for p in procs]
    cls.codes = [p.returncode for p in procs]

  def test_every_worker_exits_0(self):
    self.assertEqual(self.codes, [0, 0, 0], [o[1][-2000:]
                                              for o in self.outputs])

  def test_each_run_trained_exactly_once(self):
    done = trainings(self.three)
    self.assertLen(done, 2)
    for run, times in done.items():
      self.assertLen(times, 1, run)
      self.assertEqual(times[0][1], "trains")
    # The progress lines say who ran what, and agree with the logs.
    said = {}
    for i, (stdout, _) in enumerate(self.outputs):
      for line in stdout.splitlines():
        found = re.match(r"^\[\d+/2\] (\S+) \(worker (w\d)\):", line)
        if found:
          self.assertEqual(found.group(2), f"w{i}")
          said[found.group(1)] = found.group(2)
    self.assertEqual(said, {run: t[0][0] for run, t in done.items()})
    self.assertGreaterEqual(len(set(said.values())), 2)  # Shared out.

  def test_same_results_as_one_worker(self):
    self.assertEqual(rows(self.three), rows(self.one))

  def test_the_report_is_written_once(self):
    wrote = [o[0] for o in self.outputs if "\nWrote " in "\n" + o[0]]
    current = [o[0] for o in self.outputs if "are current: another worker "
               "wrote them from the same runs." in o[0]]
    self.assertLen(wrote, 1)
    self.assertLen(current, 2)
    self.assertFalse(glob.glob(os.path.join(self.three, "claims", "*.json")))


class KilledWorkerTest(absltest.TestCase):

  def test_claim_of_a_killed_worker_is_taken_over_and_resumed(self):
    study_dir = os.path.join(tempfile.mkdtemp(), "study")
    # One run, long enough to be killed after its first validation (and
    # before its last: two more of 100 steps).
    flags = ["--losses=softmax", "--interactions=dot", "--seeds=0",
             "--learning_rates=1e-2", "--train_steps=300", "--eval_every=100",
             "--claim_timeout=4"]
    first = start(command(study_dir, *flags, "--worker_name=doomed"))
    backup = os.path.join(study_dir, "runs", "softmax.dot.lr0.01.seed0",
                          "backup")
    deadline = time.time() + 300
    while not glob.glob(os.path.join(backup, "*", "checkpoint")) and (
        time.time() < deadline and first.poll() is None):
      time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    claims = study_claims.Claims(study_dir, study_claims.Worker())
    self.assertEqual(claims.read("softmax.dot.lr0.01.seed0")["worker"],
                     "doomed")  # Left behind by the dead worker.
    second = helpers.run_command(command(study_dir, *flags,
                                         "--worker_name=heir"))
    # On the same host the dead process is seen at once (no timeout).
    self.assertIn("softmax.dot.lr0.01.seed0: took over the claim of worker "
                  "doomed (its process has ended); the run resumes from its "
                  "backup.", second.stdout)
    done = trainings(study_dir)["softmax.dot.lr0.01.seed0"]
    self.assertEqual(done[0], ("doomed", "trains"))
    self.assertEqual(done[1][0], "heir")
    self.assertRegex(done[1][1], r"^resumes at step [12]00$")
    record = study_folder.load_records(study_dir)[0]
    self.assertEqual(record["worker"], "heir")
    self.assertGreater(record["resumed_at_step"], 0)
    self.assertIsNone(claims.read("softmax.dot.lr0.01.seed0"))


class RamStudyTest(absltest.TestCase):
  """A study whose folder is on TensorFlow's in-memory file system (in this
  process: `ram://` is not shared between processes)."""

  def test_study_and_report_on_ram(self):
    study_dir = "ram://study-test/study"
    base = test_study.base_config(dataset="digits", mlp_units=8,
                                  deterministic=True)  # 10 steps.
    grid = study_grid.Grid(losses=("softmax",), interactions=("dot",),
                           seeds=(0,), learning_rates=(1e-2, 3e-2))
    lines = []
    runs = study.run_study(study_dir, base, grid, progress=lines.append)
    self.assertLen(runs, 2)
    self.assertLen(study_folder.load_records(study_dir), 2)
    paths = study_report.write_report(study_dir, progress=lines.append)
    with fileio.open_file(paths["results"]) as f:
      self.assertLen(list(csv.DictReader(f)), 2)
    self.assertTrue(fileio.exists(os.path.join(
        study_dir, "runs", "softmax.dot.lr0.01.seed0", "export",
        "best_model_by_metric", "saved_model.pb")))
    again = []
    study.run_study(study_dir, base, grid, progress=again.append)
    self.assertEqual(again, [f"2 of 2 runs already finished in {study_dir}: "
                             "skipped."])


if __name__ == "__main__":
  absltest.main()
