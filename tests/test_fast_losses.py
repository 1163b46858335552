"""Tests of rank4class_tf.ranking.fast_losses against TF-Ranking and numpy references.

Every fast loss must return TF-Ranking's value and gradient (float32, 1e-5
relative) with the same hyper-parameters, weights and reduction; the one-hot
closed forms are also checked against an independent numpy formula at a class
count TF-Ranking could not hold in memory.
"""

import os
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

from rank4class_tf.ranking import fast_losses
from rank4class_tf.ranking import losses

# name -> (TF-Ranking class, fast class, hyper-parameters).
_PAIRS = {
    "pairwise_logistic": (tfr.keras.losses.PairwiseLogisticLoss,
                          fast_losses.FastPairwiseLogisticLoss,
                          {"temperature": 0.7}),
    "pairwise_hinge": (tfr.keras.losses.PairwiseHingeLoss,
                       fast_losses.FastPairwiseHingeLoss, {}),
    "pairwise_soft_zero_one": (tfr.keras.losses.PairwiseSoftZeroOneLoss,
                               fast_losses.FastPairwiseSoftZeroOneLoss,
                               {"temperature": 2.0}),
    "approx_ndcg": (tfr.keras.losses.ApproxNDCGLoss,
                    fast_losses.FastApproxNDCGLoss, {}),
    "approx_ndcg_t1": (tfr.keras.losses.ApproxNDCGLoss,
                       fast_losses.FastApproxNDCGLoss, {"temperature": 1.0}),
}
_NAMES = tuple(_PAIRS)
_GUMBEL_KWARGS = {"seed": 7, "sample_size": 4, "gumbel_temperature": 0.5}
_RTOL = 1e-5


def _one_hot(rng, batch_size, n):
  labels = np.zeros((batch_size, n), np.float32)
  labels[np.arange(batch_size), rng.integers(0, n, batch_size)] = 1.
  return labels


def _value_and_grad(loss, labels, scores, sample_weight=None,
                    function=False):
  labels = tf.constant(labels, tf.float32)
  scores = tf.constant(scores, tf.float32)

  def step(labels, scores):
    with tf.GradientTape() as tape:
      tape.watch(scores)
      value = loss(labels, scores, sample_weight=sample_weight)
    return value, tape.gradient(value, scores)

  if function:
    step = tf.function(step)
  value, grad = step(labels, scores)
  return value.numpy(), grad.numpy()


