"""docs/distributed.md's scheduler recipes, run here: the Slurm array's and the
Kubernetes Indexed Job's study commands, with the scheduler's environment
variables set, a temporary folder for the shared one and a smaller grid
appended (later flags win)."""

import csv
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

from absl.testing import absltest
import pytest
import yaml

import helpers

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

DOC = os.path.join(helpers.REPO, "docs", "distributed.md")
# 4 units (2 cells x 2 seeds), one per worker of the recipes' 4.
SMALL = ["--losses=softmax", "--interactions=dot,lc_mlp", "--seeds=0,1",
         "--learning_rates=1e-2", "--mlp_units=8", "--train_steps=10",
         "--eval_every=5", "--export=false"]
TRAINS = re.compile(r"study: worker (.+) trains (\S+)$")


def recipe(name):
  """The fenced block after `<!-- recipe: name -->` in the doc."""
  with open(DOC) as f:
    text = f.read()
  found = re.search(rf"<!-- recipe: {name} -->\n```\w+\n(.*?)```", text,
                    re.S)
  assert found, f"no recipe {name} in {DOC}"
  return found.group(1)


def trained_by(study_dir):
  """{run: worker} from the runs' study.log files."""
  out = {}
  for path in glob.glob(os.path.join(study_dir, "runs", "*", "study.log")):
    with open(path) as f:
      for line in f:
        found = TRAINS.search(line.strip())
        if found:
          out[found.group(2)] = found.group(1)
  return out


def run_all(commands_and_envs):
  procs = [subprocess.Popen(cmd, cwd=helpers.REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
           for cmd, env in commands_and_envs]
  outputs = [p.communicate(timeout=900) for p in procs]
  for p, (_, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-3000:]
  return [out for out, _ in outputs]


class RecipesTest(absltest.TestCase):

  def check_study(self, study_dir, outputs, task_names):
    by = trained_by(study_dir)
    self.assertLen(by, 4)
    # One unit per worker: every task trained exactly one run.
    self.assertCountEqual([re.sub(r"^\S+ ", "", w) for w in by.values()],
                          task_names)
    with open(os.path.join(study_dir, "results.csv")) as f:
      self.assertLen(list(csv.DictReader(f)), 4)
    self.assertEqual(sum("Wrote " in out for out in outputs), 1, outputs)

  def test_slurm_array(self):
    script = recipe("slurm-study")
    first, last = map(int, re.search(r"#SBATCH --array=(\d+)-(\d+)",
                                     script).groups())
    line = next(l for l in script.splitlines()
                if l.startswith(".venv/bin/python -m pipelines.study"))
    study_dir = os.path.join(tempfile.mkdtemp(), "study")
    cmd = [sys.executable] + [
        a.replace("/shared/studies/digits", study_dir)
        for a in shlex.split(line)[1:]] + SMALL
    runs = []
    for task in range(first, last + 1):
      env = dict(os.environ, SLURM_ARRAY_JOB_ID="881",
                 SLURM_ARRAY_TASK_ID=str(task),
                 SLURM_ARRAY_TASK_MIN=str(first),
                 SLURM_ARRAY_TASK_COUNT=str(last - first + 1))
      runs.append((cmd, env))
    outputs = run_all(runs)
    count = last - first + 1
    self.check_study(study_dir, outputs,
                     [f"slurm 881_{task} shard {task - first}/{count}"
                      for task in range(first, last + 1)])
    # Shards deal (cell, seed) units round-robin in grid order.
    self.assertEqual(trained_by(study_dir)["softmax.dot.lr0.01.seed1"].split(
        " slurm ")[1], f"881_{first + 2} shard 2/{count}")

  def test_kubernetes_indexed_job(self):
    job = yaml.safe_load(recipe("k8s-study"))
    spec = job["spec"]
    self.assertEqual(spec["completionMode"], "Indexed")
    container = spec["template"]["spec"]["containers"][0]
    study_dir = os.path.join(tempfile.mkdtemp(), "study")
    cmd = [sys.executable] + [
        a.replace("gs://BUCKET/studies/digits", study_dir)
        for a in container["command"][1:]] + SMALL
    self.assertIn(f"--num_shards={spec['completions']}", cmd)
    outputs = run_all([(cmd, dict(os.environ, JOB_COMPLETION_INDEX=str(i)))
                       for i in range(spec["completions"])])
    count = spec["completions"]
    self.check_study(study_dir, outputs,
                     [f"k8s index {i} shard {i}/{count}" for i in range(count)])


if __name__ == "__main__":
  absltest.main()
