"""Tests of rank4class_tf.data.text: WordPiece tokenization and BERT packing."""

import os
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf.data import contract
from rank4class_tf.data import inputs
from rank4class_tf.data import text
from rank4class_tf.modeling import pretrained
from rank4class_tf import run_dir as run_dir_lib

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world",
         "un", "##believ", "##able", "!", "a", "b"]


def tiny_vocab():
  path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
  with open(path, "w") as f:
    f.write("\n".join(VOCAB) + "\n")
  return path


class TextPreprocessorTest(tf.test.TestCase):

  def test_minilm_vocab_ids(self):
    pre = text.TextPreprocessor(pretrained.minilm_files()[1], seq_length=9)
    out = pre(tf.constant(["This is an example sentence"]))
    # bert-base-uncased ids: [CLS] this is an example sentence [SEP] [PAD]...
    self.assertAllEqual(out[text.WORD_IDS],
                        [[101, 2023, 2003, 2019, 2742, 6251, 102, 0, 0]])
    self.assertAllEqual(out[text.MASK], [[1] * 7 + [0] * 2])
    self.assertAllEqual(out[text.TYPE_IDS], [[0] * 9])

  def test_wordpiece_lower_case_and_unknown(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=8)
    out = pre(tf.constant(["Hello UNBELIEVABLE zzz!"]))
    # [CLS] hello un ##believ ##able [UNK] ! [SEP]
    self.assertAllEqual(out[text.WORD_IDS], [[2, 5, 7, 8, 9, 1, 10, 3]])

  def test_two_segments_and_empty_second(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=8)
    out = pre(tf.constant([["hello", "world a"], ["b", ""]]))
    self.assertAllEqual(out[text.WORD_IDS], [[2, 5, 3, 6, 11, 3, 0, 0],
                                             [2, 12, 3, 3, 0, 0, 0, 0]])
    self.assertAllEqual(out[text.TYPE_IDS], [[0, 0, 0, 1, 1, 1, 0, 0],
                                             [0, 0, 0, 1, 0, 0, 0, 0]])
    self.assertAllEqual(out[text.MASK], [[1, 1, 1, 1, 1, 1, 0, 0],
                                         [1, 1, 1, 1, 0, 0, 0, 0]])

  def test_truncation_keeps_special_tokens(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=4)
    out = pre(tf.constant(["hello world a b"]))
    self.assertAllEqual(out[text.WORD_IDS], [[2, 5, 6, 3]])

  def test_runs_in_tf_data(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=5)
    ds = tf.data.Dataset.from_tensor_slices(["hello", "a b"]).batch(2).map(pre)
    self.assertAllEqual(next(iter(ds))[text.WORD_IDS],
                        [[2, 5, 3, 0, 0], [2, 11, 12, 3, 0]])

  def test_serialization_round_trip(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=6, lower_case=True)
    restored = tf.keras.layers.deserialize(tf.keras.layers.serialize(pre))
    batch = tf.constant(["Hello world"])
    self.assertAllEqual(restored(batch)[text.WORD_IDS],
                        pre(batch)[text.WORD_IDS])
    self.assertEqual(restored.seq_length, 6)

  def test_token_ids_are_packed_once_and_expand_back(self):
    pre = text.TextPreprocessor(tiny_vocab(), seq_length=8)
    pairs = np.array([["hello", "world a"], ["b", ""]], object)
    ids = text.token_ids(pre, pairs, chunk=1)  # Two calls of one trace.
    self.assertEqual(sorted(ids), [text.TYPE_IDS, text.WORD_IDS,
                                   text.LENGTH])
    self.assertEqual(ids[text.WORD_IDS].dtype, np.uint16)
    self.assertEqual(ids[text.TYPE_IDS].dtype, np.int8)
    self.assertAllEqual(ids[text.LENGTH], [6, 4])
    expanded = text.expand({k: tf.constant(v) for k, v in ids.items()})
    packed = pre(tf.constant(pairs.tolist()))
    for name in text.BERT_INPUTS:
      self.assertEqual(expanded[name].dtype, tf.int32)
      self.assertAllEqual(expanded[name], packed[name])
    one = text.token_ids(pre, np.array(["hello world", "a"], object))
    self.assertNotIn(text.TYPE_IDS, one)
    self.assertAllEqual(text.expand(one)[text.TYPE_IDS], tf.zeros([2, 8]))
    self.assertAllEqual(one[text.WORD_IDS][0], [2, 5, 6, 3, 0, 0, 0, 0])
    # Ids past uint16 (a vocabulary of more than 65,536 tokens) stay int32.
    big = text.token_ids(
        lambda texts: {name: value + (70000 if name == text.WORD_IDS else 0)
                       for name, value in pre(texts).items()},
        np.array(["a"], object))
    self.assertEqual(big[text.WORD_IDS].dtype, np.int32)
    self.assertEqual(big[text.WORD_IDS][0, 0], 70002)
    self.assertEqual(text.token_ids(pre, np.array([], object))[
        text.WORD_IDS].shape, (0, 8))

  def test_text_inputs_trace_the_tokenizer_once_for_every_split(self):

    class Counted(text.TextPreprocessor):
      """Counts the runs of its Python `call`: one per trace."""

      def call(self, texts):
        self.calls += 1
        return super().call(texts)

    pre = Counted(tiny_vocab(), seq_length=8)
    pre.calls = 0
    text_inputs = inputs.TextInputs("text", (), pre)
    one = text_inputs.token_ids(np.array(["hello world", "a"], object))
    two = text_inputs.token_ids(np.array(["b", "world a", ""], object))
    lengths = text_inputs.token_lengths(np.array(["a b"], object))
    self.assertEqual(pre.calls, 1)
    self.assertAllEqual(one[text.WORD_IDS],
                        [[2, 5, 6, 3, 0, 0, 0, 0], [2, 11, 3, 0, 0, 0, 0, 0]])
    self.assertAllEqual(two[text.LENGTH], [3, 4, 2])
    self.assertAllEqual(lengths, [4])
    # Given the layer itself, each call traces it anew.
    text.token_ids(pre, np.array(["a"], object))
    text.token_ids(pre, np.array(["b"], object))
    self.assertEqual(pre.calls, 3)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "/nonexistent/vocab.txt: "
                                "vocabulary file not found"):
      text.TextPreprocessor("/nonexistent/vocab.txt")
    with self.assertRaisesRegex(ValueError, "seq_length must be >= 3"):
      text.TextPreprocessor(tiny_vocab(), seq_length=2)


