"""End-to-end tests of the binaries: train, evaluate, bad flags.

Each runs the binary as a user does (`python -m pipelines.<name>`) in a
subprocess on digits for a few steps.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf.data import datasets
from rank4class_tf.data import features as features_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.serving import saved_model
from rank4class_tf.ranking import calibration
from rank4class_tf.training import builders
from rank4class_tf.training import pipeline
import helpers

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

REPO = helpers.REPO



run = helpers.run_module


def scalar_tags(event_dir):
  tags = set()
  for path in glob.glob(os.path.join(event_dir, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags.update(v.tag for v in event.summary.value)
  return tags


class StepsPerExecutionTest(tf.test.TestCase):

  def test_one_step_per_call_but_on_a_tpu_and_from_a_feature_cache(self):
    from rank4class_tf import config as config_lib  # pylint: disable=g-import-not-at-top
    trainer = lambda **kw: config_lib.TrainConfig.create(
        dataset="digits", model_dir="unused", **kw).trainer
    self.assertEqual(builders.steps_per_execution(trainer()), 1)
    self.assertEqual(builders.steps_per_execution(
        trainer(strategy="mirrored", eval_every=50)), 1)
    self.assertEqual(builders.steps_per_execution(
        trainer(strategy="tpu", eval_every=50)), 10)
    self.assertEqual(builders.steps_per_execution(
        trainer(strategy="tpu", eval_every=4)), 4)
    # From a feature cache: the largest divisor of eval_every up to 50.
    for eval_every, steps in ((500, 50), (1000, 50), (60, 30), (7, 7),
                              (53, 1)):
      self.assertEqual(builders.steps_per_execution(
          trainer(eval_every=eval_every), cached=True), steps)
    # What the pipeline compiles the model with.
    config = config_lib.TrainConfig.create(
        dataset="digits", model_dir="unused", eval_every=50)
    pipeline = builders.build_pipeline(config, datasets.get("digits"))
    self.assertEqual(pipeline._hparams.steps_per_execution, 1)  # pylint: disable=protected-access


class TrainEvaluateTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), "digits_approx_ndcg")
    # The module docstring's command with fewer steps.
    # --verbosity=0: absl's INFO logging back on the console.
    cls.train = run("pipelines.train", "--dataset=digits",
                    "--loss=approx_ndcg", "--interaction=lc_mlp",
                    "--train_steps=60", "--eval_every=20", "--mlp_units=16",
                    f"--model_dir={cls.model_dir}", "--verbosity=0")

  def test_verbosity_restores_tensorflow_info_lines(self):
    self.assertIn("Assets written to", self.train.stderr)
    self.assertIn("Epoch 3/3", self.train.stdout)

  def test_model_dir_holds_everything(self):
    d = self.model_dir
    config = exported_ranker.load_config(d)
    self.assertEqual((config.loss.name, config.model.interaction,
                      config.trainer.train_steps),
                     ("approx_ndcg", "lc_mlp", 60))
    self.assertEqual(tf.train.latest_checkpoint(
        os.path.join(d, "checkpoints")), os.path.join(d, "checkpoints",
                                                      "ckpt-0003"))
    self.assertIsNotNone(tf.train.latest_checkpoint(
        os.path.join(d, "best_checkpoint")))
    for export in ("best_model_by_metric", "latest_model"):
      self.assertTrue(os.path.exists(
          os.path.join(d, "export", export, "saved_model.pb")))
    self.assertEqual(glob.glob(os.path.join(d, "export", ".tmp-*")), [])
    want = {"epoch_loss", "epoch_top1_accuracy", "epoch_top5_accuracy",
            "epoch_ndcg_5", "epoch_mrr"}
    for split in ("train", "validation"):
      self.assertContainsSubset(want, scalar_tags(os.path.join(d, split)))

  def test_saved_model_in_fresh_process_equals_model(self):
    data = datasets.get("digits")
    images = data.splits["test"][0][:32]
    out = os.path.join(tempfile.mkdtemp(), "serve.npz")
    np.save(out + ".images.npy", images)
    export = os.path.join(self.model_dir, "export", "best_model_by_metric")
    script = textwrap.dedent(f"""
        import numpy as np, tensorflow as tf
        serve = tf.saved_model.load({export!r}).signatures["serving_default"]
        out = serve(image=tf.constant(np.load({out + '.images.npy'!r})))
        np.savez({out!r}, **{{k: v.numpy() for k, v in out.items()}})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300,
                   capture_output=True)
    served = np.load(out, allow_pickle=True)  # top_k_names are bytes objects.

    # The model: rebuilt from the run's config, best checkpoint restored.
    config = exported_ranker.load_config(self.model_dir)
    model = builders.build_pipeline(config, data).model_builder.build()
    model.load_weights(tf.train.latest_checkpoint(
        os.path.join(self.model_dir, "best_checkpoint"))).expect_partial()
    features = features_lib.class_list_features({"image": tf.constant(images)}, 10)
    scores = model(features, training=False).numpy()

    self.assertAllClose(served["scores"], scores, rtol=1e-5, atol=1e-5)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    self.assertAllEqual(served["top_k_ids"], order)
    self.assertAllEqual(served["top_k_names"],
                        np.array(data.class_names)[order].astype(bytes))
    self.assertAllClose(served["top_k_scores"],
                        np.take_along_axis(scores, order, axis=1))

  def test_export_holds_signatures_not_layer_traces(self):
    export = os.path.join(self.model_dir, "export", "best_model_by_metric")
    loaded = tf.saved_model.load(export)
    self.assertCountEqual(loaded.signatures.keys(),
                          [saved_model.SERVING_KEY, saved_model.CLASS_NAMES_KEY])
    # Saved without Keras' layer traces (saved_model.export_saved_model): the
    # loaded object has no call function of its own, only the signatures
    # (the model itself: its config and checkpoint, as in the test above).
    self.assertFalse(callable(loaded))
    self.assertFalse(hasattr(loaded, "keras_api"))

  def test_serving_rejects_hostile_images(self):
    export = os.path.join(self.model_dir, "export", "best_model_by_metric")
    serve = tf.saved_model.load(export).signatures["serving_default"]
    images = np.zeros([2, 8, 8, 1], np.float32)
    images[1, 3, 3, 0] = np.nan
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                "image: NaN or Inf values in the instance"):
      serve(image=tf.constant(images))
    images[1, 3, 3, 0] = np.inf
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "NaN or Inf"):
      serve(image=tf.constant(images))
    errors = (TypeError, ValueError, tf.errors.InvalidArgumentError)
    with self.assertRaises(errors):  # Wrong shape.
      serve(image=tf.zeros([2, 16, 16, 1]))
    with self.assertRaises(errors):  # Wrong rank.
      serve(image=tf.zeros([2, 8, 8]))
    with self.assertRaises(errors):  # Wrong dtype.
      serve(image=tf.zeros([2, 8, 8, 1], tf.int32))

  def calibration_record(self, export="best_model_by_metric"):
    with open(os.path.join(self.model_dir, "export", export,
                           "calibration.json")) as f:
      return json.load(f)

  def test_export_is_calibrated_on_validation(self):
    record = self.calibration_record()
    self.assertEqual((record["split"], record["num_examples"]),
                     ("validation", 270))
    self.assertEqual(record["calibration"]["kind"], "temperature")
    got = record["metrics"]
    # ApproxNDCG's scores are not logits: the temperature repairs them.
    self.assertLess(got["calibrated_ece"], got["ece"])
    self.assertLess(got["calibrated_nll"], got["nll"])

  def test_probabilities_are_the_calibrated_softmax(self):
    ranker = exported_ranker.ExportedRanker(self.model_dir)
    self.assertTrue(ranker.has_probabilities)
    images = datasets.get("digits").splits["test"][0][:16]
    out = ranker.outputs(images)
    t = self.calibration_record()["calibration"]["temperature"]
    self.assertAllClose(out["probabilities"].sum(axis=1), np.ones(16),
                        atol=1e-5)
    self.assertAllClose(out["probabilities"],
                        calibration.softmax(out["scores"] / t), atol=1e-5)
    ranked = ranker.rank(images[:1], top_k=3, probabilities=True)[0]
    self.assertAllClose([p for _, _, p in ranked],
                        np.sort(out["probabilities"][0])[::-1][:3],
                        atol=1e-6)

  def test_calibrate_binary_on_a_copy(self):
    copy = os.path.join(tempfile.mkdtemp(), "run")
    shutil.copytree(self.model_dir, copy)
    before = self.calibration_record()
    out = run("pipelines.calibrate", f"--model_dir={copy}")
    records = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertEqual(set(records), {"best_model_by_metric", "latest_model"})
    self.assertAllClose(  # The same weights: the same fit.
        records["best_model_by_metric"]["calibration"]["temperature"],
        before["calibration"]["temperature"], rtol=1e-4)
    with open(os.path.join(copy, "reliability.png"), "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
    empty = tempfile.mkdtemp()
    bad = run("pipelines.calibrate", f"--model_dir={empty}", check=False)
    self.assertEqual(bad.returncode, 1)
    self.assertLen(bad.stderr.strip().splitlines(), 1)
    self.assertEqual(os.listdir(empty), [])
    both = run("pipelines.calibrate", check=False)
    self.assertEqual(both.stderr.strip(),
                     "calibrate: set one of --model_dir and --study_dir.")
    alone = run("pipelines.calibrate", f"--model_dir={empty}", "--recompute",
                check=False)
    self.assertEqual(alone.returncode, 1)
    self.assertEqual(alone.stderr.strip(),
                     "calibrate: --recompute is read with --study_dir only "
                     "(--model_dir always fits the calibration again).")
    self.assertEqual(os.listdir(empty), [])

  def test_evaluate_prints_one_json_line(self):
    proc = run("pipelines.evaluate", f"--model_dir={self.model_dir}",
               "--split=test")
    lines = proc.stdout.strip().splitlines()
    self.assertLen(lines, 1)
    results = json.loads(lines[0])
    self.assertEqual(set(results), {"top1_accuracy", "top5_accuracy",
                                    "ndcg@5", "mrr", "num_examples", "split",
                                    "export", "nll", "ece", "brier",
                                    "calibrated_nll", "calibrated_ece",
                                    "calibrated_brier"})
    self.assertEqual(results["num_examples"], 270)
    # The library function gives the same numbers.
    lib = helpers.evaluate(self.model_dir, "test")
    self.assertAllClose(results["top1_accuracy"], lib["top1_accuracy"])
    self.assertGreater(results["top5_accuracy"], results["top1_accuracy"])

  def test_evaluate_bad_inputs(self):
    proc = run("pipelines.evaluate", "--model_dir=/nonexistent/run",
               check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip(), "evaluate: /nonexistent/run/"
                     "config.json not found: --model_dir is not a trained run.")
    proc = run("pipelines.evaluate", f"--model_dir={self.model_dir}",
               "--split=dev", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertIn("--split='dev' is not valid", proc.stderr)


class BuildOptimizerTest(tf.test.TestCase):
  """`pipeline.build_optimizer`: the training step traced once, not twice,
  and the same training."""

  def fit(self, build_first):
    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input([4])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(inputs))
    # The optimizer as the pipeline makes it (a legacy Adam on Keras 2).
    model.compile(optimizer=tf.keras.optimizers.get(
        {"class_name": "adam", "config": {"learning_rate": 0.1}}),
                  loss="mse", steps_per_execution=2)
    if build_first:
      pipeline.build_optimizer(model)
      slots = [v for v in model.optimizer.variables()
               if v.shape == model.weights[0].shape]
      self.assertLen(slots, 2)  # Adam's m and v of the kernel, zeros.
      self.assertAllEqual(slots[0], np.zeros([4, 3]))
    x = np.arange(32, dtype=np.float32).reshape(8, 4) / 32
    y = np.stack([x.sum(1), x[:, 0], -x[:, 3]], axis=1)
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, shuffle=False)
    return (model.train_function.experimental_get_tracing_count(),
            model.get_weights())

  def test_traced_once_same_weights(self):
    traces, weights = self.fit(build_first=True)
    keras_traces, keras_weights = self.fit(build_first=False)
    self.assertEqual((traces, keras_traces), (1, 2))
    for a, b in zip(weights, keras_weights):
      self.assertAllEqual(a, b)


class BadFlagsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      ("--loss=hinge", "train: --loss='hinge' is not valid; choose one of: "
       "softmax, pairwise_logistic, approx_ndcg, gumbel_approx_ndcg, mse, "
       "sigmoid_cross_entropy, rescaled_mse, two_way, two_way_margin, "
       "sodeep_spearman"),
      ("--interaction=bilinear", "train: --interaction='bilinear' is not "
       "valid; choose one of: dot, lc_mlp, concat_mlp, cosine, "
       "label_attention."),
      ("--dataset=mnist", "train: --dataset='mnist' is not valid; choose one "
       "of: digits, goemotions"),
      ("--batch_size=0", "train: --batch_size=0 must be > 0."),
      ("--train_steps=-1", "train: --train_steps=-1 must be > 0."),
      ("--mlp_units=0", "train: --mlp_units=0 must be > 0."),
  )
  def test_one_line_and_nothing_written(self, flag, message):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    proc = run("pipelines.train", flag, f"--model_dir={model_dir}",
               check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertLen(proc.stderr.strip().splitlines(), 1)
    self.assertStartsWith(proc.stderr.strip(), message)
    self.assertFalse(os.path.exists(model_dir))


class SoDeepLossTest(tf.test.TestCase):

  def test_train_with_sodeep_spearman_on_the_shipped_sorter(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "sodeep")
    run("pipelines.train", "--dataset=digits", "--loss=sodeep_spearman",
        "--sorter=lstm", "--parallel_loss=mse", "--parallel_weight=0.1",
        "--train_steps=4", "--eval_every=2", f"--model_dir={model_dir}")
    config = exported_ranker.load_config(model_dir)
    self.assertEqual((config.loss.name, config.loss.sorter,
                      config.loss.parallel_loss),
                     ("sodeep_spearman", "lstm", "mse"))
    results = helpers.evaluate(model_dir)
    self.assertBetween(results["top1_accuracy"], 0., 1.)

  def test_missing_sorter_for_the_class_count(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "sodeep")
    proc = run("pipelines.train", "--dataset=digits", "--loss=sodeep_map",
               "--sorter=cnn", f"--model_dir={model_dir}", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip(), "train: No trained 'cnn' sorter for "
                     "d=10; shipped: cnn_d100, cnn_reference_d100, lstm_d10, "
                     "lstm_d100, lstm_d28, "
                     "pairwise_d10, pairwise_d100, pairwise_d28. Train one "
                     "with pipelines/train_sorter.py.")
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()
