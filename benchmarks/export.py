r"""Export time and size with and without Keras' layer traces.

`saved_model.export_saved_model` writes a run's SavedModel with
`save_traces=saved_model.SAVE_TRACES` (False): the export holds its signatures
and weights, not Keras' trace of every layer's call. This times
`pipelines.export` (`training.export_run`: the model built, both
checkpoints restored, calibrated and saved; the best export a copy when its
weights are the final ones) on copies of finished `--export=false` runs,
both settings alternating `--repeats` times, and prints a markdown table:
run, setting, median seconds, the `saved_model.pb` bytes, and whether the
two settings' `serving_default` outputs on the run's first test instances
are identical; then the machine's load.

  .venv/bin/python -m pipelines.train --dataset=digits --train_steps=20 \
      --eval_every=10 --export=false --model_dir=/tmp/export_bench/digits
  .venv/bin/python -m pipelines.train --dataset=text_files \
      --data_dir=data/examples/emotions_csv --text_column=comment \
      --label_column=feeling --encoder=bert --init_checkpoint=minilm \
      --freeze_encoder --feature_cache_dir=/tmp/export_bench/cache \
      --max_seq_length=32 --interaction=label_attention --label_dim=8 \
      --label_heads=2 --train_steps=20 --eval_every=10 --export=false \
      --model_dir=/tmp/export_bench/minilm
  .venv/bin/python -m benchmarks.export \
      --runs=/tmp/export_bench/digits,/tmp/export_bench/minilm --repeats=3
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

flags.DEFINE_list("runs", None, "Finished runs trained with --export=false.")
flags.DEFINE_integer("repeats", 3, "Exports per run and setting.")
FLAGS = flags.FLAGS


def export_once(run: str, save_traces: bool, root: str):
  """Exports a fresh copy of `run`: (seconds, the copy)."""
  from rank4class_tf.serving import saved_model  # pylint: disable=g-import-not-at-top
  from rank4class_tf.training import trainer as training  # pylint: disable=g-import-not-at-top
  copy = tempfile.mkdtemp(dir=root)
  shutil.rmtree(copy)
  shutil.copytree(run, copy)
  saved_model.SAVE_TRACES = save_traces
  start = time.perf_counter()
  training.export_run(copy)
  return time.perf_counter() - start, copy


def served(copy: str):
  """serving_default's outputs on the run's first 8 test instances."""
  from rank4class_tf.serving import exported_ranker  # pylint: disable=g-import-not-at-top
  from rank4class_tf.training import builders  # pylint: disable=g-import-not-at-top
  ranker = exported_ranker.ExportedRanker(copy)
  data = builders.load_data(exported_ranker.load_config(copy))
  return ranker.outputs(data.splits["test"][0][:8])


def main(argv):
  if len(argv) > 1:
    sys.exit(f"export: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.runs:
    sys.exit("export: --runs must name finished runs.")
  for run in FLAGS.runs:
    if not os.path.isfile(os.path.join(run, "config.json")):
      sys.exit(f"export: --runs: {run} holds no run (no config.json).")
    if os.path.isdir(os.path.join(run, "export")):
      sys.exit(f"export: --runs: {run} already holds an export; train it "
               "with --export=false.")
  if FLAGS.repeats < 1:
    sys.exit("export: --repeats must be at least 1.")
  import numpy as np  # pylint: disable=g-import-not-at-top
  from rank4class_tf import run_dir as run_dir_lib  # pylint: disable=g-import-not-at-top
  root = tempfile.mkdtemp(prefix="export_bench_")
  print("| run | layer traces | median s (of %d) | saved_model.pb bytes | "
        "same serving_default |" % FLAGS.repeats)
  print("|---|---|---|---|---|")
  try:
    for run in FLAGS.runs:
      seconds = {True: [], False: []}
      copies = {}
      for _ in range(FLAGS.repeats):
        for save_traces in (True, False):
          took, copy = export_once(run, save_traces, root)
          seconds[save_traces].append(took)
          copies[save_traces] = copy
      scores = {k: served(c) for k, c in copies.items()}
      same = all(np.array_equal(scores[True][k], scores[False][k])
                 for k in scores[True]) and (scores[True].keys()
                                             == scores[False].keys())
      for save_traces in (True, False):
        pb = os.path.join(run_dir_lib.RunDir(copies[save_traces]).export(
            run_dir_lib.LATEST_EXPORT), "saved_model.pb")
        print(f"| {os.path.basename(run.rstrip('/'))} | "
              f"{'yes' if save_traces else 'no (shipped)'} | "
              f"{statistics.median(seconds[save_traces]):.2f} | "
              f"{os.path.getsize(pb):,} | {'yes' if same else 'NO'} |")
  finally:
    shutil.rmtree(root, ignore_errors=True)
  print(f"\n{os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f} (1 min) at the end.")


if __name__ == "__main__":
  app.run(main)
