"""Starts the binaries the tests run in processes forked from a warm Python.

A binary's process spends about 6 s of this 2-core machine importing
TensorFlow, TF-Ranking and the Model Garden before it reads a flag, and the
suite starts many of them (at least 73 in one count, most refusing a bad
input in one line or training a few steps). One interpreter per pytest process imports
them once, single-threaded, and no module of the binaries (`pipelines` is
imported for its start-up settings, then dropped); each `python -m MODULE
FLAGS` the tests run is then a child forked from it: a new process (its own
pid, absl flags, module state and exit status) that sets the command's
environment, working folder, stdin, stdout and stderr, and runs MODULE as
`python -m` does (`runpy.run_module(..., alter_sys=True)`).

What differs from a cold start, and how `run` keeps it out of the tests:

* the imports happen before the command's environment is set, so a
  command given an environment of its own (`env=`) runs cold, and when
  `os.environ` has changed (pytest's per-test `PYTEST_CURRENT_TEST` and
  the per-class `TMPDIR` aside, which no preloaded import reads) the warm
  interpreter is started again in it;
* what importing TensorFlow prints goes to the warm interpreter's stderr,
  not the command's: a test of a binary's start-up output passes
  `cold=True`;
* a binary that imports none of the preloaded libraries (the sorter
  binaries skip the Model Garden and TF Hub) also has their absl flags.

`R4C_COLD_BINARIES=1` starts every binary cold, as a user's shell does.
"""

import atexit
import json
import os
import runpy
import shutil
import socket
import subprocess
import sys
import tempfile
from typing import Optional, Sequence

# Imported by every binary of the package that trains, scores or serves.
PRELOAD = ("tensorflow", "tensorflow_ranking", "tensorflow_text",
           "tensorflow_hub", "official.nlp.modeling", "scipy.stats", "pandas")
COLD_VARIABLE = "R4C_COLD_BINARIES"
# Set by pytest for each test, and by conftest.py for each test class (its
# temporary folder); read by no preloaded import (a child reads TMPDIR anew:
# `_child`).
_PER_TEST = ("PYTEST_CURRENT_TEST", "TMPDIR")
# The folder of what lasts as long as the pytest process (conftest.py sets
# it): the warm interpreter's socket outlives the test class that started it.
PROCESS_TMP_VARIABLE = "R4C_TESTS_PROCESS_TMP"

# The longest path a Unix socket binds to: sockaddr_un's sun_path holds 108
# bytes on Linux, 104 on macOS, a closing NUL included.
_SOCKET_PATH_MAX = 103

_server = None  # (Popen, socket path, environment) of this process's.


def _start(repo: str):
  """This process's warm interpreter, started on first use, and again when
  it has ended or `os.environ` has changed since it started."""
  global _server
  if (_server is not None and _server[0].poll() is None and
      _server[2] != _imported_with(os.environ)):
    _server[0].kill()
    _server[0].wait()
  if (_server is None or _server[0].poll() is not None):
    path = _socket_path()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                             repo, path, str(os.getpid())], cwd=repo,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            text=True)
    if proc.stdout.readline().strip() != "ready":
      raise RuntimeError(f"the warm interpreter did not start "
                         f"(exit {proc.wait()})")
    _server = (proc, path, _imported_with(os.environ))
  return _server


def _socket_path() -> str:
  """A new path for the warm interpreter's socket: in the pytest process's
  folder, or, where that path is too long for a socket (under a long TMPDIR,
  and pytest-xdist's workers make their folders inside the controller's),
  in a new folder of /tmp, removed when this process ends."""
  path = os.path.join(tempfile.mkdtemp(
      prefix="warm_python_", dir=os.environ.get(PROCESS_TMP_VARIABLE)),
                      "socket")
  if len(os.fsencode(path)) <= _SOCKET_PATH_MAX:
    return path
  os.rmdir(os.path.dirname(path))
  folder = tempfile.mkdtemp(prefix="warm_python_", dir="/tmp")
  atexit.register(shutil.rmtree, folder, ignore_errors=True)
  return os.path.join(folder, "socket")


def module_of(cmd: Sequence[str]) -> Optional[str]:
  """MODULE of `[sys.executable, "-m", MODULE, ...]`, else None."""
  if len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m":
    return cmd[2]
  return None


