"""Tests of rank4class_tf.modeling.zero_shot: calibrated stacking and the
cosine fusion inside the model, the residual class projection with the
cosine interaction, and an export that serves the scores evaluation scores
for a class list with unseen and never-trained names."""

import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import interactions
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.modeling import stateless_dropout
from rank4class_tf.modeling import zero_shot
from rank4class_tf.modeling import zero_shot_baselines
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.serving import saved_model
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training
from rank4class_tf.training import zero_shot_fit
import helpers
import test_class_encoders
import test_text_pipelines

CLASSES = test_text_pipelines.CLASSES  # joy, anger, neutral


class ZeroShotCalibrationTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.RandomState(0)
    self.scores = tf.constant(rng.normal(size=(4, 5)), tf.float32)
    self.h = tf.constant(rng.normal(size=(4, 3)), tf.float32)
    self.t = tf.constant(rng.normal(size=(5, 3)), tf.float32)
    self.seen = tf.constant([1., 0., 1., 1., 0.])
    h = self.h.numpy() / np.linalg.norm(self.h.numpy(), axis=1,
                                        keepdims=True)
    t = self.t.numpy() / np.linalg.norm(self.t.numpy(), axis=1,
                                        keepdims=True)
    self.cosine = h @ t.T

  def call(self, margin=0., weight=0., training=None):
    layer = zero_shot.ZeroShotCalibration(margin, weight)
    return layer([self.scores, self.h, self.t, self.seen],
                 training=training).numpy()

  def test_stacking_shifts_exactly_the_seen_classes(self):
    scores = np.array([[1., 2., 3., 4., 5.], [0., 0., 0., 0., 0.]])
    self.scores = tf.constant(scores, tf.float32)
    self.assertAllClose(self.call(margin=0.75),
                        [[0.25, 2., 2.25, 3.25, 5.],
                         [-0.75, 0., -0.75, -0.75, 0.]])

  def test_fusion_weights_0_and_1_are_the_trained_and_cosine_scores(self):
    self.assertAllClose(self.call(weight=0.), self.scores)
    self.assertAllClose(self.call(weight=1.), self.cosine, atol=1e-6)
    self.assertAllClose(self.call(weight=0.25),
                        0.75 * self.scores.numpy() + 0.25 * self.cosine,
                        atol=1e-6)
    self.assertAllClose(
        self.cosine, zero_shot_baselines.cosine_scores(self.h.numpy(),
                                                       self.t.numpy()),
        atol=1e-6)

  def test_training_calls_see_the_trained_scores(self):
    self.assertAllClose(self.call(2., 0.5, training=True), self.scores)

  def test_serialization_and_range(self):
    layer = zero_shot.ZeroShotCalibration(0.5, 0.3, name="zero_shot")
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    self.assertEqual(clone.get_config(), layer.get_config())
    with self.assertRaisesRegex(ValueError, r"`cosine_fusion`=1.5 must be"):
      zero_shot.ZeroShotCalibration(0., 1.5)


class ResidualProjectionTest(tf.test.TestCase):

  def test_identity_initialised_projection_ranks_as_the_cosine(self):
    rng = np.random.RandomState(1)
    features = rng.normal(size=(6, 8)).astype(np.float32)
    h = rng.normal(size=(5, 8)).astype(np.float32)
    encoder = class_encoders.TextClassEncoder(
        9, 6, 8, class_features=features, projection="residual",
        seen=[1, 1, 0, 1, 0, 1])
    head = model_lib.ClassRankingHead(
        6, interactions.get("cosine"), class_encoder=encoder,
        zero_shot=zero_shot.ZeroShotCalibration(0., 0.))
    head.build([tf.TensorShape([None, 8]), tf.TensorShape([None, 6])])
    c, t, seen = encoder.split_table(encoder.table())
    self.assertAllClose(c, np.pad(features, [[0, 0], [0, 1]]))
    self.assertAllClose(t, features)
    self.assertAllEqual(seen, [1, 1, 0, 1, 0, 1])
    scores = head.all_class_scores(tf.constant(h)).numpy()
    cosine = zero_shot_baselines.cosine_scores(h, features)
    self.assertAllEqual(np.argsort(-scores, axis=1),
                        np.argsort(-cosine, axis=1))
    # tau cos([h, 1], [t, 0]) = tau |h| / |[h, 1]| cos(h, t).
    scale = 10. * np.linalg.norm(h, axis=1) / np.sqrt(
        (h ** 2).sum(axis=1) + 1.)
    self.assertAllClose(scores, scale[:, None] * cosine, atol=1e-5)
    clone = class_encoders.TextClassEncoder.from_config(encoder.get_config())
    self.assertEqual(clone.get_config(), encoder.get_config())

  def test_dense_width_is_checked(self):
    with self.assertRaisesRegex(ValueError, "at least as wide"):
      class_encoders.TextClassEncoder(4, 2, 8, class_features=np.zeros(
          [2, 8]), projection="residual")


