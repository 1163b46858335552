"""Tests of rank4class_tf.training.feature_cache and frozen-encoder training.

The cache is checked against the frozen encoder run directly, its key
against every input it depends on, and a run trained from it against the
same run with the frozen encoder run at every step (same weights), on a
GoEmotions-format fixture with all-MiniLM-L6-v2.
"""

import functools
import json
import os
import shutil
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.data import text
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import pretrained
from rank4class_tf.modeling import stateless_dropout
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training
import helpers
import test_text_pipelines


def spec(**kwargs):
  values = dict(encoder="bert", encoder_size="minilm_l6",
                init_checkpoint="minilm",
                vocab_file=pretrained.minilm_files()[1], pooling="mean",
                max_seq_length=12, sequence=False)
  values.update(kwargs)
  return feature_cache.CacheSpec(**values)


@functools.lru_cache(maxsize=1)
def minilm_network():
  """all-MiniLM-L6-v2 as the Model Garden encoder with the loader's
  weights, built once per process: the tests only call it."""
  network = pretrained.build_bert_encoder(**pretrained.MINILM_L6)
  pretrained.load_minilm(network)
  return network


def minilm_sequence_output(texts, seq_length):
  """all-MiniLM-L6-v2's last-layer token vectors and mask, computed here
  with the Model Garden encoder and the loader directly."""
  network = minilm_network()
  packed = text.TextPreprocessor(pretrained.minilm_files()[1],
                                 seq_length)(tf.constant(texts))
  return (network(packed, training=False)["sequence_output"].numpy(),
          packed[text.MASK].numpy())


