"""The checks a run passes before it writes anything.

`validate(config)` runs `TrainConfig.validate` (what the config alone can
tell), then checks every name against its kind's lookup (datasets,
encoders, interactions, losses, metrics, sorters, strategies) and the
combinations the kinds allow. `check_files` checks the files a run reads
besides its data, and the batch size against the data and the memory
(`batch_bytes`, `available_memory`). Both run no TensorFlow op: a
multi-worker strategy must be created before the first one.
"""

from typing import Optional

import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf import config as config_lib
from rank4class_tf.data import classes as classes_lib
from rank4class_tf import distribute
from rank4class_tf import lookup
from rank4class_tf import provenance
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import interactions
from rank4class_tf.modeling import pretrained
from rank4class_tf.multilabel import mulcon
from rank4class_tf.ranking import losses
from rank4class_tf.ranking import metrics
from rank4class_tf.sorting import sorters


# The one choice check (`lookup`), in argument terms.
_check_choice = lookup.check_choice


def validate(config: config_lib.TrainConfig) -> None:
  """Checks a config: `TrainConfig.validate`, then every name against its
  kind's lookup and the combinations the kinds allow. Runs no TensorFlow op.

  Raises:
    ValueError: one line naming the flag, its value and what is valid.
  """
  data, model, loss, trainer = (config.data, config.model, config.loss,
                                config.trainer)
  if not catalog.is_dataset(data.dataset):
    _check_choice("dataset", data.dataset,
                  catalog.DATASET_NAMES + (catalog.TFDS_PREFIX + "<name>",))
  _check_choice("encoder", model.encoder, encoders.ENCODER_NAMES)
  _check_choice("interaction", model.interaction, interactions.ALL_NAMES)
  _check_choice("loss", loss.name, losses.LOSS_NAMES)
  config.validate()
  distribute.check_name(trainer.strategy)
  if model.encoder in encoders.TEXT_ENCODERS:
    _check_choice("encoder_size", model.encoder_size, pretrained.SIZES)
  kind = catalog.kind(data.dataset)
  if kind is not None:  # Else checked once loaded (`check_data_kind`).
    check_data_kind(model.encoder, data.dataset, kind)
  _validate_images(config)
  _validate_precision(config)
  _validate_text_encoder(config)
  _validate_class_encoder(config)
  if loss.name.startswith("sodeep_"):
    _check_choice("sorter", loss.sorter, sorters.SORTER_NAMES)
  _validate_label_attention(config)
  for name in tuple(trainer.metrics) + (trainer.best_metric,):
    try:
      metrics.check_name(name)
    except ValueError as e:
      raise ValueError(f"`metrics`/`best_metric`: {e}") from None
  if trainer.best_metric not in trainer.metrics:
    raise ValueError(f"`best_metric`={trainer.best_metric!r} must be one of "
                     f"`metrics` ({', '.join(trainer.metrics)}).")
  whole_split = [m for m in tuple(trainer.metrics)
                 if m in metrics.WHOLE_SPLIT_METRICS]
  if whole_split and trainer.strategy != "default":
    raise ValueError(f"`metrics`: {', '.join(whole_split)} needs every "
                     "score of the validation split on one replica; use "
                     "`strategy`=default, or compute it afterwards with "
                     "pipelines.evaluate.")


def check_data_kind(encoder: str, dataset: str, kind: str) -> None:
  """Whether `encoder` reads `dataset`'s instances, of `kind` (`text`,
  `image` or `numeric`, `catalog.kind`): text encoders read text only, the
  image encoders colour images only, and a numeric feature vector (a user's
  table) only the `mlp` encoder.

  Raises:
    ValueError: one line naming the encoder, the dataset and what is valid.
  """
  if (kind == "text") != (encoder in encoders.TEXT_ENCODERS):
    valid = (encoders.TEXT_ENCODERS if kind == "text" else
             tuple(e for e in encoders.ENCODER_NAMES
                   if e not in encoders.TEXT_ENCODERS))
    raise ValueError(f"`encoder`={encoder!r} cannot read the "
                     f"{'text' if kind == 'text' else 'numeric'} "
                     f"dataset {dataset!r}; choose one of: "
                     f"{', '.join(valid)}.")
  if encoder in encoders.IMAGE_ENCODERS and kind != "image":
    raise ValueError(f"`encoder`={encoder!r} reads colour images; "
                     "choose `dataset` from: "
                     f"{', '.join(catalog.IMAGE_DATASETS)}.")
  if dataset in catalog.NUMERIC_DATASETS and encoder != "mlp":
    raise ValueError(f"`encoder`={encoder!r} cannot read the feature "
                     f"vectors of `dataset`={dataset}; use `encoder`=mlp.")


