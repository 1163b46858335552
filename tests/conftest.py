"""pytest set-up shared by every test module."""

import os
import shutil
import tempfile

# Before any test module imports TensorFlow: on TensorFlow 2.16+ tf.keras must
# be Keras 2 and TF-Ranking needs the Estimator stand-in (rank4class_tf/compat.py).
import rank4class_tf  # pylint: disable=unused-import

# Every temporary folder of the run (the tests' tempfile.mkdtemp() run folders,
# with their checkpoints, and those of the binaries they start, which inherit
# TMPDIR) goes under one folder per pytest process, removed when it ends, so
# that a suite run leaves nothing behind in /tmp (a text run's folder holds
# about 1 GB of MiniLM checkpoints).
_SESSION_TMP = tempfile.mkdtemp(prefix="rank4class_tests_")
tempfile.tempdir = _SESSION_TMP
os.environ["TMPDIR"] = _SESSION_TMP


def pytest_unconfigure(config):
  del config  # Unused.
  shutil.rmtree(_SESSION_TMP, ignore_errors=True)
