"""Shared helpers of the test modules: paths, subprocess runs, evaluation.

The end-to-end tests run the binaries as users do, in a fresh process from
the repository root (two binaries in one process would collide on absl
flags).
"""

import os
import subprocess
import sys
from typing import Optional, Sequence

from rank4class_tf import serving
from rank4class_tf.training import builders

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_command(cmd: Sequence[str], check: bool = True,
                stdin: Optional[str] = None, env=None,
                timeout: int = 900) -> subprocess.CompletedProcess:
  """Runs `cmd` from the repository root, capturing text output; with
  `check`, a non-zero exit raises with the end of its stderr."""
  proc = subprocess.run(list(cmd), cwd=REPO, capture_output=True, text=True,
                        input=stdin, env=env, timeout=timeout)
  if check and proc.returncode != 0:
    raise AssertionError(f"{' '.join(cmd[:4])} failed (exit "
                         f"{proc.returncode}):\n{proc.stderr[-3000:]}")
  return proc


def run_module(module: str, *flags: str, check: bool = True,
               stdin: Optional[str] = None,
               env=None) -> subprocess.CompletedProcess:
  """`python -m module flags` from the repository root (see run_command)."""
  return run_command([sys.executable, "-m", module, *flags], check=check,
                     stdin=stdin, env=env)


def evaluate(model_dir: str, *args, **kwargs):
  """`serving.evaluate` of a run on the run's own data."""
  data = builders.load_data(serving.load_config(model_dir))
  return serving.evaluate(model_dir, data, *args, **kwargs)