def can_run(cmd: Sequence[str], env=None, cold: bool = False) -> bool:
  """Whether `run` may fork `cmd` from the warm interpreter: a `python -m`
  command whose environment is this process's (the one the warm interpreter
  imports in)."""
  if cold or os.environ.get(COLD_VARIABLE) == "1" or not module_of(cmd):
    return False
  return env is None or _imported_with(env) == _imported_with(os.environ)


def _imported_with(environment):
  """What of `environment` the preloaded imports may have read: all of it,
  less what pytest changes from test to test."""
  return {k: v for k, v in environment.items() if k not in _PER_TEST}


def run(cmd: Sequence[str], repo: str, stdin: Optional[str] = None,
        env=None, timeout: int = 900) -> subprocess.CompletedProcess:
  """`cmd` (`python -m MODULE FLAGS`, see `can_run`) in a child of the warm
  interpreter, from `repo`; its exit status and output, as
  `subprocess.run(..., capture_output=True, text=True)` gives them.

  Raises:
    subprocess.TimeoutExpired: the child ran past `timeout` (it is killed).
  """
  _, path, _ = _start(repo)
  folder = tempfile.mkdtemp(prefix="warm_run_")
  files = {name: os.path.join(folder, name) for name in ("in", "out", "err")}
  with open(files["in"], "w") as f:
    f.write(stdin or "")
  request = dict(module=module_of(cmd), args=list(cmd[3:]), cwd=repo,
                 env=dict(os.environ if env is None else env), **files)
  with socket.socket(socket.AF_UNIX) as conn:
    conn.settimeout(timeout)
    conn.connect(path)
    conn.sendall((json.dumps(request) + "\n").encode())
    reply = conn.makefile()
    pid = int(reply.readline())
    try:
      returncode = int(reply.readline())
    except socket.timeout:
      os.kill(pid, 9)
      raise subprocess.TimeoutExpired(list(cmd), timeout) from None
  with open(files["out"]) as out, open(files["err"]) as err:
    return subprocess.CompletedProcess(list(cmd), returncode, out.read(),
                                       err.read())


def _child(request) -> None:
  """Runs the request's module as `python -m` would; never returns (its
  exit unwinds the warm interpreter's stack in this child)."""
  os.environ.clear()
  os.environ.update(request["env"])
  # tempfile's folder is read from TMPDIR again, as a new interpreter does
  # (the warm one may have cached that of the test class that started it).
  tempfile.tempdir = None
  os.chdir(request["cwd"])
  for fd, name, mode in ((0, "in", os.O_RDONLY),
                         (1, "out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                         (2, "err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
    opened = os.open(request[name], mode, 0o644)
    os.dup2(opened, fd)
    os.close(opened)
  # The binaries' package runs its start-up code again (its settings of the
  # environment and warnings), as in a new interpreter.
  for name in [n for n in sys.modules
               if n == "pipelines" or n.startswith("pipelines.")]:
    del sys.modules[name]
  sys.argv = [request["module"]] + request["args"]
  # Its exit, an exception included, is the interpreter's, as for `python
  # -m`: atexit handlers run, and output is flushed.
  runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
  sys.exit(0)


def _serve(repo: str, path: str, parent: int) -> None:
  """Preloads, then forks a child per request until `parent` is gone."""
  sys.path.insert(0, repo)
  import importlib  # pylint: disable=g-import-not-at-top
  importlib.import_module("pipelines")
  for name in PRELOAD:
    importlib.import_module(name)
  server = socket.socket(socket.AF_UNIX)
  server.bind(path)
  server.listen(4)
  server.settimeout(5)
  print("ready", flush=True)
  while os.getppid() == parent:
    try:
      conn, _ = server.accept()
    except socket.timeout:
      continue
    with conn:
      conn.settimeout(None)
      request = json.loads(conn.makefile().readline())
      pid = os.fork()
      if pid == 0:
        server.close()
        conn.close()
        _child(request)
      conn.sendall(f"{pid}\n".encode())
      _, status = os.waitpid(pid, 0)
      try:
        conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
      except OSError:  # The test gave up (timeout) and closed its end.
        pass


if __name__ == "__main__":
  _serve(sys.argv[1], sys.argv[2], int(sys.argv[3]))