@pytest.mark.slow  # Builds caches with the real MiniLM.
class CacheTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = test_text_pipelines.goemotions_fixture()
    cls.data = datasets.get("goemotions", cls.data_dir)
    cls.caches = {}

  def setUp(self):
    super().setUp()
    self.cache_dir = tempfile.mkdtemp()

  def built(self, sequence=False, length_bucketing=True):
    """The cache of `spec(sequence=sequence)`, built with that padding in a
    folder of its own once per class, for the tests that read it (a test
    that writes into a cache folder or counts its builds makes its own)."""
    key = (sequence, length_bucketing)
    if key not in self.caches:
      self.caches[key] = feature_cache.load(
          tempfile.mkdtemp(), spec(sequence=sequence), self.data,
          length_bucketing=length_bucketing)
    return self.caches[key]

  def test_values_are_the_frozen_encoders_mean_pooled_h(self):
    cache = self.built()
    texts = self.data.splits["test"][0][:3].tolist()
    tokens, mask = minilm_sequence_output(texts, 12)
    # Masked mean over the tokens, [CLS] and [SEP] included.
    expected = ((tokens * mask[..., None]).sum(1) /
                mask.sum(1, keepdims=True))
    cached, labels = cache.data.splits["test"]
    self.assertAllClose(cached[:3], expected, atol=1e-5)
    self.assertAllEqual(labels, self.data.splits["test"][1])
    self.assertEqual(cache.data.instance_shape, (384,))
    self.assertEqual(cache.data.class_names, self.data.class_names)

  def test_token_features_for_label_attention(self):
    cache = self.built(sequence=True)
    texts = self.data.splits["train"][0][:2].tolist()
    tokens, mask = minilm_sequence_output(texts, 12)
    cached = cache.data.splits["train"][0]
    # The encoder's token vectors, zero on padding.
    self.assertAllClose(cached["features"][:2], tokens * mask[..., None],
                        atol=1e-5)
    self.assertAllEqual(cached["mask"][:2], mask)
    self.assertEqual(cache.data.instance_shape, (12, 384))

  def test_same_values_whichever_padding_builds_it(self):
    for sequence in (False, True):
      built = [self.built(sequence, bucketing) for bucketing in (False, True)]
      for split in ("train", "test"):
        padded, bucketed = (cache.data.splits[split] for cache in built)
        self.assertAllEqual(padded[1], bucketed[1])
        if sequence:
          self.assertAllEqual(padded[0]["mask"], bucketed[0]["mask"])
          self.assertAllClose(padded[0]["features"], bucketed[0]["features"],
                              atol=1e-5)
        else:
          self.assertAllClose(padded[0], bucketed[0], atol=1e-5)
      if sequence:
        # The fixture's texts are shorter than 12 tokens: bucketing encoded
        # them at fewer columns and padded the token features back.
        self.assertLess(built[1].data.splits["train"][0]["mask"].sum(1).max(),
                        12)

  def test_reused_without_rebuilding(self):
    lines = []
    first = feature_cache.load(self.cache_dir, spec(), self.data,
                               progress=lines.append)
    self.assertLen(lines, 3)  # One line per split built.
    second = feature_cache.load(self.cache_dir, spec(), self.data,
                                progress=lines.append)
    self.assertLen(lines, 3)
    self.assertEqual(first.folder, second.folder)
    self.assertEqual(os.listdir(self.cache_dir),
                     [os.path.basename(first.folder)])

  def test_key_changes_with_every_input(self):
    base = feature_cache.key_of(spec().describe(self.data))
    self.assertEqual(base, feature_cache.key_of(spec().describe(self.data)))
    changed = [spec(max_seq_length=16), spec(pooling="cls"),
               spec(pooling="pooled"), spec(sequence=True),
               spec(encoder_size="tiny")]
    keys = {feature_cache.key_of(s.describe(self.data)) for s in changed}
    self.assertLen(keys | {base}, len(changed) + 1)
    # The data file's content: one edited comment in train.tsv.
    edited = tempfile.mkdtemp()
    shutil.rmtree(edited)
    shutil.copytree(self.data_dir, edited)
    path = os.path.join(edited, "train.tsv")
    with open(path) as f:
      rows = f.read().replace("so happy for you", "so glad for you")
    with open(path, "w") as f:
      f.write(rows)
    other = datasets.get("goemotions", edited)
    self.assertNotEqual(base, feature_cache.key_of(spec().describe(other)))
    # The same content elsewhere is the same cache.
    copied = tempfile.mkdtemp()
    shutil.rmtree(copied)
    shutil.copytree(self.data_dir, copied)
    self.assertEqual(base, feature_cache.key_of(
        spec().describe(datasets.get("goemotions", copied))))

  def test_stale_max_seq_length_or_data_is_never_read(self):
    short = feature_cache.load(self.cache_dir, spec(max_seq_length=6),
                               self.data)
    # A folder under another key's name holding these values (a copy, or
    # a build killed between its files) is rebuilt, not read.
    longer = spec(max_seq_length=12)
    folder = os.path.join(
        self.cache_dir,
        feature_cache.key_of(longer.describe(self.data))[:24])
    shutil.copytree(short.folder, folder)
    cache = feature_cache.load(self.cache_dir, longer, self.data)
    self.assertEqual(cache.folder, folder)
    with open(os.path.join(folder, feature_cache.KEY_FILE)) as f:
      self.assertEqual(json.load(f)["description"]["max_seq_length"], 12)
    direct = self.built()  # spec() is `longer`, built in a folder of its own.
    self.assertEqual(spec(), longer)
    self.assertAllClose(cache.data.splits["test"][0],
                        direct.data.splits["test"][0])
    self.assertNotAllClose(cache.data.splits["test"][0],
                           short.data.splits["test"][0])

  def test_damaged_file_is_one_line_naming_it(self):
    # A copy of a whole cache, under its key in this test's folder.
    built = self.built().folder
    shutil.copytree(built, os.path.join(self.cache_dir,
                                        os.path.basename(built)))
    lines = []
    cache = feature_cache.load(self.cache_dir, spec(), self.data,
                               progress=lines.append)
    self.assertEqual(os.path.dirname(cache.folder), self.cache_dir)
    self.assertEmpty(lines)  # Read, not built again.
    path = os.path.join(cache.folder, "test.features.npy")
    with open(path, "r+b") as f:
      f.truncate(200)
    with self.assertRaisesRegex(ValueError, f"^{path} cannot be read .*; "
                                f"delete {cache.folder} to rebuild"):
      feature_cache.load(self.cache_dir, spec(), self.data)

  def test_split_hash(self):
    a = feature_cache.split_sha256(np.array(["ab", "c"], object),
                                   np.array([0, 1]))
    # Segment boundaries and labels count.
    self.assertNotEqual(a, feature_cache.split_sha256(
        np.array(["a", "bc"], object), np.array([0, 1])))
    self.assertNotEqual(a, feature_cache.split_sha256(
        np.array(["ab", "c"], object), np.array([0, 2])))
    self.assertEqual(a, feature_cache.split_sha256(
        np.array([b"ab", b"c"], object), np.array([0, 1])))

  def test_numeric_dataset_is_refused(self):
    with self.assertRaisesRegex(ValueError, "needs a text dataset"):
      feature_cache.load(self.cache_dir, spec(), datasets.get("digits"))


