"""Tests of the Rank4Class model, including the paper's §3.2 equivalence."""

import hashlib
import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr
from absl.testing import parameterized

from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.modeling import interactions
from rank4class_tf.modeling import model as model_lib

NUM_CLASSES = 10


def digits_batch(batch_size=16):
  data = datasets.get("digits")
  ds = datasets.ranking_dataset(data, "validation", batch_size, training=False)
  return data, next(iter(ds))


class EquivalenceTest(tf.test.TestCase):
  """With `dot` + softmax, the ranking model IS the classical classifier."""

  def test_same_scores_loss_and_gradients_as_dense_classifier(self):
    tf.keras.utils.set_random_seed(1)
    data, (features, labels) = digits_batch()
    ranker = model_lib.build_model_builder(
        data, config_lib.ModelConfig(encoder_dim=32, dropout=0.)).build()
    encoder = ranker.get_layer("encoder")
    head = ranker.get_layer("ranking_head")
    table = head.class_encoder.embeddings  # [10, 33] = [W^T | b].

    # The classical classifier: the same encoder, then Dense(n).
    images = tf.keras.Input([8, 8, 1])
    dense = tf.keras.layers.Dense(NUM_CLASSES)
    classifier = tf.keras.Model(images, dense(encoder(images)))
    dense.set_weights([table.numpy()[:, :32].T, table.numpy()[:, 32]])

    ranking_loss = tfr.keras.losses.SoftmaxLoss()
    classic_loss = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    with tf.GradientTape(persistent=True) as tape:
      rank_scores = ranker(features, training=False)
      class_scores = classifier(features["image"], training=False)
      l_rank = ranking_loss(labels, rank_scores)
      l_class = classic_loss(labels, class_scores)
    self.assertAllClose(rank_scores, class_scores, rtol=1e-5, atol=1e-5)
    self.assertAllClose(l_rank, l_class, rtol=1e-5)

    enc_vars = encoder.trainable_variables
    g_rank = tape.gradient(l_rank, enc_vars + [table])
    g_class = tape.gradient(l_class, enc_vars + dense.trainable_variables)
    for a, b in zip(g_rank[:-1], g_class[:-2]):
      self.assertAllClose(a, b, rtol=1e-4, atol=1e-6)
    # The table's gradient is [dL/dW^T | dL/db].
    self.assertAllClose(g_rank[-1][:, :32], tf.transpose(g_class[-2]),
                        rtol=1e-4, atol=1e-6)
    self.assertAllClose(g_rank[-1][:, 32], g_class[-1], rtol=1e-4, atol=1e-6)


class ModelTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*interactions.INTERACTION_NAMES)
  def test_scores_shape_and_single_encoder_call(self, interaction):
    data, (features, _) = digits_batch(8)
    model = model_lib.build_model_builder(data, config_lib.ModelConfig(
        interaction=interaction, mlp_units=8)).build()
    self.assertEqual(model(features).shape, (8, NUM_CLASSES))
    # The instance encoder is applied once per instance, not once per class.
    self.assertLen(model.get_layer("encoder").inbound_nodes, 1)

  def test_class_list_order_and_subsets(self):
    data, (features, _) = digits_batch(4)
    model = model_lib.build_model_builder(data).build()
    full = model(features).numpy()
    ids = np.tile(np.array([[7], [2], [2]], np.int64)[None], [4, 1, 1])
    sub = dict(features, class_id=ids,
               example_list_mask=tf.ones([4, 3], tf.bool))
    self.assertAllClose(model(sub), full[:, [7, 2, 2]])

  def test_dot_scores_are_h_prime_times_table(self):
    data, (features, _) = digits_batch(4)
    model = model_lib.build_model_builder(
        data, config_lib.ModelConfig(encoder_dim=16, dropout=0.)).build()
    h = model.get_layer("encoder")(features["image"]).numpy()
    table = model.get_layer("ranking_head").class_encoder.table().numpy()
    want = np.concatenate([h, np.ones([4, 1])], axis=1) @ table.T
    self.assertAllClose(model(features), want, rtol=1e-5, atol=1e-5)


