"""Writes data/examples/emotions_csv/: a user-format example made from the
shipped GoEmotions files (Apache-2.0), for docs/data.md's walkthrough.

A CSV as a user would have it: header `comment,feeling`, class names (not
ids) as labels, 5 of the 28 emotions, a train and a test file and no
validation file (cut from train when loaded). Rows are the first single-label
comments of each class in the shipped files' order, so the output is a fixed
function of those files:

  .venv/bin/python tools/example_data/make_emotions_csv.py

rewrites the committed files byte for byte (tests/test_user_example.py
checks that).
"""

import csv
import io
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SOURCE = os.path.join(REPO, "data", "goemotions")
TARGET = os.path.join(REPO, "data", "examples", "emotions_csv")
CLASSES = ("gratitude", "amusement", "anger", "sadness", "curiosity")
ROWS = {"train.tsv": ("train.csv", 120), "test.tsv": ("test.csv", 30)}


def rows(source: str, per_class: int):
  """(comment, feeling) of the first `per_class` single-label rows of each
  class in `source`, in the file's order."""
  with open(os.path.join(SOURCE, "emotions.txt"), encoding="utf-8") as f:
    names = f.read().split("\n")
  taken = {name: 0 for name in CLASSES}
  with open(os.path.join(SOURCE, source), encoding="utf-8") as f:
    for line in f:
      text, labels, _ = line.rstrip("\n").split("\t")
      if "," in labels:
        continue
      name = names[int(labels)]
      if name in taken and taken[name] < per_class:
        taken[name] += 1
        yield text, name


def contents(source: str, per_class: int) -> str:
  out = io.StringIO(newline="")
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(["comment", "feeling"])
  writer.writerows(rows(source, per_class))
  return out.getvalue()


def main() -> int:
  os.makedirs(TARGET, exist_ok=True)
  for source, (target, per_class) in ROWS.items():
    with open(os.path.join(TARGET, target), "w", encoding="utf-8",
              newline="") as f:
      f.write(contents(source, per_class))
  return 0


if __name__ == "__main__":
  sys.exit(main())
