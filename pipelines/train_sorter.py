r"""Pretrains a SoDeep sorter (lstm or cnn) on synthetic score vectors.

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

from rank4class_tf.sorting import training

# Sorter.
flags.DEFINE_string("sorter", "lstm", "Sorter to train: lstm, cnn.")
flags.DEFINE_integer("seq_len", 100, "d, the length of the score vectors.")
flags.DEFINE_integer("units", 64, "lstm: units per direction.")
flags.DEFINE_integer("num_layers", 2, "lstm: stacked bidirectional layers.")
flags.DEFINE_string("projection", "shared",
                    "lstm: final projection, full (reference) or shared.")
flags.DEFINE_integer("width", 32, "cnn: channels of the first blocks.")
# Training.
flags.DEFINE_integer("batch_size", 512, "Vectors per step (paper: 512).")
flags.DEFINE_float("learning_rate", 1e-3, "Initial Adam learning rate.")
flags.DEFINE_integer("halve_every_vectors", 10_000_000,
                     "Halve the learning rate after this many vectors "
                     "(paper: 100 epochs of 100,000).")
flags.DEFINE_integer("epoch_vectors", 100_000,
                     "Vectors between validations and checkpoints.")
flags.DEFINE_integer("train_vectors", 1_000_000, "Total training vectors.")
flags.DEFINE_integer("seed", 0, "Seed of initialisation and data.")
flags.DEFINE_string("init_from", None,
                    "A finished run whose sorter weights start this one.")
flags.DEFINE_integer("threads", 0, "TensorFlow intra-op threads (0: all).")
flags.DEFINE_string("model_dir", None, "Directory for everything the run makes.")
flags.DEFINE_string("export_to", None,
                    "Optional pretrained folder (rank4class_tf/sorting/"
                    "pretrained ships it) receiving <sorter>_d<seq_len>.npz "
                    "and an entry in its sorters.json with this command.")

FLAGS = flags.FLAGS


def config_from_flags() -> training.SorterConfig:
  """Maps the flags onto the run's config, field by field."""
  return training.SorterConfig(
      sorter=FLAGS.sorter,
      seq_len=FLAGS.seq_len,
      units=FLAGS.units,
      num_layers=FLAGS.num_layers,
      projection=FLAGS.projection,
      width=FLAGS.width,
      batch_size=FLAGS.batch_size,
      learning_rate=FLAGS.learning_rate,
      halve_every_vectors=FLAGS.halve_every_vectors,
      epoch_vectors=FLAGS.epoch_vectors,
      train_vectors=FLAGS.train_vectors,
      seed=FLAGS.seed,
      init_from=FLAGS.init_from or "",
      threads=FLAGS.threads,
      model_dir=FLAGS.model_dir or "")


def main(argv):
  if len(argv) > 1:
    sys.exit(f"train_sorter: unexpected arguments: {' '.join(argv[1:])}")
  try:
    record = training.train(config_from_flags(), verbose=2)
  except ValueError as e:
    sys.exit(f"train_sorter: {e}")
  if FLAGS.export_to:
    command = " ".join([".venv/bin/python -m pipelines.train_sorter"] +
                       sys.argv[1:])
    record = training.export_pretrained(FLAGS.model_dir, FLAGS.export_to,
                                        command)
  print(json.dumps(record, sort_keys=True))


if __name__ == "__main__":
  app.run(main)
