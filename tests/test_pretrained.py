"""Tests of rank4class_tf.modeling.pretrained: MiniLM, Google BERT/ELECTRA, dispatch.

The references are independent of the module: the sentence-transformers
embedding of all-MiniLM-L6-v2, and a numpy BERT forward pass written here
from the original BERT equations on tiny checkpoints written by this test.
"""

import collections
import hashlib
import math
import os
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from official.nlp.modeling import layers
from safetensors import numpy as safetensors_numpy

from rank4class_tf.modeling import pretrained

from bert_fixtures import tiny_google_weights as _tiny_weights
from bert_fixtures import write_tf1_checkpoint as _write_tf1_checkpoint

# sentence-transformers all-MiniLM-L6-v2, "This is an example sentence".
_MINILM_REFERENCE = [0.0677, 0.0635, 0.0487, 0.0793, 0.0374]

_TINY = dict(vocab_size=20, hidden_size=8, num_layers=2, num_attention_heads=2,
             inner_dim=16, max_sequence_length=10, type_vocab_size=2,
             inner_activation="gelu")


def _tokenize(texts, vocab_file, seq_length):
  tokenizer = layers.BertTokenizer(vocab_file=vocab_file, lower_case=True)
  pack = layers.BertPackInputs(
      seq_length, special_tokens_dict=tokenizer.get_special_tokens_dict())
  return pack(tokenizer(tf.constant(texts)))


def _tempdir(test):
  """A fresh directory removed after `test` (pytest-safe)."""
  directory = tempfile.TemporaryDirectory()
  test.addCleanup(directory.cleanup)
  return directory.name


def _digest(array):
  """Order-free fingerprint: survives transposes and reshapes, nothing else."""
  values = np.sort(np.asarray(array, np.float32).ravel())
  return hashlib.sha1(values.tobytes()).hexdigest()


class MiniLMTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.safetensors_path, cls.vocab_path = pretrained.minilm_files()
    cls.encoder = pretrained.build_bert_encoder(**pretrained.MINILM_L6)
    cls.skipped = pretrained.init_encoder(cls.encoder, "minilm")
    cls.source = safetensors_numpy.load_file(cls.safetensors_path)

  def test_sentence_transformers_reference(self):
    inputs = _tokenize(["This is an example sentence"], self.vocab_path, 16)
    embedding = pretrained.mean_pooled_embedding(
        self.encoder, inputs["input_word_ids"], inputs["input_mask"],
        inputs["input_type_ids"])
    self.assertEqual(embedding.shape, (1, 384))
    self.assertAllClose(embedding[0, :5], _MINILM_REFERENCE, atol=1e-3, rtol=0)
    self.assertAllClose(tf.norm(embedding, axis=-1), [1.], atol=1e-6)

  def test_padding_does_not_change_the_embedding(self):
    texts = ["This is an example sentence", "Each sentence is converted"]
    short, long = (_tokenize(texts, self.vocab_path, n) for n in (12, 40))
    embed = lambda x: pretrained.mean_pooled_embedding(
        self.encoder, x["input_word_ids"], x["input_mask"],
        x["input_type_ids"])
    self.assertAllClose(embed(short), embed(long), atol=1e-5)

  def test_every_source_tensor_lands_in_exactly_one_weight(self):
    # Sorted values are unchanged by the transposes and reshapes of the
    # mapping: the multisets of fingerprints match one to one.
    self.assertEqual(self.skipped, ())
    source = {k: v for k, v in self.source.items()
              if k != "embeddings.position_ids"}
    self.assertLen(source, 103)
    self.assertLen(self.encoder.weights, 103)
    self.assertEqual(
        collections.Counter(_digest(v) for v in source.values()),
        collections.Counter(_digest(w.numpy()) for w in self.encoder.weights))

  def test_weights_equal_source_arrays(self):
    weights = pretrained.encoder_variables(self.encoder)
    src = self.source
    self.assertAllEqual(weights["word_embeddings/embeddings"],
                        src["embeddings.word_embeddings.weight"])
    self.assertAllEqual(weights["embeddings/layer_norm/gamma"],
                        src["embeddings.LayerNorm.weight"])
    query = src["encoder.layer.3.attention.self.query.weight"]  # [out, in]
    self.assertAllEqual(
        weights["transformer/layer_3/self_attention/query/kernel"][:, 5, :],
        query[5 * 32:6 * 32, :].T)  # head 5 of 12, 32 dims each
    self.assertAllEqual(
        weights["transformer/layer_3/self_attention/value/bias"][7],
        src["encoder.layer.3.attention.self.value.bias"][7 * 32:8 * 32])
    out = src["encoder.layer.5.attention.output.dense.weight"]
    self.assertAllEqual(
        weights["transformer/layer_5/self_attention/attention_output/kernel"]
        [2], out[:, 2 * 32:3 * 32].T)
    self.assertAllEqual(weights["transformer/layer_0/intermediate/kernel"],
                        src["encoder.layer.0.intermediate.dense.weight"].T)
    self.assertAllEqual(weights["transformer/layer_0/output_layer_norm/beta"],
                        src["encoder.layer.0.output.LayerNorm.bias"])
    self.assertAllEqual(weights["pooler_transform/kernel"],
                        src["pooler.dense.weight"].T)

  def test_too_few_layers_lists_unused_tensors(self):
    encoder = pretrained.build_bert_encoder(
        **dict(pretrained.MINILM_L6, num_layers=5))
    with self.assertRaisesRegex(ValueError,
                                r"not used.*encoder\.layer\.5\.attention"):
      pretrained.load_minilm(encoder)

  def test_too_many_layers_names_missing_tensor(self):
    encoder = pretrained.build_bert_encoder(
        **dict(pretrained.MINILM_L6, num_layers=7))
    with self.assertRaisesRegex(ValueError, r"'encoder\.layer\.6\..*missing"):
      pretrained.load_minilm(encoder)

  def test_wrong_width_lists_shape_mismatches(self):
    encoder = pretrained.build_bert_encoder(
        **dict(pretrained.MINILM_L6, hidden_size=192))
    before = encoder.weights[0].numpy()
    with self.assertRaisesRegex(
        ValueError, r"Shape mismatches.*word_embeddings/embeddings: encoder "
        r"\(30522, 192\) vs source \(30522, 384\)"):
      pretrained.load_minilm(encoder)
    self.assertAllEqual(encoder.weights[0], before)  # nothing half-loaded


