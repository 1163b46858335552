"""The hyper-parameters of a training run: one dataclass of four groups.

`TrainConfig` holds a `DataConfig`, a `ModelConfig`, a `LossConfig` and a
`TrainerConfig`. Every field is documented by its `help` (also its flag's
help): the training binaries generate one flag per field from these
dataclasses (`pipelines/flag_utils.py`), so a new option is one field here.
Flag names are flat and unique across groups; a field whose flag name differs
from the field's says so with `flag` (the loss settings keep the loss's own
argument names, e.g. `LossConfig.k` is `--rescaled_mse_k`).

This module imports nothing from the library but its own `fields`
(`config/fields.py`: the documented field and the flat {flag: value} view
of a config, named here as before: `config.field`, `config.flag_fields`,
`config.from_flat`, `config.to_flat`). `TrainConfig.validate` checks what a
config alone can tell (ranges, required fields, consistency); names of
datasets, encoders, interactions, losses, metrics and strategies are checked
by each kind's own lookup when `checks.validate` runs, before anything is
written.

>>> config = TrainConfig.create(loss="approx_ndcg", rescaled_mse_k=2.0)
>>> config.loss.name, config.loss.k, config.trainer.learning_rate
('approx_ndcg', 2.0, 0.001)
>>> config.replace(learning_rate=0.1).flat()["learning_rate"]
0.1
"""

import dataclasses
import json
import os
import typing
from typing import Any, Dict, Optional, Tuple

from rank4class_tf.config import fields

# The field helpers (`config/fields.py`), named here as they always were.
field = fields.field
FlagField = fields.FlagField
flag_fields = fields.flag_fields
from_flat = fields.from_flat
to_flat = fields.to_flat

DEFAULT_METRICS = ("top1_accuracy", "top5_accuracy", "ndcg@5", "mrr")
OPTIMIZERS = ("adam", "adagrad")
# `--lr_schedule`: the learning rate after `--warmup_steps` (training.
# schedules builds each from the Model Garden's optimization package).
LR_SCHEDULES = ("constant", "linear", "cosine")
# `auto`: bfloat16 where the hardware computes it, else float32 (resolved
# when a run starts: `training.builders.resolve_defaults`).
PRECISIONS = ("auto", "float32", "bfloat16", "float16")
# `--split_rule`: how a missing split is cut from streamed train data
# (`data.splits`): the one rule of every streamed format, or the rules each
# format had before issue 62 (run folders written then keep it).
SPLIT_RULES = ("seed_file_record", "by_format")
# Settings a config written before they existed did not record: it ran with
# these values (the behaviour of that time), not with today's defaults.
LEGACY_VALUES = {"length_bucketing": False, "float32_layers": False,
                 "split_rule": "by_format"}


