r"""Ranks the classes of raw text with a trained run's exported model.

Example:

  .venv/bin/python -m pipelines.predict --model_dir=runs/goemotions_softmax \
      --text="Thank you so much, this made my day" --top_k=5

prints one `name<TAB>score<TAB>probability` line per class, best first:
the probability is the export's calibrated one (fitted on the validation
split when the run was exported, whatever the loss: docs/model.md,
"Probabilities"); an export written before calibration existed prints
`name<TAB>score` (`pipelines.calibrate` adds them).

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

Runs on images (image_folder, CIFAR-10, ...) rank image files:
--image=a.jpg,b.png, or one path a line on standard input; runs on a user's
table (tabular_files) rank feature vectors: --features=5.1,3.5,1.4,0.2, or
one comma-separated row a line on standard input, in the training columns'
order (raw values: the model standardises them).
"""

import os
import sys

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from . import console
from . import line_input
from rank4class_tf.data import image_files
from rank4class_tf.data import user_files
from rank4class_tf.modeling import class_encoders
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker

flags.DEFINE_string("model_dir", None, "Directory of a trained run.")
flags.DEFINE_string("text", None, "One instance; stdin lines when absent.")
flags.DEFINE_list("image", None, "Image files to rank (runs on images); "
                  "stdin lines are paths when absent.")
flags.DEFINE_list("features", None, "One feature vector, comma-separated "
                  "(runs on a table); stdin rows when absent.")
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


def parse_vectors(lines, source, num_features, first_line=1):
  """Comma-separated rows of numbers -> float32 [n, num_features]."""
  rows = []
  for number, line in enumerate(lines, start=first_line):
    if isinstance(line, bytes):
      line = line.decode("utf-8", "replace")
    fields = [f.strip() for f in line.strip().split(",")]
    try:
      row = [float(f) for f in fields]
    except ValueError:
      row = []
    if len(row) != num_features or not np.all(np.isfinite(row)):
      raise ValueError(f"{source}:{number}: expected {num_features} "
                       f"comma-separated finite numbers, got {line.strip()!r}.")
    for field, value in zip(fields, row):
      if not user_files.fits_float32(value):  # inf as the model's float32.
        raise ValueError(f"{source}:{number}: {field!r} is beyond float32's "
                         "range (+-3.4028235e38), in which the model reads "
                         "features.")
    rows.append(row)
  return np.array(rows, np.float32)


def read_images(lines, source, first_line=1):
  """Image paths -> a list of uint8 [1, height, width, 3] (one image per
  call: sizes differ)."""
  out = []
  for number, line in enumerate(lines, start=first_line):
    path = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    path = path.strip()
    problem = (image_files.undecodable(path) if os.path.isfile(path) else
               "no such file.")
    if problem:
      raise ValueError(f"{source}:{number}: {path}: {problem}")
    out.append(image_files.decode(tf.io.read_file(path)).numpy()[None])
  return out


def rank_lines(ranker, lines, name, first, kind, num_segments):
  """Rankings of one batch of input lines (text, image paths or rows)."""
  probabilities = ranker.has_probabilities
  if kind == "image":
    return [ranking for image in read_images(lines, name, first)
            for ranking in ranker.rank(image, FLAGS.top_k, probabilities)]
  if kind == "vector":
    return ranker.rank(parse_vectors(lines, name, ranker.instance_shape[0],
                                     first), FLAGS.top_k, probabilities)
  instances = parse_instances(lines, name, num_segments, first)
  if FLAGS.classes is None:
    return ranker.rank(instances, FLAGS.top_k, probabilities)
  return ranker.rank_class_list(instances, FLAGS.classes, FLAGS.top_k)


def input_kind(ranker):
  """`text`, `image` or `vector`: what the export ranks."""
  if ranker.instance_dtype == tf.string:
    return "text"
  if len(ranker.instance_shape) == 3 and ranker.instance_shape[-1] == 3:
    return "image"
  if len(ranker.instance_shape) == 1:
    return "vector"
  raise ValueError(f"{FLAGS.model_dir} ranks instances of shape "
                   f"{ranker.instance_shape}: predict reads text, image "
                   "files and feature vectors.")


def print_rankings(rankings, first):
  """`name<TAB>score[<TAB>probability]` lines per instance, an empty line
  between instances: one line per class (`line_input.one_line`)."""
  for i, ranking in enumerate(rankings):
    if i or not first:
      print()
    for name, score, *probability in ranking:
      print("\t".join([line_input.one_line(name), f"{score:.4f}"] +
                      [f"{p:.4f}" for p in probability]))


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
      # Before the export loads.
      exported_ranker.check_class_texts(FLAGS.classes)
    ranker = exported_ranker.ExportedRanker(FLAGS.model_dir, FLAGS.export)
    if FLAGS.classes is not None and not ranker.ranks_class_lists:
      raise ValueError(f"--classes: {FLAGS.model_dir} ranks its training "
                       "classes only (train with --class_encoder=text to "
                       "rank class lists).")
    kind = input_kind(ranker)
    given = {"text": FLAGS.text, "image": FLAGS.image,
             "vector": FLAGS.features}
    flag = {"text": "--text", "image": "--image", "vector": "--features"}
    for other in given:
      if other != kind and given[other] is not None:
        raise ValueError(f"{flag[other]}: {FLAGS.model_dir} ranks "
                         f"{'texts' if kind == 'text' else kind + 's'}; "
                         f"use {flag[kind]}.")
    if FLAGS.classes is not None and kind != "text":
      raise ValueError("--classes: class lists rank texts only.")
    num_segments = (ranker.instance_shape[0] if kind == "text" and
                    ranker.instance_shape else 1)
    if given[kind] is not None:
      lines = ([",".join(FLAGS.features)] if kind == "vector" else
               given[kind] if kind == "image" else [FLAGS.text])
      source = [(1, lines)]
      name = flag[kind]
    else:
      source = line_input.batches(sys.stdin.buffer, FLAGS.batch_size)
      name = "<stdin>"
    printed = False
    for first, lines in source:
      rankings = rank_lines(ranker, lines, name, first, kind, num_segments)
      print_rankings(rankings, first=not printed)
      sys.stdout.flush()
      printed = True
    if not printed:
      raise ValueError(f"{name}: no instances.")
  except ValueError as e:
    console.fail("predict", e)


if __name__ == "__main__":
  app.run(main)