# ---------------------------------------------------------------------------
# Tiny Google BERT / ELECTRA checkpoints and an independent numpy forward.


def _layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


_erf = np.vectorize(math.erf)


def _numpy_bert(w, word_ids, mask, type_ids, num_heads, with_pooler=True):
  """Original BERT (post-norm, exact GELU) in float64 numpy.

  Returns:
    (sequence_output [batch, seq, hidden], pooled_output [batch, hidden] or
    None).
  """
  w = {k: v.astype(np.float64) for k, v in w.items()}
  seq = word_ids.shape[1]
  x = (w["embeddings/word_embeddings"][word_ids] +
       w["embeddings/position_embeddings"][:seq][None] +
       w["embeddings/token_type_embeddings"][type_ids])
  x = _layer_norm(x, w["embeddings/LayerNorm/gamma"],
                  w["embeddings/LayerNorm/beta"])
  if "embeddings_project/kernel" in w:
    x = x @ w["embeddings_project/kernel"] + w["embeddings_project/bias"]
  batch, _, hidden = x.shape
  head = hidden // num_heads
  blocked = (1. - mask[:, None, None, :].astype(np.float64)) * -1e9
  i = 0
  while f"encoder/layer_{i}/output/dense/kernel" in w:
    p = f"encoder/layer_{i}/"
    split = lambda t: t.reshape(batch, seq, num_heads, head).transpose(
        0, 2, 1, 3)  # [batch, heads, seq, head]
    q, k, v = (split(x @ w[p + f"attention/self/{n}/kernel"] +
                     w[p + f"attention/self/{n}/bias"])
               for n in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + blocked
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
    attention = (context @ w[p + "attention/output/dense/kernel"] +
                 w[p + "attention/output/dense/bias"])
    x = _layer_norm(x + attention, w[p + "attention/output/LayerNorm/gamma"],
                    w[p + "attention/output/LayerNorm/beta"])
    h = (x @ w[p + "intermediate/dense/kernel"] +
         w[p + "intermediate/dense/bias"])
    h = 0.5 * h * (1. + _erf(h / math.sqrt(2.)))
    h = h @ w[p + "output/dense/kernel"] + w[p + "output/dense/bias"]
    x = _layer_norm(x + h, w[p + "output/LayerNorm/gamma"],
                    w[p + "output/LayerNorm/beta"])
    i += 1
  pooled = None
  if with_pooler:
    pooled = np.tanh(x[:, 0] @ w["pooler/dense/kernel"] +
                     w["pooler/dense/bias"])
  return x, pooled


def _hf_names(w):
  """Google-named [in, out] weights -> Hugging Face BertModel names."""
  hf = {}
  for name, value in w.items():
    parts = name.split("/")
    if parts[0] == "encoder":  # encoder/layer_3/... -> encoder.layer.3....
      parts[1:2] = ["layer", parts[1][len("layer_"):]]
    if parts[-1] == "kernel":  # Linear weights are [out, in]
      parts[-1], value = "weight", value.T
    elif parts[-1] in ("gamma", "beta"):
      parts[-1] = {"gamma": "weight", "beta": "bias"}[parts[-1]]
    elif parts[-1].endswith("embeddings"):
      parts.append("weight")
    hf[".".join(parts)] = np.ascontiguousarray(value)
  return hf


_WORD_IDS = np.array([[2, 5, 7, 11, 3, 0, 0], [2, 19, 4, 3, 8, 9, 3]])
_MASK = np.array([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
_TYPE_IDS = np.array([[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1]])


def _run(encoder):
  out = encoder(dict(input_word_ids=tf.constant(_WORD_IDS, tf.int32),
                     input_mask=tf.constant(_MASK, tf.int32),
                     input_type_ids=tf.constant(_TYPE_IDS, tf.int32)),
                training=False)
  return out["sequence_output"].numpy(), out["pooled_output"].numpy()


class GoogleCheckpointTest(tf.test.TestCase, parameterized.TestCase):

  def _check_outputs(self, encoder, w, with_pooler=True):
    sequence, pooled = _run(encoder)
    ref_sequence, ref_pooled = _numpy_bert(w, _WORD_IDS, _MASK, _TYPE_IDS, 2,
                                           with_pooler)
    # Padded positions are outputs too (they attend to the real tokens).
    self.assertAllClose(sequence, ref_sequence, atol=2e-5, rtol=1e-5)
    if with_pooler:
      self.assertAllClose(pooled, ref_pooled, atol=2e-5, rtol=1e-5)

  def test_bert_checkpoint_ignores_heads_and_optimizer_slots(self):
    w = _tiny_weights(seed=0)
    arrays = {"bert/" + k: v for k, v in w.items()}
    arrays.update({
        "cls/predictions/output_bias": np.zeros(20, np.float32),
        "cls/seq_relationship/output_weights": np.ones((2, 8), np.float32),
        "bert/encoder/layer_0/output/dense/kernel/adam_m":
            np.ones((16, 8), np.float32),
        "bert/encoder/layer_0/output/dense/kernel/adam_v":
            np.ones((16, 8), np.float32),
        "global_step": np.int64(1000),
    })
    prefix = _write_tf1_checkpoint(
        os.path.join(_tempdir(self), "bert_model.ckpt"),
        arrays)
    encoder = pretrained.build_bert_encoder(**_TINY)
    self.assertEqual(pretrained.load_google_checkpoint(encoder, prefix), ())
    weights = pretrained.encoder_variables(encoder)
    self.assertAllEqual(
        weights["transformer/layer_1/self_attention/key/kernel"][:, 1, :],
        w["encoder/layer_1/attention/self/key/kernel"][:, 4:])
    self.assertAllEqual(
        weights["transformer/layer_0/self_attention/attention_output/kernel"]
        [0], w["encoder/layer_0/attention/output/dense/kernel"][:4])
    self.assertAllEqual(weights["transformer/layer_0/output/kernel"],
                        w["encoder/layer_0/output/dense/kernel"])
    self.assertCountEqual(
        [_digest(v) for v in w.values()],
        [_digest(v.numpy()) for v in encoder.weights])
    self._check_outputs(encoder, w)

  def test_electra_discriminator_without_pooler(self):
    w = _tiny_weights(seed=1, with_pooler=False)
    arrays = {"electra/" + k: v for k, v in w.items()}
    arrays.update({
        "discriminator_predictions/dense/kernel": np.ones((8, 8), np.float32),
        "generator/encoder/layer_0/output/dense/kernel":
            np.ones((16, 4), np.float32),
        "generator_predictions/output_bias": np.zeros(20, np.float32),
        "electra/embeddings/word_embeddings/adam_m":
            np.ones((20, 8), np.float32),
    })
    prefix = _write_tf1_checkpoint(
        os.path.join(_tempdir(self), "model.ckpt"), arrays)
    encoder = pretrained.build_bert_encoder(**_TINY)
    pooler = encoder.get_layer("pooler_transform").kernel.numpy()
    skipped = pretrained.load_google_checkpoint(encoder, prefix)
    self.assertEqual(skipped,
                     ("pooler_transform/kernel", "pooler_transform/bias"))
    self.assertAllEqual(encoder.get_layer("pooler_transform").kernel, pooler)
    self._check_outputs(encoder, w, with_pooler=False)

  def test_electra_embedding_projection(self):
    w = _tiny_weights(seed=2, embedding_width=4, with_pooler=False)
    prefix = _write_tf1_checkpoint(
        os.path.join(_tempdir(self), "model.ckpt"),
        {"electra/" + k: v for k, v in w.items()})
    encoder = pretrained.build_bert_encoder(**_TINY, embedding_width=4)
    pretrained.load_google_checkpoint(encoder, prefix)
    self.assertAllEqual(encoder.get_layer("embedding_projection").kernel,
                        w["embeddings_project/kernel"])
    self._check_outputs(encoder, w, with_pooler=False)
    with self.assertRaisesRegex(ValueError, "embedding_width"):
      pretrained.load_google_checkpoint(
          pretrained.build_bert_encoder(**_TINY), prefix)

  def test_shorter_encoder_takes_the_first_positions(self):
    w = _tiny_weights(seed=6)
    prefix = _write_tf1_checkpoint(
        os.path.join(_tempdir(self), "model.ckpt"),
        {"bert/" + k: v for k, v in w.items()})
    encoder = pretrained.build_bert_encoder(
        **dict(_TINY, max_sequence_length=7))
    pretrained.load_google_checkpoint(encoder, prefix)
    self.assertAllEqual(encoder.get_layer("position_embedding").weights[0],
                        w["embeddings/position_embeddings"][:7])
    self._check_outputs(encoder, w)

  @parameterized.named_parameters(
      ("missing", "encoder/layer_1/output/LayerNorm/beta", None,
       r"'bert/encoder/layer_1/output/LayerNorm/beta'.*missing"),
      ("extra_layer", None, "encoder/layer_2/output/dense/bias",
       r"not used by the 2-layer encoder: \['bert/encoder/layer_2/output"),
  )
  def test_mismatch_raises(self, drop, add, message):
    w = _tiny_weights(seed=3)
    if drop:
      del w[drop]
    if add:
      w[add] = np.zeros(8, np.float32)
    prefix = _write_tf1_checkpoint(
        os.path.join(_tempdir(self), "model.ckpt"),
        {"bert/" + k: v for k, v in w.items()})
    with self.assertRaisesRegex(ValueError, message):
      pretrained.load_google_checkpoint(
          pretrained.build_bert_encoder(**_TINY), prefix)

  def test_no_bert_scope_raises(self):
    prefix = _write_tf1_checkpoint(
        os.path.join(_tempdir(self), "model.ckpt"),
        {"roberta/embeddings/word_embeddings": np.zeros((20, 8), np.float32)})
    with self.assertRaisesRegex(ValueError, "no bert/embeddings"):
      pretrained.load_google_checkpoint(
          pretrained.build_bert_encoder(**_TINY), prefix)


class InitEncoderTest(tf.test.TestCase):

  def test_safetensors_path_uses_hf_naming(self):
    w = _tiny_weights(seed=4)
    path = os.path.join(_tempdir(self), "tiny.safetensors")
    hf = _hf_names(w)
    hf["embeddings.position_ids"] = np.arange(10, dtype=np.int64)[None]
    self.assertIn("encoder.layer.1.attention.self.query.weight", hf)
    safetensors_numpy.save_file(hf, path)
    encoder = pretrained.build_bert_encoder(**_TINY)
    self.assertEqual(pretrained.init_encoder(encoder, path), ())
    sequence, pooled = _run(encoder)
    ref_sequence, ref_pooled = _numpy_bert(w, _WORD_IDS, _MASK, _TYPE_IDS, 2)
    self.assertAllClose(sequence, ref_sequence, atol=2e-5, rtol=1e-5)
    self.assertAllClose(pooled, ref_pooled, atol=2e-5, rtol=1e-5)

  def test_checkpoint_prefix_and_directories(self):
    w = _tiny_weights(seed=5)
    arrays = {"bert/" + k: v for k, v in w.items()}
    with_state = _tempdir(self)
    prefix = _write_tf1_checkpoint(os.path.join(with_state, "ckpt-7"), arrays)
    # Google's downloads hold bert_model.ckpt.* without a `checkpoint` file.
    bare = _tempdir(self)
    _write_tf1_checkpoint(os.path.join(bare, "bert_model.ckpt"), arrays,
                          write_state=False)
    _, ref_pooled = _numpy_bert(w, _WORD_IDS, _MASK, _TYPE_IDS, 2)
    for source in (prefix, prefix + ".index", with_state, bare):
      encoder = pretrained.build_bert_encoder(**_TINY)
      self.assertEqual(pretrained.init_encoder(encoder, source), ())
      self.assertAllClose(_run(encoder)[1], ref_pooled, atol=2e-5, rtol=1e-5)

  def test_unreadable_sources_raise_one_line_naming_the_path(self):
    root = _tempdir(self)
    garbage = os.path.join(root, "garbage.safetensors")
    with open(garbage, "wb") as f:
      f.write(b"not a safetensors file")
    with open(os.path.join(root, "bad.ckpt.index"), "wb") as f:
      f.write(b"not an sstable")
    two = _tempdir(self)
    for name in ("a.ckpt", "b.ckpt"):
      _write_tf1_checkpoint(os.path.join(two, name),
                            {"bert/x": np.zeros(1, np.float32)},
                            write_state=False)
    encoder = pretrained.build_bert_encoder(**_TINY)
    for path in (os.path.join(root, "missing.safetensors"), garbage,
                 os.path.join(root, "missing_ckpt"),
                 os.path.join(root, "bad.ckpt"), two, _tempdir(self)):
      with self.assertRaises(ValueError) as caught:
        pretrained.init_encoder(encoder, path)
      message = str(caught.exception)
      self.assertIn(repr(path), message)
      self.assertNotIn("\n", message)

  def test_minilm_files_are_found(self):
    safetensors_path, vocab_path = pretrained.minilm_files()
    self.assertTrue(safetensors_path.endswith("model.safetensors"))
    with open(vocab_path, encoding="utf-8") as f:
      vocab = f.read().split("\n")
    self.assertEqual(vocab[101:103], ["[CLS]", "[SEP]"])
    self.assertLen([t for t in vocab if t], 30522)


class ConfigTest(tf.test.TestCase):

  def test_sizes(self):
    self.assertEqual(
        {k: pretrained.MINILM_L6[k] for k in (
            "vocab_size", "hidden_size", "num_layers", "num_attention_heads",
            "inner_dim", "max_sequence_length", "type_vocab_size")},
        dict(vocab_size=30522, hidden_size=384, num_layers=6,
             num_attention_heads=12, inner_dim=1536, max_sequence_length=512,
             type_vocab_size=2))
    for config in (pretrained.BERT_BASE, pretrained.ELECTRA_BASE):
      self.assertEqual((config["hidden_size"], config["num_layers"],
                        config["num_attention_heads"], config["inner_dim"]),
                       (768, 12, 12, 3072))
    self.assertEqual(pretrained.ELECTRA_BASE["embedding_width"], 768)

  def test_exact_gelu(self):
    # "gelu" resolves to the erf form, not Model Garden's tanh default.
    gelu = tf.keras.activations.get(pretrained.MINILM_L6["inner_activation"])
    x = np.array([-2., -0.5, 0.3, 1.7], np.float32)
    self.assertAllClose(gelu(x), 0.5 * x * (1. + _erf(x / math.sqrt(2.))),
                        atol=1e-7)
    self.assertNotAllClose(
        gelu(x), tf.keras.activations.gelu(x, approximate=True), atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
