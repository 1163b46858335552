r"""A user's text file larger than memory: peak memory and time to train.

Writes a CSV train file of --gigabytes (rows of 5 to 9 shipped GoEmotions
comments joined, about 490 characters, labelled with the first comment's
emotion) and small validation and test files into --data_dir (kept there
for the next call), then runs `pipelines.train` on it as a user would,
twice: with the counting pass's cache empty (a new file), and again with
it filled. A child process trains; this one samples the child's resident
memory (RSS) every 0.1 s.

  .venv/bin/python -m benchmarks.large_text_files --gigabytes=2 \
      --data_dir=/tmp/large_text_files

Prints a markdown table: per run, the seconds until the data was loaded
(the log line `streaming ...`), until the first training step ended (the
run trains one step and validates on 200 rows), the peak RSS, and the
file's size; and `uptime`'s load.
"""

import csv
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags
import psutil

from rank4class_tf.data import datasets

flags.DEFINE_float("gigabytes", 2.0, "Size of the generated train file.")
flags.DEFINE_string("data_dir", None, "Where the files are written (and "
                    "reused when already of the size).")
flags.DEFINE_integer("batch_size", 32, "Training batch size.")
flags.DEFINE_integer("max_seq_length", 64, "Tokens per text.")

FLAGS = flags.FLAGS
EVAL_ROWS = 200


def write_files(folder: str, size: int) -> None:
  """train.csv of about `size` bytes, validation.csv and test.csv of
  EVAL_ROWS rows each, from the shipped GoEmotions comments."""
  data = datasets.get("goemotions")
  texts, labels = data.splits["train"]
  names = data.class_names
  rng = random.Random(0)
  os.makedirs(folder, exist_ok=True)

  def row():
    picks = [rng.randrange(len(texts)) for _ in range(rng.randint(5, 9))]
    return " ".join(texts[i] for i in picks), names[labels[picks[0]]]

  for split, rows in (("validation", EVAL_ROWS), ("test", EVAL_ROWS)):
    with open(os.path.join(folder, f"{split}.csv"), "w", newline="",
              encoding="utf-8") as f:
      writer = csv.writer(f)
      writer.writerow(["text", "label"])
      writer.writerows(row() for _ in range(rows))
  path = os.path.join(folder, "train.csv")
  with open(path + ".tmp", "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["text", "label"])
    while f.tell() < size:
      writer.writerows(row() for _ in range(10_000))
  os.replace(path + ".tmp", path)


def run_train(folder: str, cache: str):
  """(seconds to loaded data, seconds to the end, peak RSS bytes) of a
  one-step `pipelines.train` on `folder`."""
  model_dir = tempfile.mkdtemp()
  cmd = [sys.executable, "-m", "pipelines.train", "--dataset=text_files",
         f"--data_dir={folder}", "--encoder=bert", "--init_checkpoint=minilm",
         f"--max_seq_length={FLAGS.max_seq_length}",
         f"--batch_size={FLAGS.batch_size}", "--train_steps=1",
         "--eval_every=1", "--export=false", "--verbosity=0",
         f"--model_dir={model_dir}/run"]
  env = dict(os.environ, RANK4CLASS_CACHE_DIR=cache)
  start = time.time()
  child = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env)
  peak, loaded = [0], [None]

  def sample():
    proc = psutil.Process(child.pid)
    while child.poll() is None:
      try:
        rss = proc.memory_info().rss + sum(
            c.memory_info().rss for c in proc.children(recursive=True))
        peak[0] = max(peak[0], rss)
      except psutil.Error:
        pass
      time.sleep(0.1)

  sampler = threading.Thread(target=sample)
  sampler.start()
  output = []
  for line in child.stdout:
    output.append(line)
    if loaded[0] is None and "text_files: streaming" in line:
      loaded[0] = time.time() - start
  child.wait()
  sampler.join()
  if child.returncode:
    raise SystemExit("".join(output[-30:]))
  return loaded[0], time.time() - start, peak[0]


def main(argv):
  del argv
  folder = FLAGS.data_dir or tempfile.mkdtemp()
  size = int(FLAGS.gigabytes * 2**30)
  path = os.path.join(folder, "train.csv")
  if not os.path.exists(path) or abs(os.path.getsize(path) - size) > 2**24:
    started = time.time()
    write_files(folder, size)
    print(f"wrote {path} ({os.path.getsize(path) / 2**30:.2f} GiB) in "
          f"{time.time() - started:.0f} s")
  cache = tempfile.mkdtemp()
  rows = []
  for label in ("new file (counting pass)", "same file (cached counts)"):
    loaded, total, peak = run_train(folder, cache)
    rows.append(f"| {label} | {loaded:.0f} | {total:.0f} | "
                f"{peak / 2**30:.2f} |")
  print(f"\ntrain.csv: {os.path.getsize(path) / 2**30:.2f} GiB; "
        f"batch {FLAGS.batch_size}, length {FLAGS.max_seq_length}, MiniLM "
        "fine-tuned; one step, then validation on "
        f"{EVAL_ROWS} rows\n")
  print("| run | data loaded (s) | first step and validation done (s) | "
        "peak RSS (GiB) |")
  print("|---|---:|---:|---:|")
  print("\n".join(rows))
  print("\nuptime:", subprocess.run(["uptime"], capture_output=True,
                                    text=True).stdout.strip())


if __name__ == "__main__":
  app.run(main)
