"""Test fixtures shared by the BERT tests: tiny weights in Google's naming."""

import numpy as np
import tensorflow as tf


def tiny_google_weights(seed, embedding_width=8, hidden=8, inner=16, layers_=2,
                        vocab=20, positions=10, with_pooler=True):
  """Random tiny BERT weights in Google naming (no scope), [in, out]."""
  rng = np.random.default_rng(seed)
  normal = lambda *shape: rng.normal(0., 0.5, shape).astype(np.float32)
  w = {
      "embeddings/word_embeddings": normal(vocab, embedding_width),
      "embeddings/position_embeddings": normal(positions, embedding_width),
      "embeddings/token_type_embeddings": normal(2, embedding_width),
      "embeddings/LayerNorm/gamma": 1. + normal(embedding_width),
      "embeddings/LayerNorm/beta": normal(embedding_width),
  }
  if embedding_width != hidden:
    w["embeddings_project/kernel"] = normal(embedding_width, hidden)
    w["embeddings_project/bias"] = normal(hidden)
  for i in range(layers_):
    p = f"encoder/layer_{i}/"
    for part in ("query", "key", "value"):
      w[p + f"attention/self/{part}/kernel"] = normal(hidden, hidden)
      w[p + f"attention/self/{part}/bias"] = normal(hidden)
    w[p + "attention/output/dense/kernel"] = normal(hidden, hidden)
    w[p + "attention/output/dense/bias"] = normal(hidden)
    w[p + "attention/output/LayerNorm/gamma"] = 1. + normal(hidden)
    w[p + "attention/output/LayerNorm/beta"] = normal(hidden)
    w[p + "intermediate/dense/kernel"] = normal(hidden, inner)
    w[p + "intermediate/dense/bias"] = normal(inner)
    w[p + "output/dense/kernel"] = normal(inner, hidden)
    w[p + "output/dense/bias"] = normal(hidden)
    w[p + "output/LayerNorm/gamma"] = 1. + normal(hidden)
    w[p + "output/LayerNorm/beta"] = normal(hidden)
  if with_pooler:
    w["pooler/dense/kernel"] = normal(hidden, hidden)
    w["pooler/dense/bias"] = normal(hidden)
  return w


def write_tf1_checkpoint(prefix, arrays, write_state=True):
  """Writes {name: array} as a TF1 checkpoint with exactly those names."""
  with tf.Graph().as_default():
    variables = [tf.compat.v1.Variable(v, name=k) for k, v in arrays.items()]
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return saver.save(session, prefix, write_meta_graph=False,
                        write_state=write_state)
