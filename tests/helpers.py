"""Shared helpers of the test modules: paths, subprocess runs, evaluation.

The end-to-end tests run the binaries as users do, in a fresh process from
the repository root (two binaries in one process would collide on absl
flags), forked from a warm interpreter where it behaves as a cold start
(`warm_python`; docs/testing.md).
"""

import os
import subprocess
import sys
import tempfile
from typing import Optional, Sequence

from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
from tests import warm_python

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def process_tempdir() -> str:
  """A new temporary folder that lasts as long as the pytest process, for
  what a process builds once and several test classes read (a class's own
  temporary folders are removed when it ends: conftest.py)."""
  return tempfile.mkdtemp(dir=os.environ.get(warm_python.PROCESS_TMP_VARIABLE))


def run_command(cmd: Sequence[str], check: bool = True,
                stdin: Optional[str] = None, env=None,
                timeout: int = 900,
                cold: bool = False) -> subprocess.CompletedProcess:
  """Runs `cmd` from the repository root, capturing text output; with
  `check`, a non-zero exit raises with the end of its stderr. A binary
  (`python -m MODULE ...`) is forked from a warm interpreter where it may
  be (`warm_python`), unless `cold`."""
  if warm_python.can_run(cmd, env, cold):
    proc = warm_python.run(cmd, REPO, stdin=stdin, env=env,
                           timeout=timeout)
  else:
    proc = subprocess.run(list(cmd), cwd=REPO, capture_output=True,
                          text=True, input=stdin, env=env, timeout=timeout)
  if check and proc.returncode != 0:
    raise AssertionError(f"{' '.join(cmd[:4])} failed (exit "
                         f"{proc.returncode}):\n{proc.stderr[-3000:]}")
  return proc


def run_module(module: str, *flags: str, check: bool = True,
               stdin: Optional[str] = None, env=None,
               cold: bool = False) -> subprocess.CompletedProcess:
  """`python -m module flags` from the repository root (see run_command)."""
  return run_command([sys.executable, "-m", module, *flags], check=check,
                     stdin=stdin, env=env, cold=cold)


def evaluate(model_dir: str, *args, **kwargs):
  """`exported_ranker.evaluate` of a run on the run's own data."""
  data = builders.load_data(exported_ranker.load_config(model_dir))
  return exported_ranker.evaluate(model_dir, data, *args, **kwargs)


class Killed(Exception):
  """A run stopped by `train_killed_after_first_validation`."""


def train_killed_after_first_validation(config) -> None:
  """Trains `config` in this process until the backup of its first
  validation is written, then stops it as SIGKILL would (no clean-up): a
  last callback raises `Killed`. Raises AssertionError if the run ends
  without being stopped."""
  # pylint: disable=g-import-not-at-top
  from unittest import mock
  import tensorflow as tf
  from rank4class_tf.training import pipeline as pipeline_lib
  from rank4class_tf.training import trainer as training

  class KillAfterFirstValidation(tf.keras.callbacks.Callback):

    def on_epoch_end(self, epoch, logs=None):
      if epoch == 0:
        raise Killed()

  build_callbacks = pipeline_lib.Rank4ClassPipeline.build_callbacks
  with mock.patch.object(
      pipeline_lib.Rank4ClassPipeline, "build_callbacks",
      lambda pipeline: build_callbacks(pipeline) + [
          KillAfterFirstValidation()]):
    try:
      training.train(config)
    except Killed:
      return
  raise AssertionError(f"{config.trainer.model_dir}: the run was not stopped")
