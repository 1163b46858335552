"""Tests of rank4class_tf.multilabel.metrics (and multilabel_metric_ops) against
scikit-learn and numpy."""

import os
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn import metrics as skm

from rank4class_tf.multilabel import metric_ops as ops
from rank4class_tf.multilabel import metrics as mm
from rank4class_tf.ranking import metrics

COUNT_NAMES = ("cp", "cr", "cf1", "op", "or", "of1", "macro_f1")
TOP3_NAMES = ("cp_top3", "cr_top3", "cf1_top3", "op_top3", "or_top3",
              "of1_top3", "macro_f1_top3")
BEST3_NAMES = tuple(name.replace("_top3", "_best3") for name in TOP3_NAMES)


def random_split(seed, num_instances=48, num_classes=7, padding=True):
  """Multi-hot labels and logits with ties, an empty class and instance."""
  rng = np.random.RandomState(seed)
  labels = (rng.rand(num_instances, num_classes) < 0.35).astype(np.float32)
  labels[7] = 1.  # An instance positive for every class but class 3.
  labels[:, 3] = 0.  # A class without positive.
  labels[5] = 0.  # An instance without positive.
  # Scores rounded to one decimal: many ties, within and across classes.
  scores = np.round(rng.normal(size=labels.shape), 1).astype(np.float32)
  scores[9] = 0.  # Every class of an instance tied, on the threshold.
  if padding:
    pad = rng.rand(*labels.shape) < 0.08
    pad[5] = False
    labels[pad] = -1.
  return labels, scores


def np_f1(p, r):
  return 0. if p + r == 0 else 2. * p * r / (p + r)


def sklearn_map_class(labels, scores):
  aps = []
  for c in range(labels.shape[1]):
    valid = labels[:, c] >= 0
    y = labels[valid, c]
    if y.sum() > 0:
      aps.append(skm.average_precision_score(y, scores[valid, c]))
  return np.mean(aps)


def sklearn_map_sample(labels, scores):
  return sklearn_map_class(labels.T, scores.T)


def sklearn_counts(labels, predicted, suffix=""):
  """Count statistics by scikit-learn; padded entries become (0, 0)."""
  valid = labels >= 0
  y_true = np.where(valid, labels, 0).astype(int)
  y_pred = np.where(valid, predicted, 0).astype(int)
  kw = dict(zero_division=0)
  cp = skm.precision_score(y_true, y_pred, average="macro", **kw)
  cr = skm.recall_score(y_true, y_pred, average="macro", **kw)
  op = skm.precision_score(y_true, y_pred, average="micro", **kw)
  orr = skm.recall_score(y_true, y_pred, average="micro", **kw)
  values = {"cp": cp, "cr": cr, "cf1": np_f1(cp, cr), "op": op, "or": orr,
            "of1": np_f1(op, orr),
            "macro_f1": skm.f1_score(y_true, y_pred, average="macro", **kw)}
  return {k + suffix: v for k, v in values.items()}


def np_threshold_predictions(scores, threshold=0.5):
  return 1. / (1. + np.exp(-scores.astype(np.float64))) >= threshold


def np_top_k_predictions(labels, scores, k):
  """The k best valid classes of each row, ties to the lower class id."""
  predicted = np.zeros(scores.shape, bool)
  for i, (row_labels, row_scores) in enumerate(zip(labels, scores)):
    ids = np.flatnonzero(row_labels >= 0)
    # lexsort: last key first; sort by -score, then by class id.
    best = ids[np.lexsort((ids, -row_scores[ids]))][:k]
    predicted[i, best] = True
  return predicted