if __name__ == "__main__":
  tf.test.main()


class LengthBucketingTest(tf.test.TestCase):
  """Batches padded to their longest text (issue 34), on shipped GoEmotions."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # pylint: disable=g-import-not-at-top
    from rank4class_tf import config as config_lib
    from rank4class_tf.data import datasets
    from rank4class_tf.training import builders
    cls.datasets = datasets
    cls.data = datasets.get("goemotions")
    cls.inputs = {
        bucketing: builders.build_inputs(config_lib.TrainConfig.create(
            dataset="goemotions", encoder="bert", max_seq_length=32,
            model_dir="unused", length_bucketing=bucketing), cls.data)
        for bucketing in (False, True)}

  def test_trim_rounds_up_and_never_passes_the_length(self):
    packed = self.inputs[False].packed(tf.constant(
        ["ok", "one two three four five six seven eight nine ten"]))
    self.assertEqual(packed[text.WORD_IDS].shape, (2, 32))
    self.assertAllEqual(text.lengths(packed), [3, 12])
    self.assertEqual(text.trim(packed)[text.WORD_IDS].shape, (2, 16))
    self.assertEqual(text.trim(packed, 1)[text.MASK].shape, (2, 12))
    self.assertAllEqual(text.trim(packed, 1)[text.WORD_IDS],
                        packed[text.WORD_IDS][:, :12])
    self.assertEqual(text.trim(packed, 64)[text.WORD_IDS].shape, (2, 32))
    self.assertAllEqual(
        [text.bucket_key({text.MASK: packed[text.MASK][i]}) for i in (0, 1)],
        [1, 2])

  def test_same_scores_with_and_without_bucketing(self):
    # pylint: disable=g-import-not-at-top
    from rank4class_tf.data import features
    from rank4class_tf.modeling import model as model_lib
    tf.keras.utils.set_random_seed(3)
    model = model_lib.build_model_builder(
        self.data, config_lib.ModelConfig(
            encoder="bert", encoder_size="minilm_l6", init_checkpoint="minilm",
            pooling="mean", dropout=0.0),
        instance_inputs=self.inputs[True]).build()
    texts = self.data.splits["validation"][0]
    order = np.argsort([len(t) for t in texts], kind="stable")
    batch = tf.constant(texts[order[:24]].tolist())  # Short: 2-8 tokens.
    scores = {}
    for bucketing, inputs in self.inputs.items():
      context = inputs(batch)
      scores[bucketing] = model(features.class_list_features(
          context, self.data.num_classes)).numpy()
    self.assertEqual(self.inputs[True](batch)[text.WORD_IDS].shape, (24, 8))
    self.assertAllClose(scores[True], scores[False], atol=1e-5, rtol=0)
    self.assertGreater(np.abs(scores[True]).max(), 0.1)

  def test_training_batches_few_shapes_and_a_seeded_stream(self):
    def stream(seed, skip=0, take=120):
      ds = self.datasets.ranking_dataset(
          self.data, "train", 32, training=True, seed=seed,
          instance_inputs=self.inputs[True])
      return [(f[text.WORD_IDS].numpy(), y.numpy())
              for f, y in ds.skip(skip).take(take)]

    first = stream(7)
    widths = [ids.shape[1] for ids, _ in first]
    self.assertLessEqual(set(widths), {8, 16, 24, 32})
    self.assertGreater(len(set(widths)), 1)
    self.assertTrue(all(ids.shape[0] == 32 for ids, _ in first))
    # Every batch is its bucket: its longest text fills the last quantum.
    for ids, _ in first:
      longest = (ids != 0).sum(1).max()
      self.assertEqual(ids.shape[1], -(-longest // 8) * 8)
    # A resumed run skips to the same batches; another seed differs.
    again = stream(7, skip=100, take=20)
    for (a, y), (b, z) in zip(first[100:], again):
      self.assertAllEqual(a, b)
      self.assertAllEqual(y, z)
    self.assertNotAllEqual(stream(8, take=1)[0][1], first[0][1])

  def test_token_ids_give_the_batches_of_tokenizing_in_tf_data(self):
    # In memory: tokenized once, tf.data reads the ids; streamed: tokenized
    # in tf.data. The same seeded batches, in both paddings.
    streamed = contract.streamed(self.data)
    for bucketing, inputs in self.inputs.items():
      for split, training in (("train", True), ("validation", False)):
        batches = [
            list(self.datasets.ranking_dataset(
                data, split, 32, training=training, seed=7,
                instance_inputs=inputs).take(40))
            for data in (self.data, streamed)]
        for (f, y), (g, z) in zip(*batches):
          self.assertEqual(sorted(f), sorted(g))
          for name in f:
            self.assertEqual(f[name].dtype, g[name].dtype)
            self.assertAllEqual(f[name], g[name])
          self.assertAllEqual(y, z)
        widths = {f[text.WORD_IDS].shape[1] for f, _ in batches[0]}
        if training:
          self.assertEqual(len(widths) > 1, bucketing)
    ids = self.inputs[True].token_ids(self.data.splits["train"][0])
    self.assertIs(self.inputs[True].token_ids(self.data.splits["train"][0]),
                  ids)  # Tokenized once.
    self.assertEqual(ids[text.WORD_IDS].shape, (36308, 32))
    self.assertEqual(ids[text.WORD_IDS].dtype, np.uint16)

  def test_token_ids_give_the_scores_of_tokenizing_in_tf_data(self):
    # pylint: disable=g-import-not-at-top
    from rank4class_tf.modeling import model as model_lib
    from rank4class_tf.ranking import losses
    inputs = self.inputs[True]
    results = []
    for data in (self.data, contract.streamed(self.data)):
      tf.keras.utils.set_random_seed(11)
      model = model_lib.build_model_builder(
          self.data, config_lib.ModelConfig(
              encoder="bert", encoder_size="tiny", pooling="mean",
              dropout=0.0),
          instance_inputs=inputs).build()
      model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                    loss=losses.get("softmax"))
      history = model.fit(
          self.datasets.ranking_dataset(data, "train", 16, training=True,
                                        seed=3, instance_inputs=inputs),
          epochs=2, steps_per_epoch=3, verbose=0).history["loss"]
      scores = model.predict(self.datasets.ranking_dataset(
          data, "validation", 64, training=False,
          instance_inputs=inputs).take(3), verbose=0)
      results.append((history, scores))
    (loss_a, scores_a), (loss_b, scores_b) = results
    self.assertAllClose(loss_a, loss_b, atol=1e-6, rtol=0)
    self.assertEqual(scores_a.shape, (192, 28))
    self.assertAllClose(scores_a, scores_b, atol=1e-6, rtol=0)
    self.assertGreater(np.abs(scores_a).max(), 0.01)

  def test_evaluation_keeps_the_order_unless_length_sorted(self):
    labels = self.data.splits["validation"][1]
    ds = self.datasets.ranking_dataset(self.data, "validation", 256,
                                       training=False,
                                       instance_inputs=self.inputs[True])
    got = np.concatenate([y.numpy().argmax(1) for _, y in ds])
    self.assertAllEqual(got, labels)
    ds = self.datasets.ranking_dataset(self.data, "validation", 256,
                                       training=False, length_sorted=True,
                                       instance_inputs=self.inputs[True])
    widths, got = [], []
    for f, y in ds:
      widths.append(f[text.WORD_IDS].shape[1])
      got.append(y.numpy().argmax(1))
    self.assertAllEqual(np.sort(np.concatenate(got)), np.sort(labels))
    self.assertEqual(widths, sorted(widths))
    self.assertEqual(widths[0], 8)


class BFloat16RunTest(tf.test.TestCase):
  """--mixed_precision=bfloat16 trains, exports and serves (issues 34, 60)."""

  def test_bfloat16_run_trains_exports_and_serves_in_bfloat16(self):
    # pylint: disable=g-import-not-at-top
    from unittest import mock
    from rank4class_tf import checks
    from rank4class_tf import config as config_lib
    from rank4class_tf.serving import exported_ranker
    from rank4class_tf.training import trainer as training
    import test_text_pipelines
    from unittest import mock
    from rank4class_tf import checks
    model_dir = os.path.join(tempfile.mkdtemp(), "bfloat16")
    # On a CPU without bfloat16 instructions TensorFlow emulates them: the
    # run is refused there (checks), so the test says the CPU has them.
    with mock.patch.object(checks, "cpu_has_bfloat16", lambda: True):
      training.train(config_lib.TrainConfig.create(
          dataset="goemotions",
          data_dir=test_text_pipelines.goemotions_fixture(),
          encoder="bert", encoder_size="tiny", max_seq_length=16,
          batch_size=4, train_steps=2, eval_every=1, seed=1,
          mixed_precision="bfloat16", model_dir=model_dir))
    trainer = exported_ranker.load_config(model_dir).trainer
    self.assertEqual((trainer.mixed_precision, trainer.float32_layers),
                     ("bfloat16", True))
    scores = exported_ranker.ExportedRanker(model_dir).scores(["so happy today",
                                                       "thanks a lot"])
    self.assertEqual(scores.shape, (2, 3))  # The fixture's 3 classes.
    self.assertEqual(scores.dtype, np.float32)
    self.assertTrue(np.isfinite(scores).all())
    # The export computes in bfloat16 (a float32 one has no such tensor:
    # the exports of the other text tests), its scores cast to float32.
    export = os.path.join(model_dir, "export", run_dir_lib.BEST_EXPORT)
    self.assertIn("DT_BFLOAT16", str(tf.saved_model.load(export).signatures[
        "serving_default"].graph.as_graph_def()))
