"""Tests of rank4class_tf.multilabel.label_attention: blocks, head, MulCon training."""

import os
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.multilabel import label_attention as la
from rank4class_tf.multilabel import losses as multilabel_losses
from rank4class_tf.multilabel import mulcon
from rank4class_tf.training import builders


def np_layer_norm(x, layer):
  gamma, beta = [w.numpy() for w in layer.weights]
  mean = x.mean(-1, keepdims=True)
  var = x.var(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + layer.epsilon) * gamma + beta


def np_attention_block(block, query, value, mask):
  """MAB written out with numpy from the block's weights."""
  mha = block.attention
  (wq, bq), (wk, bk), (wv, bv), (wo, bo) = [
      (d.kernel.numpy(), d.bias.numpy())
      for d in (mha._query_dense, mha._key_dense, mha._value_dense,  # pylint: disable=protected-access
                mha._output_dense)]  # pylint: disable=protected-access
  q = np.einsum("btd,dhk->bthk", query, wq) + bq
  k = np.einsum("bsd,dhk->bshk", value, wk) + bk
  v = np.einsum("bsd,dhk->bshk", value, wv) + bv
  logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1])
  logits = np.where(mask[:, None, None, :] > 0, logits, -1e9)
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  attended = np.einsum("bhts,bshk->bthk", weights, v)
  out = np.einsum("bthk,hkd->btd", attended, wo) + bo
  h = np_layer_norm(query + out, block.norm_1)
  linear = h @ block.linear.kernel.numpy() + block.linear.bias.numpy()
  return np_layer_norm(h + linear, block.norm_2)


class AttentionBlockTest(tf.test.TestCase):

  def test_matches_numpy_with_padding_mask(self):
    rng = np.random.RandomState(0)
    query = rng.normal(size=(2, 3, 8)).astype(np.float32)
    value = rng.normal(size=(2, 5, 8)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    block = la.AttentionBlock(8, num_heads=4)
    got = block(query, value, mask).numpy()
    self.assertAllClose(got, np_attention_block(block, query, value, mask),
                        rtol=1e-4, atol=1e-5)
    # Padded positions are never attended to.
    changed = value.copy()
    changed[0, 3:] = 100.
    self.assertAllClose(block(query, changed, mask)[0], got[0], atol=1e-5)

  def test_width_must_divide_heads(self):
    with self.assertRaisesRegex(ValueError, "multiple of the 4 heads"):
      la.AttentionBlock(6, num_heads=4)

  def test_round_trip(self):
    block = la.AttentionBlock(8, num_heads=2, dropout=0.1)
    restored = tf.keras.layers.deserialize(tf.keras.layers.serialize(block))
    self.assertEqual((restored.dim, restored.num_heads, restored.dropout),
                     (8, 2, 0.1))


class LabelAttentionHeadTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    # Fixed initial weights: with unseeded ones, now and then every ReLU
    # unit of the projector is 0 for some label and its projection is 0.
    tf.keras.utils.set_random_seed(0)
    rng = np.random.RandomState(1)
    self.features = rng.normal(size=(3, 6, 5)).astype(np.float32)
    self.mask = np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4],
                         np.int32)
    self.ids = np.tile(np.arange(4)[None], [3, 1])
    self.head = la.LabelAttentionHead(4, dim=8, num_heads=2,
                                      projection_dim=3)
    self.out = self.head([self.features, self.mask, self.ids])

  def test_scores_are_per_label_linear_classifiers(self):
    g = self.head.label_embeddings(self.features, self.mask).numpy()
    kernel = self.head.classifier_kernel.numpy()
    bias = self.head.classifier_bias.numpy()
    self.assertAllClose(self.out["scores"],
                        np.einsum("bld,ld->bl", g, kernel) + bias,
                        rtol=1e-5, atol=1e-5)
    self.assertEqual(self.out["scores"].dtype, tf.float32)

  def test_projections_have_unit_norm(self):
    norms = np.linalg.norm(self.out["projections"].numpy(), axis=-1)
    self.assertAllClose(norms, np.ones([3, 4]), atol=1e-5)

  def test_list_order_and_subsets(self):
    ids = np.array([[3, 1], [0, 0], [2, 3]])
    sub = self.head([self.features, self.mask, ids[..., None]])
    full = self.out["scores"].numpy()
    self.assertAllClose(sub["scores"],
                        np.take_along_axis(full, ids, axis=1), atol=1e-6)
    self.assertAllClose(
        sub["projections"],
        np.take_along_axis(self.out["projections"].numpy(),
                           ids[..., None], axis=1), atol=1e-6)

  def test_classes_are_exchangeable(self):
    # No positional encoding over the labels: permuting the label table
    # (queries, classifiers) permutes the scores.
    perm = np.array([2, 0, 3, 1])
    scores = self.out["scores"].numpy()
    for weight in (self.head.label_queries, self.head.classifier_kernel,
                   self.head.classifier_bias):
      weight.assign(tf.gather(weight, perm))
    permuted = self.head([self.features, self.mask, self.ids])["scores"]
    self.assertAllClose(permuted, scores[:, perm], rtol=1e-4, atol=1e-5)

  def test_no_projector_without_contrastive_loss(self):
    head = la.LabelAttentionHead(4, dim=8, num_heads=2, projection_dim=0)
    out = head([self.features, self.mask, self.ids])
    self.assertEqual(set(out), {"scores"})

  def test_round_trip(self):
    restored = tf.keras.layers.deserialize(
        tf.keras.layers.serialize(self.head))
    restored([self.features, self.mask, self.ids])
    restored.set_weights(self.head.get_weights())
    self.assertAllClose(
        restored([self.features, self.mask, self.ids])["scores"],
        self.out["scores"])


