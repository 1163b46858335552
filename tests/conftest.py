"""pytest set-up shared by every test module."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

# Before any test module imports TensorFlow: on TensorFlow 2.16+ tf.keras must
# be Keras 2 and TF-Ranking needs the Estimator stand-in (rank4class_tf/compat.py).
import rank4class_tf  # pylint: disable=unused-import

import pytest

from tests import warm_python

# Every temporary folder of the run (the tests' tempfile.mkdtemp() run folders,
# with their checkpoints, and those of the binaries they start, which inherit
# TMPDIR) goes under one folder per pytest process, removed when it ends, so
# that a suite run leaves nothing behind in /tmp (a text run's folder holds
# about 1 GB of MiniLM checkpoints); and each test class's, under a folder of
# its own, removed when the class ends (`_class_tmp`).
_SESSION_TMP = tempfile.mkdtemp(prefix="rank4class_tests_")
tempfile.tempdir = _SESSION_TMP
os.environ["TMPDIR"] = _SESSION_TMP
os.environ[warm_python.PROCESS_TMP_VARIABLE] = _SESSION_TMP
# Removed at exit, last: TensorFlow's googletest registers the removal of
# its own temporary folder (`tf.test.TestCase.get_temp_dir`, made in this
# one) when a test first asks for it, later than this, so atexit runs it
# first. Removed in `pytest_unconfigure`, before it, the folder made
# googletest log "Error removing ...: not found" at the end of every run.
atexit.register(shutil.rmtree, _SESSION_TMP, ignore_errors=True)


# The longest test classes, longest first (pytest --durations of a whole
# `make test` run, reference stack, 2 cores: 30-150 s each, a set-up training
# a run or a study, or several binaries in subprocesses). Under `-n 2 --dist
# loadscope` a worker takes whole classes in collection order; started last,
# one of them keeps a worker busy minutes after the other has finished.
# Started first, the short classes fill in around them.
SLOW_SCOPES = (
    "tests/test_study_pipeline.py::StudyTest",
    "tests/test_text_pipelines.py::GoEmotionsMiniLMTest",
    "tests/test_class_encoders.py::ZeroShotTrainingTest",
    "tests/test_study_workers.py::ThreeWorkersTest",
    "tests/test_feature_cache.py::FrozenTrainingTest",
    "tests/test_pipelines.py::TrainEvaluateTest",
    "tests/test_faults.py::ResumeTest",
    "tests/test_user_example.py::WalkthroughTest",
    "tests/test_sorting_pipelines.py::SorterPipelinesTest",
    "tests/test_install.py::NonEditableInstallTest",
    "tests/test_faults.py::FinishedRunTest",
    "tests/test_class_encoders.py::MirroredTest",
    "tests/test_study_pipeline.py::FrozenTextStudyTest",
    "tests/test_feature_cache.py::ExportLaterTest",
    "tests/test_user_datasets.py::EndToEndTest",
    "tests/test_distributed_recipes.py::RecipesTest",
    "tests/test_user_files.py::MirroredTest",
    "tests/test_user_files.py::DownstreamTest",
)


def pytest_collection_modifyitems(session, config, items):
  """Moves the items of `SLOW_SCOPES` to the front, in that order (a stable
  sort: every other item keeps its place)."""
  del session, config  # Unused.
  rank = {scope: i for i, scope in enumerate(SLOW_SCOPES)}

  def key(item):
    scope = item.nodeid.split("::")
    return rank.get("::".join(scope[:2]), len(rank))

  items.sort(key=key)


def pytest_addoption(parser):
  parser.addoption(
      "--class_sizes", default=None, metavar="FILE",
      help="Append a line to FILE as each test class ends: its node id, a "
      "tab, the bytes its temporary folder holds (benchmarks/suite_disk.py).")


def _du_bytes(folder: str) -> int:
  """`du -sb folder`: the bytes of its files and folders."""
  out = subprocess.run(["du", "-sb", folder], capture_output=True, text=True,
                       check=False).stdout
  return int(out.split()[0])


@pytest.fixture(scope="class", autouse=True)
def _class_tmp(request):
  """Points tempfile and TMPDIR at a new folder for the test class (a module's
  functions outside a class share one), removed when the class ends.

  Kept to the end of the process, the classes' folders add up to 5.44 GB
  in a `make test`, and a CI machine with less free disk failed 30 tests on
  "No space left on device"; removed as each class ends, the suite's
  temporary folders peaked at 0.77 GB (`benchmarks/suite_disk.py`, with
  `--class_sizes`; results/suite_disk/benchmark.md). What several classes of
  a process share (a cached run, the warm interpreter's socket, TensorFlow's
  `get_temp_dir` root) is made in the process's folder instead
  (`helpers.process_tempdir`).
  """
  if "tensorflow" in sys.modules:
    # tf.test.TestCase.get_temp_dir's root, made once per process on first
    # use: made here, in the process's folder, it outlives this class.
    # pylint: disable-next=g-import-not-at-top
    from tensorflow.python.platform import googletest
    googletest.GetTempDir()
  folder = tempfile.mkdtemp(prefix="class_", dir=_SESSION_TMP)
  tempfile.tempdir = folder
  os.environ["TMPDIR"] = folder
  yield folder
  tempfile.tempdir = _SESSION_TMP
  os.environ["TMPDIR"] = _SESSION_TMP
  sizes = request.config.getoption("class_sizes")
  if sizes:
    # One short line per write, in append mode: whole under pytest-xdist's
    # two processes appending to the same file.
    with open(sizes, "a", encoding="utf-8") as f:
      f.write(f"{request.node.nodeid}\t{_du_bytes(folder)}\n")
  shutil.rmtree(folder, ignore_errors=True)