def mlgcn_overall_topk(labels, scores, k):
  """ML-GCN's util.py `AveragePrecisionMeter.overall_topk(k)`, in numpy.

  As there: every entry starts at -1; each of the k best entries of a row
  becomes 1 if its score (a logit) is >= 0, else -1; `evaluation` then
  counts the entries >= 0 as predicted, with Np = 0 replaced by 1 in CP.
  Beyond ML-GCN: padded entries (label < 0) are never among the k best and
  count nowhere, ties go to the lower class id (torch.topk leaves them
  unspecified), a ratio over Ng = 0 (or an F1 of 0 + 0) is 0, not NaN, and
  OP divides by the true sum of Np: ML-GCN sums Np after replacing its
  zeros by 1, which lowers OP by one per class that is never predicted.

  Returns:
    ({statistic_top{k}: value} for the six ML-GCN statistics, the
    [n, c] bool predictions).
  """
  n, c = scores.shape
  marked = np.zeros((n, c)) - 1.
  for i in range(n):
    ids = np.flatnonzero(labels[i] >= 0)
    top = ids[np.lexsort((ids, -scores[i, ids]))][:k]
    for ind in top:
      marked[i, ind] = 1. if scores[i, ind] >= 0 else -1.
  valid = labels >= 0
  targets = np.where(labels >= 1, 1., 0.)
  nc, npred, ng = np.zeros(c), np.zeros(c), np.zeros(c)
  for j in range(c):
    keep = valid[:, j]
    ng[j] = np.sum(targets[keep, j] == 1)
    npred[j] = np.sum(marked[keep, j] >= 0)
    nc[j] = np.sum(targets[keep, j] * (marked[keep, j] >= 0))
  op = np.sum(nc) / np.sum(npred)
  npred[npred == 0] = 1
  ratio = lambda a, b: np.where(b > 0, a / np.maximum(b, 1), 0.)
  orr = ratio(np.sum(nc), np.sum(ng))
  cp = np.sum(nc / npred) / c
  cr = np.sum(ratio(nc, ng)) / c
  values = {"op": op, "or": orr, "of1": np_f1(op, orr),
            "cp": cp, "cr": cr, "cf1": np_f1(cp, cr)}
  return ({f"{key}_top{k}": float(v) for key, v in values.items()},
          (marked >= 0) & valid)


def np_reference(labels, scores, threshold=0.5):
  want = {"map_class": sklearn_map_class(labels, scores),
          "map_sample": sklearn_map_sample(labels, scores)}
  want.update(sklearn_counts(
      labels, np_threshold_predictions(scores, threshold)))
  want.update(mlgcn_overall_topk(labels, scores, 3)[0])
  want.update(sklearn_counts(
      labels, np_top_k_predictions(labels, scores, 3), "_best3"))
  return want


# A hand-computed case: 4 instances, 4 classes, ties, no padding.
HAND_LABELS = np.array([[1, 0, 1, 0],
                        [0, 1, 1, 0],
                        [1, 0, 0, 0],
                        [0, 0, 0, 0]], np.float32)
HAND_SCORES = np.array([[2., 1., 1., -1.],
                        [1., 0., 2., -2.],
                        [1., -1., .5, 0.],
                        [-1., -1., 3., 0.]], np.float32)
HAND_VALUES = {
    # Class APs 5/6 (tie at 1 counts the negative), 1/2, 7/12; class 3 empty.
    "map_class": 23. / 36.,
    # Instance APs 5/6, 5/6, 1; instance 3 has no positive.
    "map_sample": 8. / 9.,
    # score >= 0: Nc = [2, 1, 2, 0], Np = [3, 2, 4, 2], Ng = [2, 1, 2, 0].
    "cp": 5. / 12., "cr": 3. / 4., "cf1": 15. / 28.,
    "op": 5. / 11., "or": 1., "of1": 5. / 8., "macro_f1": 8. / 15.,
    # Best 2, tie of classes 1 and 2 in row 0 goes to class 1:
    # Nc = [2, 0, 1, 0], Np = [3, 1, 3, 1], Ng = [2, 1, 2, 0].
    "cp_best2": 1. / 4., "cr_best2": 3. / 8., "cf1_best2": 3. / 10.,
    "op_best2": 3. / 8., "or_best2": 3. / 5., "of1_best2": 6. / 13.,
    "macro_f1_best2": 3. / 10.,
    # Every one of those has a score >= 0 (row 3: class 3 scores 0), so
    # top 2 (also over the threshold) predicts the same.
    "cp_top2": 1. / 4., "of1_top2": 6. / 13.,
}

