"""The one hyper-parameter dataclass of a training run, documented field by field.

The training binary maps its flags onto `TrainConfig` and the library reads only
this object. `validate()` checks every field and names the offending flag, so a
bad run stops before anything is written.
"""

import dataclasses
import json
from typing import Any, Dict, Optional

from rank4class_tf import datasets
from rank4class_tf import encoders
from rank4class_tf import interactions
from rank4class_tf import losses
from rank4class_tf import metrics
from rank4class_tf import pretrained
from rank4class_tf.sorting import sorters

OPTIMIZERS = ("adam", "adagrad")
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored",
              "parameter_server", "tpu")


@dataclasses.dataclass
class TrainConfig:
  """Hyper-parameters of one training run.

  Data:
    dataset: dataset name (`datasets.DATASET_NAMES`).
    data_dir: directory of the dataset's files, for datasets that need one
      (the TFDS data directory for `cifar10` / `imagenet2012`).
    download: let TFDS download and prepare `cifar10` / `imagenet2012` when
      they are missing from data_dir (ImageNet still needs its manual
      download); False stops with a one-line error instead.
    image_size: side of the preprocessed `imagenet2012` images (None: 224);
      `cifar10` is 32.

  Model:
    encoder: instance encoder name (`encoders.ENCODER_NAMES`); `bert` or
      `electra` for text datasets.
    encoder_dim: size of h produced by `small_cnn` / `mlp`.
    encoder_size: architecture of `bert` / `electra` (`pretrained.SIZES`).
    init_checkpoint: weights of `bert` / `electra`: `minilm` (the shipped
      all-MiniLM-L6-v2), a .safetensors file, or a Google BERT / ELECTRA
      TensorFlow checkpoint; of `resnet50`: a Model Garden ResNet-50
      checkpoint; empty for random weights.
    vocab_file: WordPiece vocabulary; empty: `vocab.txt` beside a Google
      checkpoint, else MiniLM's (BERT's uncased vocabulary).
    max_seq_length: tokens per text instance, [CLS] and [SEP] included
      (the paper: 32 for GoEmotions, 128 for MIND).
    dropout: dropout rate on h during training (cifar-vgg's `vgg16`: 0.5).
    interaction: `dot`, `lc_mlp`, `concat_mlp` or `label_attention`
      (classes as queries over the encoder's token / position features).
    mlp_units: width of the two hidden layers of the MLP interactions.
    label_dim: `label_attention`: width D of the label-level embeddings.
    label_heads: `label_attention`: attention heads (MulCon: 4).
    projection_dim: `label_attention`: size of the contrastive projections.

  Loss:
    loss: loss name (`losses.LOSS_NAMES`).
    temperature: softmax / pairwise / ApproxNDCG temperature (None: the
      TF-Ranking default of that loss, 1.0 or 0.1 for ApproxNDCG).
    sample_size: Gumbel-ApproxNDCG samples per list.
    gumbel_temperature: Gumbel-ApproxNDCG noise temperature.
    rescaled_mse_k: k of `rescaled_mse` (weight of the true class).
    rescaled_mse_m: M of `rescaled_mse` (target score of the true class).
    sorter: sorter of the `sodeep_*` losses: `handcrafted`, or `lstm` / `cnn`
      with weights shipped for d = the class count (frozen).
    parallel_loss: `sodeep_*`: a Keras loss added to the rank loss (`mae`,
      `l1`, `mse` or a Keras loss class name); empty for none.
    parallel_weight: `sodeep_*`: weight of `parallel_loss`.
    recall_margin: `sodeep_recall`: rank margin (1/d = one position).
    two_way_positive_temperature: `two_way`: T_P.
    two_way_negative_temperature: `two_way`: T_N.
    two_way_epsilon: `two_way_margin`: the margin inside the softplus.
    contrastive_weight: gamma of MulCon's label-level contrastive loss added
      to the loss (needs `label_attention`); 0 turns it off.
    contrastive_temperature: its temperature tau (MulCon: 0.2).
    contrastive_start_step: MulCon's two steps: the loss alone until this
      step, then loss + gamma * LLCL (a multiple of eval_every; 0: the
      contrastive term from the start).
    contrastive_learning_rate: learning rate of the second step (None:
      unchanged).

  Training:
    optimizer: `adam` or `adagrad`.
    learning_rate: optimizer learning rate.
    batch_size: global batch size (split over replicas).
    train_steps: total optimizer steps.
    eval_every: steps between validations (one Keras epoch each); every
      validation writes TensorBoard scalars and may save the best checkpoint.
    best_metric: validation metric that picks the best checkpoint
      (higher is better).
    metrics: metrics computed in training and validation.
    strategy: `default`, `mirrored`, `multi_worker_mirrored`,
      `parameter_server` or `tpu` (see README, "Scale out and survive").
    tpu: TPU address for `strategy=tpu`.
    cpu_devices: split the host CPU into this many logical devices, so that
      `mirrored` runs data-parallel on one CPU.
    deterministic: enable TensorFlow's op determinism (bitwise repeatable
      runs, and resumed runs equal uninterrupted ones; slower).
    overwrite: allow a model_dir that already holds an export.
    mixed_precision: compute in float16 with float32 weights (Keras
      `mixed_float16` policy, loss scaling); scores, losses and metrics stay
      float32. For GPUs; runs, slowly, on a CPU.
    jit_compile: compile the training and evaluation steps with XLA.
    seed: seed of weights initialisation, shuffling and Gumbel noise.
    model_dir: directory receiving everything the run makes.
    top_k: number of ranked classes the exported SavedModel returns.
  """
  # Data.
  dataset: str = "digits"
  data_dir: Optional[str] = None
  download: bool = False
  image_size: Optional[int] = None
  # Model.
  encoder: str = "small_cnn"
  encoder_dim: int = 128
  encoder_size: str = "minilm_l6"
  init_checkpoint: str = ""
  vocab_file: str = ""
  max_seq_length: int = 32
  dropout: float = 0.1
  interaction: str = "dot"
  mlp_units: int = 128
  label_dim: int = 256
  label_heads: int = 4
  projection_dim: int = 128
  # Loss.
  loss: str = "softmax"
  temperature: Optional[float] = None
  sample_size: int = 8
  gumbel_temperature: float = 1.0
  rescaled_mse_k: float = 1.0
  rescaled_mse_m: float = 1.0
  sorter: str = "lstm"
  parallel_loss: str = ""
  parallel_weight: float = 1.0
  recall_margin: float = 0.1
  two_way_positive_temperature: float = 4.0
  two_way_negative_temperature: float = 1.0
  two_way_epsilon: float = 1.0
  contrastive_weight: float = 0.0
  contrastive_temperature: float = 0.2
  contrastive_start_step: int = 0
  contrastive_learning_rate: Optional[float] = None
  # Training.
  optimizer: str = "adam"
  learning_rate: float = 1e-3
  batch_size: int = 64
  train_steps: int = 2000
  eval_every: int = 200
  best_metric: str = "top1_accuracy"
  metrics: tuple = metrics.DEFAULT_METRICS
  strategy: str = "default"
  tpu: str = ""
  cpu_devices: int = 1
  deterministic: bool = False
  overwrite: bool = False
  mixed_precision: bool = False
  jit_compile: bool = False
  seed: int = 42
  model_dir: str = ""
  top_k: int = 5

  def encoder_kwargs(self) -> Dict[str, Any]:
    """The keyword arguments of `encoders.get(self.encoder)`."""
    if self.encoder in encoders.TEXT_ENCODERS:
      return {"size": self.encoder_size,
              "init_checkpoint": self.init_checkpoint or None,
              "dropout": self.dropout}
    if self.encoder == "resnet50":
      return {"init_checkpoint": self.init_checkpoint or None,
              "dropout": self.dropout}
    if self.encoder == "vgg16":
      return {"dropout": self.dropout}
    return {"dim": self.encoder_dim, "dropout": self.dropout}

  def loss_kwargs(self) -> Dict[str, Any]:
    """The hyper-parameters of `self.loss`, named as `losses.get` takes them."""
    candidates = {
        "temperature": self.temperature,
        "sample_size": self.sample_size,
        "gumbel_temperature": self.gumbel_temperature,
        "seed": self.seed,
        "k": self.rescaled_mse_k,
        "m": self.rescaled_mse_m,
        "sorter": self.sorter,
        "d": None,  # The class count, known once the data is loaded.
        "parallel_loss": self.parallel_loss or None,
        "parallel_weight": self.parallel_weight,
        "margin": self.recall_margin,
        "positive_temperature": self.two_way_positive_temperature,
        "negative_temperature": self.two_way_negative_temperature,
        "epsilon": self.two_way_epsilon,
    }
    return {k: candidates[k] for k in losses.hyperparameters(self.loss)
            if k in candidates}

  def validate(self) -> None:
    """Checks every field. Runs no TensorFlow op (a multi-worker strategy
    must be created before the first one).

    Raises:
      ValueError: one line naming the flag, its value and the valid choices.
    """
    choices = {
        "dataset": datasets.DATASET_NAMES,
        "encoder": encoders.ENCODER_NAMES,
        "interaction": interactions.ALL_NAMES,
        "loss": losses.LOSS_NAMES,
        "optimizer": OPTIMIZERS,
        "strategy": STRATEGIES,
    }
    for name, valid in choices.items():
      value = getattr(self, name)
      if value not in valid:
        raise ValueError(f"--{name}={value!r} is not valid; choose one of: "
                         f"{', '.join(valid)}.")
    if (self.encoder in encoders.TEXT_ENCODERS and
        self.encoder_size not in pretrained.SIZES):
      raise ValueError(f"--encoder_size={self.encoder_size!r} is not valid; "
                       f"choose one of: {', '.join(pretrained.SIZES)}.")
    text_data = self.dataset in datasets.TEXT_DATASETS
    if text_data != (self.encoder in encoders.TEXT_ENCODERS):
      kind = "text" if text_data else "numeric"
      valid = (encoders.TEXT_ENCODERS if text_data else
               tuple(e for e in encoders.ENCODER_NAMES
                     if e not in encoders.TEXT_ENCODERS))
      raise ValueError(f"--encoder={self.encoder!r} cannot read the {kind} "
                       f"dataset {self.dataset!r}; choose one of: "
                       f"{', '.join(valid)}.")
    if (self.encoder in encoders.IMAGE_ENCODERS and
        self.dataset not in datasets.IMAGE_DATASETS):
      raise ValueError(f"--encoder={self.encoder!r} reads colour images; "
                       "choose --dataset from: "
                       f"{', '.join(datasets.IMAGE_DATASETS)}.")
    self._validate_images()
    if self.max_seq_length < 3:
      raise ValueError(f"--max_seq_length={self.max_seq_length!r} must be "
                       ">= 3 ([CLS], a token, [SEP]).")
    positive = ("encoder_dim", "mlp_units", "cpu_devices", "sample_size",
                "batch_size", "train_steps", "eval_every", "top_k",
                "learning_rate", "gumbel_temperature", "rescaled_mse_k",
                "label_dim", "label_heads", "projection_dim",
                "two_way_positive_temperature",
                "two_way_negative_temperature", "contrastive_temperature")
    for name in positive:
      if not getattr(self, name) > 0:
        raise ValueError(f"--{name}={getattr(self, name)!r} must be > 0.")
    if self.loss.startswith("sodeep_"):
      if self.sorter not in sorters.SORTER_NAMES:
        raise ValueError(f"--sorter={self.sorter!r} is not valid; choose one "
                         f"of: {', '.join(sorters.SORTER_NAMES)}.")
      if not self.parallel_weight >= 0 or not self.recall_margin >= 0:
        raise ValueError("--parallel_weight and --recall_margin must be "
                         ">= 0.")
    self._validate_label_attention()
    if self.temperature is not None and not self.temperature > 0:
      raise ValueError(f"--temperature={self.temperature!r} must be > 0.")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"--dropout={self.dropout!r} must be in [0, 1).")
    for name in tuple(self.metrics) + (self.best_metric,):
      try:
        metrics.check_name(name)
      except ValueError as e:
        raise ValueError(f"--metrics/--best_metric: {e}") from None
    if self.best_metric not in self.metrics:
      raise ValueError(f"--best_metric={self.best_metric!r} must be one of "
                       f"--metrics ({', '.join(self.metrics)}).")
    if not self.model_dir:
      raise ValueError("--model_dir must be set.")
    if self.strategy == "tpu" and not self.tpu:
      raise ValueError("--tpu must name the TPU address when --strategy=tpu.")
    whole_split = [m for m in tuple(self.metrics)
                   if m in metrics.WHOLE_SPLIT_METRICS]
    if whole_split and self.strategy != "default":
      raise ValueError(f"--metrics: {', '.join(whole_split)} needs every "
                       "score of the validation split on one replica; use "
                       "--strategy=default, or compute it afterwards with "
                       "pipelines.evaluate.")

  def _validate_label_attention(self) -> None:
    """The label_attention and MulCon flags."""
    if self.interaction in interactions.SEQUENCE_INTERACTIONS:
      if self.encoder not in encoders.SEQUENCE_ENCODERS:
        raise ValueError(
            f"--interaction={self.interaction} attends over token or "
            f"position features; --encoder={self.encoder!r} has none (use "
            f"one of {', '.join(encoders.SEQUENCE_ENCODERS)}).")
      if self.label_dim % self.label_heads:
        raise ValueError(f"--label_dim={self.label_dim} must be a multiple "
                         f"of --label_heads={self.label_heads}.")
    if not self.contrastive_weight >= 0:
      raise ValueError(f"--contrastive_weight={self.contrastive_weight!r} "
                       "must be >= 0.")
    if self.contrastive_weight > 0:
      if self.interaction not in interactions.SEQUENCE_INTERACTIONS:
        raise ValueError("--contrastive_weight > 0 (MulCon's label-level "
                         "contrastive loss) needs "
                         "--interaction=label_attention.")
      if (self.contrastive_start_step % self.eval_every or
          not 0 <= self.contrastive_start_step < self.train_steps):
        raise ValueError(
            f"--contrastive_start_step={self.contrastive_start_step} must "
            f"be a multiple of --eval_every={self.eval_every} in "
            f"[0, --train_steps={self.train_steps}).")
      if (self.contrastive_learning_rate is not None and
          not self.contrastive_learning_rate > 0):
        raise ValueError("--contrastive_learning_rate="
                         f"{self.contrastive_learning_rate!r} must be > 0.")

  def _validate_images(self) -> None:
    """The image flags: download, image_size, init_checkpoint, precision."""
    for name in ("download", "mixed_precision", "jit_compile"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"--{name}={getattr(self, name)!r} must be true or "
                         "false.")
    if self.download and self.dataset not in datasets.TFDS_DATASETS:
      raise ValueError(f"--download reads TFDS datasets only "
                       f"({', '.join(datasets.TFDS_DATASETS)}), not "
                       f"{self.dataset!r}.")
    if self.image_size is not None:
      if self.dataset not in datasets.RESIZED_DATASETS:
        raise ValueError(f"--image_size={self.image_size!r}: only "
                         f"{', '.join(datasets.RESIZED_DATASETS)} images "
                         "are resized.")
      if not self.image_size >= 32:
        raise ValueError(f"--image_size={self.image_size!r} must be >= 32.")
    if self.init_checkpoint:
      readers = encoders.TEXT_ENCODERS + ("resnet50",)
      if self.encoder not in readers:
        raise ValueError(f"--init_checkpoint is read by {', '.join(readers)} "
                         f"only, not --encoder={self.encoder!r}.")
      if self.encoder == "resnet50" and (
          self.init_checkpoint == "minilm" or
          self.init_checkpoint.endswith(".safetensors")):
        raise ValueError(f"--init_checkpoint={self.init_checkpoint!r} is a "
                         "text checkpoint; --encoder=resnet50 takes a Model "
                         "Garden ResNet-50 checkpoint.")
    if self.mixed_precision and self.strategy == "tpu":
      raise ValueError("--mixed_precision is float16 for GPUs; TPUs compute "
                       "in bfloat16 on their own.")

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> "TrainConfig":
    values = json.loads(text)
    values["metrics"] = tuple(values["metrics"])
    return cls(**values)
