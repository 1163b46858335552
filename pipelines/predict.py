r"""Ranks the classes of raw text with a trained run's exported model.

Example:

  .venv/bin/python -m pipelines.predict --model_dir=runs/goemotions_softmax \
      --text="Thank you so much, this made my day" --top_k=5

prints one `name<TAB>score` line per class, best first.

A run trained with --class_encoder=text also ranks classes it never saw:
--classes=a,b,c ranks those class texts instead of the training classes
(the export's `rank_classes` signature), e.g.

  .venv/bin/python -m pipelines.predict --model_dir=runs/goemotions_text \
      --text="I can't wait for the trip" --classes=excitement,boredom,fear

A class given twice in --classes is refused (`--classes: 'fear' is given
twice (classes 3 and 4).`), not ranked twice. Class names always come from
the export itself (its `class_names` signature), not from the run's
classes.json.

Without --text it reads instances from standard input, one per line (a line
ends with \n, \r\n or a lone \r), in batches of --batch_size, and prints
each batch's rankings (an empty line between two instances) before it reads
the next, so memory does not grow with the input. A bad line (empty,
not UTF-8, too many segments) stops with one line naming it, after the
rankings of the batches before it. For two-segment datasets (MIND: title and
abstract) an instance is `title<TAB>abstract`.
"""

import sys

from absl import app
from absl import flags
import numpy as np

from pipelines import console
from pipelines import line_input
from rank4class_tf.modeling import class_encoders
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf import serving

flags.DEFINE_string("model_dir", None, "Directory of a trained run.")
flags.DEFINE_string("text", None, "One instance; stdin lines when absent.")
flags.DEFINE_integer("top_k", 5, "Classes printed per instance.")
flags.DEFINE_integer("batch_size", 256,
                     "Instances read from stdin and ranked per call: memory "
                     "stays one batch whatever the input's size.")
flags.DEFINE_enum("export", run_dir_lib.BEST_EXPORT, run_dir_lib.EXPORTS,
                  "Which exported SavedModel to use.")
flags.DEFINE_list("classes", None,
                  "Class texts to rank instead of the training classes "
                  "(runs trained with --class_encoder=text; at most "
                  f"{class_encoders.MAX_SERVED_CLASSES}, each once).")

FLAGS = flags.FLAGS


def parse_instances(lines, source, num_segments, first_line=1):
  """Raw lines -> serving instances; one-line errors name source and line.

  Args:
    lines: the lines, str, or bytes read from a file (decoded as UTF-8).
    source: what the lines come from (`--text`, `<stdin>`), for errors.
    num_segments: 1, or the segments of a two-segment dataset (MIND:
      title<TAB>abstract).
    first_line: the number of the first line in `source`.
  """
  rows = []
  for number, line in enumerate(lines, start=first_line):
    if isinstance(line, bytes):
      try:
        line = line.decode("utf-8")
      except UnicodeDecodeError:
        raise ValueError(f"{source}:{number}: not valid UTF-8.") from None
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
  return np.array(rows, dtype=object)


def print_rankings(rankings, first):
  """`name<TAB>score` lines per instance, an empty line between instances."""
  for i, ranking in enumerate(rankings):
    if i or not first:
      print()
    for name, score in ranking:
      print(f"{name}\t{score:.4f}")


def main(argv):
  if len(argv) > 1:
    sys.exit(f"predict: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.model_dir:
    sys.exit("predict: --model_dir must be set.")
  if FLAGS.top_k <= 0:
    sys.exit(f"predict: --top_k={FLAGS.top_k} must be > 0.")
  if FLAGS.batch_size <= 0:
    sys.exit(f"predict: --batch_size={FLAGS.batch_size} must be > 0.")
  console.quiet()
  try:
    if FLAGS.classes is not None:
      serving.check_class_texts(FLAGS.classes)  # Before the export loads.
    ranker = serving.ExportedRanker(FLAGS.model_dir, FLAGS.export)
    if FLAGS.classes is not None and not ranker.ranks_class_lists:
      raise ValueError(f"--classes: {FLAGS.model_dir} ranks its training "
                       "classes only (train with --class_encoder=text to "
                       "rank class lists).")
    if ranker.instance_shape not in ((), (2,)):
      raise ValueError(f"{FLAGS.model_dir} was not trained on text.")
    num_segments = ranker.instance_shape[0] if ranker.instance_shape else 1
    if FLAGS.text is not None:
      source = [(1, [FLAGS.text])]
      name = "--text"
    else:
      source = line_input.batches(sys.stdin.buffer, FLAGS.batch_size)
      name = "<stdin>"
    printed = False
    for first, lines in source:
      instances = parse_instances(lines, name, num_segments, first)
      if FLAGS.classes is None:
        rankings = ranker.rank(instances, FLAGS.top_k)
      else:
        rankings = ranker.rank_class_list(instances, FLAGS.classes,
                                          FLAGS.top_k)
      print_rankings(rankings, first=not printed)
      sys.stdout.flush()
      printed = True
    if not printed:
      raise ValueError(f"{name}: no instances.")
  except ValueError as e:
    console.fail("predict", e)


if __name__ == "__main__":
  app.run(main)
