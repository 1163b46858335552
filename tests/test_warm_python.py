"""A binary forked from the warm interpreter behaves as one started cold.

`tests/warm_python.py` starts the suite's binaries from an interpreter that
has imported TensorFlow already; these tests run the same commands both
ways and compare exit status, stdout and stderr byte for byte, so a binary
whose cold start printed more (TensorFlow's start-up chatter), read its
flags or environment otherwise, or exited otherwise fails here.
"""

import os
import subprocess
import sys
import tempfile
from unittest import mock

from absl.testing import absltest

from tests import helpers
from tests import warm_python

REPO = helpers.REPO


def both(*args, **kwargs):
  """(warm, cold) runs of `python -m args...`, neither checked."""
  cmd = [sys.executable, "-m", *args]
  return (helpers.run_command(cmd, check=False, **kwargs),
          helpers.run_command(cmd, check=False, cold=True, **kwargs))


class WarmEqualsColdTest(absltest.TestCase):

  def assert_same(self, warm, cold, returncode):
    self.assertEqual((warm.returncode, warm.stdout, warm.stderr),
                     (cold.returncode, cold.stdout, cold.stderr))
    self.assertEqual(warm.returncode, returncode)

  def test_refusals_of_two_binaries_in_a_row(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    for args, lines in ((("pipelines.train", "--loss=hinge",
                          f"--model_dir={model_dir}"), 1),
                        (("pipelines.train", "--batch_size=abc"), 2),
                        (("pipelines.evaluate",
                          "--model_dir=/nonexistent/run"), 1)):
      warm, cold = both(*args)
      self.assert_same(warm, cold, 1)
      self.assertLen(warm.stderr.strip().splitlines(), lines)
      if args[1] == "--loss=hinge":
        self.assertIn("--loss='hinge' is not valid", warm.stderr)
    self.assertFalse(os.path.exists(model_dir))

  def test_stdin_stdout_and_exit_status(self):
    warm, cold = both("json.tool", "--sort-keys", stdin='{"b": 1, "a": [2]}')
    self.assert_same(warm, cold, 0)
    self.assertEqual(warm.stdout, '{\n    "a": [\n        2\n    ],\n'
                     '    "b": 1\n}\n')
    warm, cold = both("json.tool", stdin="{not json")
    self.assert_same(warm, cold, 1)
    self.assertStartsWith(warm.stderr, "Expecting property name")

  def test_what_runs_cold(self):
    train = [sys.executable, "-m", "pipelines.train"]
    self.assertTrue(warm_python.can_run(train))
    self.assertTrue(warm_python.can_run(
        train, env=dict(os.environ, PYTEST_CURRENT_TEST="another")))
    self.assertFalse(warm_python.can_run(
        train, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")))
    self.assertFalse(warm_python.can_run(train, cold=True))
    self.assertFalse(warm_python.can_run([sys.executable, "-c", "1"]))
    with mock.patch.dict(os.environ, {warm_python.COLD_VARIABLE: "1"}):
      self.assertFalse(warm_python.can_run(train))

  def test_a_changed_environment_starts_it_again(self):
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "probe_env.py"), "w") as f:
      f.write("import os, sys\n"
              "print(os.environ['R4C_PROBE'], 'tensorflow' in sys.modules, "
              "os.getppid(), os.getpid())\n")
    for value in ("1", "2"):
      with mock.patch.dict(os.environ, {"PYTHONPATH": folder,
                                        "R4C_PROBE": value}):
        cmd = [sys.executable, "-m", "probe_env"]
        self.assertTrue(warm_python.can_run(cmd))
        proc = warm_python.run(cmd, REPO)
        server = warm_python._server  # pylint: disable=protected-access
        self.assertEqual(server[2]["R4C_PROBE"], value)
        # A new process, forked from the warm interpreter, which imported
        # TensorFlow before the module ran.
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        probe, imported, parent, pid = proc.stdout.split()
        self.assertEqual((probe, imported, int(parent)),
                         (value, "True", server[0].pid))
        self.assertNotIn(int(pid), (server[0].pid, os.getpid()))

  def test_killed_child_and_timeout(self):
    with self.assertRaises(subprocess.TimeoutExpired):
      warm_python.run([sys.executable, "-m", "http.server", "0"], REPO,
                      timeout=3)
    # The warm interpreter serves the next command.
    warm, cold = both("json.tool", stdin="[]")
    self.assert_same(warm, cold, 0)


LONG_FOLDER_SCRIPT = """
import sys
from tests import warm_python
proc = warm_python.run([sys.executable, "-m", "json.tool"], sys.argv[1],
                       stdin='{"a": 1}')
print(repr((proc.returncode, proc.stdout, proc.stderr)))
print(warm_python._server[1])
"""


class LongProcessFolderTest(absltest.TestCase):

  def test_a_socket_path_too_long_goes_to_a_folder_of_tmp(self):
    # Under pytest-xdist with TMPDIR=/tmp/suite_disk_tmp_XXXXXXXX
    # (benchmarks/suite_disk.py), a worker's process folder sits in the
    # controller's and the socket path came to 107 bytes: "AF_UNIX path too
    # long", and every test of a binary failed.
    process = os.path.join(tempfile.mkdtemp(), "p" * 60, "q" * 30)
    os.makedirs(process)
    self.assertGreater(len(os.path.join(process, "warm_python_12345678",
                                        "socket")), 107)
    env = dict(os.environ, **{warm_python.PROCESS_TMP_VARIABLE: process})
    env.pop(warm_python.COLD_VARIABLE, None)
    proc = subprocess.run([sys.executable, "-c", LONG_FOLDER_SCRIPT, REPO],
                          cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    result, socket_path = proc.stdout.splitlines()
    self.assertEqual(result, repr((0, '{\n    "a": 1\n}\n', "")))
    self.assertRegex(socket_path, r"^/tmp/warm_python_\w+/socket$")
    # Its folder went with the process; none was left in the process folder.
    self.assertFalse(os.path.exists(os.path.dirname(socket_path)))
    self.assertEqual(os.listdir(process), [])


if __name__ == "__main__":
  absltest.main()
