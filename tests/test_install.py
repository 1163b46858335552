"""A non-editable install runs the binaries and the shipped data anywhere.

Builds the wheel from a copy of the sources (so nothing is written into the
checkout), installs it with `pip install --no-deps --target`, and runs
`pipelines.demo` and a GoEmotions `pipelines.train` as a user of that install
would: from a folder outside the repository, with the installed copy first on
PYTHONPATH and the dependencies from this interpreter's site-packages. The
GoEmotions run reads no --data_dir, so it uses the files the wheel ships in
`rank4class_tf/data/`.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from absl.testing import absltest
import helpers

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

REPO = helpers.REPO
# What setup.py builds from; build outputs and caches are left behind.
SOURCES = ("setup.py", "MANIFEST.in", "README.md", "rank4class_tf",
           "pipelines", "data")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info",
                                 "build", "dist")


def _pip(*args, cwd):
  """`python -m pip args` offline; raises with pip's output on failure."""
  proc = subprocess.run(
      [sys.executable, "-m", "pip", "--disable-pip-version-check", *args,
       "--no-deps", "--no-index", "--quiet"],
      cwd=cwd, capture_output=True, text=True, timeout=300)
  if proc.returncode != 0:
    raise AssertionError(f"pip {args[0]} failed:\n{proc.stderr[-3000:]}")


class NonEditableInstallTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    source = os.path.join(cls.tmp, "source")
    os.mkdir(source)
    for name in SOURCES:
      path = os.path.join(REPO, name)
      if os.path.isdir(path):
        shutil.copytree(path, os.path.join(source, name), ignore=IGNORED)
      elif os.path.exists(path):
        shutil.copy(path, source)
    dist = os.path.join(cls.tmp, "dist")
    _pip("wheel", "--no-build-isolation", "--wheel-dir", dist, source,
         cwd=cls.tmp)
    (wheel,) = os.listdir(dist)
    cls.site = os.path.join(cls.tmp, "site")
    _pip("install", "--no-compile", "--target", cls.site,
         os.path.join(dist, wheel), cwd=cls.tmp)
    cls.cwd = os.path.join(cls.tmp, "elsewhere")
    os.mkdir(cls.cwd)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def run_installed(self, *args):
    """`python args` from outside the repo, the installed copy first."""
    env = dict(os.environ, PYTHONPATH=self.site)
    return subprocess.run([sys.executable, *args], cwd=self.cwd, env=env,
                          capture_output=True, text=True, timeout=600)

  def test_modules_and_data_come_from_the_install(self):
    proc = self.run_installed(
        "-c", "import importlib.util as u; "
        "print(u.find_spec('rank4class_tf').origin); "
        "print(u.find_spec('pipelines').origin)")
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertEqual(proc.stdout.split(), [
        os.path.join(self.site, "rank4class_tf", "__init__.py"),
        os.path.join(self.site, "pipelines", "__init__.py")])
    for name in ("README.md", "goemotions/emotions.txt",
                 "goemotions/train.tsv", "goemotions/dev.tsv",
                 "goemotions/test.tsv", "goemotions/LICENSE"):
      self.assertTrue(os.path.isfile(
          os.path.join(self.site, "rank4class_tf", "data", "shipped", name)),
                      name)
    for name in ("sorting/pretrained/sorters.json",
                 "study/paper_tables/template.json"):
      self.assertTrue(os.path.isfile(
          os.path.join(self.site, "rank4class_tf", name)), name)

  def test_demo_prints_its_table(self):
    # `make demo` with fewer steps and two losses (the demo's own test: its
    # table, and a quiet console).
    model_dir = os.path.join(self.tmp, "demo")
    proc = self.run_installed(
        "-m", "pipelines.demo", f"--model_dir={model_dir}",
        "--losses=softmax,pairwise_logistic", "--train_steps=20",
        "--eval_every=10")
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    lines = proc.stdout.strip().splitlines()
    self.assertTrue(lines[-1].startswith("Total wall time"), proc.stdout)
    header = lines.index("| loss | top1_accuracy | top5_accuracy | ndcg@5 "
                         "| mrr | train s |")
    rows = {line.split(" | ")[0][2:]: line
            for line in lines[header + 2:header + 4]}
    self.assertEqual(set(rows), {"softmax", "pairwise_logistic"})
    for loss, row in rows.items():
      # The table's numbers are the export's on the test split.
      results = helpers.evaluate(os.path.join(model_dir, loss))
      self.assertEqual(row.split(" | ")[1], f"{results['top1_accuracy']:.4f}")
    # Quiet: the table and this package's own log lines on the console
    # (at most 20 lines), TensorFlow's INFO lines (the SavedModel writer's)
    # only in log.txt.
    output = (proc.stdout + proc.stderr).strip().splitlines()
    self.assertLessEqual(len(output), 20, "\n".join(output))
    self.assertNotIn("Assets written to", proc.stderr)
    with open(os.path.join(model_dir, "log.txt")) as f:
      self.assertIn("Assets written to", f.read())

  def test_goemotions_trains_on_the_shipped_files(self):
    # The tiny settings of test_text_pipelines, on the shipped data.
    model_dir = os.path.join(self.tmp, "goemotions")
    proc = self.run_installed(
        "-m", "pipelines.train", "--dataset=goemotions", "--encoder=bert",
        "--encoder_size=tiny", "--loss=softmax", "--interaction=dot",
        "--batch_size=4", "--max_seq_length=16", "--train_steps=1",
        "--eval_every=1", "--top_k=2", "--export=false",
        f"--model_dir={model_dir}")
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    # No export (test_demo_prints_its_table exports from the install; here
    # each export would calibrate on the 5,426 shipped validation comments).
    with open(os.path.join(model_dir, "best_checkpoint", "best.json")) as f:
      self.assertEqual(json.load(f)["epoch"], 1)
    self.assertFalse(os.path.exists(os.path.join(model_dir, "export")))


if __name__ == "__main__":
  absltest.main()
