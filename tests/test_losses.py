"""Tests of rank4class_tf.ranking.losses: name lookup, rescaled MSE, serialization."""

import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr
from absl.testing import parameterized

from rank4class_tf.ranking import losses


class LossLookupTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*losses.LOSS_NAMES)
  def test_every_name_builds_a_finite_loss(self, name):
    # SoDeep losses rank lists of the sorter's length d.
    kwargs = ({"sorter": "handcrafted", "d": 3} if name.startswith("sodeep_")
              else {})
    loss = losses.get(name, **kwargs)
    value = loss([[0., 1., 0.], [1., 0., 0.]], [[0.5, 2., -1.], [3., 0., 1.]])
    self.assertTrue(np.isfinite(value.numpy()))

  def test_unknown_name_lists_valid_names(self):
    with self.assertRaisesRegex(ValueError, "valid names: softmax, "
                                "pairwise_logistic, approx_ndcg"):
      losses.get("hinge")

  def test_tf_ranking_names_are_ours(self):
    # TF-Ranking's names (RankingLossKey) build our loss of that name, and
    # `tfr.keras.losses.get` takes the name PipelineHparams is given.
    from rank4class_tf import config as config_lib  # pylint: disable=g-import-not-at-top
    labels, scores = [[0., 0., 1., 0.]], [[0.3, 1.2, 0.9, -0.4]]
    for ours, theirs in config_lib.TFR_LOSS_NAMES.items():
      loss = losses.get(theirs)
      self.assertEqual(loss.name, ours)
      self.assertIsInstance(loss, type(losses.get(ours)))
      if ours != "gumbel_approx_ndcg":  # Random samples: no equal values.
        self.assertAllClose(loss(labels, scores),
                            tfr.keras.losses.get(theirs)(labels, scores),
                            msg=theirs)
    self.assertEqual(losses.hyperparameters("approx_ndcg_loss"),
                     ("temperature",))
    self.assertEqual(config_lib.LossConfig(name="mean_squared_loss").name,
                     "mse")
    self.assertEqual(config_lib.TrainConfig.create(
        model_dir="x", loss="approx_ndcg_loss").loss.name, "approx_ndcg")

  def test_unknown_hyperparameter(self):
    with self.assertRaisesRegex(ValueError, "'mse' has no hyper-parameter"):
      losses.get("mse", temperature=2.)

  def test_hyperparameters_reach_tfr(self):
    # ApproxNDCG at temperature T equals TF-Ranking's at T.
    labels = [[0., 0., 1., 0.]]
    scores = [[0.3, 1.2, 0.9, -0.4]]
    ours = losses.get("approx_ndcg", temperature=0.5)(labels, scores)
    ref = tfr.keras.losses.ApproxNDCGLoss(temperature=0.5)(labels, scores)
    self.assertAllClose(ours, ref)
    self.assertNotAllClose(
        ours, tfr.keras.losses.ApproxNDCGLoss(temperature=0.1)(labels, scores))

  def test_softmax_equals_categorical_crossentropy(self):
    rng = np.random.RandomState(0)
    labels = np.eye(5, dtype=np.float32)[rng.randint(0, 5, size=8)]
    scores = rng.normal(size=(8, 5)).astype(np.float32)
    cce = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    self.assertAllClose(losses.get("softmax")(labels, scores),
                        cce(labels, scores), rtol=1e-5)


class RescaledMSETest(tf.test.TestCase):

  def test_imagenet_setting_hand_value(self):
    loss = losses.get("rescaled_mse", k=15., m=30.)
    # List 1: (15 * (29 - 30)^2 + 1) / 2 = 8; list 2: (15 * 30^2 + 0) / 2.
    value = loss([[0., 1.], [1., 0.]], [[1., 29.], [0., 0.]])
    self.assertAllClose(value, (8. + 15. * 900. / 2.) / 2.)

  def test_k_m_one_equals_tfr_mean_squared(self):
    rng = np.random.RandomState(3)
    labels = np.eye(6, dtype=np.float32)[rng.randint(0, 6, size=4)]
    scores = rng.normal(size=(4, 6)).astype(np.float32)
    self.assertAllClose(losses.get("rescaled_mse")(labels, scores),
                        tfr.keras.losses.MeanSquaredLoss()(labels, scores),
                        rtol=1e-5)

  def test_gradient_matches_closed_form(self):
    # d/ds_c [k (s_c - M)^2 / C] = 2 k (s_c - M) / C; others 2 s_i / C.
    scores = tf.Variable([[1., 2., 3.]])
    with tf.GradientTape() as tape:
      value = losses.get("rescaled_mse", k=4., m=2.)([[0., 0., 1.]], scores)
    grad = tape.gradient(value, scores)
    self.assertAllClose(grad, [[2. / 3., 4. / 3., 2. * 4. * 1. / 3.]])


class SerializationTest(tf.test.TestCase):

  def test_rescaled_mse_from_config(self):
    loss = losses.RescaledMeanSquaredLoss(k=15., m=30.)
    config = tf.keras.losses.serialize(loss)
    restored = tf.keras.losses.deserialize(config)
    self.assertIsInstance(restored, losses.RescaledMeanSquaredLoss)
    self.assertEqual((restored.k, restored.m), (15., 30.))
    labels, scores = [[0., 1.]], [[1., 29.]]
    self.assertAllClose(restored(labels, scores), loss(labels, scores))

  def test_rescaled_mse_in_saved_model(self):
    inputs = tf.keras.Input([3])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(inputs))
    model.compile("adam", loss=losses.RescaledMeanSquaredLoss(k=15., m=30.))
    path = os.path.join(tempfile.mkdtemp(), "model")
    model.save(path)
    restored = tf.keras.models.load_model(path)
    self.assertIsInstance(restored.loss, losses.RescaledMeanSquaredLoss)
    self.assertEqual(restored.loss.get_config()["k"], 15.)


if __name__ == "__main__":
  tf.test.main()
