"""Tests of rank4class_tf.provenance."""

import os
import re
import subprocess
import tempfile
import sys

import tensorflow as tf

from rank4class_tf import provenance

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record(commit="a" * 40, dirty=False, tf_version="2.15.1"):
  return {"package": "0.1.0", "git_commit": commit, "git_dirty": dirty,
          "tensorflow": tf_version, "tensorflow_ranking": "0.5.5",
          "python": "3.11.7"}


class CollectTest(tf.test.TestCase):

  def test_fields_of_this_process(self):
    got = provenance.collect()
    self.assertEqual(set(got), set(provenance.CODE_FIELDS) | {"python"})
    self.assertEqual(got["tensorflow"], tf.__version__)
    import rank4class_tf  # pylint: disable=g-import-not-at-top
    self.assertEqual(got["package"], rank4class_tf.__version__)
    if os.path.exists(os.path.join(REPO, ".git")):
      head = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True)
      self.assertEqual(got["git_commit"], head.stdout.strip())
      self.assertIsInstance(got["git_dirty"], bool)
    else:
      self.assertEqual(got["git_commit"], provenance.NOT_A_CHECKOUT)

  def test_not_a_checkout(self):
    # A copy of the package outside any git checkout.
    tmp = tempfile.mkdtemp()
    package = os.path.join(tmp, "rank4class_tf")
    os.makedirs(package)
    with open(os.path.join(REPO, "rank4class_tf", "provenance.py")) as f:
      source = f.read()
    with open(os.path.join(package, "provenance.py"), "w") as f:
      f.write(source)
    with open(os.path.join(package, "__init__.py"), "w") as f:
      f.write('__version__ = "9.9"\n')
    proc = subprocess.run(
        [sys.executable, "-c", "from rank4class_tf import provenance; "
         "r = provenance.collect(); print(r['git_commit'], r['git_dirty'], "
         "r['package'])"], cwd=tmp, capture_output=True, text=True,
        check=True, env=dict(os.environ, GIT_CEILING_DIRECTORIES=tmp))
    self.assertEqual(proc.stdout.strip(), "not a git checkout None 9.9")

  def test_light(self):
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['rank4class_tf'] = "
         "type(sys)('rank4class_tf'); sys.modules['rank4class_tf']"
         ".__version__ = '0'; sys.modules['rank4class_tf'].__path__ = "
         f"[{os.path.join(REPO, 'rank4class_tf')!r}]; "
         "from rank4class_tf import provenance; provenance.collect(); "
         "print('tensorflow' in sys.modules)"],
        capture_output=True, text=True, check=True)
    self.assertEqual(proc.stdout.strip(), "False")


class DescribeTest(tf.test.TestCase):

  def test_describe(self):
    self.assertEqual(provenance.describe(record(dirty=True)),
                     "rank4class_tf 0.1.0, commit aaaaaaaaaaaa (dirty), "
                     "TensorFlow 2.15.1, TF-Ranking 0.5.5")
    self.assertEqual(provenance.describe(record(
        commit=provenance.NOT_A_CHECKOUT, dirty=None)),
                     "rank4class_tf 0.1.0, not a git checkout, TensorFlow "
                     "2.15.1, TF-Ranking 0.5.5")
    self.assertRegex(provenance.describe(None), "^unrecorded")

  def test_code_differs(self):
    self.assertFalse(provenance.code_differs([record(), record()]))
    self.assertTrue(provenance.code_differs([record(), record("b" * 40)]))
    self.assertTrue(provenance.code_differs([record(),
                                             record(tf_version="2.20.0")]))
    self.assertTrue(provenance.code_differs([record(), None]))
    # Two runs of one dirty checkout: their changes are unknown.
    self.assertTrue(provenance.code_differs([record(dirty=True)] * 2))
    self.assertFalse(provenance.code_differs([record(dirty=True)]))
    self.assertLen(provenance.distinct([record(), record("b" * 40),
                                        record()]), 2)


if __name__ == "__main__":
  tf.test.main()