# Top 3 against best 3: 5 classes, a tie at the boundary, a row with one
# class over the threshold and one with none.
TOP3_LABELS = np.array([[1, 0, 1, 0, 0],
                        [0, 1, 0, 0, 1],
                        [1, 1, 0, 0, 0]], np.float32)
TOP3_SCORES = np.array([[2., 1., 1., 1., -1.],  # 1, 2, 3 tied: 3 left out.
                        [-1., .5, -2., -3., -.5],  # Only class 1 >= 0.
                        [-2., -1., -3., -4., -5.]], np.float32)  # None.
TOP3_VALUES = {
    # Predicted {0, 1, 2}, {1}, {}: Nc = [1, 1, 1, 0, 0],
    # Np = [1, 2, 1, 0, 0], Ng = [2, 2, 1, 0, 1].
    "cp_top3": 1. / 2., "cr_top3": 2. / 5., "cf1_top3": 4. / 9.,
    "op_top3": 3. / 4., "or_top3": 1. / 2., "of1_top3": 3. / 5.,
    "macro_f1_top3": 13. / 30.,
    # Predicted {0, 1, 2}, {1, 4, 0}, {1, 0, 2}: Nc = [2, 2, 1, 0, 1],
    # Np = [3, 3, 2, 0, 1], Ng = [2, 2, 1, 0, 1].
    "cp_best3": 17. / 30., "cr_best3": 4. / 5., "cf1_best3": 136. / 205.,
    "op_best3": 2. / 3., "or_best3": 1., "of1_best3": 4. / 5.,
    "macro_f1_best3": 49. / 75.,
}