class PoolingTest(tf.test.TestCase):

  def test_mean_pooling_is_the_sentence_transformers_embedding(self):
    encoder = encoders.get("bert", init_checkpoint="minilm", pooling="mean",
                           dropout=0.0)
    packed = text.TextPreprocessor(pretrained.minilm_files()[1], 128)(
        tf.constant(["This is an example sentence"]))
    h = encoder(packed, training=False).numpy()
    # sentence-transformers' all-MiniLM-L6-v2 (mean pooling, then its
    # Normalize module), first five entries.
    self.assertAllClose(h[0, :5] / np.linalg.norm(h[0]),
                        [0.0677, 0.0635, 0.0487, 0.0793, 0.0374], atol=1e-4)

  def test_default_pooling_per_checkpoint(self):
    self.assertEqual(encoders.default_pooling("bert", "minilm"), "mean")
    self.assertEqual(encoders.default_pooling("bert", "/x/m.safetensors"),
                     "mean")
    self.assertEqual(encoders.default_pooling("bert", "/x/bert_model.ckpt"),
                     "pooled")
    self.assertEqual(encoders.default_pooling("electra", "/x/electra"), "cls")
    config = config_lib.TrainConfig.create(
        dataset="goemotions", encoder="bert", init_checkpoint="minilm",
        model_dir="unused")
    self.assertEqual(builders.resolve_defaults(config).model.pooling, "mean")
    self.assertEqual(
        builders.resolve_defaults(config.replace(pooling="cls")).model.pooling,
        "cls")
    self.assertEqual(encoders.config_kwargs(config.model)["pooling"], "mean")

  def test_frozen_encoder_is_not_trained_and_runs_in_inference_mode(self):
    encoder = encoders.get("bert", size="tiny", pooling="cls", dropout=0.0,
                           trainable_encoder=False)
    packed = text.TextPreprocessor(pretrained.minilm_files()[1], 8)(
        tf.constant(["a b c", "d"]))
    self.assertEmpty(encoder.trainable_weights)
    # BERT's own dropout is off even in a training call.
    self.assertAllClose(encoder(packed, training=True),
                        encoder(packed, training=False))

  def test_pooler_is_trained_only_when_it_makes_h(self):
    def trained(**kwargs):
      encoder = encoders.get("bert", size="tiny", dropout=0.0, **kwargs)
      return {w.name for w in encoder.trainable_weights
              if "pooler_transform" in w.name}
    self.assertLen(trained(pooling="pooled"), 2)  # Kernel and bias.
    self.assertEmpty(trained(pooling="mean"))
    self.assertEmpty(trained(pooling="cls"))
    self.assertEmpty(trained(pooling="pooled", sequence=True))

  def test_bad_flags(self):
    def check(**kwargs):
      from rank4class_tf import checks  # pylint: disable=g-import-not-at-top
      checks.validate(config_lib.TrainConfig.create(model_dir="unused",
                                                    **kwargs))
    text_run = dict(dataset="goemotions", encoder="bert")
    with self.assertRaisesRegex(ValueError, "`pooling`='max' is not valid; "
                                "choose one of: pooled, cls, mean"):
      check(pooling="max", **text_run)
    with self.assertRaisesRegex(ValueError, "`pooling` is read by bert, "
                                "electra only"):
      check(pooling="mean")
    with self.assertRaisesRegex(ValueError, "`freeze_encoder` freezes a "
                                "pretrained text encoder"):
      check(freeze_encoder=True)
    with self.assertRaisesRegex(ValueError, "`freeze_encoder` needs "
                                "`init_checkpoint`"):
      check(freeze_encoder=True, **text_run)


