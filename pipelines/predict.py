r"""Ranks the classes of raw text with a trained run's exported model.

Example:

  .venv/bin/python -m pipelines.predict --model_dir=runs/goemotions_softmax \
      --text="Thank you so much, this made my day" --top_k=5

prints one `name<TAB>score` line per class, best first. Without --text it reads
instances from standard input, one per line, and prints each instance's
ranking followed by an empty line. For two-segment datasets (MIND: title and
abstract) an instance is `title<TAB>abstract`.
"""

import sys

from absl import app
from absl import flags
import numpy as np

from pipelines import console
from rank4class_tf import serving

flags.DEFINE_string("model_dir", None, "Directory of a trained run.")
flags.DEFINE_string("text", None, "One instance; stdin lines when absent.")
flags.DEFINE_integer("top_k", 5, "Classes printed per instance.")
flags.DEFINE_enum("export", serving.BEST_EXPORT, serving.EXPORTS,
                  "Which exported SavedModel to use.")

FLAGS = flags.FLAGS


def parse_instances(lines, source, num_segments):
  """Raw lines -> serving instances; one-line errors name source and line."""
  rows = []
  for number, line in enumerate(lines, start=1):
    line = line.rstrip("\n").rstrip("\r")
    if not line.strip():
      raise ValueError(f"{source}:{number}: empty text.")
    if num_segments == 1:
      rows.append(line)
    else:
      fields = line.split("\t")
      if len(fields) > num_segments:
        raise ValueError(f"{source}:{number}: expected at most "
                         f"{num_segments} tab-separated segments, got "
                         f"{len(fields)}.")
      rows.append(fields + [""] * (num_segments - len(fields)))
  if not rows:
    raise ValueError(f"{source}: no instances.")
  return np.array(rows, dtype=object)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"predict: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.model_dir:
    sys.exit("predict: --model_dir must be set.")
  if FLAGS.top_k <= 0:
    sys.exit(f"predict: --top_k={FLAGS.top_k} must be > 0.")
  console.quiet()
  try:
    ranker = serving.ExportedRanker(FLAGS.model_dir, FLAGS.export)
    if ranker.instance_shape not in ((), (2,)):
      raise ValueError(f"{FLAGS.model_dir} was not trained on text.")
    num_segments = ranker.instance_shape[0] if ranker.instance_shape else 1
    if FLAGS.text is not None:
      instances = parse_instances([FLAGS.text], "--text", num_segments)
    else:
      instances = parse_instances(sys.stdin.readlines(), "<stdin>",
                                  num_segments)
    rankings = ranker.rank(instances, FLAGS.top_k)
  except ValueError as e:
    sys.exit(f"predict: {e}")
  for i, ranking in enumerate(rankings):
    if i:
      print()
    for name, score in ranking:
      print(f"{name}\t{score:.4f}")


if __name__ == "__main__":
  app.run(main)
