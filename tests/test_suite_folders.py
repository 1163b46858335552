"""The suite's temporary folders: one per test class, removed when it ends.

tests/conftest.py points tempfile and TMPDIR at a folder of each test class,
under a folder of each pytest process; what several classes of a process
share is made in the process's folder (`helpers.process_tempdir`). This
runs a small suite with that conftest in a subprocess and checks, from its
second class, what its first one left; and what conftest's `--class_sizes`
logs of each class's folder (benchmarks/suite_disk.py reads it).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest

import helpers
from tests import warm_python

SUITE = '''
import os
import tempfile

import tensorflow as tf

PROCESS = os.environ[{variable!r}]
RECORD = os.path.join(PROCESS, "record.txt")


class FirstTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.made_before = tempfile.mkdtemp()

  def test_writes(self):
    run = tempfile.mkdtemp()
    with open(os.path.join(run, "checkpoint"), "w") as f:
      f.write("x" * 1000)
    kept = tempfile.mkdtemp(dir=PROCESS)
    with open(RECORD, "w") as f:
      f.write("\\n".join([self.made_before, run, kept, os.environ["TMPDIR"],
                         tempfile.gettempdir(), self.get_temp_dir()]))


class SecondTest(tf.test.TestCase):

  def test_reads(self):
    with open(RECORD) as f:
      made_before, run, kept, tmpdir, gettempdir, tf_dir = f.read().split("\\n")
    assert gettempdir == tmpdir, (gettempdir, tmpdir)
    assert os.path.dirname(tmpdir) == PROCESS, (tmpdir, PROCESS)
    assert os.path.basename(tmpdir).startswith("class_"), tmpdir
    assert os.path.dirname(made_before) == tmpdir, (made_before, tmpdir)
    assert os.path.dirname(run) == tmpdir, (run, tmpdir)
    assert not os.path.exists(tmpdir), tmpdir
    assert os.path.isdir(kept), kept
    assert os.environ["TMPDIR"] != tmpdir
    assert os.path.dirname(tempfile.gettempdir()) == PROCESS
    # TensorFlow's get_temp_dir root outlived the first class.
    assert os.path.isdir(os.path.dirname(tf_dir)), tf_dir
    assert os.path.dirname(os.path.dirname(tf_dir)) == PROCESS, tf_dir
    assert os.path.isdir(self.get_temp_dir())
'''.format(variable=warm_python.PROCESS_TMP_VARIABLE)


class ClassFoldersTest(absltest.TestCase):

  def test_a_class_folder_is_gone_when_the_next_class_runs(self):
    root = tempfile.mkdtemp()
    os.mkdir(os.path.join(root, "tests"))
    for name in ("conftest.py", "warm_python.py"):
      shutil.copy(os.path.join(helpers.REPO, "tests", name),
                  os.path.join(root, "tests", name))
    with open(os.path.join(root, "tests", "test_two_classes.py"), "w") as f:
      f.write(SUITE)
    tmp = os.path.join(root, "tmp")
    os.mkdir(tmp)
    env = dict(os.environ, TMPDIR=tmp, PYTHONPATH=helpers.REPO)
    env.pop(warm_python.PROCESS_TMP_VARIABLE, None)
    sizes = os.path.join(root, "sizes.tsv")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "tests", f"--class_sizes={sizes}"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)
    self.assertEqual(proc.returncode, 0, proc.stdout[-3000:] + proc.stderr)
    self.assertIn("2 passed", proc.stdout)
    # The process's folder, with what it kept, is removed at its end.
    self.assertEqual(os.listdir(tmp), [])
    # --class_sizes (benchmarks/suite_disk.py): a line per class as it ended,
    # `du -sb` of its folder; the first class's held its 1,000-byte file.
    with open(sizes) as f:
      lines = [line.rstrip("\n").split("\t") for line in f]
    self.assertEqual([node for node, _ in lines],
                     ["tests/test_two_classes.py::FirstTest",
                      "tests/test_two_classes.py::SecondTest"])
    first, second = (int(size) for _, size in lines)
    self.assertGreaterEqual(first - second, 1000)


class SuiteDiskNumbersTest(absltest.TestCase):

  def test_docs_quote_the_committed_benchmark(self):
    # results/suite_disk/benchmark.md: `benchmarks/suite_disk.py`'s table.
    with open(os.path.join(helpers.REPO, "results", "suite_disk",
                           "benchmark.md"), encoding="utf-8") as f:
      table = f.read()
    row = re.search(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \| \d+ \| nothing \|$",
                    table, re.M)
    self.assertIsNotNone(row, "no table row in results/suite_disk/benchmark.md")
    classes, total, peak = row.groups()
    docs = {}
    for name in ("docs/testing.md", "docs/benchmarks.md",
                 "tests/conftest.py"):
      with open(os.path.join(helpers.REPO, name), encoding="utf-8") as f:
        docs[name] = " ".join(f.read().split())
    self.assertIn(f"add up to {total} GB in one `make test` ({classes} "
                  "classes", docs["docs/testing.md"])
    self.assertIn(f"peaked at {peak} GB", docs["docs/testing.md"])
    self.assertIn(f"{classes} classes whose folders add up to {total} GB",
                  docs["docs/benchmarks.md"])
    self.assertIn(f"a peak of {peak} GB", docs["docs/benchmarks.md"])
    self.assertIn(f"add up to {total} GB", docs["tests/conftest.py"])
    self.assertIn(f"peaked at {peak} GB", docs["tests/conftest.py"])


if __name__ == "__main__":
  absltest.main()