def upgrade(values: Dict[str, Any]) -> Dict[str, Any]:
  """{flag: value} of an older config in today's terms: the boolean
  `mixed_precision` of release 0.1 (true: mixed_float16) as its precision."""
  values = dict(values)
  if isinstance(values.get("mixed_precision"), bool):
    values["mixed_precision"] = ("float16" if values["mixed_precision"]
                                 else "float32")
  return values


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """The dataset of a run."""
  dataset: str = field(
      "digits", "Dataset: digits, goemotions, goemotions_multilabel, mind, "
      "digits32, cifar10, imagenet2012, coco2017, voc2007; a user's own "
      "data in --data_dir: text_files (CSV / TSV / JSONL, or <split>/<class>/"
      "*.txt), image_folder (<split>/<class>/*.jpg|png), tabular_files "
      "(numeric CSV / TSV), tfrecord (tf.train.Example); or tfds:<name>, any "
      "TFDS classification data set (docs/data.md).")
  data_dir: Optional[str] = field(
      None, "Directory of the dataset's files (TFDS data directory for "
      "cifar10 / imagenet2012 / coco2017 / voc2007).")
  download: bool = field(
      False, "Let TFDS download and prepare a TFDS dataset when missing "
      "from --data_dir (ImageNet still needs its manual download); false "
      "stops with a one-line error instead.")
  image_size: Optional[int] = field(
      None, "Side of the preprocessed imagenet2012 / coco2017 / voc2007 "
      "images (default 224); cifar10 is 32.")
  holdout_classes: Tuple[str, ...] = field(
      (), "Zero-shot classes: the instances of these classes (comma-"
      "separated names) are removed from train and validation; the model "
      "still ranks every class, and evaluation reports the held-out-class "
      "instances apart (needs --class_encoder=text).")
  text_column: str = field(
      "text", "text_files: the column (CSV/TSV header, JSONL key) holding "
      "the text.")
  label_column: str = field(
      "label", "A user's data: the column (text_files, tabular_files) or "
      "feature (tfrecord, tfds:<name>) holding the label: a class name, a "
      "class id (with --class_names_file) or, multi-label, a JSON list.")
  label_separator: str = field(
      "", "text_files: joins the class names of a multi-label row in one "
      "field (e.g. '|'); set, every label is a list ('anger': a list of "
      "one); empty: multi-label rows are JSON lists.")
  class_names_file: str = field(
      "", "A user's data: one class name a line, index = class id; empty: "
      "the train labels' names, sorted.")
  split_seed: int = field(
      20220128, "A user's data: seed of the stratified split that cuts a "
      "missing validation or test split from train (10% each).")
  feature_columns: Tuple[str, ...] = field(
      (), "tabular_files: the numeric feature columns (comma-separated); "
      "empty: every column but --label_column.")
  instance_feature: str = field(
      "", "tfrecord, tfds:<name>: the text or image feature; empty: the one "
      "bytes feature (tfrecord) or the one Text / Image feature (TFDS) "
      "besides the label.")
  tfds_splits: Tuple[str, ...] = field(
      (), "tfds:<name>: our splits as TFDS split expressions, e.g. "
      "'train=train[:90%],validation=train[90%:],test=test'; empty: TFDS's "
      "train, validation and test, a missing one cut from the end of train "
      "(10% each).")
  skip_bad_records: bool = field(
      False, "A user's data: skip rows, records and images that cannot be "
      "read (counted and reported) instead of stopping at the first.")
  split_rule: str = field(
      "seed_file_record", "A user's streamed data (large text files, "
      "TFRecords): how a missing validation or test split is cut from train: "
      "seed_file_record, a record goes to it when the hash of "
      "'split_seed:file name:record number' falls in its 10% of the hash "
      "range; by_format, the rules of runs before it (streamed text: "
      "'split_seed:row number' in 10 buckets).")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """The instance encoder, the class encoder and the interaction."""
  encoder: str = field(
      "small_cnn", "Instance encoder: small_cnn, mlp (numeric data); vgg16, "
      "resnet50 (colour images); bert, electra (text).")
  encoder_dim: int = field(128, "Size of h for small_cnn / mlp.")
  encoder_size: str = field(
      "minilm_l6", "bert / electra architecture: minilm_l6, bert_base, "
      "electra_base, tiny.")
  init_checkpoint: str = field(
      "", "bert / electra weights: minilm (the shipped all-MiniLM-L6-v2), a "
      ".safetensors file or a Google BERT / ELECTRA TF checkpoint; resnet50 "
      "weights: a Model Garden ResNet-50 checkpoint; empty: random weights.")
  vocab_file: str = field(
      "", "WordPiece vocabulary (default: vocab.txt beside the checkpoint, "
      "else MiniLM's uncased vocabulary).")
  max_seq_length: int = field(
      32, "Tokens per text instance, [CLS]/[SEP] included (the paper: 32 for "
      "GoEmotions, 128 for MIND).")
  pooling: str = field(
      "", "bert / electra: how token vectors become h: pooled (BERT's "
      "pooler), cls (the [CLS] vector) or mean (masked mean of the tokens); "
      "empty: the checkpoint's own (mean for minilm and .safetensors "
      "sentence-transformers files, cls for electra, pooled for Google "
      "BERT). The run's config.json records the pooling used.")
  freeze_encoder: bool = field(
      False, "bert / electra: keep the encoder's initial weights and run it "
      "in inference mode; only the class encoder and the interaction train "
      "(with --feature_cache, from the encoder's outputs computed once).")
  dropout: float = field(
      0.1, "Dropout rate on h during training (cifar-vgg's vgg16: 0.5).")
  interaction: str = field(
      "dot", "Instance-class interaction: dot, lc_mlp, concat_mlp, "
      "label_attention (classes attend over tokens/positions).")
  mlp_units: int = field(
      128, "Width of both hidden layers of lc_mlp / concat_mlp.")
  class_encoder: str = field(
      "embedding", "Class encoder: embedding (one learned vector per class) "
      "or text (each class encoded from its name and description by a text "
      "tower, then projected; ranks unseen classes and served class lists).")
  class_tower: str = field(
      "shared", "--class_encoder=text: shared (the instance encoder's own "
      "weights) or separate (a second encoder from the same checkpoint).")
  class_descriptions: str = field(
      "", "--class_encoder=text: file of name<TAB>description lines, one per "
      "class (any order); empty: each class is its name.")
  class_projection: str = field(
      "dense", "--class_encoder=text: how the tower output t becomes c: "
      "dense (c = P t + b) or residual (c = [t, 0] + P t + b, P and b "
      "starting at 0: training starts from the sentence embeddings' "
      "geometry; with --interaction=cosine, from the untrained cosine's "
      "ranking).")
  seen_margin: float = field(
      0.0, "--class_encoder=text, zero-shot: calibrated stacking, a margin "
      "subtracted at inference from the scores of the classes seen in "
      "training (all but --holdout_classes; a served class text is seen "
      "when it is a training class's); choose it with "
      "pipelines.zero_shot_fit (docs/class_encoders.md).")
  cosine_fusion: float = field(
      0.0, "--class_encoder=text, zero-shot: weight w in [0, 1] of the "
      "untrained cosine of the instance's and the class text's tower "
      "outputs, mixed at inference with the trained score: (1 - w) s + w "
      "cos (0: the trained score); choose it with pipelines.zero_shot_fit.")
  label_dim: int = field(
      256, "label_attention: width D of the label-level embeddings.")
  label_heads: int = field(4, "label_attention: attention heads (MulCon: 4).")
  projection_dim: int = field(
      128, "label_attention: size of the contrastive projections.")


