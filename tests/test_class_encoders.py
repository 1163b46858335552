"""Tests of rank4class_tf.modeling.class_encoders: classes encoded from their texts.

The class table of a shared tower is checked against all-MiniLM-L6-v2 run
directly and the projection applied here; zero-shot training against the
batches it reads; the export's `rank_classes` signature against
`serving_default`; and bad class files, names and lists against their
one-line errors.
"""

import functools
import os
import re
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf.data import classes as classes_lib
from rank4class_tf.data import datasets
from rank4class_tf.data import features as features_lib
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import model as model_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.serving import saved_model
from rank4class_tf.training import builders
from rank4class_tf.training import trainer as training
import helpers
import test_feature_cache
import test_text_pipelines

CLASSES = test_text_pipelines.CLASSES  # joy, anger, neutral


def write(lines):
  path = os.path.join(tempfile.mkdtemp(), "classes.tsv")
  with open(path, "wb") as f:
    f.write(b"\n".join(line.encode("utf-8") if isinstance(line, str) else line
                       for line in lines) + b"\n")
  return path


class ClassTextsTest(tf.test.TestCase):

  def test_description_file_in_any_order(self):
    path = write(["neutral", "anger\tstrong displeasure", "joy\tgreat pleasure"])
    self.assertEqual(classes_lib.read_class_texts(path, CLASSES),
                     ["joy: great pleasure", "anger: strong displeasure",
                      "neutral"])
    self.assertEqual(classes_lib.class_texts(["sci_fi", "joy"]),
                     ["sci fi", "joy"])

  def test_bad_description_files_name_file_and_line(self):
    cases = [
        (["joy", "anger"], r"classes.tsv: 2 lines for 3 classes \(no line "
         r"for neutral\)"),
        (["joy", "anger", "neutral", "joy"], r"classes.tsv:4: class 'joy' "
         "is described twice"),
        (["joy", "\tno name", "neutral"], r"classes.tsv:2: empty class text"),
        (["joy", "fear", "neutral"], r"classes.tsv:2: 'fear' is not a class"),
        (["joy", b"anger\t\xff", "neutral"], r"classes.tsv:2: not valid "
         "UTF-8"),
        (["joy", "anger\ta\tb", "neutral"], r"classes.tsv:2: expected "
         "name<TAB>description"),
    ]
    for lines, message in cases:
      with self.assertRaisesRegex(ValueError, message):
        classes_lib.read_class_texts(write(lines), CLASSES)
    with self.assertRaisesRegex(ValueError, "`class_descriptions`=/nope: "
                                "file not found"):
      classes_lib.read_class_texts("/nope", CLASSES)

  def test_holdout_ids_and_masks(self):
    self.assertEqual(classes_lib.holdout_ids(["neutral", "joy"], CLASSES),
                     (0, 2))
    for names, message in ((["fear"], "'fear' is not a class"),
                           (["joy", "joy"], "'joy' is listed twice"),
                           (list(CLASSES), "holds out every class")):
      with self.assertRaisesRegex(ValueError, message):
        classes_lib.holdout_ids(names, CLASSES)
    self.assertAllEqual(
        classes_lib.holdout_mask(np.array([0, 1, 2, 1]), (1,)),
        [False, True, False, True])
    multi_hot = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], np.float32)
    self.assertAllEqual(classes_lib.holdout_mask(multi_hot, (1, 2)),
                        [False, True, True])

  def test_without_classes_filters_train_and_validation_only(self):
    data = datasets.get("goemotions", test_text_pipelines.goemotions_fixture())
    held = classes_lib.without_classes(data, (1,))
    for split in ("train", "validation"):
      labels = held.splits[split][1]
      self.assertNotIn(1, labels)
      self.assertLen(labels, int((data.splits[split][1] != 1).sum()))
      kept = data.splits[split][1] != 1
      self.assertAllEqual(held.splits[split][0], data.splits[split][0][kept])
    self.assertAllEqual(held.splits["test"][1], data.splits["test"][1])
    self.assertEqual(held.class_names, data.class_names)
    # Cached token features (label_attention from the feature cache):
    # instances are a dict of arrays, each filtered.
    splits = dict(data.splits)
    for split in ("train", "validation"):
      labels = data.splits[split][1]
      rows = np.arange(len(labels))
      splits[split] = ({"tokens": rows[:, None] * np.ones([1, 3]),
                        "mask": rows}, labels)
    tokens = type(data)(**dict(vars(data), splits=splits))
    held = classes_lib.without_classes(tokens, (1,))
    for split in ("train", "validation"):
      kept = np.flatnonzero(data.splits[split][1] != 1)
      self.assertAllEqual(held.splits[split][0]["mask"], kept)
      self.assertAllEqual(held.splits[split][0]["tokens"][:, 2], kept)


