"""Tests of rank4class_tf.multilabel.losses and the maths in multilabel_ops.

Two-way loss and MulCon's LLCL against independent numpy references.
"""

import os
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf.multilabel import losses as ml
from rank4class_tf.multilabel import mulcon
from rank4class_tf.multilabel import ops
from rank4class_tf.ranking import losses


def _lse(v):
  v = np.asarray(v, np.float64)
  m = v.max()
  return m + np.log(np.exp(v - m).sum())


def _softplus(v):
  return np.log1p(np.exp(-abs(v))) + max(v, 0.)


def np_two_way(labels, logits, tp=4., tn=1., margin=0.):
  """Independent reference: loops over the lists, as the paper writes it."""
  labels = np.asarray(labels, np.float64)
  logits = np.asarray(logits, np.float64)

  def term(y, x):
    pos, neg = x[y > 0], x[y == 0]
    if not len(pos):
      return None  # Left out of the mean.
    if not len(neg):
      return 0.  # softplus(-inf).
    return _softplus(tn * _lse(neg / tn) + tp * _lse(-pos / tp) + margin)

  sample = [t for t in (term(y, x) for y, x in zip(labels, logits))
            if t is not None]
  klass = [t for t in (term(y, x) for y, x in zip(labels.T, logits.T))
           if t is not None]
  mean = lambda v: float(np.mean(v)) if v else 0.
  return mean(sample) + mean(klass)


def np_llcl(labels, z, tau=0.2, base_tau=0.2):
  """Independent reference of MulCon eq. 8 with explicit anchor loops,
  averaged over the anchors that have a positive ("positive_anchors")."""
  labels = np.asarray(labels)
  z = np.asarray(z, np.float64)
  anchors = [(b, c) for b in range(labels.shape[0])
             for c in range(labels.shape[1]) if labels[b, c] > 0]
  per_anchor = []
  for a in anchors:
    others = [q for q in anchors if q != a]
    positives = [q for q in others if q[1] == a[1]]
    if not positives:
      continue
    sims = {q: z[a] @ z[q] / tau for q in others}
    log_norm = _lse([sims[q] for q in others])
    per_anchor.append(-np.mean([sims[p] - log_norm for p in positives]))
  mean = float(np.mean(per_anchor)) if per_anchor else 0.
  return tau / base_tau * mean


def np_supcon_mulcon(labels, z, tau=0.2, base_tau=0.2):
  """MulCon's `SupConLoss.loss_log` (models/networks.py), in numpy matrices.

  As MulCon's stage-two model calls it: the features are the projections of
  the relevant labels (instance-major order), each with a one-hot label of
  its class; mask = L L^T without the diagonal; the log-softmax runs over
  every other feature; an anchor without positive gets the mean over 1
  (its mask row is empty, so 0); the sum over anchors is scaled by
  -tau / base_tau and divided by len_pos, the number of relevant labels.
  """
  labels = np.asarray(labels)
  rows, classes = np.nonzero(labels > 0)
  features = np.asarray(z, np.float64)[rows, classes]  # [len_pos, dim]
  len_pos = len(rows)
  if not len_pos:
    return 0.  # MulCon divides 0 by 0 here.
  one_hot = np.eye(labels.shape[1])[classes]
  logits_mask = 1. - np.eye(len_pos)
  mask = one_hot @ one_hot.T * logits_mask
  anchor_dot_contrast = features @ features.T / tau
  logits = anchor_dot_contrast - anchor_dot_contrast.max(1, keepdims=True)
  exp_logits = np.exp(logits) * logits_mask
  log_prob = logits - np.log(exp_logits.sum(1, keepdims=True))
  average = mask.sum(1)
  average[average == 0] = 1
  mean_log_prob_pos = (mask * log_prob).sum(1) / average
  loss = -(tau / base_tau) * mean_log_prob_pos
  return float(loss.sum() / len_pos)


