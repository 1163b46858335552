r"""The cost of checking a run's data against its record, on a large file.

Writes a `text_files` train.csv of --megabytes (random words, two classes)
into --data_dir (kept there for the next call), then takes its fingerprint
(`data.identity.fingerprint`, what every command reading a run's data
does before comparing it with the run's data.json) in fresh processes:
first with an empty hash cache (the file's SHA-256 computed: a run's first
start), then twice with the cache filled (a `stat`: every later command).

  .venv/bin/python -m benchmarks.data_identity --megabytes=200 \
      --data_dir=/tmp/data_identity

Prints a markdown table: per call, the milliseconds the fingerprint took
(in the child, after its imports) and the file's size; and `uptime`'s load.
The file was just written, so the first hash reads it from the page cache,
as on a machine that has read it recently; from a cold disk add its read
time.
"""

import os
import random
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

flags.DEFINE_float("megabytes", 200.0, "Size of the generated train file.")
flags.DEFINE_string("data_dir", None, "Where the file is written (and "
                    "reused when already of the size).")

FLAGS = flags.FLAGS

_CHILD = """
import sys, time
from rank4class_tf import config
from rank4class_tf.data import identity
start = time.perf_counter()
record = identity.fingerprint(config.DataConfig(dataset="text_files",
                                                data_dir=sys.argv[1]))
print(time.perf_counter() - start, record["files"]["train.csv"]["bytes"])
"""


def write_file(path: str, megabytes: float) -> None:
  """A CSV of random lowercase words, about `megabytes` MB."""
  rng = random.Random(0)
  words = ["".join(rng.choice("abcdefghij") for _ in range(6))
           for _ in range(1000)]
  target = int(megabytes * 1e6)
  with open(path, "w", encoding="utf-8") as f:
    f.write("text,label\n")
    written = 0
    while written < target:
      row = " ".join(rng.choices(words, k=60)) + f",{'pq'[written % 2]}\n"
      f.write(row)
      written += len(row)
  hour_ago = time.time() - 3600  # An old file: its hash is cached.
  os.utime(path, (hour_ago, hour_ago))


def main(argv):
  del argv  # Unused.
  data_dir = FLAGS.data_dir or tempfile.mkdtemp()
  os.makedirs(data_dir, exist_ok=True)
  path = os.path.join(data_dir, "train.csv")
  if (not os.path.exists(path) or
      abs(os.path.getsize(path) - FLAGS.megabytes * 1e6) > 1e6):
    write_file(path, FLAGS.megabytes)
  env = dict(os.environ, RANK4CLASS_CACHE_DIR=tempfile.mkdtemp())
  rows = []
  for label in ("first (hash computed)", "cached", "cached again"):
    out = subprocess.run([sys.executable, "-c", _CHILD, data_dir], env=env,
                         capture_output=True, text=True, check=True)
    seconds, size = out.stdout.split()
    rows.append(f"| {label} | {float(seconds) * 1000:,.1f} | "
                f"{int(size) / 1e6:,.0f} |")
  print("| fingerprint of train.csv | ms | MB |")
  print("|---|---|---|")
  print("\n".join(rows))
  print(f"\nload: {os.getloadavg()[0]:.1f} (1 min), "
        f"{os.cpu_count()} CPU cores")


if __name__ == "__main__":
  app.run(main)