CPUINFO = provenance.CPUINFO
BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_bfloat16(cpuinfo: Optional[str] = None) -> Optional[bool]:
  """Whether the CPU has bfloat16 instructions (AVX512-BF16 or AMX-BF16,
  by the `flags` of /proc/cpuinfo); None where that file cannot be read
  or names no flags."""
  fields = provenance.cpuinfo_fields(cpuinfo or CPUINFO)
  if not fields or "flags" not in fields:
    return None
  return any(flag in fields["flags"].split() for flag in BFLOAT16_CPU_FLAGS)


def native_bfloat16(strategy: str = "") -> Optional[str]:
  """What computes bfloat16 natively here, in words, or None: a TPU
  (`strategy`=tpu), a GPU of compute capability 8.0 or more (Ampere and
  later), or a CPU with AVX512-BF16 or AMX (`cpu_has_bfloat16`)."""
  if strategy == "tpu":
    return "a TPU"
  for gpu in tf.config.list_physical_devices("GPU"):
    capability = tf.config.experimental.get_device_details(gpu).get(
        "compute_capability")
    if capability and tuple(capability) >= (8, 0):
      return f"a GPU of compute capability {capability[0]}.{capability[1]}"
  if cpu_has_bfloat16():
    return f"a CPU with {' or '.join(BFLOAT16_CPU_FLAGS)}"
  return None


def _validate_precision(config: config_lib.TrainConfig) -> None:
  """--mixed_precision=bfloat16 on a CPU without bfloat16 instructions (and
  no GPU or TPU) is refused: TensorFlow would emulate it, slower than
  float32, for a less precise model."""
  trainer = config.trainer
  if (trainer.mixed_precision != "bfloat16" or trainer.strategy == "tpu" or
      cpu_has_bfloat16() is not False or
      tf.config.list_physical_devices("GPU")):
    return
  raise ValueError(
      "`mixed_precision`=bfloat16: this CPU has no bfloat16 instructions "
      f"({' or '.join(BFLOAT16_CPU_FLAGS)} in {CPUINFO}) and no GPU is "
      "visible; TensorFlow would emulate them, slower than float32. Use "
      "`mixed_precision`=float32.")


def _validate_label_attention(config: config_lib.TrainConfig) -> None:
  """The label_attention and MulCon flags."""
  model = config.model
  sequence = model.interaction in interactions.SEQUENCE_INTERACTIONS
  if sequence and model.encoder not in encoders.SEQUENCE_ENCODERS:
    raise ValueError(
        f"`interaction`={model.interaction} attends over token or "
        f"position features; `encoder`={model.encoder!r} has none (use "
        f"one of {', '.join(encoders.SEQUENCE_ENCODERS)}).")
  if config.loss.contrastive_weight > 0 and not sequence:
    raise ValueError("`contrastive_weight` > 0 (MulCon's label-level "
                     "contrastive loss) needs "
                     "`interaction`=label_attention.")
  _check_choice("contrastive_normalization",
                config.loss.contrastive_normalization,
                mulcon.CONTRASTIVE_NORMALIZATIONS)