def _random_case(seed, batch=6, classes=5):
  rng = np.random.RandomState(seed)
  labels = (rng.uniform(size=(batch, classes)) < 0.35).astype(np.float32)
  labels[0] = 0.  # An instance without positives.
  labels[1] = 1.  # An instance without negatives.
  labels[:, 2] = 0.  # A class without positives.
  logits = rng.normal(scale=2., size=(batch, classes)).astype(np.float32)
  return labels, logits


class TwoWayLossTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((0, 4., 1.), (1, 1., 1.), (2, 2., 0.5))
  def test_value_matches_numpy(self, seed, tp, tn):
    labels, logits = _random_case(seed)
    loss = losses.get("two_way", positive_temperature=tp,
                      negative_temperature=tn)
    self.assertAllClose(loss(labels, logits), np_two_way(labels, logits, tp,
                                                         tn), rtol=1e-5)

  def test_hand_value(self):
    # One instance, positive logit 2, negatives 0 and -1; T_P = 4, T_N = 1.
    # Sample term: softplus(log(e^0 + e^-1) - 2); class terms: class 0 has
    # no negative in the batch (0), classes 1, 2 no positive (left out).
    expected = np.log1p(np.exp(np.log(1. + np.exp(-1.)) - 2.))
    value = ops.two_way_loss([[1., 0., 0.]], [[2., 0., -1.]])
    self.assertAllClose(value, expected + 0.)

  def test_invariant_to_a_constant_shift(self):
    labels, logits = _random_case(3)
    loss = ml.TwoWayLoss()
    self.assertAllClose(loss(labels, logits), loss(labels, logits + 7.5),
                        rtol=1e-5)
    self.assertNotAllClose(loss(labels, logits), loss(labels, 2. * logits))

  def test_gradient_of_a_positive_is_eq_v(self):
    # Supplement eq. (v): dl/dx_p = -sigmoid(z) * softmax_P(-x / T_P)_p,
    # and for a negative +sigmoid(z) * softmax_N(x / T_N)_n.
    tp, tn = 4., 1.
    y = np.array([1., 1., 0., 1., 0., 0.], np.float32)
    x = np.array([0.5, -1., 2., 1.5, -0.3, 0.8], np.float32)
    pos, neg = y > 0, y == 0
    z = tn * _lse(x[neg] / tn) + tp * _lse(-x[pos] / tp)
    sig = 1. / (1. + np.exp(-z))
    w_pos = np.exp(-x[pos] / tp) / np.exp(-x[pos] / tp).sum()
    w_neg = np.exp(x[neg] / tn) / np.exp(x[neg] / tn).sum()
    expected = np.zeros_like(x, np.float64)
    expected[pos] = -sig * w_pos
    expected[neg] = sig * w_neg
    logits = tf.Variable(x[np.newaxis])
    with tf.GradientTape() as tape:
      sample, _ = ops.two_way_terms(y[np.newaxis], logits, axis=1,
                                    positive_temperature=tp,
                                    negative_temperature=tn)
    self.assertAllClose(tape.gradient(sample, logits)[0], expected,
                        rtol=1e-5)

  def test_full_gradient_sums_both_ways(self):
    labels, logits = _random_case(4)
    var = tf.Variable(logits)
    with tf.GradientTape() as tape:
      value = ops.two_way_loss(labels, var)
    grad = tape.gradient(value, var).numpy()
    eps = 1e-3
    numeric = np.zeros_like(logits)
    for i in range(logits.shape[0]):
      for j in range(logits.shape[1]):
        up, down = logits.copy(), logits.copy()
        up[i, j] += eps
        down[i, j] -= eps
        numeric[i, j] = (np_two_way(labels, up) -
                         np_two_way(labels, down)) / (2 * eps)
    self.assertAllClose(grad, numeric, atol=1e-4)

  def test_lists_without_positives_or_negatives_give_no_nan(self):
    # All-zero labels, all-one labels, huge logits on padding: finite value
    # and gradients everywhere.
    for labels in ([[0., 0., 0.]], [[1., 1., 1.]], [[1., 0., -1.]]):
      var = tf.Variable([[1e4, -1e4, 3e38]])
      with tf.GradientTape() as tape:
        value = ops.two_way_loss(labels, var)
      grad = tape.gradient(value, var)
      self.assertTrue(np.isfinite(value.numpy()), labels)
      self.assertTrue(np.all(np.isfinite(grad.numpy())), labels)
    self.assertEqual(float(ops.two_way_loss([[0., 0.]], [[1., 2.]])), 0.)

  def test_padding_is_ignored(self):
    labels, logits = _random_case(5)
    padded_labels = np.concatenate([labels, -np.ones([6, 2], np.float32)], 1)
    padded_logits = np.concatenate([logits, np.full([6, 2], 50., np.float32)],
                                   1)
    self.assertAllClose(ops.two_way_loss(padded_labels, padded_logits),
                        ops.two_way_loss(labels, logits), rtol=1e-6)

  def test_margin_variant(self):
    labels, logits = _random_case(6)
    loss = losses.get("two_way_margin", epsilon=0.7)
    self.assertAllClose(loss(labels, logits),
                        np_two_way(labels, logits, 1., 1., 0.7), rtol=1e-5)
    self.assertAllClose(losses.get("two_way_margin", epsilon=0.)(labels,
                                                                 logits),
                        losses.get("two_way", positive_temperature=1.)(
                            labels, logits), rtol=1e-6)

  def test_bad_temperature(self):
    with self.assertRaisesRegex(ValueError, "positive_temperature must be > 0"):
      ml.TwoWayLoss(positive_temperature=0.)


class LabelContrastiveLossTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((0, 0.2, 0.2), (1, 0.5, 0.2), (2, 0.1, 0.07))
  def test_value_matches_numpy(self, seed, tau, base_tau):
    rng = np.random.RandomState(seed)
    labels = (rng.uniform(size=(5, 4)) < 0.5).astype(np.float32)
    labels[0, 3] = 1.  # Class 3 active once: an anchor without positives
    labels[1:, 3] = 0.  # that still sits in the others' denominators.
    labels[2, :3] = 1.  # Classes 0-2 have positives.
    labels[3, :3] = 1.
    z = rng.normal(size=(5, 4, 3)).astype(np.float32)
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    by_anchors = np_supcon_mulcon(labels, z, tau, base_tau)
    by_positives = np_llcl(labels, z, tau, base_tau)
    self.assertAllClose(
        mulcon.label_contrastive_loss(labels, z, tau,
                                      base_temperature=base_tau),
        by_anchors, rtol=1e-5)
    self.assertAllClose(
        mulcon.label_contrastive_loss(labels, z, tau, "positive_anchors",
                                      base_tau), by_positives, rtol=1e-5)
    self.assertAllClose(
        mulcon.LabelContrastiveLoss(tau, base_temperature=base_tau)(labels, z),
        by_anchors, rtol=1e-5)
    self.assertAllClose(
        mulcon.LabelContrastiveLoss(tau, "positive_anchors", base_tau)(
            labels, z), by_positives, rtol=1e-5)
    # The two differ by (anchors with a positive) / (all anchors).
    anchors = labels.sum()
    with_positive = anchors - 1.  # Only the class-3 anchor lacks one.
    self.assertAllClose(by_anchors, by_positives * with_positive / anchors,
                        rtol=1e-6)

  def test_hand_value(self):
    # Two instances sharing class 0, instance 0 also has class 1. Anchor
    # (0, 0): positive (1, 0), contrast {(0, 1), (1, 0)}.
    z = np.zeros([2, 2, 2], np.float32)
    z[0, 0] = z[1, 0] = [1., 0.]
    z[0, 1] = [0., 1.]
    labels = [[1., 1.], [1., 0.]]
    tau = 0.2
    # Anchors (0,0) and (1,0) are symmetric: -log(e^5 / (e^5 + e^0));
    # anchor (0, 1) has no positive: 0, over 3 anchors for "mulcon".
    one = -np.log(np.exp(1 / tau) / (np.exp(1 / tau) + 1.))
    self.assertAllClose(mulcon.label_contrastive_loss(labels, z), 2. * one / 3.)
    self.assertAllClose(
        mulcon.label_contrastive_loss(labels, z,
                                   normalization="positive_anchors"), one)
    # base_temperature 0.1 doubles both (tau / base = 2).
    self.assertAllClose(
        mulcon.label_contrastive_loss(labels, z, base_temperature=0.1),
        4. * one / 3.)
    self.assertAllClose(
        mulcon.label_contrastive_loss(labels, z, 0.2, "positive_anchors", 0.1),
        2. * one)

  @parameterized.parameters("mulcon", "positive_anchors")
  def test_no_positive_pair_gives_zero_and_no_nan(self, normalization):
    z = tf.Variable(tf.math.l2_normalize(tf.ones([2, 3, 4]), -1))
    for labels in ([[1., 0., 0.], [0., 1., 0.]], [[0., 0., 0.]] * 2):
      with tf.GradientTape() as tape:
        value = mulcon.label_contrastive_loss(labels, z,
                                           normalization=normalization)
      self.assertEqual(float(value), 0.)
      self.assertTrue(np.all(np.isfinite(tape.gradient(value, z).numpy())))

  def test_bad_settings(self):
    with self.assertRaisesRegex(ValueError, "`normalization`='mean' is not "
                                "valid; choose one of: mulcon, "
                                "positive_anchors"):
      mulcon.LabelContrastiveLoss(normalization="mean")
    with self.assertRaisesRegex(ValueError, "`normalization`='mean'"):
      mulcon.label_contrastive_loss([[1.]], tf.ones([1, 1, 2]),
                                 normalization="mean")
    with self.assertRaisesRegex(ValueError, "base_temperature must be > 0"):
      mulcon.LabelContrastiveLoss(base_temperature=0.)


class SerializationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      (ml.TwoWayLoss, {"positive_temperature": 2., "negative_temperature":
                       0.5}),
      (ml.TwoWayMarginLoss, {"epsilon": 0.3}),
      (mulcon.LabelContrastiveLoss, {"temperature": 0.1}),
      (mulcon.LabelContrastiveLoss, {"temperature": 0.1, "normalization":
                                 "positive_anchors", "base_temperature":
                                 0.07}))
  def test_from_config(self, cls, kwargs):
    loss = cls(**kwargs)
    restored = tf.keras.losses.deserialize(tf.keras.losses.serialize(loss))
    self.assertIsInstance(restored, cls)
    self.assertEqual(restored.get_config(), loss.get_config())
    for key, value in kwargs.items():
      self.assertEqual(getattr(restored, key), value)

  def test_label_contrastive_config_of_an_older_version(self):
    # A config saved before `normalization` and `base_temperature` existed
    # loads with the defaults: MulCon's normalization, a factor 1.
    restored = mulcon.LabelContrastiveLoss.from_config(
        {"temperature": 0.3, "name": "label_contrastive", "reduction": "auto"})
    self.assertEqual((restored.temperature, restored.normalization,
                      restored.base_temperature), (0.3, "mulcon", 0.2))

  def test_two_way_in_saved_model(self):
    inputs = tf.keras.Input([3])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(inputs))
    model.compile("adam", loss=ml.TwoWayLoss(positive_temperature=3.))
    model.fit(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32),
              epochs=1, verbose=0)
    path = os.path.join(tempfile.mkdtemp(), "model")
    model.save(path)
    restored = tf.keras.models.load_model(path)
    self.assertEqual(restored.loss.get_config()["positive_temperature"], 3.)


if __name__ == "__main__":
  tf.test.main()