def digits_batch(batch_size, multi_hot=False):
  data = datasets.get("digits")
  features, labels = next(iter(datasets.ranking_dataset(
      data, "train", batch_size, training=False)))
  if multi_hot:  # Add the next class: two relevant classes per instance.
    labels = tf.minimum(labels + tf.roll(labels, 1, axis=1), 1.)
  return data, features, labels


def build(data, loss=None, **contrastive):
  """The label-attention model; `contrastive` settings (LossConfig fields)
  make MulCon's, with gamma 1 unless given."""
  model = config_lib.ModelConfig(
      interaction="label_attention", encoder_dim=16, dropout=0., label_dim=8,
      label_heads=2, projection_dim=4)
  if contrastive:
    loss = config_lib.LossConfig(**dict(dict(contrastive_weight=1.),
                                        **contrastive))
  return model_lib.build_model_builder(data, model, loss).build()


class LabelAttentionModelTest(tf.test.TestCase, parameterized.TestCase):

  def test_single_label_model_and_saved_model(self):
    data, features, _ = digits_batch(4)
    model = build(data)
    scores = model(features)
    self.assertEqual(scores.shape, (4, 10))
    self.assertLen(model.get_layer("encoder").inbound_nodes, 1)
    path = os.path.join(tempfile.mkdtemp(), "model")
    model.save(path)
    restored = tf.keras.models.load_model(path)
    self.assertAllClose(restored(features), scores, rtol=1e-5, atol=1e-6)

  def test_encoder_without_positions_is_refused(self):
    data, _, _ = digits_batch(2)
    with self.assertRaisesRegex(ValueError, "`encoder`=mlp has none"):
      model_lib.build_model_builder(data, config_lib.ModelConfig(
          encoder="mlp", interaction="label_attention"))
    with self.assertRaisesRegex(ValueError, "needs `interaction`="
                                "label_attention"):
      model_lib.build_model_builder(
          data, loss=config_lib.LossConfig(contrastive_weight=0.2))

  @parameterized.parameters(0.0, 0.5)
  def test_train_step_adds_gamma_times_llcl(self, gamma):
    # One SGD step of the MulCon model equals a step on the gradient of
    # loss + gamma * LLCL computed by hand.
    data, features, labels = digits_batch(6, multi_hot=True)
    tf.keras.utils.set_random_seed(3)
    # gamma 0: MulCon's first step (a later --contrastive_start_step).
    model = build(data, config_lib.LossConfig(
        contrastive_temperature=0.2, contrastive_weight=gamma or 0.5,
        contrastive_start_step=0 if gamma else 10))
    self.assertIsInstance(model, mulcon.ContrastiveRankingModel)
    loss = multilabel_losses.TwoWayLoss()
    contrastive = mulcon.LabelContrastiveLoss(0.2)
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=loss)
    model(features)
    before = [v.numpy() for v in model.trainable_variables]
    with tf.GradientTape() as tape:
      out = model.network(features, training=True)
      total = (loss(labels, out["scores"]) +
               gamma * contrastive(labels, out["projections"]))
    grads = tape.gradient(total, model.trainable_variables)
    logs = model.train_on_batch(features, labels, return_dict=True)
    for b, g, v in zip(before, grads, model.trainable_variables):
      if g is None:
        continue
      self.assertAllClose(v.numpy(), b - 0.1 * tf.convert_to_tensor(g),
                          rtol=1e-3, atol=1e-5)
    self.assertIn("contrastive_loss", logs)
    self.assertAllClose(logs["contrastive_loss"],
                        contrastive(labels, out["projections"]), rtol=1e-4)
    # Validation logs the contrastive loss of the current weights.
    evaluated = model.evaluate(features, labels, return_dict=True, verbose=0)
    after = model.network(features, training=False)
    self.assertAllClose(evaluated["contrastive_loss"],
                        contrastive(labels, after["projections"]), rtol=1e-4)
    self.assertAllClose(evaluated["loss"], loss(labels, after["scores"]),
                        rtol=1e-4)

  def test_contrastive_model_saves_after_fit_alone(self):
    # fit and evaluate never go through the model's own __call__; the
    # SavedModel must still be written and serve the scores.
    data, features, labels = digits_batch(4, multi_hot=True)
    model = build(data, contrastive_temperature=0.2, contrastive_weight=1.)
    model.compile(optimizer="adam", loss=multilabel_losses.TwoWayLoss())
    model.fit(features, labels, epochs=1, verbose=0,
              validation_data=(features, labels))
    path = os.path.join(tempfile.mkdtemp(), "model")
    model.save(path, include_optimizer=False)
    served = tf.saved_model.load(path)(features, training=False)
    self.assertAllClose(served, model(features), rtol=1e-5, atol=1e-6)

  def test_contrastive_settings_reach_the_loss(self):
    data, _, _ = digits_batch(2)
    model = build(data, contrastive_temperature=0.3,
                  contrastive_normalization="positive_anchors",
                  contrastive_base_temperature=0.1)
    config = model.contrastive_loss.get_config()
    self.assertEqual((config["temperature"], config["normalization"],
                      config["base_temperature"]),
                     (0.3, "positive_anchors", 0.1))
    # MulCon's normalization and a factor 1 by default.
    config = build(data, contrastive_temperature=0.2).contrastive_loss \
        .get_config()
    self.assertEqual((config["normalization"], config["base_temperature"]),
                     ("mulcon", 0.2))
    with self.assertRaisesRegex(ValueError, "`normalization`='all' is not "
                                "valid; choose one of: mulcon, "
                                "positive_anchors"):
      build(data, contrastive_temperature=0.2,
            contrastive_normalization="all")
    # The training binary's path: config fields -> the model's loss.
    run = config_lib.TrainConfig.create(
        model_dir=tempfile.mkdtemp(), interaction="label_attention",
        encoder_dim=16, label_dim=8, label_heads=2, projection_dim=4,
        contrastive_weight=1.0, contrastive_normalization="positive_anchors",
        contrastive_base_temperature=0.05, train_steps=1, eval_every=1)
    model = builders.build_pipeline(run, data).model_builder.build()
    config = model.contrastive_loss.get_config()
    self.assertEqual((config["temperature"], config["normalization"],
                      config["base_temperature"]),
                     (0.2, "positive_anchors", 0.05))

  def test_schedule_switches_weight_and_learning_rate(self):
    data, _, _ = digits_batch(2)
    model = build(data, contrastive_temperature=0.2)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                  loss=multilabel_losses.TwoWayLoss())
    schedule = mulcon.ContrastiveSchedule(start_epoch=2, weight=0.7,
                                      learning_rate=1e-4)
    schedule.set_model(model)
    seen = []
    for epoch in (0, 1, 2, 3, 1):  # The last: a resumed run's order.
      schedule.on_epoch_begin(epoch)
      seen.append((float(model.contrastive_weight.numpy()),
                   float(model.optimizer.learning_rate.numpy())))
    self.assertAllClose(seen, [(0., 1e-3), (0., 1e-3), (0.7, 1e-4),
                               (0.7, 1e-4), (0., 1e-3)])


if __name__ == "__main__":
  tf.test.main()
