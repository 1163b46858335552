r"""Prints sorters' L1 on the fixed, seeded 10,000-vector synthetic test set.

Examples (the end-to-end test runs the first two):

  .venv/bin/python -m pipelines.evaluate_sorter \
      --sorter=handcrafted,handcrafted_adaptive --seq_len=100
  .venv/bin/python -m pipelines.evaluate_sorter --sorter=lstm --seq_len=100
  .venv/bin/python -m pipelines.evaluate_sorter --sorter=lstm --seq_len=100 \
      --model_dir=runs/sorter_lstm_100

--sorter takes one or more names (comma-separated): handcrafted (lambda =
10), handcrafted_adaptive (the SoDeep reference code's lambda = 6.8 / std of
each vector's pairwise differences), lstm, cnn, cnn_reference, pairwise. Without
--model_dir, the learned ones are the shipped sorters (`sorters.load_sorter`);
with it, the sorter
a `train_sorter` run saved (one --sorter). Prints one JSON line per sorter:
{"sorter": ..., "seq_len": ..., "l1": ..., "num_vectors": ...}; with
--smoothness also how each soft rank moves with its own score on the test
set's first 1,000 vectors (`training.smoothness`: gradient_mean,
gradient_median, gradient_p99, flat_share, wrong_sign_share), since an exact
but flat sorter is useless as a loss. The paper's
Table 1 (d = 100): handcrafted 0.0350, CNN 0.0120, LSTM 0.0033; ours are in
rank4class_tf/sorting/README.md.
"""

import json
import sys

from absl import app
from absl import flags

from . import console
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import synthetic
from rank4class_tf.sorting import training

flags.DEFINE_list("sorter", ["handcrafted"],
                  "Sorters to evaluate, comma-separated: handcrafted, "
                  "handcrafted_adaptive, lstm, cnn, cnn_reference, pairwise "
                  "(one JSON line "
                  "each).")
flags.DEFINE_integer("seq_len", 100, "d, the length of the score vectors.")
flags.DEFINE_string("model_dir", None,
                    "A train_sorter run to evaluate instead of the shipped "
                    "sorter.")
flags.DEFINE_integer("num_vectors", synthetic.TEST_SIZE,
                     "Size of the test set (its first vectors).")

flags.DEFINE_bool("smoothness", False,
                  "Also measure the sorters' rank gradients "
                  "(training.smoothness; about 2 min for the d = 100 LSTM on "
                  "2 CPU cores).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"evaluate_sorter: unexpected arguments: {' '.join(argv[1:])}")
  console.quiet()
  names = list(dict.fromkeys(FLAGS.sorter))  # In order, once each.
  try:
    if not names:
      raise ValueError("--sorter must name at least one sorter.")
    if FLAGS.model_dir:
      if len(names) != 1:
        raise ValueError("--model_dir evaluates one run's sorter; give one "
                         f"--sorter, not {','.join(names)}.")
      record = training.read_record(FLAGS.model_dir)
      if (record["sorter"], record["seq_len"]) != (names[0], FLAGS.seq_len):
        raise ValueError(f"--sorter={names[0]} --seq_len={FLAGS.seq_len} "
                         f"but the run trained {record['sorter']} with "
                         f"d={record['seq_len']}.")
      loaded = {names[0]: training.load_trained(FLAGS.model_dir)}
    else:
      loaded = {name: sorters.load_sorter(name, FLAGS.seq_len)
                for name in names}
  except ValueError as e:
    console.fail("evaluate_sorter", e)
  for name, sorter in loaded.items():
    l1 = training.evaluate_l1(sorter, FLAGS.seq_len, size=FLAGS.num_vectors)
    line = {"sorter": name, "seq_len": FLAGS.seq_len, "l1": round(l1, 6),
            "num_vectors": FLAGS.num_vectors}
    if FLAGS.smoothness:
      line.update({k: round(v, 4) for k, v in training.smoothness(
          sorter, FLAGS.seq_len).items()})
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
  app.run(main)