def minilm_mean(texts, seq_length):
  """all-MiniLM-L6-v2's mean-pooled h, computed here (numpy masked mean)."""
  tokens, mask = test_feature_cache.minilm_sequence_output(texts, seq_length)
  return (tokens * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)


def text_model(interaction="dot", class_tower="shared", **kwargs):
  config = config_lib.TrainConfig.create(
      dataset="goemotions", encoder="bert", init_checkpoint="minilm",
      interaction=interaction, mlp_units=8, label_dim=8, label_heads=2,
      max_seq_length=12, class_encoder="text", class_tower=class_tower,
      model_dir="unused", **kwargs)
  data = datasets.get("goemotions", test_text_pipelines.goemotions_fixture())
  inputs = builders.build_inputs(config, data)
  builder = model_lib.build_model_builder(
      data, config.model, instance_inputs=inputs, class_texts=list(CLASSES))
  return builder.build(), inputs


def find(model, kind):
  (layer,) = [l for l in model.submodules if isinstance(l, kind)]
  return layer


@pytest.mark.slow
class TowerTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model, cls.inputs = text_model()
    # Read, never changed, by the two tests of a separate class tower.
    cls.separate, _ = text_model(class_tower="separate")

  def test_shared_tower_class_is_minilm_of_its_name_projected(self):
    encoder = find(self.model, class_encoders.TextClassEncoder)
    self.assertIs(encoder.tower, self.model.get_layer("encoder"))
    h = minilm_mean(list(CLASSES), 12)
    kernel, bias = encoder.projection.kernel.numpy(), encoder.projection.bias
    self.assertAllClose(encoder.table(training=False), h @ kernel + bias,
                        atol=1e-4)
    self.assertEqual(kernel.shape, (384, 385))  # h' = [h, 1] for dot.

  def test_model_scores_are_dot_of_h_and_class_table(self):
    texts = ["I love this so much", "the bus comes at nine"]
    scores = self.model(features_lib.class_list_features(
        self.inputs(tf.constant(texts)), 3), training=False).numpy()
    encoder = find(self.model, class_encoders.TextClassEncoder)
    h = minilm_mean(texts, 12)
    table = minilm_mean(list(CLASSES), 12) @ encoder.projection.kernel.numpy(
        ) + encoder.projection.bias.numpy()
    expected = np.concatenate([h, np.ones([2, 1])], axis=1) @ table.T
    self.assertAllClose(scores, expected, atol=1e-3)

  def test_class_texts_are_encoded_once_per_step_not_per_instance(self):
    encoder = find(self.model, class_encoders.TextClassEncoder)
    tower = encoder.tower
    calls = []
    original = tower.pooled_features

    def spy(inputs, training=None):
      calls.append(int(inputs["input_word_ids"].shape[0]))
      return original(inputs, training=training)

    tower.pooled_features = spy
    try:
      batch = features_lib.class_list_features(
          self.inputs(tf.constant(["a", "b", "c", "d", "e"])), 3)
      self.model(batch, training=True)
    finally:
      del tower.pooled_features
    # One tower pass on the 3 class texts, one on the 5 instances.
    self.assertEqual(sorted(calls), [3, 5])

  def test_separate_tower_starts_from_the_same_checkpoint(self):
    model = self.separate
    encoder = find(model, class_encoders.TextClassEncoder)
    instance = model.get_layer("encoder")
    self.assertIsNot(encoder.tower, instance)
    self.assertEqual(encoder.tower.name, "class_tower")
    ids = {id(w) for w in instance.weights}
    self.assertFalse(any(id(w) in ids for w in encoder.tower.weights))
    for a, b in zip(encoder.tower.network.weights, instance.network.weights):
      self.assertAllEqual(a, b)

  def test_serialization_round_trip(self):
    model = self.separate
    encoder = find(model, class_encoders.TextClassEncoder)
    clone = class_encoders.TextClassEncoder.from_config(encoder.get_config())
    clone.build(None)
    clone.set_weights(encoder.get_weights())
    self.assertEqual(clone.get_config(), encoder.get_config())
    self.assertAllClose(clone.table(training=False),
                        encoder.table(training=False), atol=1e-5)
    head = find(model, model_lib.ClassRankingHead)
    config = tf.keras.layers.serialize(head)
    revived = tf.keras.layers.deserialize(config)
    self.assertIsInstance(revived.class_encoder,
                          class_encoders.TextClassEncoder)
    self.assertEqual(revived.get_config(), head.get_config())

  def test_every_interaction_scores_a_class_table(self):
    texts = tf.constant(["so happy for you", "stop doing that"])
    for interaction in ("lc_mlp", "concat_mlp", "label_attention"):
      model, inputs = text_model(interaction)
      scores = model(features_lib.class_list_features(inputs(texts), 3),
                     training=False)
      self.assertEqual(scores.shape, (2, 3))
      self.assertTrue(np.isfinite(scores.numpy()).all())

  def test_stored_features_serve_the_same_scores(self):
    model, inputs = text_model("lc_mlp")
    batch = features_lib.class_list_features(
        inputs(tf.constant(["so happy for you"])), 3)
    before = model(batch, training=False).numpy()
    encoder = find(model, class_encoders.TextClassEncoder)
    self.assertFalse(encoder.stored)
    saved_model.store_class_features(model)
    self.assertTrue(encoder.stored)
    self.assertAllClose(encoder.class_features, minilm_mean(list(CLASSES), 12),
                        atol=1e-4)
    self.assertAllClose(model(batch, training=False), before, atol=1e-4)


