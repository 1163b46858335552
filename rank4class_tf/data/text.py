"""Text instances -> BERT inputs, inside the graph.

`TextPreprocessor` tokenizes raw strings with WordPiece (tensorflow_text,
through the Model Garden's `BertTokenizer` and `BertPackInputs` layers) and
packs them as `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated round-robin
and padded to `seq_length`. The same layer runs in the tf.data pipeline and in
the exported SavedModel, so serving takes raw strings.

**Length bucketing** (`trim`, `bucket_key`): a batch packed to `seq_length`
is cut to its longest member, rounded up to a multiple of `LENGTH_QUANTUM`
(8) in training and evaluation, so at most ceil(seq_length / 8) distinct
shapes occur, and exactly (quantum 1) in serving, never past `seq_length`.
The cut columns are padding of every member ([PAD] ids, mask 0, type 0), and
every layer that reads tokens masks padding, so the scores do not change
(`inputs.TextInputs`, `datasets.ranking_dataset`).

**Token ids computed once** (`token_ids`, `expand`): an in-memory split is
tokenized once, into numpy arrays, and tf.data reads the ids: the word ids
[n, seq_length] (uint16 when every id fits, else int32), each text's
length (special tokens included) and, for several segments, the segment
ids (int8). The mask is the length (packing leaves no gap), so `expand`
gives back exactly what `TextPreprocessor` packed: `{WORD_IDS, MASK,
TYPE_IDS}` int32 [batch, seq_length].
"""

from typing import Any, Callable, Dict, Tuple

import numpy as np
import tensorflow as tf
from official.nlp.modeling import layers as nlp_layers

WORD_IDS = "input_word_ids"
MASK = "input_mask"
TYPE_IDS = "input_type_ids"
BERT_INPUTS = (WORD_IDS, MASK, TYPE_IDS)
# Bucketed batches are padded to a multiple of this many tokens.
LENGTH_QUANTUM = 8
# The length of each packed text in the arrays of `token_ids`.
LENGTH = "length"
# Texts tokenized per call by `token_ids`.
TOKENIZE_CHUNK = 4096


def lengths(inputs: Dict[str, tf.Tensor]) -> tf.Tensor:
  """Tokens of each packed member, special tokens included: [batch] int32."""
  return tf.reduce_sum(tf.cast(inputs[MASK], tf.int32), axis=-1)


def bucket_key(inputs: Dict[str, tf.Tensor],
               quantum: int = LENGTH_QUANTUM) -> tf.Tensor:
  """The length bucket of one packed member (no batch axis), int64: its
  length rounded up to a multiple of `quantum`, divided by `quantum`."""
  return length_bucket(lengths(inputs), quantum)