def _validate_text_encoder(config: config_lib.TrainConfig) -> None:
  """--pooling and --freeze_encoder: text encoders only."""
  model = config.model
  text_encoder = model.encoder in encoders.TEXT_ENCODERS
  if model.pooling:
    _check_choice("pooling", model.pooling, encoders.POOLINGS)
    if not text_encoder:
      raise ValueError(f"`pooling` is read by {', '.join(encoders.TEXT_ENCODERS)}"
                       f" only, not `encoder`={model.encoder!r}.")
  if model.freeze_encoder:
    if not text_encoder:
      raise ValueError("`freeze_encoder` freezes a pretrained text encoder "
                       f"({', '.join(encoders.TEXT_ENCODERS)}), not "
                       f"`encoder`={model.encoder!r}.")
    if not model.init_checkpoint:
      raise ValueError("`freeze_encoder` needs `init_checkpoint`: a frozen "
                       "encoder of random weights learns nothing.")


def _validate_class_encoder(config: config_lib.TrainConfig) -> None:
  """--class_encoder, --class_tower, --class_descriptions,
  --holdout_classes (their names and files: `check_files`)."""
  model = config.model
  _check_choice("class_encoder", model.class_encoder,
                class_encoders.CLASS_ENCODERS)
  _check_choice("class_tower", model.class_tower, class_encoders.CLASS_TOWERS)
  _check_choice("class_projection", model.class_projection,
                class_encoders.CLASS_PROJECTIONS)
  if model.class_encoder == "text":
    if model.encoder not in encoders.TEXT_ENCODERS:
      raise ValueError("`class_encoder`=text encodes class texts with a text "
                       f"encoder ({', '.join(encoders.TEXT_ENCODERS)}), not "
                       f"`encoder`={model.encoder!r}.")
    calibrated = model.seen_margin or model.cosine_fusion
    if calibrated and model.interaction == "label_attention":
      raise ValueError("`seen_margin` and `cosine_fusion` calibrate scores "
                       "of h; `interaction`=label_attention scores tokens.")
    if model.class_projection == "residual" and (
        model.interaction == "label_attention"):
      raise ValueError("`class_projection`=residual adds the tower output "
                       "to c_i; `interaction`=label_attention's class "
                       "vectors are of another width.")
    return
  for name, value, default in (
      ("class_tower", model.class_tower, "shared"),
      ("class_projection", model.class_projection, "dense"),
      ("seen_margin", model.seen_margin, 0.0),
      ("cosine_fusion", model.cosine_fusion, 0.0),
      ("class_descriptions", model.class_descriptions, "")):
    if value != default:
      raise ValueError(f"`{name}`={value!r} is read with "
                       "`class_encoder`=text only.")


def _validate_images(config: config_lib.TrainConfig) -> None:
  """The image flags: download, image_size, init_checkpoint."""
  data, model = config.data, config.model
  tfds_data = catalog.is_tfds(data.dataset)
  if (data.download and data.dataset not in catalog.TFDS_DATASETS and
      not tfds_data):
    raise ValueError(f"`download` reads TFDS datasets only "
                     f"({', '.join(catalog.TFDS_DATASETS)}, "
                     f"{catalog.TFDS_PREFIX}<name>), not {data.dataset!r}.")
  if (data.image_size is not None and
      data.dataset not in catalog.RESIZED_DATASETS + catalog.KIND_WHEN_LOADED
      and not tfds_data):
    raise ValueError(f"`image_size`={data.image_size!r}: only "
                     f"{', '.join(catalog.RESIZED_DATASETS)}, tfrecord and "
                     f"{catalog.TFDS_PREFIX}<name> images are resized.")
  if model.init_checkpoint:
    readers = encoders.TEXT_ENCODERS + ("resnet50",)
    if model.encoder not in readers:
      raise ValueError(f"`init_checkpoint` is read by {', '.join(readers)} "
                       f"only, not `encoder`={model.encoder!r}.")
    if model.encoder == "resnet50" and (
        model.init_checkpoint == "minilm" or
        model.init_checkpoint.endswith(".safetensors")):
      raise ValueError(f"`init_checkpoint`={model.init_checkpoint!r} is a "
                       "text checkpoint; `encoder`=resnet50 takes a Model "
                       "Garden ResNet-50 checkpoint.")


# Batches held at once: the one being trained on and the one tf.data
# prefetches (`datasets.ranking_dataset`).
BATCHES_HELD = 2


