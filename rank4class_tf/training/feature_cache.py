"""Frozen text encoders' outputs, computed once per split and reused.

With `--freeze_encoder` the instance encoder is a fixed function of the text
(`encoders.BertInstanceEncoder.features`: inference mode, no dropout), so
its output for every instance of a split can be computed once and every
training run of the same encoder (a study's whole grid) trains only the
class encoder and the interaction, from the stored values. The dropout on h
still applies during training (`encoders.CachedFeatures`), so a run from the
cache trains what a frozen encoder run on the fly trains (a test compares
the weights).

A cache is a folder `<cache_dir>/<key>/` named by the SHA-256 of everything
the values depend on (`CacheSpec.describe`):

* the dataset's name and, per split, the SHA-256 of its instances and
  labels as loaded (so an edited data file, wherever it lives, gives
  another key);
* the encoder, its size, the checkpoint's name and the SHA-256 of its
  files, the vocabulary file's SHA-256, the pooling, `max_seq_length`, and
  whether token features (`label_attention`) or h are stored.

It holds `key.json` (that description, the shapes and build times, written
last) and per split `<split>.features.npy` (float32 [n, dim], or
[n, seq_length, dim] token features) and, for token features,
`<split>.mask.npy` (int32 [n, seq_length]). A folder is built under a
temporary name and renamed into place, so a killed build leaves no cache
that could be read; a folder whose `key.json` does not match its key is
never read (it is rebuilt).

`cache_dir` may be on any file system TensorFlow has (`gs://`, `ram://`).
There the values are computed into a local temporary folder (`np.memmap`
writes local files only; the local disk must hold one cache) and copied
into `<cache_dir>/<key>/` file by file, each through a temporary name
renamed into place and `key.json` last: a reader sees no cache until
`key.json` is there, then only whole files. Two processes building the
same cache there both copy it (the same values), the last copy of each
file winning.

TensorFlow has no cache of this kind: `tf.data.Dataset.cache` keys a file by
its path only and would serve stale values after a data or checkpoint
change, and it cannot be shared between the runs of a study.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from rank4class_tf.data import contract
from rank4class_tf.data import inputs as inputs_lib
from rank4class_tf.data import text
from rank4class_tf import fileio
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import pretrained

# Bumped when the stored values or the layout change.
CACHE_VERSION = 1
KEY_FILE = "key.json"
# Context feature names of a model trained from a cache.
ENCODED = "encoded"
ENCODED_TOKENS = "encoded_tokens"
ENCODED_MASK = "encoded_mask"
# Instances per encoder call while building.
BUILD_BATCH = 128


# The one file hash (`fileio`), by its old name here.
file_sha256 = fileio.file_sha256


def split_sha256(instances: np.ndarray, labels: np.ndarray) -> str:
  """SHA-256 of a split's instances (strings, in order) and labels.

  >>> split_sha256(np.array(["a", "b"], object), np.array([0, 1]))[:12]
  '54ff71a782f7'
  """
  digest = hashlib.sha256()
  for instance in np.asarray(instances, object).reshape(len(instances), -1):
    for segment in instance:
      value = segment if isinstance(segment, bytes) else str(segment).encode()
      digest.update(len(value).to_bytes(8, "little") + value)
  labels = np.ascontiguousarray(labels, np.float64)
  digest.update(str(labels.shape).encode() + labels.tobytes())
  return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class CacheSpec:
  """The frozen encoder whose outputs a cache holds.

  Attributes:
    encoder: `bert` or `electra`.
    encoder_size: architecture name (`pretrained.SIZES`).
    init_checkpoint: the `--init_checkpoint` value (required).
    vocab_file: the WordPiece vocabulary.
    pooling: one of `encoders.POOLINGS` (ignored with `sequence`).
    max_seq_length: tokens per instance.
    sequence: token features for `label_attention` instead of h.
  """
  encoder: str
  encoder_size: str
  init_checkpoint: str
  vocab_file: str
  pooling: str
  max_seq_length: int
  sequence: bool = False

  def describe(self, data: contract.ClassificationData) -> Dict[str, Any]:
    """Everything the cached values depend on (hashes read the files)."""
    return {
        "version": CACHE_VERSION,
        "dataset": data.name,
        "splits": {split: split_sha256(*data.splits[split])
                   for split in sorted(data.splits)},
        "encoder": self.encoder,
        "encoder_size": self.encoder_size,
        "init_checkpoint": self.init_checkpoint,
        "checkpoint_sha256": [
            file_sha256(path)
            for path in pretrained.checkpoint_files(self.init_checkpoint)],
        "vocab_sha256": file_sha256(self.vocab_file),
        "pooling": None if self.sequence else self.pooling,
        "max_seq_length": self.max_seq_length,
        "sequence": self.sequence,
    }

  def build_encoder(self) -> encoders.BertInstanceEncoder:
    """The frozen encoder (its `features` are the cached values)."""
    return encoders.get(self.encoder, size=self.encoder_size,
                        init_checkpoint=self.init_checkpoint, dropout=0.0,
                        pooling=self.pooling, sequence=self.sequence,
                        trainable_encoder=False)


def key_of(description: Dict[str, Any]) -> str:
  """The folder name of a cache: SHA-256 of its description."""
  return hashlib.sha256(json.dumps(description, sort_keys=True)
                        .encode()).hexdigest()


class CachedInputs:
  """`features.InstanceInputs` of a model trained from a cache.

  The pipeline's instances are the cached values: h [dim], or
  {"features": [seq_length, dim], "mask": [seq_length]}.

  Args:
    shape: shape of one cached h or token-feature matrix.
  """

  def __init__(self, shape: Tuple[int, ...]):
    self.key = ENCODED
    self.shape = tuple(shape)
    self.sequence = len(self.shape) == 2

  def __call__(self, instance) -> Dict[str, tf.Tensor]:
    if self.sequence:
      return {ENCODED_TOKENS: instance["features"],
              ENCODED_MASK: instance["mask"]}
    return {ENCODED: instance}

  def serving_features(self, instance) -> Dict[str, tf.Tensor]:
    return self(instance)

  def context_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    if self.sequence:
      return {ENCODED_TOKENS: tf.io.FixedLenFeature(self.shape, tf.float32),
              ENCODED_MASK: tf.io.FixedLenFeature(self.shape[:1], tf.int32)}
    return {ENCODED: tf.io.FixedLenFeature(self.shape, tf.float32)}

  def serving_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None, *self.shape], tf.float32, name=ENCODED)

  def serving_assets(self) -> Dict[str, Any]:
    return {}

  def encoder_input(self, context: Dict[str, tf.Tensor]):
    if self.sequence:
      return {"features": context[ENCODED_TOKENS],
              "mask": context[ENCODED_MASK]}
    return context[ENCODED]


@dataclasses.dataclass(frozen=True)
class FeatureCache:
  """A cache read back: the data of its values and their inputs.

  Attributes:
    folder: the cache's folder.
    data: the dataset with the cached values as instances (same classes,
      labels and splits as the text dataset).
    inputs: how the model reads them.
    built_seconds: {split: seconds its values took to compute}.
  """
  folder: str
  data: contract.ClassificationData
  inputs: CachedInputs
  built_seconds: Dict[str, float]


def _check_text(data: contract.ClassificationData) -> None:
  if not data.is_text or data.streams:
    raise ValueError(f"`freeze_encoder` with `feature_cache` needs a text "
                     f"dataset held in memory; {data.name!r} is not one.")


def _pad_to(values: np.ndarray, length: int) -> np.ndarray:
  """[n, l, ...] values zero-padded on axis 1 to `length`."""
  pad = [(0, 0)] * values.ndim
  pad[1] = (0, length - values.shape[1])
  return np.pad(values, pad)


def _build(folder: str, spec: CacheSpec, description: Dict[str, Any],
           data: contract.ClassificationData,
           progress: Callable[[str], None],
           length_bucketing: bool = True) -> None:
  """Computes every split into `folder` (through a temporary folder; on
  another file system, a local one copied there: see the module doc)."""
  if fileio.is_local(folder):
    # Another process building the same cache meanwhile: its whole copy is
    # kept (the same content), this one dropped.
    with fileio.atomic_folder(folder, replace=False) as tmp:
      _compute(tmp, spec, description, data, progress, length_bucketing)
    return
  local = tempfile.mkdtemp(prefix="rank4class_feature_cache-")
  try:
    _compute(local, spec, description, data, progress, length_bucketing)
    _upload(local, folder)
  finally:
    shutil.rmtree(local)


def _upload(local: str, folder: str) -> None:
  """Copies a local cache's files into `folder` on another file system,
  each written atomically (`fileio.write_atomically`), `key.json` last."""
  fileio.makedirs(folder)
  for name in sorted(os.listdir(local), key=lambda name: name == KEY_FILE):
    with open(os.path.join(local, name), "rb") as source:
      fileio.write_atomically(
          f"{folder.rstrip('/')}/{name}",
          lambda target, source=source: shutil.copyfileobj(
              source, target, 1 << 24), binary=True)


def _compute(folder: str, spec: CacheSpec,
             description: Dict[str, Any], data: contract.ClassificationData,
             progress: Callable[[str], None],
             length_bucketing: bool) -> None:
  """Computes every split into the local `folder`, `key.json` last."""
  encoder = spec.build_encoder()
  inputs = inputs_lib.TextInputs(
      "text", (), text.TextPreprocessor(spec.vocab_file,
                                        seq_length=spec.max_seq_length),
      length_bucketing=length_bucketing)

  @tf.function(reduce_retracing=True)
  def encode(texts):
    return encoder.features(inputs(texts), training=False)

  shapes, seconds = {}, {}
  for split in sorted(data.splits):
    instances = data.splits[split][0]
    start = time.time()
    # With bucketing, the texts are encoded shortest first, each batch cut
    # to its longest text (`text.trim`), and written back in place.
    order = (np.argsort(inputs.token_lengths(instances), kind="stable")
             if length_bucketing else np.arange(len(instances)))
    features = mask = None
    for begin in range(0, len(instances), BUILD_BATCH):
      rows = order[begin:begin + BUILD_BATCH]
      values = encode(tf.constant(instances[rows].tolist(), tf.string))
      if spec.sequence:
        # Token features padded back to max_seq_length, zero on padding
        # (what the encoder gives there depends on the padding; no layer
        # reads it).
        batch_mask = _pad_to(values["mask"].numpy(), spec.max_seq_length)
        values = _pad_to(values["features"].numpy(), spec.max_seq_length)
        values *= batch_mask[..., None].astype(values.dtype)
      else:
        values = values.numpy()
      if features is None:
        features = np.lib.format.open_memmap(
            os.path.join(folder, f"{split}.features.npy"), mode="w+",
            dtype=np.float32, shape=(len(instances),) + values.shape[1:])
        if spec.sequence:
          mask = np.lib.format.open_memmap(
              os.path.join(folder, f"{split}.mask.npy"), mode="w+",
              dtype=np.int32, shape=(len(instances),) + batch_mask.shape[1:])
      features[rows] = values
      if spec.sequence:
        mask[rows] = batch_mask
    features.flush()
    if spec.sequence:
      mask.flush()
    shapes[split] = list(features.shape)
    seconds[split] = round(time.time() - start, 2)
    del features, mask
    progress(f"feature cache: {split} ({len(instances)} instances) encoded "
             f"in {seconds[split]:.1f} s")
  with open(os.path.join(folder, KEY_FILE), "w") as f:
    json.dump({"key": key_of(description), "description": description,
               "shapes": shapes, "seconds": seconds}, f, indent=1,
              sort_keys=True)


def _read_key(folder: str) -> Optional[Dict[str, Any]]:
  try:
    return fileio.read_json(os.path.join(folder, KEY_FILE))
  except (OSError, ValueError, tf.errors.OpError):
    return None


def _read_array(folder: str, name: str, rows: int) -> np.ndarray:
  """A cached array, checked to hold one row per instance."""
  path = os.path.join(folder, name)
  try:
    if fileio.is_local(path):
      array = np.load(path)
    else:
      with fileio.open_file(path, "rb") as f:
        array = np.load(f)
  except (OSError, ValueError, EOFError, tf.errors.OpError) as e:
    raise ValueError(f"{path} cannot be read ({e}); delete {folder} to "
                     "rebuild the cache.") from None
  if len(array) != rows:
    raise ValueError(f"{path} holds {len(array)} rows for {rows} instances; "
                     f"delete {folder} to rebuild the cache.")
  return array


def load(cache_dir: str, spec: CacheSpec,
         data: contract.ClassificationData,
         progress: Callable[[str], None] = logging.info,
         length_bucketing: bool = True) -> FeatureCache:
  """The cache of `spec` on `data`, built first when it does not exist.

  Args:
    cache_dir: folder of the caches.
    spec: the frozen encoder.
    data: the text dataset (in-memory splits).
    progress: called with one line per split built.
    length_bucketing: build it shortest texts first, each batch padded to
      its longest text (`--length_bucketing`); the values are the same
      either way (token features are zero on padding), so it is not part
      of the cache's key.

  Returns:
    The cache.

  Raises:
    ValueError: `data` is not an in-memory text dataset.
  """
  _check_text(data)
  description = spec.describe(data)
  key = key_of(description)
  folder = os.path.join(cache_dir, key[:24])
  record = _read_key(folder)
  if record is None or record.get("key") != key or record.get(
      "description") != description:
    if fileio.exists(folder):
      logging.warning("%s does not hold the cache of its key: rebuilding.",
                      folder)
      if fileio.is_local(folder):
        # Elsewhere its files are replaced one by one, `key.json` last.
        shutil.rmtree(folder)
    fileio.makedirs(cache_dir)
    _build(folder, spec, description, data, progress, length_bucketing)
    record = _read_key(folder)
  splits = {}
  for split, (_, labels) in data.splits.items():
    features = _read_array(folder, f"{split}.features.npy", len(labels))
    if spec.sequence:
      features = {"features": features,
                  "mask": _read_array(folder, f"{split}.mask.npy",
                                      len(labels))}
    splits[split] = (features, labels)
  shape = tuple(record["shapes"][sorted(splits)[0]][1:])
  cached = contract.ClassificationData(
      name=data.name, class_names=data.class_names, instance_key=ENCODED,
      instance_shape=shape, instance_dtype=tf.float32, splits=splits)
  return FeatureCache(folder, cached, CachedInputs(shape),
                      dict(record["seconds"]))
