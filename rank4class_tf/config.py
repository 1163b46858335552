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

OPTIMIZERS = ("adam", "adagrad")
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


@dataclasses.dataclass
class TrainConfig:
  """Hyper-parameters of one training run.

  Data:
    dataset: dataset name (`datasets.DATASET_NAMES`).
    data_dir: directory of the dataset's files, for datasets that need one.

  Model:
    encoder: instance encoder name (`encoders.ENCODER_NAMES`); `bert` or
      `electra` for text datasets.
    encoder_dim: size of h produced by `small_cnn` / `mlp`.
    encoder_size: architecture of `bert` / `electra` (`pretrained.SIZES`).
    init_checkpoint: weights of `bert` / `electra`: `minilm` (the shipped
      all-MiniLM-L6-v2), a .safetensors file, or a Google BERT / ELECTRA
      TensorFlow checkpoint; empty for random weights.
    vocab_file: WordPiece vocabulary; empty: `vocab.txt` beside a Google
      checkpoint, else MiniLM's (BERT's uncased vocabulary).
    max_seq_length: tokens per text instance, [CLS] and [SEP] included
      (the paper: 32 for GoEmotions, 128 for MIND).
    dropout: dropout rate on h during training.
    interaction: `dot`, `lc_mlp` or `concat_mlp`.
    mlp_units: width of the two hidden layers of the MLP interactions.

  Loss:
    loss: loss name (`losses.LOSS_NAMES`).
    temperature: softmax / pairwise / ApproxNDCG temperature (None: the
      TF-Ranking default of that loss, 1.0 or 0.1 for ApproxNDCG).
    sample_size: Gumbel-ApproxNDCG samples per list.
    gumbel_temperature: Gumbel-ApproxNDCG noise temperature.
    rescaled_mse_k: k of `rescaled_mse` (weight of the true class).
    rescaled_mse_m: M of `rescaled_mse` (target score of the true class).

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
    strategy: `default`, `mirrored`, `multi_worker_mirrored` or `tpu`.
    tpu: TPU address for `strategy=tpu`.
    seed: seed of weights initialisation, shuffling and Gumbel noise.
    model_dir: directory receiving everything the run makes.
    top_k: number of ranked classes the exported SavedModel returns.
  """
  # Data.
  dataset: str = "digits"
  data_dir: Optional[str] = None
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
  # Loss.
  loss: str = "softmax"
  temperature: Optional[float] = None
  sample_size: int = 8
  gumbel_temperature: float = 1.0
  rescaled_mse_k: float = 1.0
  rescaled_mse_m: float = 1.0
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
  seed: int = 42
  model_dir: str = ""
  top_k: int = 5

  def encoder_kwargs(self) -> Dict[str, Any]:
    """The keyword arguments of `encoders.get(self.encoder)`."""
    if self.encoder in encoders.TEXT_ENCODERS:
      return {"size": self.encoder_size,
              "init_checkpoint": self.init_checkpoint or None,
              "dropout": self.dropout}
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
    }
    return {k: candidates[k] for k in losses.hyperparameters(self.loss)}

  def validate(self) -> None:
    """Checks every field.

    Raises:
      ValueError: one line naming the flag, its value and the valid choices.
    """
    choices = {
        "dataset": datasets.DATASET_NAMES,
        "encoder": encoders.ENCODER_NAMES,
        "interaction": interactions.INTERACTION_NAMES,
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
    if self.max_seq_length < 3:
      raise ValueError(f"--max_seq_length={self.max_seq_length!r} must be "
                       ">= 3 ([CLS], a token, [SEP]).")
    positive = ("encoder_dim", "mlp_units", "sample_size", "batch_size",
                "train_steps", "eval_every", "top_k", "learning_rate",
                "gumbel_temperature", "rescaled_mse_k")
    for name in positive:
      if not getattr(self, name) > 0:
        raise ValueError(f"--{name}={getattr(self, name)!r} must be > 0.")
    if self.temperature is not None and not self.temperature > 0:
      raise ValueError(f"--temperature={self.temperature!r} must be > 0.")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"--dropout={self.dropout!r} must be in [0, 1).")
    for name in tuple(self.metrics) + (self.best_metric,):
      try:
        metrics.get(name)
      except ValueError as e:
        raise ValueError(f"--metrics/--best_metric: {e}") from None
    if self.best_metric not in self.metrics:
      raise ValueError(f"--best_metric={self.best_metric!r} must be one of "
                       f"--metrics ({', '.join(self.metrics)}).")
    if not self.model_dir:
      raise ValueError("--model_dir must be set.")
    if self.strategy == "tpu" and not self.tpu:
      raise ValueError("--tpu must name the TPU address when --strategy=tpu.")

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> "TrainConfig":
    values = json.loads(text)
    values["metrics"] = tuple(values["metrics"])
    return cls(**values)