def batch_bytes(config: config_lib.TrainConfig, data) -> int:
  """A lower bound of one training batch's bytes, per instance.

  What any model of this package holds for an instance whatever its
  encoder: the instance as the model reads it (`data.instance_shape`, 4
  bytes per value; a text's `max_seq_length` int32 token ids per segment),
  its labels and its scores, [num_classes] float32 each. Activations, which
  depend on the encoder, come on top.

  >>> import types
  >>> import tensorflow as tf
  >>> digits = types.SimpleNamespace(instance_shape=(8, 8, 1),
  ...                                instance_dtype=tf.float32,
  ...                                is_text=False, num_classes=10)
  >>> batch_bytes(config_lib.TrainConfig.create(dataset="digits"), digits)
  336
  """
  if data.is_text:
    segments = data.instance_shape[0] if data.instance_shape else 1
    instance = 4 * config.model.max_seq_length * segments
  else:
    values = 1
    for dim in data.instance_shape:
      values *= dim or 1  # Raw images of any size: at least one value.
    instance = 4 * values
  return instance + 2 * 4 * data.num_classes


def available_memory() -> Optional[int]:
  """Bytes of memory a new allocation can still get: Linux's
  `MemAvailable`, lowered to what a cgroup (v2 or v1) memory limit leaves;
  None where neither is known (then no batch is refused for memory)."""
  found = []
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          found.append(int(line.split()[1]) * 1024)
  except (OSError, ValueError, IndexError):
    pass
  for limit_file, used_file in (
      ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
      ("/sys/fs/cgroup/memory/memory.limit_in_bytes",  # cgroup v1.
       "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
    try:
      with open(limit_file) as f:
        limit = f.read().strip()
      with open(used_file) as f:
        used = int(f.read().strip())
      if limit != "max":  # v1's "no limit" is a huge number: min drops it.
        found.append(max(int(limit) - used, 0))
    except (OSError, ValueError):
      pass
  return min(found) if found else None


def check_batch_size(config: config_lib.TrainConfig, data) -> None:
  """Refuses a batch size the data or the memory cannot hold.

  A batch larger than the training split repeats its instances within one
  step, and an absurd one (10^6 on digits) used to crash the process in a
  kernel (a segmentation fault) after the run had started writing. A batch
  whose lower bound (`batch_bytes`, `BATCHES_HELD` batches at once) exceeds
  the available memory would only end in the kernel's out-of-memory kill.

  Raises:
    ValueError: one line naming --batch_size and the largest it allows.
  """
  batch_size = config.trainer.batch_size
  if "train" in data.split_names:
    size = data.size("train")
    if batch_size > size:
      raise ValueError(
          f"`batch_size`={batch_size} is larger than the {size} training "
          f"instances of `dataset`={config.data.dataset}; give at most "
          f"{size}.")
  available = available_memory()
  per_instance = BATCHES_HELD * batch_bytes(config, data)
  if available is not None and batch_size * per_instance > available:
    raise ValueError(
        f"`batch_size`={batch_size} needs at least "
        f"{batch_size * per_instance / 1e9:.2f} GB of memory for its "
        f"batches of `dataset`={config.data.dataset} ({per_instance} bytes "
        f"per instance); {available / 1e9:.2f} GB is available: give at "
        f"most {available // per_instance}.")


def check_files(config: config_lib.TrainConfig, data) -> None:
  """Checks what a run reads besides its config (raises ValueError).

  The batch size against the training split's size and the memory
  (`check_batch_size`), the init checkpoint, the class description file,
  the held-out class names, and the shipped sorter of a `sodeep_*` loss for
  the class count: `train` checks them before writing anything.
  """
  check_batch_size(config, data)
  if config.model.init_checkpoint:
    pretrained.check_init_checkpoint(config.model.init_checkpoint)
  if config.model.class_descriptions:
    classes_lib.read_class_texts(config.model.class_descriptions,
                                    data.class_names)
  if config.data.holdout_classes:
    classes_lib.without_classes(
        data, classes_lib.holdout_ids(config.data.holdout_classes,
                                         data.class_names))
  if config.loss.name.startswith("sodeep_"):
    sorters.check_available(config.loss.sorter, data.num_classes)
