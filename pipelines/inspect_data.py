r"""Shows what a data set holds, before training on it.

Example (the end-to-end test runs this command on a small folder it writes):

  .venv/bin/python -m pipelines.inspect_data --dataset=text_files \
      --data_dir=my_texts --max_seq_length=32 --output_dir=runs/inspect_my_texts

Takes `pipelines.train`'s data flags (--dataset, --data_dir, --text_column,
--skip_bad_records, --holdout_classes, ...) and, for text, its tokenizer's
(--encoder, --init_checkpoint, --vocab_file, --max_seq_length): the same
command line inspects what that training run would read. Prints one screen:
instances and classes per split, imbalance, classes a split lacks, exact
duplicates within a split and across splits (leakage), and per kind token
lengths against --max_seq_length with the [UNK] rate, image sizes and
undecodable files, or feature statistics; then plain warnings. With
--output_dir, also writes `inspection.json` (every number) and
`class_counts.png` there, each atomically: a new or empty folder, or a
previous inspection's (replaced); a folder holding other files is refused
before the data is read, as `evaluate --report_dir` refuses one. Bad input
exits with status 1 and one line naming it
(docs/pipelines.md#inspect-your-data-first).
"""

import sys

from absl import app
from absl import flags

from . import console
from . import flag_utils
from rank4class_tf import config as config_lib
from rank4class_tf.data import classes as classes_lib
from rank4class_tf.data import datasets
from rank4class_tf.data import inspection
from rank4class_tf.data import text
from rank4class_tf.training import builders

# The model flags that choose the tokenizer; the others are not the data's.
_TOKENIZER_FLAGS = ("encoder", "init_checkpoint", "vocab_file",
                    "max_seq_length")
_OTHER_MODEL_FLAGS = tuple(f.flag for f in config_lib.flag_fields(
    config_lib.ModelConfig) if f.flag not in _TOKENIZER_FLAGS)

flag_utils.define(config_lib.DataConfig)
flag_utils.define(config_lib.ModelConfig, skip=_OTHER_MODEL_FLAGS)
# Listed by --helpshort with the binary's own flag.
for _field in config_lib.flag_fields(config_lib.DataConfig):
  flags.declare_key_flag(_field.flag)
for _name in _TOKENIZER_FLAGS:
  flags.declare_key_flag(_name)
flags.DEFINE_string("output_dir", None,
                    "Folder for inspection.json and class_counts.png "
                    "(made if missing; an existing one must be empty or "
                    "hold a previous inspection); unset: print only.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"inspect_data: unexpected arguments: {' '.join(argv[1:])}")
  data_config = flag_utils.config_from_flags(config_lib.DataConfig)
  model = flag_utils.config_from_flags(config_lib.ModelConfig,
                                       skip=_OTHER_MODEL_FLAGS)
  console.quiet()
  try:
    if model.max_seq_length < 3:
      raise ValueError(f"`max_seq_length`={model.max_seq_length} must be "
                       ">= 3 ([CLS], a token, [SEP]).")
    if FLAGS.output_dir is not None:  # Before the data is read.
      inspection.check_output_dir(FLAGS.output_dir)
    data = datasets.from_config(data_config)
    if data_config.holdout_classes:  # As training reads it (zero-shot).
      data = classes_lib.without_classes(data, classes_lib.holdout_ids(
          data_config.holdout_classes, data.class_names))
    preprocessor = None
    if data.is_text:
      preprocessor = text.TextPreprocessor(builders.vocab_file(model),
                                           seq_length=model.max_seq_length)
    report = inspection.inspect(data, preprocessor,
                                data_dir=data_config.data_dir)
    report["warnings"] = [console.flag_terms(w) for w in report["warnings"]]
    written = (inspection.write(report, FLAGS.output_dir)
               if FLAGS.output_dir else ())
  except ValueError as e:
    console.fail("inspect_data", e)
  print(console.flag_terms(inspection.summary(report)))
  if written:
    print(f"\nWrote {' and '.join(written)}")


if __name__ == "__main__":
  app.run(main)
