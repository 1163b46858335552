r"""Pretrains a SoDeep sorter (lstm, cnn or pairwise) on synthetic score vectors.

Example (the end-to-end test runs this command with fewer vectors):

  .venv/bin/python -m pipelines.train_sorter --sorter=lstm --seq_len=100 \
      --units=64 --num_layers=2 --projection=shared --batch_size=256 \
      --train_vectors=1000000 --epoch_vectors=50000 \
      --halve_every_vectors=300000 --threads=2 --model_dir=runs/sorter_lstm_100

Writes into --model_dir: config.json, TensorBoard events (train/,
validation/), checkpoints/, backup/ (rerunning the same command resumes),
sorter.npz (the weights) and sorter.json (hyper-parameters, L1 on the fixed
10,000-vector test set, training seconds). Prints sorter.json as one line.
Rerunning the command of a finished run does not retrain; adding
--export_to=rank4class_tf/sorting/pretrained then ships the sorter (the
weights and an entry with the command in pretrained/sorters.json).
Bad flags exit with status 1 and one line naming the flag.
"""

import json
import sys

from absl import app
from absl import flags

from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.sorting import training
from . import console
from . import flag_utils

flag_utils.define(training.SorterConfig)
flags.DEFINE_string("export_to", None,
                    "Optional pretrained folder (rank4class_tf/sorting/"
                    "pretrained ships it) receiving <sorter>_d<seq_len>.npz "
                    "and an entry in its sorters.json with this command.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"train_sorter: unexpected arguments: {' '.join(argv[1:])}")
  console.quiet(FLAGS.model_dir or None, started_by=FLAGS.model_dir and
                run_dir_lib.RunDir(FLAGS.model_dir).config_file)
  try:
    record = training.train(
        flag_utils.config_from_flags(training.SorterConfig), verbose=2)
  except ValueError as e:
    console.fail("train_sorter", e)
  if FLAGS.export_to:
    command = " ".join([".venv/bin/python -m pipelines.train_sorter"] +
                       sys.argv[1:])
    record = training.export_pretrained(FLAGS.model_dir, FLAGS.export_to,
                                        command)
  print(json.dumps(record, sort_keys=True))


if __name__ == "__main__":
  app.run(main)