# Our loss names -> TF-Ranking's (`tfr.keras.losses.RankingLossKey`), for
# the losses TF-Ranking has. TF-Ranking's names are accepted wherever a loss
# is named (`--loss=softmax_loss`) and stored as ours; `PipelineHparams.loss`
# gets TF-Ranking's.
TFR_LOSS_NAMES = {
    "softmax": "softmax_loss",
    "pairwise_logistic": "pairwise_logistic_loss",
    "approx_ndcg": "approx_ndcg_loss",
    "gumbel_approx_ndcg": "gumbel_approx_ndcg_loss",
    "mse": "mean_squared_loss",
    "sigmoid_cross_entropy": "sigmoid_cross_entropy_loss",
}
LOSS_ALIASES = {tfr: ours for ours, tfr in TFR_LOSS_NAMES.items()}


def canonical_loss(name: str) -> str:
  """Our name of a loss named either way.

  >>> canonical_loss("approx_ndcg_loss"), canonical_loss("approx_ndcg")
  ('approx_ndcg', 'approx_ndcg')
  """
  return LOSS_ALIASES.get(name, name)


@dataclasses.dataclass(frozen=True)
class LossConfig:
  """The loss, its settings under the loss's own argument names, and
  MulCon's label-level contrastive term.

  `losses.build(config.loss, num_classes, seed)` passes a loss exactly the
  settings it takes; the class count (SoDeep's `d`) is given when the loss
  is built.
  """
  name: str = field(
      "softmax", "Loss: softmax, pairwise_logistic, approx_ndcg, "
      "gumbel_approx_ndcg, mse, sigmoid_cross_entropy, rescaled_mse, "
      "two_way, two_way_margin, sodeep_spearman, sodeep_map, sodeep_recall "
      "(TF-Ranking's names, e.g. softmax_loss, approx_ndcg_loss, "
      "mean_squared_loss, are accepted).",
      flag="loss")
  temperature: Optional[float] = field(
      None, "Temperature of softmax / pairwise_logistic / approx_ndcg / "
      "gumbel_approx_ndcg (default: TF-Ranking's for that loss, 1.0 or 0.1 "
      "for approx_ndcg).")
  sample_size: int = field(8, "Gumbel-ApproxNDCG samples per list.")
  gumbel_temperature: float = field(
      1.0, "Gumbel-ApproxNDCG noise temperature.")
  k: float = field(1.0, "rescaled_mse: weight k of the true class "
                   "(ImageNet: 15).", flag="rescaled_mse_k")
  m: float = field(1.0, "rescaled_mse: target M of the true class "
                   "(ImageNet: 30).", flag="rescaled_mse_m")
  sorter: str = field(
      "lstm", "sodeep_* losses: handcrafted (lambda 10), "
      "handcrafted_adaptive (SoDeep code's lambda = 6.8 / std), lstm, cnn, "
      "cnn_reference, "
      "pairwise (shipped for d = the class count: 10, 28, 100 (cnn and "
      "cnn_reference: 100); "
      "frozen).")
  parallel_loss: str = field(
      "", "sodeep_*: Keras loss added to the rank loss (mae, l1, mse or a "
      "Keras loss class name); empty for none.")
  parallel_weight: float = field(1.0, "sodeep_*: weight of --parallel_loss.")
  margin: float = field(0.1, "sodeep_recall: rank margin (1/d = one "
                        "position).", flag="recall_margin")
  positive_temperature: float = field(
      4.0, "two_way: T_P.", flag="two_way_positive_temperature")
  negative_temperature: float = field(
      1.0, "two_way: T_N.", flag="two_way_negative_temperature")
  epsilon: float = field(1.0, "two_way_margin: margin inside the softplus.",
                         flag="two_way_epsilon")
  contrastive_weight: float = field(
      0.0, "MulCon: gamma of the label-level contrastive loss added to the "
      "loss (needs --interaction=label_attention; 0: off).")
  contrastive_temperature: float = field(0.2, "MulCon: its tau.")
  contrastive_normalization: str = field(
      "mulcon", "MulCon: what the LLCL's sum over anchors (relevant labels "
      "of the batch) is divided by: mulcon (every anchor, one without "
      "positive adding 0: MulCon's code) or positive_anchors (the anchors "
      "that have a positive).")
  contrastive_base_temperature: float = field(
      0.2, "MulCon: SupCon's base temperature; the LLCL is scaled by "
      "--contrastive_temperature / this (MulCon: 0.2 and 0.2, a factor 1).")
  contrastive_start_step: int = field(
      0, "MulCon's two steps: the loss alone until this step, then loss + "
      "gamma * LLCL (a multiple of --eval_every; 0: from the start).")
  contrastive_learning_rate: Optional[float] = field(
      None, "MulCon: learning rate of the second step (default: unchanged).")

  def __post_init__(self):
    # TF-Ranking's name of a loss is stored as ours (`canonical_loss`).
    object.__setattr__(self, "name", canonical_loss(self.name))
    if self.parallel_loss:
      object.__setattr__(self, "parallel_loss",
                         canonical_loss(self.parallel_loss))


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """Optimisation, validation, devices and the run's folder."""
  optimizer: str = field("adam", "adam or adagrad.")
  learning_rate: float = field(
      1e-3, "Learning rate (a decaying --lr_schedule starts from it at step "
      "0).")
  lr_schedule: str = field(
      "constant", "Learning-rate schedule after --warmup_steps: constant, "
      "linear (decays linearly to 0 at --train_steps, BERT's fine-tuning "
      "recipe) or cosine (to 0 at --train_steps); built from the Model "
      "Garden's official.modeling.optimization. A decaying schedule's run "
      "is not extended by more --train_steps (its decay would change).")
  warmup_steps: int = field(
      0, "Steps of linear warmup from 0 to the schedule's rate at that step "
      "(the Model Garden's LinearWarmup; 0: none; < --train_steps).")
  batch_size: int = field(64, "Global batch size (split over replicas).")
  train_steps: int = field(
      2000, "Total training steps: exactly this many optimizer steps (with "
      "--patience, at most: the ceiling), a multiple of --eval_every.")
  eval_every: int = field(
      200, "Steps between validations (one Keras epoch each); every "
      "validation writes TensorBoard scalars and may save the best "
      "checkpoint.")
  best_metric: str = field(
      "top1_accuracy", "Validation metric that picks the best checkpoint "
      "(higher is better).")
  patience: int = field(
      0, "Stop once --best_metric has not improved for this many "
      "validations (Keras' EarlyStopping), --train_steps being the ceiling; "
      "the run is then finished, and `converged` when its best is followed "
      "by this many validations. 0: train to --train_steps.")
  metrics: Tuple[str, ...] = field(
      DEFAULT_METRICS, "Metrics: top<k>_accuracy, ndcg@<k>, ndcg, mrr, "
      "precision@<k>; multi-label map_class, map_sample, cp, cr, cf1, op, "
      "or, of1, macro_f1, their _top3 forms (of the 3 best classes, those "
      "over the threshold: ML-GCN) and _best3 forms (the 3 best classes).")
  strategy: str = field(
      "default", "default, mirrored, multi_worker_mirrored, "
      "parameter_server, tpu (see docs/distributed.md).")
  tpu: str = field("", "TPU address for --strategy=tpu.")
  cpu_devices: int = field(
      1, "Logical CPU devices (for --strategy=mirrored on a CPU).")
  deterministic: bool = field(
      False, "Deterministic ops: repeatable runs and exact resumes "
      "(slower).")
  overwrite: bool = field(
      False, "Delete the run in model_dir and train afresh: needed only to "
      "change its settings (the same flags resume an unfinished run and "
      "leave a finished one as it is; more --train_steps extend it).")
  feature_cache: bool = field(
      True, "With --freeze_encoder: train from the encoder's outputs, "
      "computed once per split and stored under --feature_cache_dir (false: "
      "run the frozen encoder at every step).")
  feature_cache_dir: str = field(
      "", "Folder of the feature caches, one per (dataset, data, encoder, "
      "checkpoint, pooling, length) key, local or e.g. gs:// (default: "
      "<model_dir>/feature_cache; a study: <study_dir>/feature_cache, shared "
      "by its runs).")
  export: bool = field(
      True, "Write the SavedModels (export/) when training ends; false keeps "
      "the checkpoints only (pipelines.export writes the SavedModels "
      "later), e.g. for the many runs of a study.")
  keep_checkpoints: int = field(
      0, "Per-validation checkpoints kept: the newest N in checkpoints/ and "
      "the best one alone in best_checkpoint/, older ones deleted after each "
      "validation (a fine-tuned MiniLM run writes ~260 MB a validation); 0 "
      "keeps every one. What resuming, extending and exporting read is "
      "always kept.")
  mixed_precision: str = field(
      "float32", "Compute precision, weights kept in float32: float32, "
      "auto (bfloat16 where the hardware computes it: a CPU with AVX512-BF16 "
      "or AMX, a GPU of compute capability 8.0 or more, a TPU; else float32; "
      "config.json records which), bfloat16 (Keras mixed_bfloat16) or "
      "float16 (mixed_float16 with loss scaling; GPUs). Scores, losses and "
      "metrics stay float32; the exports compute as trained. float32 stays "
      "the default until bfloat16 is shown to keep its accuracy "
      "(docs/text.md, Speed).")
  float32_layers: bool = field(
      True, "Under --mixed_precision=bfloat16 or float16: keep the "
      "numerically sensitive layers in float32 (the scores and the layers "
      "around them, the embeddings, the attention softmax: "
      "modeling/precision.py); false: Keras' policy on every layer, as runs "
      "before it did.")
  jit_compile: bool = field(
      False, "Compile the training and evaluation steps with XLA.")
  length_bucketing: bool = field(
      True, "Text datasets: pad each batch to its longest text (rounded up "
      "to 8 tokens; serving: exactly) instead of --max_seq_length, and "
      "group training examples of similar length into batches; false: the "
      "fixed padding of release 0.1. Ignored for other datasets.")
  seed: int = field(
      42, "Seed of initialisation, shuffling and Gumbel noise.")
  model_dir: str = field(
      "", "Directory for everything the run makes: a local path or any file "
      "system TensorFlow has, e.g. gs://BUCKET/run (not locked there: "
      "docs/distributed.md, Storage).")
  top_k: int = field(5, "Ranked classes returned by the SavedModel.")


