"""Text instances -> BERT inputs, inside the graph.

`TextPreprocessor` tokenizes raw strings with WordPiece (tensorflow_text,
through the Model Garden's `BertTokenizer` and `BertPackInputs` layers) and
packs them as `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated round-robin
and padded to `seq_length`. The same layer runs in the tf.data pipeline and in
the exported SavedModel, so serving takes raw strings.
"""

from typing import Any, Dict

import tensorflow as tf
from official.nlp.modeling import layers as nlp_layers

WORD_IDS = "input_word_ids"
MASK = "input_mask"
TYPE_IDS = "input_type_ids"
BERT_INPUTS = (WORD_IDS, MASK, TYPE_IDS)


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

  >>> from rank4class_tf import pretrained
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