class PureFunctionTest(tf.test.TestCase, parameterized.TestCase):

  def test_hand_computed_values(self):
    got = mm.multilabel_scores(HAND_LABELS, HAND_SCORES, list(HAND_VALUES))
    self.assertEqual(list(got), list(HAND_VALUES))
    for name, value in HAND_VALUES.items():
      self.assertAllClose(got[name], value, rtol=1e-6, atol=0, msg=name)

  def test_top3_and_best3_hand_values(self):
    got = mm.multilabel_scores(TOP3_LABELS, TOP3_SCORES, list(TOP3_VALUES))
    for name, value in TOP3_VALUES.items():
      self.assertAllClose(got[name], value, rtol=1e-6, atol=0, msg=name)
    # The same numbers from the ML-GCN reference and its predictions.
    want, predicted = mlgcn_overall_topk(TOP3_LABELS, TOP3_SCORES, 3)
    self.assertAllEqual(predicted, [[1, 1, 1, 0, 0], [0, 1, 0, 0, 0],
                                    [0, 0, 0, 0, 0]])
    for name, value in want.items():
      self.assertAllClose(value, TOP3_VALUES[name], rtol=1e-12, msg=name)
    # Padded entries scoring highest are never among the 3 best (both are
    # negatives outside the 3 best unpadded).
    labels, scores = TOP3_LABELS.copy(), TOP3_SCORES.copy()
    labels[0, 4] = labels[2, 3] = -1.
    scores[0, 4] = scores[2, 3] = 9.
    padded = mm.multilabel_scores(labels, scores, list(TOP3_VALUES))
    for name, value in TOP3_VALUES.items():
      self.assertAllClose(padded[name], value, rtol=1e-6, atol=0, msg=name)

  @parameterized.parameters(0.3, 0.8)
  def test_top3_uses_the_threshold(self, threshold):
    # At another threshold, top 3 keeps the 3 best classes over it.
    labels, scores = random_split(11)
    over = np_threshold_predictions(scores, threshold)
    predicted = np_top_k_predictions(labels, scores, 3) & over
    want = sklearn_counts(labels, predicted, "_top3")
    got = mm.multilabel_scores(labels, scores, TOP3_NAMES,
                               threshold=threshold)
    for name in TOP3_NAMES:
      self.assertAllClose(got[name], want[name], rtol=1e-5, msg=name)

  @parameterized.parameters((0, True), (1, True), (2, False))
  def test_matches_sklearn_and_mlgcn(self, seed, padding):
    labels, scores = random_split(seed, padding=padding)
    want = np_reference(labels, scores)
    # macro_f1_top3 (not in ML-GCN): scikit-learn on ML-GCN's predictions.
    want["macro_f1_top3"] = sklearn_counts(
        labels, mlgcn_overall_topk(labels, scores, 3)[1])["macro_f1"]
    got = mm.multilabel_scores(labels, scores, list(want))
    self.assertEqual(list(got), list(want))
    for name in want:
      self.assertAllClose(got[name], want[name], rtol=1e-5, atol=1e-7,
                          msg=name)
      self.assertIsInstance(got[name], float)

  def test_default_names(self):
    labels, scores = random_split(3)
    got = mm.multilabel_scores(labels, scores)
    self.assertEqual(tuple(got), mm.MULTILABEL_METRICS)
    self.assertEqual(mm.MULTILABEL_METRICS, (
        "map_class", "map_sample", "cp", "cr", "cf1", "op", "or", "of1",
        "macro_f1", "cp_top3", "cr_top3", "cf1_top3", "op_top3", "or_top3",
        "of1_top3"))
    self.assertEqual(mm.WHOLE_SPLIT_METRICS, ("map_class",))

  @parameterized.parameters(0.3, 0.7, 0., 1.)
  def test_other_thresholds(self, threshold):
    labels, scores = random_split(4)
    got = mm.multilabel_scores(labels, scores, COUNT_NAMES,
                               threshold=threshold)
    want = sklearn_counts(labels,
                          np_threshold_predictions(scores, threshold))
    for name in COUNT_NAMES:
      self.assertAllClose(got[name], want[name], rtol=1e-5, msg=name)

  def test_per_class_and_per_instance_ap(self):
    labels, scores = random_split(5, padding=False)
    ap, has_positive = ops.average_precision_per_class(labels, scores)
    self.assertAllEqual(has_positive, labels.sum(0) > 0)
    for c in np.flatnonzero(labels.sum(0) > 0):
      self.assertAllClose(
          ap[c], skm.average_precision_score(labels[:, c], scores[:, c]))
    self.assertEqual(float(ap[3]), 0.)
    ap, has_positive = ops.average_precision_per_instance(labels, scores)
    self.assertAllEqual(has_positive, labels.sum(1) > 0)
    self.assertAllClose(
        ap[7], skm.average_precision_score(labels[7], scores[7]))

  def test_ties_do_not_depend_on_order(self):
    # sklearn groups ties: a positive tied with negatives gets their precision.
    labels = np.array([[1., 0., 0., 1.]])
    for scores in ([[1., 1., 1., 0.]], [[1., 1., 1., 1.]]):
      got = ops.map_sample(labels, np.array(scores, np.float32))
      self.assertAllClose(
          got, skm.average_precision_score(labels[0], scores[0]))
    # Permuting the classes (hence the order of ties) changes nothing.
    labels, scores = random_split(6, padding=False)
    perm = np.random.RandomState(0).permutation(labels.shape[0])
    self.assertEqual(float(ops.map_class(labels, scores)),
                     float(ops.map_class(labels[perm], scores[perm])))

  def test_padding_is_ignored(self):
    # A padded column entry with a high score changes neither AP nor counts.
    labels, scores = HAND_LABELS.copy(), HAND_SCORES.copy()
    labels = np.concatenate([labels, -np.ones((2, 4), np.float32)])
    scores = np.concatenate([scores, 10. * np.ones((2, 4), np.float32)])
    got = mm.multilabel_scores(labels, scores, list(HAND_VALUES))
    for name, value in HAND_VALUES.items():
      self.assertAllClose(got[name], value, rtol=1e-6, msg=name)

  def test_top_k_skips_padded_classes(self):
    labels = np.array([[-1., 1., 0., -1.]], np.float32)
    scores = np.array([[5., 1., 0., 5.]], np.float32)
    for rule in ("top", "best"):
      predicted = ops.predictions(labels, scores, top_k=2, top_k_rule=rule)
      self.assertAllEqual(predicted, [[False, True, True, False]])

  def test_inside_tf_function(self):
    labels, scores = random_split(7)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)] * 2)
    def compute(labels, scores):
      return mm.metric_tensors(labels, scores, mm.MULTILABEL_METRICS)

    got = {k: float(v) for k, v in compute(labels, scores).items()}
    want = mm.multilabel_scores(labels, scores)
    self.assertAllClose(got, want)

  @parameterized.parameters("map", "f1", "cp_top0", "cp_top", "or_", "",
                            "cp_best0", "cp_bottom3", "map_class_top3")
  def test_unknown_names(self, name):
    self.assertIsNone(mm.parse_name(name))
    with self.assertRaisesRegex(ValueError, "valid names"):
      mm.get(name)

  def test_parse_name(self):
    self.assertEqual(mm.parse_name("cf1_top3"), ("cf1", 3, "top"))
    self.assertEqual(mm.parse_name("cf1_best3"), ("cf1", 3, "best"))
    self.assertEqual(mm.parse_name("macro_f1"), ("macro_f1", None, None))
    self.assertEqual(mm.parse_name("or_top12"), ("or", 12, "top"))
    self.assertEqual(mm.parse_name("map_class"), ("map_class", None, None))
    self.assertEqual(mm.metric_name("of1", 3, "best"), "of1_best3")