@pytest.mark.slow
class CalibratedExportTest(tf.test.TestCase):
  """A frozen run from the cache with anger held out, a margin and a
  fusion weight: its export ranks a class list with the held-out and a
  never-trained name by the scores evaluation scores."""

  def test_rank_classes_serves_the_evaluated_scores(self):
    data_dir = test_text_pipelines.goemotions_fixture()
    root = tempfile.mkdtemp()
    margin, weight = 0.7, 0.4
    config = test_class_encoders.run_config(
        "calibrated", root, data_dir, holdout_classes=("anger",),
        seen_margin=margin, cosine_fusion=weight)
    training.train(config)
    data = builders.load_data(config)
    labels, evaluated = training.checkpoint_scores(config, data,
                                                   ("test",))["test"]
    texts = list(data.splits["test"][0])
    ranker = exported_ranker.ExportedRanker(config.trainer.model_dir)
    self.assertAllClose(ranker.scores(texts), evaluated, atol=1e-4)
    listed = ["neutral", "anger", "joy", "fury"]
    export = tf.saved_model.load(os.path.join(
        config.trainer.model_dir, "export", run_dir_lib.BEST_EXPORT))
    served = export.signatures[saved_model.CLASS_LIST_KEY](
        text=tf.constant(texts), class_texts=tf.constant(listed))[
            "scores"].numpy()
    self.assertAllClose(served[:, :3], evaluated[:, [2, 1, 0]], atol=1e-4)
    # The formula, from MiniLM run here and the best weights: fury is new,
    # so unseen (no margin), like anger.
    model_builder = builders.build_pipeline(config, data).model_builder
    model = model_builder.build()
    stateless_dropout.restore(
        model, run_dir_lib.RunDir(config.trainer.model_dir).best_checkpoint(),
        rebuild=model_builder.build)
    (encoder,) = [l for l in model.submodules
                  if isinstance(l, class_encoders.TextClassEncoder)]
    h = test_class_encoders.minilm_mean(texts, 12)
    t = test_class_encoders.minilm_mean(listed, 12)
    c = t @ encoder.projection.kernel.numpy() + encoder.projection.bias.numpy()
    trained = np.concatenate([h, np.ones([len(h), 1])], axis=1) @ c.T
    expected = ((1 - weight) * trained + weight *
                zero_shot_baselines.cosine_scores(h, t) -
                margin * np.array([1., 0., 1., 0.]))
    self.assertAllClose(served, expected, atol=1e-3)
    # The GZSL metrics of the run read the same scores.
    values = zero_shot_fit.gzsl_values(config.trainer.model_dir,
                                       ("seen_top1",))
    seen = labels != 1
    self.assertAllClose(values["seen_top1"], float(
        (evaluated[seen].argmax(axis=1) == labels[seen]).mean()))


@pytest.mark.slow
class FitTest(tf.test.TestCase):
  """A pseudo run (anger the test's unseen class, joy pseudo-unseen): the
  fit reads joy's validation instances, never anger's, and the binaries
  print the constants and the GZSL metrics."""

  def test_fit_on_pseudo_unseen_classes(self):
    data_dir = test_text_pipelines.goemotions_fixture()
    root = tempfile.mkdtemp()
    # No export: the fit and the binaries score the checkpoints.
    config = test_class_encoders.run_config(
        "pseudo", root, data_dir, holdout_classes=("anger", "joy"),
        export=False)
    training.train(config)
    model_dir = config.trainer.model_dir
    run = zero_shot_fit.run_scores(model_dir, "validation")
    data = builders.load_data(config)
    self.assertAllEqual(run["labels"], data.splits["validation"][1])
    self.assertAllEqual(run["seen"], [False, False, True])
    self.assertAllClose(run["cosine"], zero_shot_baselines.cosine_scores(
        test_class_encoders.minilm_mean(list(data.splits["validation"][0]),
                                        12),
        test_class_encoders.minilm_mean(list(CLASSES), 12)), atol=1e-4)
    fitted = zero_shot_fit.fit([model_dir], ["anger"])
    keep = run["labels"] != 1  # anger's instances are never read.
    from rank4class_tf.ranking import gzsl  # pylint: disable=g-import-not-at-top
    self.assertEqual(fitted["stacking"], gzsl.choose(
        run["labels"][keep], run["scores"][keep], run["cosine"][keep],
        run["seen"], fit_weight=False))
    self.assertEqual(fitted["fusion"]["seen_margin"], 0.)
    with self.assertRaisesRegex(ValueError, "holds out every class of"):
      zero_shot_fit.fit([model_dir], ["neutral"])
    out = helpers.run_module(
        "pipelines.zero_shot_fit", f"--pseudo_runs={model_dir}",
        "--holdout_classes=anger", "--methods=stacking")
    margin = fitted["stacking"]["seen_margin"]
    self.assertIn(f"stacking: --seen_margin={margin:.6g} --cosine_fusion=0",
                  out.stdout)
    table = helpers.run_module(
        "pipelines.compare_runs", f"--runs={model_dir}",
        "--metrics=top1_accuracy,seen_top1,unseen_top5,gzsl_h,ausuc")
    test = zero_shot_fit.gzsl_values(model_dir, ("unseen_top5",))
    self.assertIn(f"{test['unseen_top5']:.4f} ± 0.0000", table.stdout)


if __name__ == "__main__":
  tf.test.main()