_POSITIVE = ("encoder_dim", "mlp_units", "cpu_devices", "sample_size",
             "batch_size", "train_steps", "eval_every", "top_k",
             "learning_rate", "gumbel_temperature", "rescaled_mse_k",
             "label_dim", "label_heads", "projection_dim",
             "two_way_positive_temperature",
             "two_way_negative_temperature", "contrastive_temperature",
             "contrastive_base_temperature")


def absolute_path(path: Optional[str]) -> Optional[str]:
  """A local path made absolute against the current folder; None, an empty
  path or another file system's (`gs://...`) as it is.

  >>> absolute_path("/data/x"), absolute_path("gs://b/x"), absolute_path("")
  ('/data/x', 'gs://b/x', '')
  """
  if not path or "://" in path:
    return path
  return os.path.abspath(path)


# The data settings that name files: a run records them absolute.
DATA_PATHS = ("data_dir", "class_names_file")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Hyper-parameters of one training run, in four groups."""
  data: DataConfig = dataclasses.field(default_factory=DataConfig)
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  loss: LossConfig = dataclasses.field(default_factory=LossConfig)
  trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)

  @classmethod
  def create(cls, **values) -> "TrainConfig":
    """The config with the given settings, by flag name, else defaults."""
    return from_flat(cls, values)

  def replace(self, **values) -> "TrainConfig":
    """A copy with the given settings (by flag name) changed."""
    return from_flat(TrainConfig, dict(self.flat(), **values))

  def flat(self) -> Dict[str, Any]:
    """{flag name: value} of every setting."""
    return to_flat(self)

  def with_absolute_paths(self) -> "TrainConfig":
    """The config with its relative `data_dir` and `class_names_file` made
    absolute against the current folder (`absolute_path`): a run records
    them so, and reads the same data from wherever it is evaluated."""
    changed = {name: absolute_path(getattr(self.data, name))
               for name in DATA_PATHS}
    if all(getattr(self.data, k) == v for k, v in changed.items()):
      return self
    return self.replace(**changed)

  def validate(self) -> None:
    """Checks what the config alone can tell. Runs no TensorFlow op (a
    multi-worker strategy must be created before the first one); names are
    checked by `checks.validate`.

    Raises:
      ValueError: one line naming the setting, its value and what is valid.
    """
    values = self.flat()
    if self.trainer.optimizer not in OPTIMIZERS:
      raise ValueError(f"`optimizer`={self.trainer.optimizer!r} is not "
                       f"valid; choose one of: {', '.join(OPTIMIZERS)}.")
    for name in ("download", "jit_compile", "length_bucketing",
                 "float32_layers",
                 "freeze_encoder", "feature_cache", "export"):
      if not isinstance(values[name], bool):
        raise ValueError(f"`{name}`={values[name]!r} must be true or false.")
    if self.model.max_seq_length < 3:
      raise ValueError(f"`max_seq_length`={self.model.max_seq_length!r} "
                       "must be >= 3 ([CLS], a token, [SEP]).")
    for name in _POSITIVE:
      if not values[name] > 0:
        raise ValueError(f"`{name}`={values[name]!r} must be > 0.")
    for name in ("patience", "warmup_steps"):
      value = values[name]
      if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}`={value!r} must be an integer >= 0.")
    if self.trainer.lr_schedule not in LR_SCHEDULES:
      raise ValueError(f"`lr_schedule`={self.trainer.lr_schedule!r} is not "
                       f"valid; choose one of: {', '.join(LR_SCHEDULES)}.")
    keep = values["keep_checkpoints"]
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
      raise ValueError(f"`keep_checkpoints`={keep!r} must be an integer "
                       ">= 0 (0: keep every checkpoint).")
    if not self.loss.parallel_weight >= 0 or not self.loss.margin >= 0:
      raise ValueError("`parallel_weight` and `recall_margin` must be >= 0.")
    if self.loss.temperature is not None and not self.loss.temperature > 0:
      raise ValueError(f"`temperature`={self.loss.temperature!r} must be "
                       "> 0.")
    if not 0.0 <= self.model.cosine_fusion <= 1.0:
      raise ValueError(f"`cosine_fusion`={self.model.cosine_fusion!r} must "
                       "be in [0, 1].")
    if not abs(self.model.seen_margin) < float("inf"):
      raise ValueError(f"`seen_margin`={self.model.seen_margin!r} must be "
                       "finite.")
    if not 0.0 <= self.model.dropout < 1.0:
      raise ValueError(f"`dropout`={self.model.dropout!r} must be in [0, 1).")
    if self.data.image_size is not None and not self.data.image_size >= 32:
      raise ValueError(f"`image_size`={self.data.image_size!r} must be "
                       ">= 32.")
    trainer = self.trainer
    if not 0 <= trainer.seed <= 2**32 - 1:
      raise ValueError(f"`seed`={trainer.seed} must be between 0 and "
                       "2**32 - 1.")
    if trainer.train_steps % trainer.eval_every:
      raise ValueError(
          f"`train_steps`={trainer.train_steps} must be a multiple of "
          f"`eval_every`={trainer.eval_every}: training runs in epochs of "
          "`eval_every` steps, each ended by a validation.")
    if trainer.warmup_steps >= trainer.train_steps:
      raise ValueError(f"`warmup_steps`={trainer.warmup_steps} must be less "
                       f"than `train_steps`={trainer.train_steps}.")
    if not trainer.model_dir:
      raise ValueError("`model_dir` must be set.")
    if trainer.strategy == "tpu" and not trainer.tpu:
      raise ValueError("`tpu` must name the TPU address when `strategy`=tpu.")
    if self.data.split_rule not in SPLIT_RULES:
      raise ValueError(f"`split_rule`={self.data.split_rule!r} is not valid; "
                       f"choose one of: {', '.join(SPLIT_RULES)}.")
    if trainer.mixed_precision not in PRECISIONS:
      raise ValueError(f"`mixed_precision`={trainer.mixed_precision!r} is "
                       f"not valid; choose one of: {', '.join(PRECISIONS)}.")
    if trainer.mixed_precision == "float16" and trainer.strategy == "tpu":
      raise ValueError("`mixed_precision`=float16 is for GPUs; TPUs compute "
                       "in bfloat16 (`mixed_precision`=bfloat16).")
    if self.model.label_dim % self.model.label_heads:
      raise ValueError(f"`label_dim`={self.model.label_dim} must be a "
                       f"multiple of `label_heads`={self.model.label_heads}.")
    self._validate_contrastive()

  def _validate_contrastive(self) -> None:
    """MulCon's flags (that they need label_attention: `training`)."""
    loss, trainer = self.loss, self.trainer
    if not loss.contrastive_weight >= 0:
      raise ValueError(f"`contrastive_weight`={loss.contrastive_weight!r} "
                       "must be >= 0.")
    if loss.contrastive_weight > 0:
      if (loss.contrastive_start_step % trainer.eval_every or
          not 0 <= loss.contrastive_start_step < trainer.train_steps):
        raise ValueError(
            f"`contrastive_start_step`={loss.contrastive_start_step} must "
            f"be a multiple of `eval_every`={trainer.eval_every} in "
            f"[0, `train_steps`={trainer.train_steps}).")
      if (loss.contrastive_learning_rate is not None and
          not loss.contrastive_learning_rate > 0):
        raise ValueError("`contrastive_learning_rate`="
                         f"{loss.contrastive_learning_rate!r} must be > 0.")
      if loss.contrastive_learning_rate is not None and (
          trainer.lr_schedule != "constant" or trainer.warmup_steps):
        raise ValueError(
            "`contrastive_learning_rate` sets the rate of MulCon's second "
            "step, which a schedule (`lr_schedule`="
            f"{trainer.lr_schedule}, `warmup_steps`={trainer.warmup_steps}) "
            "sets too: use one or the other.")

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> "TrainConfig":
    """Reads `to_json`'s output (or a run's flat config.json of release
    0.1, keyed by flag name)."""
    values = json.loads(text)
    if set(values) <= {f.name for f in dataclasses.fields(cls)}:
      groups = {}
      for f in dataclasses.fields(cls):
        sub = {key: tuple(value) if isinstance(value, list) else value
               for key, value in dict(values.get(f.name, {})).items()}
        kind = typing.get_type_hints(cls)[f.name]
        names = {g.name for g in dataclasses.fields(kind)}
        sub = upgrade(dict(
            {k: v for k, v in LEGACY_VALUES.items() if k in names}, **sub))
        groups[f.name] = kind(**sub)
      return cls(**groups)
    return cls.create(**upgrade(dict(LEGACY_VALUES, **values)))
