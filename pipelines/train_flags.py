"""The flags of `pipelines.train`, shared with the binaries that run it.

`define()` declares one flag per `TrainConfig` field (grouped by data, model,
loss and training); `config_from_flags()` reads them back into the config by
field name, so a new field needs its flag here and nothing else. A binary that
sets some fields itself (`pipelines.study` sets the loss, interaction,
learning rate, MLP width and seed of each run) leaves their flags out with
`skip` and passes their values as overrides.
"""

import dataclasses
from typing import Callable, Iterable

from absl import flags

from rank4class_tf import config as config_lib
from rank4class_tf import training

FLAGS = flags.FLAGS
_skipped = frozenset()  # The fields whose flags `define` left out.


def define(skip: Iterable[str] = ()) -> None:
  """Declares the training flags, except those named in `skip`."""
  global _skipped
  skip = _skipped = frozenset(skip)

  def define(definer: Callable, name: str, *args, **kwargs):
    if name not in skip:
      definer(name, *args, **kwargs)

  # Data.
  define(flags.DEFINE_string, "dataset", "digits",
         "digits, goemotions, goemotions_multilabel, mind, "
         "digits32, cifar10, imagenet2012, coco2017, voc2007.")
  define(flags.DEFINE_string, "data_dir", None,
         "Directory of the dataset's files (TFDS data directory "
         "for cifar10 / imagenet2012 / coco2017 / voc2007).")
  define(flags.DEFINE_bool, "download", False,
         "Let TFDS download and prepare a TFDS dataset "
         "when missing from --data_dir.")
  define(flags.DEFINE_integer, "image_size", None,
         "Side of the preprocessed imagenet2012 / coco2017 / "
         "voc2007 images (default 224).")
  # Model.
  define(flags.DEFINE_string, "encoder", "small_cnn",
         "Instance encoder: small_cnn, mlp (numeric data); vgg16, "
         "resnet50 (colour images); bert, electra (text).")
  define(flags.DEFINE_integer, "encoder_dim", 128,
         "Size of h for small_cnn / mlp.")
  define(flags.DEFINE_string, "encoder_size", "minilm_l6",
         "bert / electra architecture: minilm_l6, bert_base, "
         "electra_base, tiny.")
  define(flags.DEFINE_string, "init_checkpoint", "",
         "bert / electra weights: minilm, a .safetensors file or "
         "a Google BERT / ELECTRA TF checkpoint; resnet50 "
         "weights: a Model Garden ResNet-50 checkpoint.")
  define(flags.DEFINE_string, "vocab_file", "",
         "WordPiece vocabulary (default: vocab.txt beside the "
         "checkpoint, else MiniLM's uncased vocabulary).")
  define(flags.DEFINE_integer, "max_seq_length", 32,
         "Tokens per text instance, [CLS]/[SEP] included.")
  define(flags.DEFINE_float, "dropout", 0.1,
         "Dropout rate on h during training.")
  define(flags.DEFINE_string, "interaction", "dot",
         "Instance-class interaction: dot, lc_mlp, concat_mlp, "
         "label_attention (classes attend over tokens/positions).")
  define(flags.DEFINE_integer, "mlp_units", 128,
         "Width of both hidden layers of lc_mlp / concat_mlp.")
  define(flags.DEFINE_integer, "label_dim", 256,
         "label_attention: width of the label-level embeddings.")
  define(flags.DEFINE_integer, "label_heads", 4,
         "label_attention: attention heads.")
  define(flags.DEFINE_integer, "projection_dim", 128,
         "label_attention: size of the contrastive projections.")
  # Loss.
  define(flags.DEFINE_string, "loss", "softmax",
         "softmax, pairwise_logistic, approx_ndcg, "
         "gumbel_approx_ndcg, mse, sigmoid_cross_entropy, "
         "rescaled_mse, two_way, two_way_margin, sodeep_spearman, "
         "sodeep_map, sodeep_recall.")
  define(flags.DEFINE_float, "temperature", None,
         "Temperature of softmax / pairwise_logistic / approx_ndcg / "
         "gumbel_approx_ndcg (default: TF-Ranking's for that loss).")
  define(flags.DEFINE_integer, "sample_size", 8,
         "Gumbel-ApproxNDCG samples per list.")
  define(flags.DEFINE_float, "gumbel_temperature", 1.0,
         "Gumbel-ApproxNDCG noise temperature.")
  define(flags.DEFINE_float, "rescaled_mse_k", 1.0,
         "rescaled_mse: weight k of the true class (ImageNet: 15).")
  define(flags.DEFINE_string, "sorter", "lstm",
         "sodeep_* losses: handcrafted, lstm, cnn (lstm/cnn: "
         "shipped for d = the class count: 10, 28, 100).")
  define(flags.DEFINE_string, "parallel_loss", "",
         "sodeep_*: Keras loss added to the rank loss (mae, l1, "
         "mse or a Keras loss class name).")
  define(flags.DEFINE_float, "parallel_weight", 1.0, "sodeep_*: weight of it.")
  define(flags.DEFINE_float, "recall_margin", 0.1,
         "sodeep_recall: rank margin.")
  define(flags.DEFINE_float, "rescaled_mse_m", 1.0,
         "rescaled_mse: target M of the true class (ImageNet: 30).")
  define(flags.DEFINE_float, "two_way_positive_temperature", 4.0,
         "two_way: T_P.")
  define(flags.DEFINE_float, "two_way_negative_temperature", 1.0,
         "two_way: T_N.")
  define(flags.DEFINE_float, "two_way_epsilon", 1.0,
         "two_way_margin: margin inside the softplus.")
  define(flags.DEFINE_float, "contrastive_weight", 0.0,
         "MulCon: gamma of the label-level contrastive loss "
         "(needs --interaction=label_attention; 0: off).")
  define(flags.DEFINE_float, "contrastive_temperature", 0.2, "MulCon: its tau.")
  define(flags.DEFINE_integer, "contrastive_start_step", 0,
         "MulCon's second step starts here (loss alone before; "
         "a multiple of --eval_every).")
  define(flags.DEFINE_float, "contrastive_learning_rate", None,
         "MulCon: learning rate of the second step.")
  # Training.
  define(flags.DEFINE_string, "optimizer", "adam", "adam or adagrad.")
  define(flags.DEFINE_float, "learning_rate", 1e-3, "Learning rate.")
  define(flags.DEFINE_integer, "batch_size", 64, "Global batch size.")
  define(flags.DEFINE_integer, "train_steps", 2000, "Total training steps.")
  define(flags.DEFINE_integer, "eval_every", 200, "Steps between validations.")
  define(flags.DEFINE_string, "best_metric", "top1_accuracy",
         "Validation metric that picks the best checkpoint.")
  define(flags.DEFINE_list, "metrics", list(config_lib.TrainConfig.metrics),
         "Metrics: top<k>_accuracy, ndcg@<k>, ndcg, mrr, "
         "precision@<k>; multi-label map_class, map_sample, cp, "
         "cr, cf1, op, or, of1, their _top3 forms, macro_f1.")
  define(flags.DEFINE_string, "strategy", "default",
         "default, mirrored, multi_worker_mirrored, "
         "parameter_server, tpu.")
  define(flags.DEFINE_string, "tpu", "", "TPU address for --strategy=tpu.")
  define(flags.DEFINE_integer, "cpu_devices", 1,
         "Logical CPU devices (for --strategy=mirrored on a CPU).")
  define(flags.DEFINE_bool, "deterministic", False,
         "Deterministic ops: repeatable runs and exact resumes.")
  define(flags.DEFINE_bool, "overwrite", False,
         "Replace the export of a model_dir that already has one.")
  define(flags.DEFINE_bool, "mixed_precision", False,
         "Compute in float16 (Keras mixed_float16; for GPUs).")
  define(flags.DEFINE_bool, "jit_compile", False,
         "Compile the training and evaluation steps with XLA.")
  define(flags.DEFINE_integer, "seed", 42,
         "Seed of initialisation, shuffling, noise.")
  define(flags.DEFINE_string, "model_dir", None,
         "Directory for everything the run makes.")
  define(flags.DEFINE_integer, "top_k", 5,
         "Ranked classes returned by the SavedModel.")


def config_from_flags(**overrides) -> config_lib.TrainConfig:
  """The run's config: each field from its flag, or from `overrides`.

  A field whose flag `define` skipped and that `overrides` does not set keeps
  its `TrainConfig` default.
  """
  values = {}
  for field in dataclasses.fields(config_lib.TrainConfig):
    if field.name in overrides:
      values[field.name] = overrides[field.name]
    elif field.name in FLAGS and field.name not in _skipped:
      values[field.name] = FLAGS[field.name].value
  values["metrics"] = tuple(values.get("metrics",
                                       config_lib.TrainConfig.metrics))
  if values.get("model_dir") is None:
    values["model_dir"] = ""
  return config_lib.TrainConfig(**values)