def run_config(model_dir, data_dir, **kwargs):
  values = dict(dataset="goemotions", data_dir=data_dir, encoder="bert",
                init_checkpoint="minilm", loss="softmax",
                interaction="lc_mlp", mlp_units=16, batch_size=4,
                max_seq_length=12, train_steps=4, eval_every=2,
                learning_rate=1e-2, dropout=0.0, freeze_encoder=True,
                deterministic=True, model_dir=model_dir)
  values.update(kwargs)
  return config_lib.TrainConfig.create(**values)


def head_weights(config, data, checkpoint=None):
  """{weight name: value} of a run's final checkpoint (or
  `checkpoints/<checkpoint>`): the class encoder's and the interaction's,
  and for a run not trained from a cache the encoder's."""
  model = builders.build_pipeline(config, data).model_builder.build()
  path = (os.path.join(config.trainer.model_dir, "checkpoints", checkpoint)
          if checkpoint else run_state.final_checkpoint(config))
  model.load_weights(path).expect_partial()
  return {w.name: w.numpy() for w in model.weights}


@pytest.mark.slow
class FrozenTrainingTest(tf.test.TestCase):
  """Cached and on-the-fly frozen runs; the export of a cached run."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = test_text_pipelines.goemotions_fixture()
    root = tempfile.mkdtemp()
    # With dropout on h: the cache's `CachedFeatures` draws the masks of
    # the on-the-fly encoder's dropout (stateless, the same key).
    cls.cached = run_config(os.path.join(root, "cached"), cls.data_dir,
                            interaction="dot", dropout=0.1)
    # No export of the on-the-fly run: its tests read its checkpoints.
    cls.on_the_fly = cls.cached.replace(
        model_dir=os.path.join(root, "on_the_fly"), feature_cache=False,
        export=False)
    cls.data = builders.load_data(cls.cached)
    training.train(cls.cached)
    training.train(cls.on_the_fly)

  def test_cached_and_on_the_fly_give_the_same_weights(self):
    cached = head_weights(self.cached, self.data)
    on_the_fly = head_weights(self.on_the_fly, self.data)
    # The cached model has no encoder weights; the others have the same
    # names in both.
    # dot: the class table [num_classes, 385]; the dropout's step counter.
    self.assertLen(cached, 2)
    self.assertLess(set(cached), set(on_the_fly))
    for name, value in cached.items():
      self.assertAllClose(value, on_the_fly[name], atol=2e-5, msg=name)
    self.assertEqual(cached["encoder/dropout/step:0"], 4)
    # Steps 3-4 moved them: the comparison is not of two idle models.
    after_two = head_weights(self.cached, self.data, "ckpt-0001")
    self.assertGreater(max(np.abs(v - after_two[k]).max()
                           for k, v in cached.items()), 1e-3)

  def test_on_the_fly_encoder_kept_minilms_weights(self):
    model = builders.build_pipeline(self.on_the_fly,
                                    self.data).model_builder.build()
    model.load_weights(run_state.final_checkpoint(
        self.on_the_fly)).expect_partial()
    network = model.get_layer("encoder").network
    fresh = minilm_network()
    for a, b in zip(network.weights, fresh.weights, strict=True):
      self.assertAllEqual(a, b)

  def test_config_records_pooling_and_cache_folder(self):
    config = exported_ranker.load_config(self.cached.trainer.model_dir)
    self.assertEqual(config.model.pooling, "mean")
    folders = os.listdir(builders.feature_cache_dir(self.cached))
    self.assertLen(folders, 1)

  def test_export_serves_mean_pooling_on_raw_text(self):
    model_dir = self.cached.trainer.model_dir
    ranker = exported_ranker.ExportedRanker(model_dir)
    texts = ["I love this so much", "the bus comes at nine"]
    served = ranker.scores(texts)
    # Independently: mean-pooled MiniLM h, h' = [h, 1], scores = h' C^T
    # with C the run's class table (dot).
    tokens, mask = minilm_sequence_output(texts, 12)
    h = (tokens * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    best = tf.train.latest_checkpoint(os.path.join(model_dir,
                                                   "best_checkpoint"))
    reader = tf.train.load_checkpoint(best)
    (table_name,) = [n for n in reader.get_variable_to_shape_map()
                     if n.endswith("class_encoder/embeddings/.ATTRIBUTES/"
                                   "VARIABLE_VALUE")]
    table = reader.get_tensor(table_name)
    expected = np.concatenate([h, np.ones([2, 1])], axis=1) @ table.T
    self.assertAllClose(served, expected, atol=1e-4)

  def test_checkpoint_scores_equal_the_export(self):
    scored = training.checkpoint_scores(self.cached, self.data)
    ranker = exported_ranker.ExportedRanker(self.cached.trainer.model_dir)
    for split in ("validation", "test"):
      labels, scores = exported_ranker.split_scores(ranker, self.data, split)
      self.assertAllEqual(scored[split][0], labels)
      self.assertAllClose(scored[split][1], scores, atol=1e-5)


  def test_checkpoint_from_before_the_dropout_counters_scores_as_trained(self):
    # The run's best checkpoint rewritten as the package wrote it before the
    # dropout step counters (the model built without them): the encoder's
    # counter would take the class table's checkpoint key.
    model_dir = os.path.join(tempfile.mkdtemp(), "old")
    shutil.copytree(self.cached.trainer.model_dir, model_dir)
    config = self.cached.replace(model_dir=model_dir)
    best = run_dir_lib.RunDir(model_dir).best_checkpoint()
    builder = builders.build_pipeline(config, self.data).model_builder
    current = builder.build()
    stateless_dropout.restore(current, best)
    counters = {id(v) for v in stateless_dropout.step_counters(current)}
    self.assertLen(counters, 1)
    with stateless_dropout.without_counters():
      old = builder.build()
    weights = [w for w in current.weights if id(w) not in counters]
    for target, value in zip(old.weights, weights, strict=True):
      target.assign(value)
    old.save_weights(best)
    self.assertFalse(stateless_dropout.checkpoint_has_counters(best))
    # What plain `load_weights(...).expect_partial()` made of it: the
    # initial class table, without a word.
    plain = builder.build()
    plain.load_weights(best).expect_partial()
    table = lambda model: [w for w in model.weights
                           if "embeddings" in w.name][0].numpy()
    self.assertNotAllClose(table(plain), table(current))
    expected = training.checkpoint_scores(self.cached, self.data)
    scored = training.checkpoint_scores(config, self.data)
    for split in ("validation", "test"):
      self.assertAllEqual(scored[split][0], expected[split][0])
      self.assertAllClose(scored[split][1], expected[split][1], atol=1e-6)


@pytest.mark.slow
class ExportLaterTest(tf.test.TestCase):
  """--export=false, then pipelines.export."""

  def test_export_binary(self):
    data_dir = test_text_pipelines.goemotions_fixture()
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    config = run_config(model_dir, data_dir, export=False,
                        interaction="label_attention", label_dim=8,
                        label_heads=2)
    training.train(config)
    self.assertFalse(run_dir_lib.RunDir(model_dir).has_exports())
    self.assertTrue(run_state.is_trained(config))
    training.train(config)  # Finished: trains nothing, exports nothing.
    self.assertFalse(run_dir_lib.RunDir(model_dir).has_exports())
    result = helpers.run_module("pipelines.export",
                                f"--model_dir={model_dir}")
    self.assertIn("best_model_by_metric", result.stdout)
    data = builders.load_data(config)
    labels, scores = exported_ranker.split_scores(exported_ranker.ExportedRanker(model_dir),
                                          data, "test")
    scored = training.checkpoint_scores(config, data, ("test",))
    self.assertAllClose(scored["test"][1], scores, atol=1e-5)
    again = helpers.run_module("pipelines.export", f"--model_dir={model_dir}",
                               check=False)
    self.assertEqual(again.returncode, 1)
    self.assertEqual(again.stderr.strip().splitlines()[-1],
                     f"export: --model_dir={model_dir} already holds an "
                     "export.")
