"""Tests of rank4class_tf.provenance."""

import os
import platform
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
    self.assertEqual(set(got),
                     set(provenance.CODE_FIELDS) | {"python", "machine"})
    self.assertEqual(got["machine"], provenance.machine())
    self.assertEqual(got["machine"]["cpu_count"], os.cpu_count())
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


# The first processor of two /proc/cpuinfo files, cut short: a VM that names
# only the make, and a Sapphire Rapids Xeon.
EPYC_VM = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx avx2 fma bmi2 sha_ni

processor\t: 1
model name\t: another name
flags\t\t: avx512f
"""
XEON = """processor\t: 0
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: avx avx2 avx512f avx512dq avx512_bf16 avx512_vnni amx_bf16 amx_tile
"""


class MachineTest(tf.test.TestCase):

  def cpuinfo(self, text):
    path = os.path.join(self.get_temp_dir(), "cpuinfo")
    with open(path, "w") as f:
      f.write(text)
    return path

  def test_first_processor_and_the_features_onednn_dispatches_on(self):
    self.assertEqual(provenance.machine(self.cpuinfo(EPYC_VM)),
                     {"cpu": "AMD EPYC (family 25, model 1)",
                      "cpu_count": os.cpu_count(),
                      "cpu_features": ["avx2"]})
    xeon = provenance.machine(self.cpuinfo(XEON))
    self.assertEqual(xeon["cpu"], "Intel(R) Xeon(R) Platinum 8481C CPU @ "
                     "2.70GHz (family 6, model 143)")
    # In CPU_FEATURES' order; avx512dq and amx_tile are not among them.
    self.assertEqual(xeon["cpu_features"],
                     ["avx2", "avx512f", "avx512_vnni", "avx512_bf16",
                      "amx_bf16"])

  def test_without_cpuinfo(self):
    got = provenance.machine(os.path.join(self.get_temp_dir(), "absent"))
    self.assertEqual(got["cpu_features"], [])
    self.assertEqual(got["cpu"], platform.processor() or platform.machine())

  def test_describe_machine(self):
    self.assertEqual(
        provenance.describe_machine(
            dict(record(), machine=provenance.machine(self.cpuinfo(XEON)))),
        "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz (family 6, model "
        f"143), {os.cpu_count()} cores, avx2, avx512f, avx512_vnni, "
        "avx512_bf16, amx_bf16")
    self.assertEqual(provenance.describe_machine(
        dict(record(), machine={"cpu": "arm", "cpu_count": 8,
                                "cpu_features": []})),
                     "arm, 8 cores, no AVX2")
    self.assertEqual(provenance.describe_machine(record()), "unrecorded")
    self.assertEqual(provenance.describe_machine(None), "unrecorded")

  def test_the_machine_is_not_the_code(self):
    on_epyc = dict(record(), machine=provenance.machine(self.cpuinfo(EPYC_VM)))
    on_xeon = dict(record(), machine=provenance.machine(self.cpuinfo(XEON)))
    self.assertFalse(provenance.code_differs([on_epyc, on_xeon]))
    self.assertEqual(provenance.describe(on_epyc),
                     provenance.describe(on_xeon))


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