class FastLossTest(tf.test.TestCase, parameterized.TestCase):

  def assertMatches(self, expected, actual):
    """Equal to 1e-5 relative (gradients: relative to their largest entry)."""
    (ev, eg), (av, ag) = expected, actual
    self.assertTrue(np.all(np.isfinite(av)) and np.all(np.isfinite(ag)))
    self.assertAllClose(ev, av, rtol=_RTOL, atol=1e-7)
    self.assertAllClose(eg, ag, rtol=_RTOL,
                        atol=_RTOL * max(np.abs(eg).max(), 1e-6))

  def assertSameAsTfr(self, name, labels, scores, sample_weight=None,
                      function=False, max_relevant_classes=None, **kwargs):
    tfr_cls, fast_cls, hparams = _PAIRS[name]
    hparams = dict(hparams, **kwargs)
    expected = _value_and_grad(tfr_cls(**hparams), labels, scores,
                               sample_weight, function)
    actual = _value_and_grad(
        fast_cls(max_relevant_classes=max_relevant_classes, **hparams),
        labels, scores, sample_weight, function)
    self.assertMatches(expected, actual)
    return actual

  @parameterized.product(name=_NAMES, n=(2, 10, 28, 1000))
  def test_one_hot_matches_tfr(self, name, n):
    rng = np.random.default_rng(n)
    batch_size = 3 if n == 1000 else 16
    scores = 2. * rng.normal(size=(batch_size, n))
    self.assertSameAsTfr(name, _one_hot(rng, batch_size, n), scores)

  @parameterized.product(name=_NAMES, n=(10, 28))
  def test_tied_scores(self, name, n):
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 3, size=(8, n)).astype(np.float32)
    scores[0] = 0.5  # a list of equal scores
    self.assertSameAsTfr(name, _one_hot(rng, 8, n), scores)

  @parameterized.product(name=_NAMES, n=(10, 1000))
  def test_large_logits(self, name, n):
    rng = np.random.default_rng(2)
    batch_size = 3 if n == 1000 else 8
    scores = (1e4 * rng.choice([-1., 1.], size=(batch_size, n)) +
              rng.normal(size=(batch_size, n)))
    labels = _one_hot(rng, batch_size, n)
    value, grad = self.assertSameAsTfr(name, labels, scores)
    self.assertTrue(np.isfinite(value) and np.all(np.isfinite(grad)))
    self.assertSameAsTfr(name, labels, -scores)

  @parameterized.product(
      name=_NAMES,
      weights=("scalar", "per_list", "per_class"),
      reduction=("auto", "sum", "sum_over_batch_size", "none"))
  def test_sample_weights_and_reductions(self, name, weights, reduction):
    rng = np.random.default_rng(3)
    batch_size, n = 6, 12
    sample_weight = {
        "scalar": tf.constant(2.5),
        "per_list": tf.constant(rng.random((batch_size, 1)), tf.float32),
        "per_class": tf.constant(rng.random((batch_size, n)), tf.float32),
    }[weights]
    self.assertSameAsTfr(name, _one_hot(rng, batch_size, n),
                         rng.normal(size=(batch_size, n)), sample_weight,
                         reduction=reduction)

  @parameterized.parameters(*_NAMES)
  def test_padding_and_lists_without_relevant_class(self, name):
    rng = np.random.default_rng(4)
    labels = _one_hot(rng, 6, 9)
    labels[0, :] = 0.           # no relevant class
    labels[1, :] = -1.          # all padding
    labels[2, 6:] = -1.         # padded tail
    labels[2, :6] = 0.
    labels[2, 1] = 1.
    labels[3, 4] = 3.           # graded single relevant class
    labels[3, 5:] = -1.
    scores = rng.normal(size=(6, 9))
    sample_weight = tf.constant(rng.random((6, 9)), tf.float32)
    self.assertSameAsTfr(name, labels, scores)
    self.assertSameAsTfr(name, labels, scores, sample_weight)

  @parameterized.product(name=_NAMES,
                         labels_kind=("multi_hot", "graded", "all_relevant"))
  def test_multi_hot_and_graded_labels(self, name, labels_kind):
    rng = np.random.default_rng(5)
    batch_size, n = 8, 28
    if labels_kind == "multi_hot":
      labels = (rng.random((batch_size, n)) < 0.2).astype(np.float32)
    elif labels_kind == "graded":
      labels = rng.integers(0, 4, (batch_size, n)).astype(np.float32)
    else:
      labels = rng.integers(1, 3, (batch_size, n)).astype(np.float32)
    labels[0, 20:] = -1.
    labels[1, :] = 0.
    labels[1, 3] = 1.
    scores = rng.normal(size=(batch_size, n))
    scores[2, :5] = 0.  # ties
    self.assertSameAsTfr(name, labels, scores)
    self.assertSameAsTfr(
        name, labels, scores,
        tf.constant(rng.random((batch_size, n)), tf.float32))

  @parameterized.parameters(*_NAMES)
  def test_tf_function_takes_both_paths_in_one_graph(self, name):
    tfr_cls, fast_cls, hparams = _PAIRS[name]
    fast, ref = fast_cls(**hparams), tfr_cls(**hparams)
    rng = np.random.default_rng(6)
    batch_size, n = 8, 10

    @tf.function
    def step(loss, labels, scores, weights):
      with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(labels, scores, sample_weight=weights)
      return value, tape.gradient(value, scores)

    one_hot = _one_hot(rng, batch_size, n)
    multi_hot = (rng.random((batch_size, n)) < 0.4).astype(np.float32)
    for labels in (one_hot, multi_hot):
      args = (tf.constant(labels), tf.constant(rng.normal(size=(8, n)),
                                               tf.float32),
              tf.constant(rng.random((batch_size, 1)), tf.float32))
      self.assertMatches([t.numpy() for t in step(ref, *args)],
                         [t.numpy() for t in step(fast, *args)])
    # One trace per loss object: the label kind is chosen in the graph.
    self.assertEqual(step.experimental_get_tracing_count(), 2)

  @parameterized.parameters(*_NAMES)
  def test_static_max_relevant_classes(self, name):
    # Fixed k: static shapes (what XLA needs); same values as TF-Ranking as
    # long as no list has more than k relevant classes.
    rng = np.random.default_rng(12)
    multi_hot = (rng.random((6, 20)) < 0.1).astype(np.float32)
    multi_hot[:, :3] = [1., 0., 1.]
    multi_hot[0, 5:] = -1.
    k = int((multi_hot > 0).sum(-1).max())
    for labels, max_relevant in ((_one_hot(rng, 6, 20), 1),
                                 (multi_hot, k), (multi_hot, 25)):
      self.assertSameAsTfr(name, labels, rng.normal(size=(6, 20)),
                           function=True, max_relevant_classes=max_relevant)

  @parameterized.parameters("pairwise_logistic", "approx_ndcg")
  def test_xla(self, name):
    tfr_cls, fast_cls, hparams = _PAIRS[name]
    rng = np.random.default_rng(13)
    step = tf.function(fast_cls(max_relevant_classes=1, **hparams),
                       jit_compile=True)
    for _ in range(2):
      labels = _one_hot(rng, 4, 20)
      scores = tf.constant(rng.normal(size=(4, 20)), tf.float32)
      self.assertAllClose(tfr_cls(**hparams)(labels, scores),
                          step(tf.constant(labels), scores), rtol=_RTOL)

  def test_rejects_bad_max_relevant_classes(self):
    for value in (0, 1.5, -2):
      with self.assertRaisesRegex(ValueError, "max_relevant_classes"):
        fast_losses.FastApproxNDCGLoss(max_relevant_classes=value)

  @parameterized.product(n=(10, 1000), labels_kind=("one_hot", "multi_hot"),
                         function=(False, True))
  def test_gumbel_same_seed_same_value(self, n, labels_kind, function):
    rng = np.random.default_rng(n)
    batch_size = 2 if n == 1000 else 8
    if labels_kind == "one_hot":
      labels = _one_hot(rng, batch_size, n)
    else:
      labels = (rng.random((batch_size, n)) < 0.3).astype(np.float32)
    scores = rng.normal(size=(batch_size, n))
    weights = tf.constant(rng.random((batch_size, 1)), tf.float32)
    results = []
    for cls in (tfr.keras.losses.GumbelApproxNDCGLoss,
                fast_losses.FastGumbelApproxNDCGLoss):
      tf.random.set_seed(11)
      results.append(_value_and_grad(cls(**_GUMBEL_KWARGS), labels, scores,
                                     weights, function))
    self.assertMatches(*results)

  def test_gumbel_large_logits(self):
    rng = np.random.default_rng(8)
    scores = 1e4 * rng.choice([-1., 1.], size=(4, 28))
    labels = _one_hot(rng, 4, 28)
    results = []
    for cls in (tfr.keras.losses.GumbelApproxNDCGLoss,
                fast_losses.FastGumbelApproxNDCGLoss):
      tf.random.set_seed(3)
      results.append(_value_and_grad(cls(seed=1), labels, scores))
    self.assertMatches(*results)

  def test_one_hot_closed_forms_at_100k_classes(self):
    # TF-Ranking would need [2, 1e5, 1e5] tensors (80 GB); the fast path is
    # O(n), checked against numpy in float64.
    rng = np.random.default_rng(9)
    batch_size, n, temperature = 2, 100_000, 0.5
    scores = rng.normal(size=(batch_size, n))
    classes = rng.integers(0, n, batch_size)
    labels = np.zeros((batch_size, n), np.float32)
    labels[np.arange(batch_size), classes] = 1.
    true = scores[np.arange(batch_size), classes][:, None]
    others = np.arange(n)[None, :] != classes[:, None]
    d = (true - scores) / temperature
    pairwise = np.where(others, np.logaddexp(0., -d), 0.).sum(-1)
    rank = 1. + np.where(others, 1. / (1. + np.exp(d)), 0.).sum(-1)
    approx = -1. / np.log2(1. + rank)

    for loss, per_list in (
        (fast_losses.FastPairwiseLogisticLoss(temperature=temperature),
         pairwise.sum() / (batch_size * n)),
        (fast_losses.FastApproxNDCGLoss(temperature=temperature),
         approx.mean())):
      value = tf.function(loss)(tf.constant(labels),
                                tf.constant(scores, tf.float32))
      self.assertAllClose(per_list, value.numpy(), rtol=_RTOL)

  def test_gradient_closed_form(self):
    # d/ds_j of sum_{j != c} log(1 + exp(s_j - s_c)) = sigmoid(s_j - s_c).
    rng = np.random.default_rng(10)
    scores = rng.normal(size=(1, 6))
    labels = np.eye(6, dtype=np.float32)[[2]]
    _, grad = _value_and_grad(
        fast_losses.FastPairwiseLogisticLoss(
            reduction=tf.keras.losses.Reduction.SUM), labels, scores)
    expected = 1. / (1. + np.exp(scores[0, 2] - scores[0]))
    expected[2] = -(expected.sum() - expected[2])
    self.assertAllClose(expected, grad[0], rtol=_RTOL)

  def test_losses_get_returns_fast_classes(self):
    self.assertIsInstance(losses.get("pairwise_logistic", temperature=0.5),
                          fast_losses.FastPairwiseLogisticLoss)
    self.assertIsInstance(losses.get("approx_ndcg"),
                          fast_losses.FastApproxNDCGLoss)
    loss = losses.get("gumbel_approx_ndcg", temperature=0.2, sample_size=3,
                      gumbel_temperature=0.5, seed=5)
    self.assertIsInstance(loss, fast_losses.FastGumbelApproxNDCGLoss)
    self.assertEqual(
        {k: loss.get_config()[k] for k in
         ("temperature", "sample_size", "gumbel_temperature", "seed")},
        {"temperature": 0.2, "sample_size": 3, "gumbel_temperature": 0.5,
         "seed": 5})

  @parameterized.parameters(
      (fast_losses.FastPairwiseLogisticLoss, {"temperature": 0.5}),
      (fast_losses.FastPairwiseHingeLoss, {}),
      (fast_losses.FastPairwiseSoftZeroOneLoss, {}),
      (fast_losses.FastApproxNDCGLoss, {"temperature": 0.3,
                                        "max_relevant_classes": 2}),
      (fast_losses.FastGumbelApproxNDCGLoss, {"seed": 3, "sample_size": 2}))
  def test_serialization(self, cls, kwargs):
    loss = cls(name="my_loss", **kwargs)
    config = tf.keras.losses.serialize(loss)
    self.assertEqual(config["registered_name"],
                     f"rank4class_tf>{cls.__name__}")
    clone = tf.keras.losses.deserialize(config)
    self.assertIsInstance(clone, cls)
    self.assertEqual(clone.get_config(), loss.get_config())

    labels = np.eye(5, dtype=np.float32)[[0, 3]]
    scores = np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32)
    inputs = tf.keras.Input([5])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(5)(inputs))
    model.compile(optimizer="sgd", loss=loss)
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "model")
      model.save(path)
      loaded = tf.keras.models.load_model(path)
    self.assertIsInstance(loaded.loss, cls)
    tf.random.set_seed(0)
    expected = loss(labels, scores)
    tf.random.set_seed(0)
    self.assertAllClose(expected, loaded.loss(labels, scores))

  @parameterized.parameters(
      fast_losses.FastPairwiseLogisticLoss, fast_losses.FastApproxNDCGLoss,
      fast_losses.FastGumbelApproxNDCGLoss)
  def test_rejects_lambda_weight_and_ragged(self, cls):
    with self.assertRaisesRegex(ValueError, "lambda_weight"):
      cls(lambda_weight=tfr.keras.losses.DCGLambdaWeight())
    with self.assertRaisesRegex(ValueError, "ragged"):
      cls(ragged=True)


if __name__ == "__main__":
  tf.test.main()
