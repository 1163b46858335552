"""pytest set-up shared by every test module."""

import atexit
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
