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
  """Both recipes deal the grid into 4 shards the same way, so they share one
  study here: array tasks 1-2 of the Slurm script and indices 2-3 of the
  Kubernetes Job complete it together (4 processes, not 8)."""

  def slurm(self, study_dir):
    script = recipe("slurm-study")
    first, last = map(int, re.search(r"#SBATCH --array=(\d+)-(\d+)",
                                     script).groups())
    self.assertEqual((first, last), (1, 4))
    line = next(l for l in script.splitlines()
                if l.startswith(".venv/bin/python -m pipelines.study"))
    cmd = [sys.executable] + [
        a.replace("/shared/studies/digits", study_dir)
        for a in shlex.split(line)[1:]] + SMALL
    return [(cmd, dict(os.environ, SLURM_ARRAY_JOB_ID="881",
                       SLURM_ARRAY_TASK_ID=str(task),
                       SLURM_ARRAY_TASK_MIN=str(first),
                       SLURM_ARRAY_TASK_COUNT=str(last - first + 1)))
            for task in (1, 2)]

  def kubernetes(self, study_dir):
    job = yaml.safe_load(recipe("k8s-study"))
    spec = job["spec"]
    self.assertEqual((spec["completionMode"], spec["completions"]),
                     ("Indexed", 4))
    container = spec["template"]["spec"]["containers"][0]
    cmd = [sys.executable] + [
        a.replace("gs://BUCKET/studies/digits", study_dir)
        for a in container["command"][1:]] + SMALL
    self.assertIn("--num_shards=4", cmd)
    return [(cmd, dict(os.environ, JOB_COMPLETION_INDEX=str(i)))
            for i in (2, 3)]

  def test_slurm_array_and_kubernetes_indexed_job(self):
    study_dir = os.path.join(tempfile.mkdtemp(), "study")
    outputs = run_all(self.slurm(study_dir) + self.kubernetes(study_dir))
    by = trained_by(study_dir)
    # 4 units (cell x seed) dealt round-robin in grid order: one each.
    self.assertEqual({run: re.sub(r"^\S+ ", "", w) for run, w in by.items()},
                     {"softmax.dot.lr0.01.seed0": "slurm 881_1 shard 0/4",
                      "softmax.lc_mlp.lr0.01.u8.seed0": "slurm 881_2 shard 1/4",
                      "softmax.dot.lr0.01.seed1": "k8s index 2 shard 2/4",
                      "softmax.lc_mlp.lr0.01.u8.seed1": "k8s index 3 shard 3/4"})
    with open(os.path.join(study_dir, "results.csv")) as f:
      self.assertLen(list(csv.DictReader(f)), 4)
    # The last worker to finish writes the report; the others say so.
    self.assertGreaterEqual(sum("Wrote " in out for out in outputs), 1)
    self.assertTrue(all("Wrote " in out or "are current" in out or
                        "the last worker to finish writes the report" in out
                        for out in outputs), outputs)


if __name__ == "__main__":
  absltest.main()
