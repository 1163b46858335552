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
written.
"""

import sys

from absl import app
from absl import flags

from rank4class_tf import config as config_lib
from rank4class_tf import training

# Data.
flags.DEFINE_string("dataset", "digits",
                    "digits, goemotions, goemotions_multilabel, mind, "
                    "digits32, cifar10, imagenet2012, coco2017, voc2007.")
flags.DEFINE_string("data_dir", None,
                    "Directory of the dataset's files (TFDS data directory "
                    "for cifar10 / imagenet2012 / coco2017 / voc2007).")
flags.DEFINE_bool("download", False,
                  "Let TFDS download and prepare a TFDS dataset "
                  "when missing from --data_dir.")
flags.DEFINE_integer("image_size", None,
                     "Side of the preprocessed imagenet2012 / coco2017 / "
                     "voc2007 images (default 224).")
# Model.
flags.DEFINE_string("encoder", "small_cnn",
                    "Instance encoder: small_cnn, mlp (numeric data); vgg16, "
                    "resnet50 (colour images); bert, electra (text).")
flags.DEFINE_integer("encoder_dim", 128,
                     "Size of h for small_cnn / mlp.")
flags.DEFINE_string("encoder_size", "minilm_l6",
                    "bert / electra architecture: minilm_l6, bert_base, "
                    "electra_base, tiny.")
flags.DEFINE_string("init_checkpoint", "",
                    "bert / electra weights: minilm, a .safetensors file or "
                    "a Google BERT / ELECTRA TF checkpoint; resnet50 "
                    "weights: a Model Garden ResNet-50 checkpoint.")
flags.DEFINE_string("vocab_file", "",
                    "WordPiece vocabulary (default: vocab.txt beside the "
                    "checkpoint, else MiniLM's uncased vocabulary).")
flags.DEFINE_integer("max_seq_length", 32,
                     "Tokens per text instance, [CLS]/[SEP] included.")
flags.DEFINE_float("dropout", 0.1, "Dropout rate on h during training.")
flags.DEFINE_string("interaction", "dot",
                    "Instance-class interaction: dot, lc_mlp, concat_mlp, "
                    "label_attention (classes attend over tokens/positions).")
flags.DEFINE_integer("mlp_units", 128,
                     "Width of both hidden layers of lc_mlp / concat_mlp.")
flags.DEFINE_integer("label_dim", 256,
                     "label_attention: width of the label-level embeddings.")
flags.DEFINE_integer("label_heads", 4, "label_attention: attention heads.")
flags.DEFINE_integer("projection_dim", 128,
                     "label_attention: size of the contrastive projections.")
# Loss.
flags.DEFINE_string("loss", "softmax",
                    "softmax, pairwise_logistic, approx_ndcg, "
                    "gumbel_approx_ndcg, mse, sigmoid_cross_entropy, "
                    "rescaled_mse, two_way, two_way_margin, sodeep_spearman, "
                    "sodeep_map, sodeep_recall.")
flags.DEFINE_float("temperature", None,
                   "Temperature of softmax / pairwise_logistic / approx_ndcg / "
                   "gumbel_approx_ndcg (default: TF-Ranking's for that loss).")
flags.DEFINE_integer("sample_size", 8, "Gumbel-ApproxNDCG samples per list.")
flags.DEFINE_float("gumbel_temperature", 1.0,
                   "Gumbel-ApproxNDCG noise temperature.")
flags.DEFINE_float("rescaled_mse_k", 1.0,
                   "rescaled_mse: weight k of the true class (ImageNet: 15).")
flags.DEFINE_string("sorter", "lstm",
                    "sodeep_* losses: handcrafted, lstm, cnn (lstm/cnn: "
                    "shipped for d = the class count: 10, 28, 100).")
flags.DEFINE_string("parallel_loss", "",
                    "sodeep_*: Keras loss added to the rank loss (mae, l1, "
                    "mse or a Keras loss class name).")
flags.DEFINE_float("parallel_weight", 1.0, "sodeep_*: weight of it.")
flags.DEFINE_float("recall_margin", 0.1, "sodeep_recall: rank margin.")
flags.DEFINE_float("rescaled_mse_m", 1.0,
                   "rescaled_mse: target M of the true class (ImageNet: 30).")
flags.DEFINE_float("two_way_positive_temperature", 4.0, "two_way: T_P.")
flags.DEFINE_float("two_way_negative_temperature", 1.0, "two_way: T_N.")
flags.DEFINE_float("two_way_epsilon", 1.0,
                   "two_way_margin: margin inside the softplus.")
flags.DEFINE_float("contrastive_weight", 0.0,
                   "MulCon: gamma of the label-level contrastive loss "
                   "(needs --interaction=label_attention; 0: off).")
flags.DEFINE_float("contrastive_temperature", 0.2, "MulCon: its tau.")
flags.DEFINE_integer("contrastive_start_step", 0,
                     "MulCon's second step starts here (loss alone before; "
                     "a multiple of --eval_every).")
flags.DEFINE_float("contrastive_learning_rate", None,
                   "MulCon: learning rate of the second step.")
# Training.
flags.DEFINE_string("optimizer", "adam", "adam or adagrad.")
flags.DEFINE_float("learning_rate", 1e-3, "Learning rate.")
flags.DEFINE_integer("batch_size", 64, "Global batch size.")
flags.DEFINE_integer("train_steps", 2000, "Total training steps.")
flags.DEFINE_integer("eval_every", 200, "Steps between validations.")
flags.DEFINE_string("best_metric", "top1_accuracy",
                    "Validation metric that picks the best checkpoint.")
flags.DEFINE_list("metrics", list(config_lib.TrainConfig.metrics),
                  "Metrics: top<k>_accuracy, ndcg@<k>, ndcg, mrr, "
                  "precision@<k>; multi-label map_class, map_sample, cp, "
                  "cr, cf1, op, or, of1, their _top3 forms, macro_f1.")
flags.DEFINE_string("strategy", "default",
                    "default, mirrored, multi_worker_mirrored, "
                    "parameter_server, tpu.")
flags.DEFINE_string("tpu", "", "TPU address for --strategy=tpu.")
flags.DEFINE_integer("cpu_devices", 1,
                     "Logical CPU devices (for --strategy=mirrored on a CPU).")
flags.DEFINE_bool("deterministic", False,
                  "Deterministic ops: repeatable runs and exact resumes.")
flags.DEFINE_bool("overwrite", False,
                  "Replace the export of a model_dir that already has one.")
flags.DEFINE_bool("mixed_precision", False,
                  "Compute in float16 (Keras mixed_float16; for GPUs).")
flags.DEFINE_bool("jit_compile", False,
                  "Compile the training and evaluation steps with XLA.")
flags.DEFINE_integer("seed", 42, "Seed of initialisation, shuffling, noise.")
flags.DEFINE_string("model_dir", None, "Directory for everything the run makes.")
flags.DEFINE_integer("top_k", 5, "Ranked classes returned by the SavedModel.")

FLAGS = flags.FLAGS


def config_from_flags() -> config_lib.TrainConfig:
  """Maps the flags onto the run's config, field by field."""
  return config_lib.TrainConfig(
      dataset=FLAGS.dataset,
      data_dir=FLAGS.data_dir,
      download=FLAGS.download,
      image_size=FLAGS.image_size,
      encoder=FLAGS.encoder,
      encoder_dim=FLAGS.encoder_dim,
      encoder_size=FLAGS.encoder_size,
      init_checkpoint=FLAGS.init_checkpoint,
      vocab_file=FLAGS.vocab_file,
      max_seq_length=FLAGS.max_seq_length,
      dropout=FLAGS.dropout,
      interaction=FLAGS.interaction,
      mlp_units=FLAGS.mlp_units,
      label_dim=FLAGS.label_dim,
      label_heads=FLAGS.label_heads,
      projection_dim=FLAGS.projection_dim,
      loss=FLAGS.loss,
      temperature=FLAGS.temperature,
      sample_size=FLAGS.sample_size,
      gumbel_temperature=FLAGS.gumbel_temperature,
      rescaled_mse_k=FLAGS.rescaled_mse_k,
      rescaled_mse_m=FLAGS.rescaled_mse_m,
      sorter=FLAGS.sorter,
      parallel_loss=FLAGS.parallel_loss,
      parallel_weight=FLAGS.parallel_weight,
      recall_margin=FLAGS.recall_margin,
      two_way_positive_temperature=FLAGS.two_way_positive_temperature,
      two_way_negative_temperature=FLAGS.two_way_negative_temperature,
      two_way_epsilon=FLAGS.two_way_epsilon,
      contrastive_weight=FLAGS.contrastive_weight,
      contrastive_temperature=FLAGS.contrastive_temperature,
      contrastive_start_step=FLAGS.contrastive_start_step,
      contrastive_learning_rate=FLAGS.contrastive_learning_rate,
      optimizer=FLAGS.optimizer,
      learning_rate=FLAGS.learning_rate,
      batch_size=FLAGS.batch_size,
      train_steps=FLAGS.train_steps,
      eval_every=FLAGS.eval_every,
      best_metric=FLAGS.best_metric,
      metrics=tuple(FLAGS.metrics),
      strategy=FLAGS.strategy,
      tpu=FLAGS.tpu,
      cpu_devices=FLAGS.cpu_devices,
      deterministic=FLAGS.deterministic,
      overwrite=FLAGS.overwrite,
      mixed_precision=FLAGS.mixed_precision,
      jit_compile=FLAGS.jit_compile,
      seed=FLAGS.seed,
      model_dir=FLAGS.model_dir or "",
      top_k=FLAGS.top_k)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"train: unexpected arguments: {' '.join(argv[1:])}")
  try:
    export_dir = training.train(config_from_flags(), verbose=2)
  except ValueError as e:
    sys.exit(f"train: {e}")
  print(f"Exported the best model to {export_dir}")


if __name__ == "__main__":
  app.run(main)
