r"""Trains a Rank4Class ranking model, keeps the best checkpoint, exports it.

Example (the end-to-end test runs this command with fewer steps):

  .venv/bin/python -m pipelines.train --dataset=digits --loss=approx_ndcg \
      --interaction=lc_mlp --train_steps=1000 --eval_every=100 \
      --model_dir=runs/digits_approx_ndcg

Writes into --model_dir: config.json, TensorBoard events (train/,
validation/), checkpoints/, best_checkpoint/ and export/{best_model_by_metric,
latest_model} SavedModels whose `serving_default` signature takes the raw
instance and returns `scores`, `top_k_ids`, `top_k_names`, `top_k_scores`.
Bad flags exit with status 1 and one line naming the flag, before anything is
written. The same command started again resumes an unfinished run; on a
finished one it prints one line (`already finished: ...`) and exits 0,
touching nothing, so a scheduler may restart the job safely. Only other
settings need --overwrite, which deletes the run and starts afresh.
"""

import sys

from absl import app
from absl import flags

from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.training import trainer as training
from . import console
from . import train_flags

train_flags.define()
# Listed by --helpshort with the binary's own flags.
flags.adopt_module_key_flags(train_flags)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"train: unexpected arguments: {' '.join(argv[1:])}")
  config = train_flags.config_from_flags()
  model_dir = config.trainer.model_dir or None
  console.quiet(model_dir, started_by=model_dir and run_dir_lib.RunDir(
      model_dir).config_file)
  try:
    finished = training.already_finished(config)
    export_dir = None if finished else training.train(config, verbose=2)
  except ValueError as e:
    console.fail("train", e)
  if finished:
    console.say(finished)
  elif config.trainer.export:
    print(f"Exported the best model to {export_dir}")
  else:
    print(f"Trained; no export (--export=false): write them with "
          f"pipelines.export --model_dir={model_dir}")


if __name__ == "__main__":
  app.run(main)