def batches(labels, scores, sizes=(10, 17, 21)):
  start = 0
  for size in sizes:
    yield labels[start:start + size], scores[start:start + size]
    start += size


class KerasMetricTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*(mm.MULTILABEL_METRICS + ("macro_f1_top3",) +
                              BEST3_NAMES))
  def test_streams_exactly(self, name):
    labels, scores = random_split(8)
    metric = mm.get(name)
    self.assertEqual(metric.name, name)
    for batch_labels, batch_scores in batches(labels, scores):
      metric.update_state(batch_labels, batch_scores)
    want = mm.multilabel_scores(labels, scores, [name])[name]
    self.assertAllClose(float(metric.result()), want, rtol=1e-6)
    metric.reset_state()
    self.assertEqual(float(metric.result()), 0.)
    metric.update_state(labels[:10], scores[:10])
    self.assertAllClose(
        float(metric.result()),
        mm.multilabel_scores(labels[:10], scores[:10], [name])[name],
        rtol=1e-6)

  @parameterized.parameters(None, 7)
  def test_from_config(self, num_classes):
    labels, scores = random_split(9)
    for metric in (mm.get("cf1_top3", num_classes=num_classes),
                   mm.get("of1_top3", num_classes=num_classes, threshold=0.3),
                   mm.get("of1_best3", num_classes=num_classes),
                   mm.get("cp", num_classes=num_classes, threshold=0.3),
                   mm.get("map_class", num_classes=num_classes),
                   mm.get("map_sample")):
      metric.update_state(labels, scores)
      restored = tf.keras.metrics.deserialize(
          tf.keras.metrics.serialize(metric))
      self.assertIsInstance(restored, type(metric))
      self.assertEqual(restored.get_config(), metric.get_config())
      restored.update_state(labels, scores)
      self.assertAllClose(restored.result(), metric.result(), msg=metric.name)
    config = mm.get("cf1_top3").get_config()
    self.assertEqual((config["statistic"], config["top_k"],
                      config["top_k_rule"], config["name"]),
                     ("cf1", 3, "top", "cf1_top3"))
    config = mm.get("cf1_best3").get_config()
    self.assertEqual((config["top_k_rule"], config["name"]),
                     ("best", "cf1_best3"))
    with self.assertRaisesRegex(ValueError, "`top_k_rule`='all' is not valid; "
                                "choose one of: top, best"):
      mm.MultiLabelCountMetric("cf1", top_k=3, top_k_rule="all")

  def test_refuses_sample_weight_and_wrong_classes(self):
    metric = mm.get("cp", num_classes=3)
    with self.assertRaisesRegex(ValueError, "sample_weight"):
      metric.update_state([[1., 0., 0.]], [[1., 0., 0.]], sample_weight=[1.])
    with self.assertRaisesRegex(ValueError, "built for 3 classes"):
      metric.update_state([[1., 0.]], [[1., 0.]])

  def test_in_model_fit_and_evaluate(self):
    labels, _ = random_split(10, num_instances=40, num_classes=5)
    features = np.random.RandomState(0).normal(size=(40, 6)).astype(np.float32)
    names = ("map_class", "map_sample", "or", "of1", "cf1_top3", "macro_f1",
             "precision@2", "mrr")
    inputs = tf.keras.Input([6])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(5)(inputs))
    model.compile("sgd", tf.keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=metrics.get_all(names))
    history = model.fit(features, labels, batch_size=16, epochs=1, verbose=0,
                        steps_per_epoch=2, validation_data=(features, labels),
                        validation_batch_size=16)
    keras_names = [metrics.keras_name(n) for n in names]
    self.assertEqual(set(history.history),
                     {"loss", "val_loss"} | set(keras_names) |
                     {"val_" + n for n in keras_names})
    got = model.evaluate(features, labels, batch_size=16, verbose=0,
                         return_dict=True)
    self.assertEqual(set(got), {"loss"} | set(keras_names))
    # Graph-mode streaming over 3 batches equals the whole split at once.
    scores = model.predict(features, verbose=0)
    multilabel = [n for n in names if mm.is_multilabel_name(n)]
    want = mm.multilabel_scores(labels, scores, multilabel)
    for name in multilabel:
      self.assertAllClose(got[name], want[name], rtol=1e-5, msg=name)
    # The validation pass ran on the same data with the final weights.
    for name in keras_names:
      self.assertAllClose(got[name], history.history["val_" + name][-1],
                          rtol=1e-5, msg=name)

  def test_in_saved_model(self):
    inputs = tf.keras.Input([4])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(inputs))
    model.compile("sgd", "mse",
                  metrics=[mm.get("map_class"), mm.get("of1_top3"),
                           mm.get("map_sample")])
    labels = np.array([[1., 0., 1.], [0., 1., 0.]], np.float32)
    features = np.ones((2, 4), np.float32)
    model.evaluate(features, labels, verbose=0)
    path = os.path.join(tempfile.mkdtemp(), "model")
    model.save(path)
    restored = tf.keras.models.load_model(path)
    got = restored.evaluate(features, labels, verbose=0, return_dict=True)
    self.assertEqual(set(got), {"loss", "map_class", "of1_top3", "map_sample"})


