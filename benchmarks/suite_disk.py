r"""Suite disk: what the test suite's temporary folders hold on disk.

Runs a test command (`make test` by default) with `TMPDIR` pointed at a new,
empty folder (every pytest process makes its folder there,
tests/conftest.py) and `PYTEST_ADDOPTS=--class_sizes=FILE` (each test
class's folder logs its bytes as the class ends, before it is removed),
measures that folder (`du -sb`) every `--every` seconds while the command
runs, and prints a markdown table: the peak held at once (what the machine
needs free), the sum of the class folders at their ends (what the suite
would hold at its end if no class folder were removed, as before c1763518),
the largest classes, what is left in the folder at the end, and the load.

  .venv/bin/python -m benchmarks.suite_disk --every=10

The sampling sees the folder every `--every` seconds, so the peak is a lower
bound: a class that grows and ends between two samples is missed by it (not
by the sum, which each class logs itself).
"""

import collections
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import timing

flags.DEFINE_string("command", "make test", "The test command, run in the "
                    "repository (split as a shell would, without a shell).")
flags.DEFINE_float("every", 10.0, "Seconds between samples.")
flags.DEFINE_integer("largest", 5, "How many of the largest classes to list.")
FLAGS = flags.FLAGS

GB = 1e9


def du_bytes(folder: str) -> int:
  """`du -sb folder` (it warns of what is removed while it reads, and counts
  the rest)."""
  out = subprocess.run(["du", "-sb", folder], capture_output=True, text=True,
                       check=False).stdout
  return int(out.split()[0])


def read_sizes(path: str) -> "collections.OrderedDict[str, int]":
  """{class node id: bytes} from a `--class_sizes` file (a class run by both
  pytest processes, or twice, keeps its largest)."""
  sizes = collections.OrderedDict()
  if not os.path.exists(path):
    return sizes
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      node, sep, size = line.rstrip("\n").rpartition("\t")
      if not sep or not size.isdigit():
        sys.exit(f"suite_disk: {path}:{number}: not 'node id<TAB>bytes': "
                 f"{line.strip()!r}")
      sizes[node] = max(sizes.get(node, 0), int(size))
  return sizes


def run(command: list[str], every: float):
  """(exit status, wall seconds, samples, peak bytes, peak second,
  {class: bytes}, names left in it) of `command` under a new TMPDIR (removed
  after, with the class sizes' log)."""
  root = tempfile.mkdtemp(prefix="suite_disk_tmp_")
  log = os.path.join(tempfile.mkdtemp(prefix="suite_disk_log_"), "sizes.tsv")
  addopts = " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"),
                                   f"--class_sizes={log}"]))
  env = dict(os.environ, TMPDIR=root, PYTEST_ADDOPTS=addopts)
  try:
    start = time.time()
    proc = subprocess.Popen(command, cwd=timing.REPO, env=env)
    samples, peak, peak_at = 0, 0, 0.0
    while proc.poll() is None:
      held = du_bytes(root)
      samples += 1
      if held > peak:
        peak, peak_at = held, time.time() - start
      try:
        proc.wait(timeout=every)
      except subprocess.TimeoutExpired:
        pass
    wall = time.time() - start
    return (proc.returncode, wall, samples, peak, peak_at, read_sizes(log),
            sorted(os.listdir(root)))
  finally:
    for folder in (root, os.path.dirname(log)):
      shutil.rmtree(folder, ignore_errors=True)


def main(argv):
  del argv
  command = shlex.split(FLAGS.command)
  before = timing.uptime()
  status, wall, samples, peak, peak_at, sizes, left = run(command,
                                                          FLAGS.every)
  print(f"`{FLAGS.command}` (exit {status}), {wall:.0f} s, sampled every "
        f"{FLAGS.every:g} s ({samples} samples); {os.cpu_count()} cores.\n"
        f"uptime before: {before}\nuptime after: {timing.uptime()}")
  print()
  print("| test classes | sum of class folders at their ends (GB) | "
        "peak held at once (GB) | peak at (s) | left at the end |")
  print("|---:|---:|---:|---:|---:|")
  print(f"| {len(sizes)} | {sum(sizes.values()) / GB:.2f} | {peak / GB:.2f} "
        f"| {peak_at:.0f} | {', '.join(left) or 'nothing'} |")
  print()
  print("| largest classes | GB at its end |")
  print("|---|---:|")
  for node, size in sorted(sizes.items(), key=lambda kv: -kv[1])[
      :FLAGS.largest]:
    print(f"| {node} | {size / GB:.2f} |")
  if status:
    sys.exit(f"suite_disk: `{FLAGS.command}` exited {status}.")


if __name__ == "__main__":
  app.run(main)
