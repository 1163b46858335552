"""Tests of rank4class_tf.text: WordPiece tokenization and BERT packing."""

import os
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_tf import pretrained
from rank4class_tf import text

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world",
         "un", "##believ", "##able", "!", "a", "b"]


def tiny_vocab():
  path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
  with open(path, "w") as f:
    f.write("\n".join(VOCAB) + "\n")
  return path


class TextPreprocessorTest(tf.test.TestCase):

  def test_minilm_vocab_ids(self):
    pre = text.TextPreprocessor(pretrained.minilm_files()[1], seq_length=9)
    out = pre(tf.constant(["This is an example sentence"]))
    # bert-base-uncased ids: [CLS] this is an example sentence [SEP] [PAD]...
    self.assertAllEqual(out[text.WORD_IDS],
                        [[101, 2023, 2003, 2019, 2742, 6251, 102, 0, 0]])
    self.assertAllEqual(out[text.MASK], [[1] * 7 + [0] * 2])
    self.assertAllEqual(out[text.TYPE_IDS], [[0] * 9])

  def test_wordpiece_lower_case_and_unknown(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=8)
    out = pre(tf.constant(["Hello UNBELIEVABLE zzz!"]))
    # [CLS] hello un ##believ ##able [UNK] ! [SEP]
    self.assertAllEqual(out[text.WORD_IDS], [[2, 5, 7, 8, 9, 1, 10, 3]])

  def test_two_segments_and_empty_second(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=8)
    out = pre(tf.constant([["hello", "world a"], ["b", ""]]))
    self.assertAllEqual(out[text.WORD_IDS], [[2, 5, 3, 6, 11, 3, 0, 0],
                                             [2, 12, 3, 3, 0, 0, 0, 0]])
    self.assertAllEqual(out[text.TYPE_IDS], [[0, 0, 0, 1, 1, 1, 0, 0],
                                             [0, 0, 0, 1, 0, 0, 0, 0]])
    self.assertAllEqual(out[text.MASK], [[1, 1, 1, 1, 1, 1, 0, 0],
                                         [1, 1, 1, 1, 0, 0, 0, 0]])

  def test_truncation_keeps_special_tokens(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=4)
    out = pre(tf.constant(["hello world a b"]))
    self.assertAllEqual(out[text.WORD_IDS], [[2, 5, 6, 3]])

  def test_runs_in_tf_data(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=5)
    ds = tf.data.Dataset.from_tensor_slices(["hello", "a b"]).batch(2).map(pre)
    self.assertAllEqual(next(iter(ds))[text.WORD_IDS],
                        [[2, 5, 3, 0, 0], [2, 11, 12, 3, 0]])

  def test_serialization_round_trip(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=6, lower_case=True)
    restored = tf.keras.layers.deserialize(tf.keras.layers.serialize(pre))
    batch = tf.constant(["Hello world"])
    self.assertAllEqual(restored(batch)[text.WORD_IDS],
                        pre(batch)[text.WORD_IDS])
    self.assertEqual(restored.seq_length, 6)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "/nonexistent/vocab.txt: "
                                "vocabulary file not found"):
      text.TextPreprocessor("/nonexistent/vocab.txt")
    with self.assertRaisesRegex(ValueError, "seq_length must be >= 3"):
      text.TextPreprocessor(tiny_vocab(), seq_length=2)


if __name__ == "__main__":
  tf.test.main()