class RankingMetricsOnMultiHotTest(tf.test.TestCase, parameterized.TestCase):
  """metrics.evaluate_scores: the new names and TF-Ranking on multi-hot."""

  def setUp(self):
    super().setUp()
    rng = np.random.RandomState(11)
    self.labels = (rng.rand(30, 8) < 0.3).astype(np.float32)
    self.labels[4] = 0.  # No relevant class: 0 in every TF-Ranking metric.
    self.scores = rng.normal(size=(30, 8)).astype(np.float32)  # No ties.

  def ranks(self):
    """Labels sorted by decreasing score, [30, 8]."""
    order = np.argsort(-self.scores, axis=1)
    return np.take_along_axis(self.labels, order, axis=1)

  @parameterized.parameters(1, 3, 8, 10)
  def test_precision_at_k(self, k):
    sorted_labels = self.ranks()
    want = np.mean(sorted_labels[:, :k].sum(1) / min(k, 8))
    got = metrics.evaluate_scores(self.labels, self.scores, [f"precision@{k}"])
    self.assertEqual(list(got), [f"precision@{k}"])
    self.assertAllClose(got[f"precision@{k}"], want, rtol=1e-5)

  @parameterized.parameters(1, 3, 5)
  def test_ndcg_and_mrr(self, k):
    sorted_labels = self.ranks()
    discounts = 1. / np.log2(2. + np.arange(8))
    dcg = ((2. ** sorted_labels - 1.) * discounts)[:, :k].sum(1)
    ideal = -np.sort(-self.labels, axis=1)
    idcg = ((2. ** ideal - 1.) * discounts)[:, :k].sum(1)
    ndcg = np.where(idcg > 0, dcg / np.maximum(idcg, 1e-12), 0.)
    first = np.argmax(sorted_labels >= 1, axis=1)
    mrr = np.where(sorted_labels.max(1) >= 1, 1. / (1. + first), 0.)
    got = metrics.evaluate_scores(self.labels, self.scores,
                                  [f"ndcg@{k}", "mrr"])
    self.assertAllClose(got[f"ndcg@{k}"], ndcg.mean(), rtol=1e-5)
    self.assertAllClose(got["mrr"], mrr.mean(), rtol=1e-5)

  def test_exact_keys_in_order(self):
    names = ["map_class", "top1_accuracy", "cf1_top3", "or", "precision@2",
             "ndcg@3", "map_sample", "macro_f1", "mrr"]
    got = metrics.evaluate_scores(self.labels, self.scores, names)
    self.assertEqual(list(got), names)
    want = mm.multilabel_scores(self.labels, self.scores,
                                [n for n in names if metrics.is_multilabel(n)])
    for name, value in want.items():
      self.assertEqual(got[name], value)

  def test_threshold_reaches_multilabel_metrics(self):
    got = metrics.evaluate_scores(self.labels, self.scores, ["cp"],
                                  threshold=0.8)
    want = sklearn_counts(self.labels,
                          np_threshold_predictions(self.scores, 0.8))["cp"]
    self.assertAllClose(got["cp"], want, rtol=1e-5)

  def test_integer_labels_equal_one_hot(self):
    ids = np.random.RandomState(12).randint(0, 8, size=30)
    names = ("map_class", "map_sample", "cf1", "of1_top3")
    self.assertEqual(
        metrics.evaluate_scores(ids, self.scores, names),
        metrics.evaluate_scores(np.eye(8)[ids], self.scores, names))

  def test_names(self):
    for name in mm.MULTILABEL_METRICS + ("precision@3", "macro_f1_top5",
                                         "cf1_best3"):
      metrics.check_name(name)
      self.assertEqual(metrics.get(name).name, metrics.keras_name(name))
    self.assertEqual(metrics.get("precision@3").name, "precision_3")
    self.assertEqual(metrics.get("or").name, "or")
    self.assertEqual(metrics.MULTILABEL_METRICS, mm.MULTILABEL_METRICS)
    self.assertEqual(metrics.get("cp", num_classes=4).get_config()
                     ["num_classes"], 4)

  @parameterized.parameters("precision@0", "precision", "cp_top0", "map",
                            "f1")
  def test_unknown_names_list_valid_ones(self, name):
    with self.assertRaisesRegex(ValueError,
                                "valid names: top<k>_accuracy.*precision@<k>"
                                ".*map_class.*of1_top<k>"):
      metrics.check_name(name)


if __name__ == "__main__":
  tf.test.main()