class SerializationTest(tf.test.TestCase, parameterized.TestCase):

  def test_class_embedding_round_trip(self):
    layer = model_lib.ClassEmbedding(5, 3)
    restored = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    self.assertEqual((restored.num_classes, restored.dim), (5, 3))

  @parameterized.parameters(*interactions.INTERACTION_NAMES)
  def test_head_round_trip(self, interaction):
    head = model_lib.ClassRankingHead(
        6, interactions.get(interaction, units=4))
    h = np.random.RandomState(0).normal(size=(3, 5)).astype(np.float32)
    ids = np.tile(np.arange(6)[None], [3, 1])
    want = head([h, ids])
    restored = tf.keras.layers.deserialize(tf.keras.layers.serialize(head))
    self.assertIsInstance(restored.interaction, type(head.interaction))
    restored([h, ids])
    restored.set_weights(head.get_weights())
    self.assertAllClose(restored([h, ids]), want)

  @parameterized.parameters(*interactions.INTERACTION_NAMES)
  def test_saved_model_round_trip(self, interaction):
    data, (features, _) = digits_batch(4)
    model = model_lib.build_model_builder(data, config_lib.ModelConfig(
        interaction=interaction, mlp_units=8)).build()
    want = model(features)
    path = os.path.join(tempfile.mkdtemp(), "model")
    model.save(path)
    restored = tf.keras.models.load_model(path)
    self.assertAllClose(restored(features), want, rtol=1e-5, atol=1e-6)
    self.assertIsInstance(restored.get_layer("ranking_head"),
                          model_lib.ClassRankingHead)


if __name__ == "__main__":
  tf.test.main()


class CopyWeightsTest(tf.test.TestCase):

  def test_copies_by_name_and_refuses_a_mismatch(self):
    def head(units, name="head"):
      inputs = tf.keras.Input([4])
      return tf.keras.Model(inputs, tf.keras.layers.Dense(
          units, name=name)(inputs))
    source, target = head(3), head(3)
    self.assertNotAllClose(source.weights[0], target.weights[0])
    self.assertEqual(model_lib.copy_weights(source, target), 2)
    for a, b in zip(source.weights, target.weights):
      self.assertAllEqual(a, b)
    with self.assertRaisesRegex(ValueError, r"cannot copy weight "
                                r"'head/kernel:0' of shape\(s\) \[\[4, 3\]\]: "
                                r"the target model's weights of that name "
                                r"have shape\(s\) \[\[4, 5\]\]"):
      model_lib.copy_weights(source, head(5))
    with self.assertRaisesRegex(ValueError, "cannot copy weight"):
      model_lib.copy_weights(source, head(3, name="other"))


class WeightsDigestTest(tf.test.TestCase):

  def test_equal_weights_only(self):
    def head(name="head"):
      inputs = tf.keras.Input([2])
      return tf.keras.Model(inputs, tf.keras.layers.Dense(
          3, name=name)(inputs))
    model = head()
    kernel = np.arange(6, dtype=np.float32).reshape(2, 3) / 8
    model.set_weights([kernel, np.zeros(3, np.float32)])
    # Written out: each weight's name, dtype, shape, then its bytes.
    want = hashlib.sha256(
        b"head/kernel:0|<f4|(2, 3)|" + kernel.tobytes() +
        b"head/bias:0|<f4|(3,)|" + bytes(12)).hexdigest()
    self.assertEqual(model_lib.weights_digest(model), want)
    other = head()
    model_lib.copy_weights(model, other)
    self.assertEqual(model_lib.weights_digest(other), want)
    # One value one float apart; the same values under another name.
    nudged = kernel.copy()
    nudged[1, 2] = np.nextafter(nudged[1, 2], np.float32(1))
    other.set_weights([nudged, np.zeros(3, np.float32)])
    self.assertNotEqual(model_lib.weights_digest(other), want)
    renamed = head("other")
    renamed.set_weights(model.get_weights())
    self.assertNotEqual(model_lib.weights_digest(renamed), want)
