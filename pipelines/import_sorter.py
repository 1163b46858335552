r"""Imports a sorter trained with PyTorch on a GPU (tools/torch_sorter/).

Two steps around a GPU training (rank4class_tf/sorting/README.md, "Training
on a GPU"):

  # 1. The fixed validation and test sets, for the PyTorch trainer to read.
  .venv/bin/python -m pipelines.import_sorter --write_sets=.sorter_sets \
      --seq_lens=100,28,10
  #    With --shipped_init, also shipped sorters as the trainer's
  #    --init_from files (<dir>/init/<key>.npz), to go on training them:
  .venv/bin/python -m pipelines.import_sorter --write_sets=.sorter_sets \
      --seq_lens=100 --shipped_init=lstm_d100
  # 2. After the training: map the weights onto the Keras sorter, check it
  #    reproduces the PyTorch outputs, measure its L1 and ship it.
  .venv/bin/python -m pipelines.import_sorter \
      --torch_run=runs/gpu/lstm_d100.npz \
      --export_to=rank4class_tf/sorting/pretrained

Step 2 prints the record as one JSON line (sorter, seq_len,
hyperparameters, l1 measured here on the fixed 10,000-vector test set,
l1_torch, check_error, vectors, seconds, device, the training command). With
--export_to it writes `<sorter>_d<d>.npz` and the entry in that folder's
sorters.json, whose command is the PyTorch one, then this one. A file that is
not a finished PyTorch run, or whose Keras outputs differ from PyTorch's by
more than 1e-4, stops with one line naming it and writes nothing.
"""

import json
import os
import sys

from absl import app
from absl import flags

from . import console
from rank4class_tf.sorting import torch_import

flags.DEFINE_string("write_sets", None,
                    "Folder to write validation_d<d>.npz and test_d<d>.npz "
                    "into, for tools/torch_sorter/train_sorter_torch.py "
                    "--sets.")
flags.DEFINE_list("seq_lens", ["100", "28", "10"],
                  "With --write_sets: the vector lengths d.")
flags.DEFINE_list("shipped_init", [],
                  "With --write_sets: shipped sorters (keys of "
                  "pretrained/sorters.json, e.g. lstm_d100) to write as "
                  "<write_sets>/init/<key>.npz, train_sorter_torch.py "
                  "--init_from files that go on training them.")
flags.DEFINE_string("torch_run", None,
                    "The --output file of a finished train_sorter_torch.py "
                    "run.")
flags.DEFINE_string("export_to", None,
                    "With --torch_run: the pretrained folder "
                    "(rank4class_tf/sorting/pretrained ships it).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"import_sorter: unexpected arguments: {' '.join(argv[1:])}")
  console.quiet()
  if FLAGS.shipped_init and not FLAGS.write_sets:
    sys.exit("import_sorter: --shipped_init needs --write_sets.")
  if bool(FLAGS.write_sets) == bool(FLAGS.torch_run):
    sys.exit("import_sorter: give one of --write_sets or --torch_run.")
  if FLAGS.write_sets:
    try:
      seq_lens = [int(d) for d in FLAGS.seq_lens]
      if not seq_lens or min(seq_lens) < 2:
        raise ValueError
    except ValueError:
      sys.exit(f"import_sorter: --seq_lens={','.join(FLAGS.seq_lens)} must "
               "be whole numbers >= 2.")
    for key in FLAGS.shipped_init:  # Before anything is written.
      try:
        torch_import.check_init(key)
      except ValueError as e:
        console.fail("import_sorter", f"--shipped_init: {e}")
    written = torch_import.write_sets(FLAGS.write_sets, seq_lens)
    command = " ".join([".venv/bin/python -m pipelines.import_sorter"] +
                       sys.argv[1:])
    inits = []
    for key in FLAGS.shipped_init:
      path = os.path.join(FLAGS.write_sets, "init", key + ".npz")
      torch_import.write_init(key, path, command)
      inits.append(path)
    print(json.dumps({"sets": sorted(written.values()), "init": inits}))
    return
  try:
    sorter, record = torch_import.import_run(FLAGS.torch_run)
  except ValueError as e:
    console.fail("import_sorter", e)
  if FLAGS.export_to:
    command = " && ".join([record["command"], " ".join(
        [".venv/bin/python -m pipelines.import_sorter"] + sys.argv[1:])])
    record = torch_import.ship(sorter, record, FLAGS.export_to, command)
  print(json.dumps({k: v for k, v in record.items() if k != "curve"},
                   sort_keys=True))


if __name__ == "__main__":
  app.run(main)