@functools.lru_cache(maxsize=1)
def shared_cache_dir():
  """One feature cache folder per process for the runs of `run_config`:
  runs of one frozen encoder on the same data read one cache (its key is
  their content; test_feature_cache tests the cache), built by the first."""
  return helpers.process_tempdir()


def run_config(name, root, data_dir, **kwargs):
  values = dict(interaction="dot", class_encoder="text",
                model_dir=os.path.join(root, name),
                feature_cache_dir=shared_cache_dir())
  values.update(kwargs)
  return test_feature_cache.run_config(values.pop("model_dir"), data_dir,
                                       **values)


@pytest.mark.slow
class ZeroShotTrainingTest(tf.test.TestCase):
  """A frozen run from the cache with `anger` held out, and its export."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = test_text_pipelines.goemotions_fixture()
    cls.root = tempfile.mkdtemp()
    cls.config = run_config("zero_shot", cls.root, cls.data_dir,
                            holdout_classes=("anger",))
    cls.data = builders.load_data(cls.config)
    training.train(cls.config)
    cls.ranker = exported_ranker.ExportedRanker(cls.config.trainer.model_dir)
    # The export, loaded once for the two tests that call its class-list
    # signature directly.
    cls.export = tf.saved_model.load(os.path.join(
        cls.config.trainer.model_dir, "export", run_dir_lib.BEST_EXPORT))
    # The best checkpoint's validation and test scores, read by two tests.
    cls.scored = training.checkpoint_scores(cls.config, cls.data)

  def test_held_out_class_is_never_in_a_training_or_validation_batch(self):
    pipeline = builders.build_pipeline(self.config, self.data)
    # pylint: disable=protected-access
    builder = pipeline.dataset_builder
    train_labels = np.concatenate([
        labels.numpy() for _, labels in
        builder.build_train_dataset().take(20)])
    # anger is padding (-1) in every list: neither a label nor a negative.
    self.assertAllEqual(train_labels[:, 1], -np.ones(len(train_labels)))
    self.assertAllEqual(train_labels[:, [0, 2]].sum(axis=1),
                        np.ones(len(train_labels)))
    valid_labels = np.concatenate([
        labels.numpy() for _, labels in builder.build_valid_dataset()])
    self.assertAllEqual(valid_labels[:, 1], -np.ones(len(valid_labels)))
    self.assertLen(valid_labels,
                   int((self.data.splits["validation"][1] != 1).sum()))
    # Validation scores (best checkpoint) are of the seen instances only.
    self.assertNotIn(1, self.scored["validation"][0])
    self.assertIn(1, self.scored["test"][0])

  def test_class_list_signature_equals_serving_default(self):
    texts = ["I hate waiting", "what a wonderful day"]
    served = self.ranker.scores(texts)
    listed = self.ranker.rank_class_list(texts, list(CLASSES), top_k=3)
    for row, ranking in zip(served, listed):
      self.assertAllClose(dict(ranking),
                          dict(zip(CLASSES, row.tolist())), atol=1e-4)

  def test_new_class_list_is_ranked(self):
    texts = ["I hate waiting"]
    signature = self.export.signatures[saved_model.CLASS_LIST_KEY]
    out = signature(text=tf.constant(texts), class_texts=tf.constant(
        ["neutral", "surprise", "joy", "fury"]))
    served = self.ranker.scores(texts)[0]
    scores = out["scores"].numpy()[0]
    self.assertAllClose(scores[[0, 2]], served[[2, 0]], atol=1e-4)
    self.assertEqual(out["top_k_texts"].shape, (1, 4))
    order = np.argsort(-scores, kind="stable")
    self.assertAllEqual(out["top_k_indices"].numpy()[0], order)
    self.assertAllEqual(out["top_k_texts"].numpy()[0].astype(str),
                        np.array(["neutral", "surprise", "joy",
                                  "fury"])[order])

  def test_bad_class_lists(self):
    signature = self.export.signatures[saved_model.CLASS_LIST_KEY]
    for texts, message in (([], "the class list is empty"),
                           (["joy", "  "], "an empty class text"),
                           (["x"] * (class_encoders.MAX_SERVED_CLASSES + 1),
                            "more than 4096 classes")):
      with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
        signature(text=tf.constant(["hi"]),
                  class_texts=tf.constant(texts, tf.string))
      with self.assertRaises(ValueError):
        self.ranker.rank_class_list(["hi"], texts)

  def test_predict_binary_ranks_given_classes(self):
    out = helpers.run_module(
        "pipelines.predict", f"--model_dir={self.config.trainer.model_dir}",
        "--text=I hate waiting", "--classes=joy,fury,neutral", "--top_k=3")
    names = [line.split("\t")[0] for line in out.stdout.splitlines()]
    self.assertCountEqual(names, ["joy", "fury", "neutral"])
    failed = helpers.run_module(
        "pipelines.predict", f"--model_dir={self.config.trainer.model_dir}",
        "--text=hi", "--classes=joy,,neutral", check=False)
    self.assertNotEqual(failed.returncode, 0)
    self.assertEqual(failed.stderr.strip().splitlines()[-1],
                     "predict: --classes: class 2 is an empty text.")

  def test_compare_runs_scores_held_out_instances(self):
    out = helpers.run_module(
        "pipelines.compare_runs", f"--runs={self.config.trainer.model_dir}",
        "--metrics=top1_accuracy", "--instances=holdout")
    labels, scores = self.scored["test"]
    anger = labels == 1
    top1 = float((scores[anger].argmax(axis=1) == 1).mean())
    self.assertIn(f"| all runs | 42 | {top1:.4f} ± 0.0000 |", out.stdout)
    seen = helpers.run_module(
        "pipelines.compare_runs", f"--runs={self.config.trainer.model_dir}",
        "--metrics=top1_accuracy", "--instances=seen")
    top1 = float((scores[~anger].argmax(axis=1) == labels[~anger]).mean())
    self.assertIn(f"| all runs | 42 | {top1:.4f} ± 0.0000 |", seen.stdout)


@pytest.mark.slow
class CachedAndOnTheFlyTest(tf.test.TestCase):
  """A text class encoder trained from the cache serves what it trained."""

  def test_label_attention_from_the_cache_exports_a_class_list_signature(self):
    data_dir = test_text_pipelines.goemotions_fixture()
    root = tempfile.mkdtemp()
    config = run_config("label_attention", root, data_dir,
                        interaction="label_attention", label_dim=8,
                        label_heads=2)
    training.train(config)
    data = builders.load_data(config)
    ranker = exported_ranker.ExportedRanker(config.trainer.model_dir)
    labels, served = exported_ranker.split_scores(ranker, data, "test")
    scored = training.checkpoint_scores(config, data, ("test",))["test"]
    self.assertAllEqual(scored[0], labels)
    self.assertAllClose(scored[1], served, atol=1e-4)
    texts = list(data.splits["test"][0][:3])
    listed = ranker.rank_class_list(texts, list(CLASSES), top_k=3)
    for row, ranking in zip(ranker.scores(texts), listed):
      self.assertAllClose(dict(ranking), dict(zip(CLASSES, row.tolist())),
                          atol=1e-4)


@pytest.mark.slow
class MirroredTest(tf.test.TestCase):
  """A text class encoder (shared tower, trained) under MirroredStrategy on
  two CPU devices, through the binary. The tiny BERT, random weights: the
  strategy is the subject here (MiniLM's towers: the tests above)."""

  def test_trains_and_exports_both_signatures(self):
    data_dir = test_text_pipelines.goemotions_fixture()
    model_dir = os.path.join(tempfile.mkdtemp(), "mirrored")
    helpers.run_module(
        "pipelines.train", "--dataset=goemotions", f"--data_dir={data_dir}",
        "--encoder=bert", "--encoder_size=tiny", "--class_encoder=text",
        "--interaction=lc_mlp", "--mlp_units=8", "--max_seq_length=12",
        "--batch_size=4", "--train_steps=2", "--eval_every=2",
        "--learning_rate=1e-4", "--strategy=mirrored", "--cpu_devices=2",
        f"--model_dir={model_dir}")
    ranker = exported_ranker.ExportedRanker(model_dir)
    texts = ["so happy for you", "the file is attached"]
    listed = ranker.rank_class_list(texts, list(CLASSES), top_k=3)
    for row, ranking in zip(ranker.scores(texts), listed):
      self.assertAllClose(dict(ranking), dict(zip(CLASSES, row.tolist())),
                          atol=1e-4)


class BadInputTest(tf.test.TestCase):
  """Bad class settings stop a run in one line, writing nothing."""

  def test_bad_flags_and_files(self):
    data_dir = test_text_pipelines.goemotions_fixture()
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    common = dict(dataset="goemotions", data_dir=data_dir, encoder="bert",
                  init_checkpoint="minilm", max_seq_length=12,
                  train_steps=2, eval_every=1, batch_size=4,
                  model_dir=model_dir)
    bad_file = write(["joy", "anger", "anger"])
    cases = [
        (dict(class_encoder="text", class_descriptions=bad_file),
         f"{bad_file}:3: class 'anger' is described twice."),
        (dict(class_encoder="label"),
         "`class_encoder`='label' is not valid; choose one of: "
         "embedding, text."),
        (dict(class_tower="separate"),
         "`class_tower`='separate' is read with `class_encoder`=text only."),
        (dict(class_encoder="text", encoder="mlp", dataset="digits",
              init_checkpoint=""),
         "`class_encoder`=text encodes class texts with a text encoder "
         "(bert, electra), not `encoder`='mlp'."),
    ]
    for settings, message in cases:
      config = config_lib.TrainConfig.create(**dict(common, **settings))
      with self.assertRaisesRegex(ValueError, "^" + re.escape(message) + "$"):
        training.train(config)
      self.assertFalse(os.path.exists(model_dir))
    # The binary: status 1, the same one line, nothing written.
    out = helpers.run_module(
        "pipelines.train", *(f"--{k}={v}" for k, v in common.items()),
        "--class_encoder=text", "--holdout_classes=fear", check=False)
    self.assertNotEqual(out.returncode, 0)
    self.assertEqual(out.stderr.strip().splitlines()[-1],
                     "train: --holdout_classes: 'fear' is not a class of the "
                     "dataset; classes: joy, anger, neutral.")
    self.assertFalse(os.path.exists(model_dir))