def length_bucket(length: tf.Tensor,
                  quantum: int = LENGTH_QUANTUM) -> tf.Tensor:
  """`bucket_key` of a text of `length` tokens: int64 ceil(length /
  quantum)."""
  return tf.cast((length + quantum - 1) // quantum, tf.int64)


def traced(pack: Callable[[tf.Tensor], Dict[str, tf.Tensor]],
           shape: Tuple[int, ...] = ()
           ) -> tf.types.experimental.PolymorphicFunction:
  """`pack` as a tf.function of [batch, *shape] raw strings, traced on its
  first call only: `token_ids` given it tokenizes every split with one
  trace instead of one trace a split."""
  return tf.function(pack, input_signature=[
      tf.TensorSpec([None, *shape], tf.string)])


def token_ids(pack: Callable[[tf.Tensor], Dict[str, tf.Tensor]],
              instances: np.ndarray,
              chunk: int = TOKENIZE_CHUNK) -> Dict[str, np.ndarray]:
  """Every instance tokenized once, as numpy arrays (see the module doc).

  Args:
    pack: raw strings [batch] or [batch, num_segments] -> packed inputs
      (`TextPreprocessor`), or `traced(pack, shape)` to trace it once for
      several calls.
    instances: [n] or [n, num_segments] strings.
    chunk: texts per call of `pack`.

  Returns:
    {WORD_IDS: [n, seq_length] uint16 or int32, LENGTH: [n] int32} and,
    for several segments, TYPE_IDS: [n, seq_length] int8.

  >>> from rank4class_tf.modeling import pretrained
  >>> pre = TextPreprocessor(pretrained.minilm_files()[1], seq_length=6)
  >>> ids = token_ids(pre, np.array(["Hello world", "a"], object))
  >>> ids[WORD_IDS], ids[LENGTH]
  (array([[ 101, 7592, 2088,  102,    0,    0],
         [ 101, 1037,  102,    0,    0,    0]], dtype=uint16), array([4, 3], dtype=int32))
  """
  if not isinstance(pack, tf.types.experimental.PolymorphicFunction):
    pack = traced(pack, np.shape(instances)[1:])
  spec = pack.input_signature[0]
  parts = [pack(tf.constant(np.asarray(instances[begin:begin + chunk],
                                       object).tolist(), tf.string))
           for begin in range(0, len(instances), chunk)]
  if not parts:
    parts = [pack(tf.zeros([0, *spec.shape[1:]], tf.string))]
  word_ids = np.concatenate([p[WORD_IDS].numpy() for p in parts])
  fits = word_ids.size == 0 or 0 <= word_ids.min() <= word_ids.max() < 2**16
  out = {WORD_IDS: word_ids.astype(np.uint16 if fits else np.int32),
         LENGTH: np.concatenate([lengths(p).numpy() for p in parts])}
  if len(spec.shape) > 1:
    out[TYPE_IDS] = np.concatenate([p[TYPE_IDS].numpy() for p in parts]
                                   ).astype(np.int8)
  return out


def expand(ids: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """A batch of `token_ids`' arrays -> the packed inputs `TextPreprocessor`
  gives: `{WORD_IDS, MASK, TYPE_IDS}` int32 [batch, seq_length].

  >>> expand({WORD_IDS: tf.constant([[101, 7, 102, 0]], tf.uint16),
  ...         LENGTH: tf.constant([3])})[MASK].numpy()
  array([[1, 1, 1, 0]], dtype=int32)
  """
  word_ids = tf.cast(ids[WORD_IDS], tf.int32)
  positions = tf.range(tf.shape(word_ids)[-1])
  mask = tf.cast(positions[tf.newaxis, :] < ids[LENGTH][:, tf.newaxis],
                 tf.int32)
  type_ids = (tf.cast(ids[TYPE_IDS], tf.int32) if TYPE_IDS in ids
              else tf.zeros_like(word_ids))
  return {WORD_IDS: word_ids, MASK: mask, TYPE_IDS: type_ids}


def trim(inputs: Dict[str, tf.Tensor],
         quantum: int = LENGTH_QUANTUM) -> Dict[str, tf.Tensor]:
  """Packed inputs [batch, seq_length] cut to the batch's longest member
  rounded up to a multiple of `quantum` (at most seq_length, at least 1).

  >>> packed = {WORD_IDS: tf.constant([[101, 7, 102, 0, 0, 0]]),
  ...           MASK: tf.constant([[1, 1, 1, 0, 0, 0]]),
  ...           TYPE_IDS: tf.zeros([1, 6], tf.int32)}
  >>> trim(packed, quantum=2)[WORD_IDS].numpy()
  array([[101,   7, 102,   0]], dtype=int32)
  """
  seq_length = tf.shape(inputs[MASK])[-1]
  longest = tf.reduce_max(lengths(inputs))
  length = (longest + quantum - 1) // quantum * quantum
  length = tf.clip_by_value(length, 1, seq_length)
  return {name: value[:, :length] for name, value in inputs.items()}


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class TextPreprocessor(tf.keras.layers.Layer):
  """Raw strings -> {input_word_ids, input_mask, input_type_ids}.

  Input: [batch_size] strings (one segment) or [batch_size, num_segments]
  strings (e.g. title and abstract, segment ids 0 and 1).
  Output: three int32 [batch_size, seq_length] tensors.

  Args:
    vocab_file: WordPiece vocabulary, one token a line.
    seq_length: packed length, special tokens included.
    lower_case: lower-case and strip accents first (uncased models).

  Example:

  >>> from rank4class_tf.modeling import pretrained
  >>> _, vocab_file = pretrained.minilm_files()    # MiniLM's uncased vocab
  >>> pre = TextPreprocessor(vocab_file, seq_length=8)
  >>> pre(tf.constant(["This is an example sentence"]))["input_word_ids"].numpy()
  array([[ 101, 2023, 2003, 2019, 2742, 6251,  102,    0]], dtype=int32)
  """

  def __init__(self, vocab_file: str, seq_length: int = 128,
               lower_case: bool = True, **kwargs):
    super().__init__(**kwargs)
    if seq_length < 3:
      raise ValueError(f"seq_length must be >= 3, got {seq_length}.")
    if not tf.io.gfile.exists(vocab_file):
      raise ValueError(f"{vocab_file}: vocabulary file not found.")
    self.vocab_file = vocab_file
    self.seq_length = int(seq_length)
    self.lower_case = bool(lower_case)
    self.tokenizer = nlp_layers.BertTokenizer(
        vocab_file=vocab_file, lower_case=lower_case)
    self.packer = nlp_layers.BertPackInputs(
        self.seq_length,
        special_tokens_dict=self.tokenizer.get_special_tokens_dict())

  def call(self, texts):
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank == 1:
      segments = [self.tokenizer(texts)]
    else:
      segments = [self.tokenizer(texts[:, i]) for i in range(texts.shape[1])]
    return self.packer(segments)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"vocab_file": self.vocab_file,
                   "seq_length": self.seq_length,
                   "lower_case": self.lower_case})
    return config
