"""End-to-end text runs: train on GoEmotions/MIND-format files, serve raw text.

The binaries run as users run them, on tiny fixtures written here in the
datasets' own formats, with the `tiny` BERT architecture (and MiniLM or a
Google-format checkpoint as --init_checkpoint).
"""

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
from safetensors import numpy as safetensors_numpy

from rank4class_tf.data import datasets
from rank4class_tf.data import features as features_lib
from rank4class_tf.data import text
from rank4class_tf.modeling import pretrained
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
import helpers

import bert_fixtures

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

REPO = helpers.REPO
CLASSES = ("joy", "anger", "neutral")
SENTENCES = {
    0: ["I love this so much", "what a wonderful day", "so happy for you",
        "this is great news", "thank you, amazing"],
    1: ["this is awful", "I hate waiting", "stop doing that", "so annoying",
        "terrible service again"],
    2: ["the bus comes at nine", "it is a table", "see the list below",
        "we met on tuesday", "the file is attached"],
}



run = helpers.run_module


def restored_model(model_dir):
  """The run's model rebuilt from its config with the best checkpoint."""
  config = exported_ranker.load_config(model_dir)
  data = datasets.get(config.data.dataset, config.data.data_dir)
  model = builders.build_pipeline(config, data).model_builder.build()
  model.load_weights(tf.train.latest_checkpoint(
      os.path.join(model_dir, "best_checkpoint"))).expect_partial()
  return model, builders.build_inputs(config, data)


def encoder_weights(model):
  """Model Garden name -> numpy value of the run's BERT encoder weights."""
  network = model.get_layer("encoder").network
  return {k: v.numpy()
          for k, v in pretrained.encoder_variables(network).items()}


def goemotions_fixture():
  """train/dev/test.tsv + emotions.txt in GoEmotions' format."""
  folder = tempfile.mkdtemp()
  with open(os.path.join(folder, "emotions.txt"), "w") as f:
    f.write("\n".join(CLASSES))
  rows = [f"{s}\t{label}\tid{label}{i}" for label, texts in SENTENCES.items()
          for i, s in enumerate(texts)]
  rows.append('"quoted ""text"" here"\t0,1\tidmulti')  # Multi-label row.
  for name in ("train.tsv", "dev.tsv", "test.tsv"):
    with open(os.path.join(folder, name), "w") as f:
      f.write("\n".join(rows) + "\n")
  return folder


class GoEmotionsMiniLMTest(tf.test.TestCase):
  """MiniLM init through the binary; raw-text SavedModel; predict."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), "goemotions")
    run("pipelines.train", "--dataset=goemotions",
        f"--data_dir={goemotions_fixture()}", "--encoder=bert",
        "--init_checkpoint=minilm", "--loss=softmax", "--interaction=dot",
        "--batch_size=4", "--max_seq_length=16", "--train_steps=2",
        "--eval_every=2", "--learning_rate=1e-5", "--top_k=2",
        f"--model_dir={cls.model_dir}")
    # Read, never changed, by two tests.
    cls.restored, cls.instance_inputs = restored_model(cls.model_dir)

  def test_saved_model_takes_raw_strings_in_a_fresh_process(self):
    texts = ["I love this so much", "the bus comes at nine"]
    out = os.path.join(tempfile.mkdtemp(), "served.npz")
    export = os.path.join(self.model_dir, "export", "best_model_by_metric")
    script = textwrap.dedent(f"""
        import numpy as np, tensorflow as tf
        import tensorflow_text  # Registers the WordPiece ops; nothing else.
        serve = tf.saved_model.load({export!r}).signatures["serving_default"]
        out = serve(text=tf.constant({texts!r}))
        np.savez({out!r}, **{{k: v.numpy() for k, v in out.items()}})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300,
                   capture_output=True)
    served = np.load(out, allow_pickle=True)

    features = features_lib.class_list_features(
        self.instance_inputs(tf.constant(texts)), 3)
    scores = self.restored(features, training=False).numpy()
    self.assertAllClose(served["scores"], scores, rtol=1e-4, atol=1e-5)
    order = np.argsort(-scores, axis=1)[:, :2]
    self.assertAllEqual(served["top_k_names"],
                        np.array(CLASSES)[order].astype(bytes))

  def test_encoder_started_from_minilm(self):
    # Two steps at lr 1e-5 move a weight by at most ~2e-5.
    weights = encoder_weights(self.restored)
    source = safetensors_numpy.load_file(pretrained.minilm_files()[0])
    self.assertAllClose(weights["word_embeddings/embeddings"],
                        source["embeddings.word_embeddings.weight"],
                        atol=1e-4)
    self.assertAllClose(weights["transformer/layer_5/output/bias"],
                        source["encoder.layer.5.output.dense.bias"],
                        atol=1e-4)

  def test_predict_text_and_stdin(self):
    proc = run("pipelines.predict", f"--model_dir={self.model_dir}",
               "--text=so happy for you", "--top_k=3")
    lines = proc.stdout.strip().split("\n")
    self.assertLen(lines, 3)
    names = [l.split("\t")[0] for l in lines]
    scores = [float(l.split("\t")[1]) for l in lines]
    self.assertCountEqual(names, CLASSES)
    self.assertEqual(scores, sorted(scores, reverse=True))
    ranker = exported_ranker.ExportedRanker(self.model_dir)
    want = ranker.rank(np.array(["so happy for you"], object), 3)[0]
    self.assertEqual(names, [n for n, _ in want])

    # Batches of 2: the third line is ranked in a second call.
    texts = ["so happy for you", "this is awful", "what a surprise"]
    proc = run("pipelines.predict", f"--model_dir={self.model_dir}",
               "--top_k=2", "--batch_size=2", stdin="\n".join(texts) + "\n")
    blocks = proc.stdout.strip().split("\n\n")
    self.assertEqual([[l.split("\t")[0] for l in b.split("\n")]
                      for b in blocks],
                     [[n for n, _ in r]
                      for r in ranker.rank(np.array(texts, object), 2)])
    # Old Mac line ends (a lone \r) end lines too; and the names come from
    # the export, whatever classes.json says (here reversed).
    classes_json = os.path.join(self.model_dir, run_dir_lib.CLASSES_FILE)
    with open(classes_json) as f:
      saved = f.read()
    with open(classes_json, "w") as f:
      json.dump(json.loads(saved)[::-1], f)
    try:
      again = run("pipelines.predict", f"--model_dir={self.model_dir}",
                  "--top_k=2", "--batch_size=2", stdin="\r".join(texts))
    finally:
      with open(classes_json, "w") as f:
        f.write(saved)
    self.assertEqual(again.stdout, proc.stdout)

  def test_predict_bad_input(self):
    proc = run("pipelines.predict", f"--model_dir={self.model_dir}",
               stdin="fine\n\n", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip(), "predict: <stdin>:2: empty text.")
    # Streamed: the first batch is ranked before line 4 fails.
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.predict",
         f"--model_dir={self.model_dir}", "--batch_size=2", "--top_k=1"],
        cwd=REPO, input=b"fine\ngood\nok\n\xff\xfe bad\n",
        capture_output=True, timeout=600)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.decode().strip(),
                     "predict: <stdin>:4: not valid UTF-8.")
    self.assertLen(proc.stdout.decode().strip().split("\n\n"), 2)
    proc = run("pipelines.predict", "--model_dir=/nonexistent", "--text=x",
               check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip(), "predict: /nonexistent not found: "
                     "--model_dir is not a trained run.")


class GoogleCheckpointAndMindTest(tf.test.TestCase):
  """MIND (title, abstract) with a Google-format BERT checkpoint."""

  def test_mind_with_google_checkpoint(self):
    ckpt_dir = tempfile.mkdtemp()
    vocab = os.path.join(ckpt_dir, "vocab.txt")
    shutil.copy(pretrained.minilm_files()[1], vocab)
    tiny = pretrained.SIZES["tiny"]
    weights = bert_fixtures.tiny_google_weights(
        0, embedding_width=tiny["hidden_size"], hidden=tiny["hidden_size"],
        inner=tiny["inner_dim"], layers_=tiny["num_layers"],
        vocab=tiny["vocab_size"], positions=tiny["max_sequence_length"])
    bert_fixtures.write_tf1_checkpoint(
        os.path.join(ckpt_dir, "bert_model.ckpt"),
        {"bert/" + k: v for k, v in weights.items()})

    news = tempfile.mkdtemp()
    rows = []
    for i in range(12):
      category = ("sports", "news", "finance")[i % 3]
      abstract = "" if i % 4 == 0 else f"abstract {i}"
      rows.append("\t".join([f"N{i}", category, "sub", f'title "{i}"',
                             abstract, "url", "[]", "[]"]))
    with open(os.path.join(news, "news.tsv"), "w") as f:
      f.write("\n".join(rows) + "\n")

    model_dir = os.path.join(tempfile.mkdtemp(), "mind")
    run("pipelines.train", "--dataset=mind", f"--data_dir={news}",
        "--encoder=bert", "--encoder_size=tiny",
        f"--init_checkpoint={ckpt_dir}", "--max_seq_length=16",
        "--batch_size=2", "--train_steps=2", "--eval_every=2",
        f"--model_dir={model_dir}")
    self.assertEqual(exported_ranker.load_class_names(model_dir),
                     ["finance", "news", "sports"])
    restored = encoder_weights(restored_model(model_dir)[0])
    # Two steps at the default lr 1e-3 move a weight by at most ~2e-3.
    self.assertAllClose(restored["position_embedding/embeddings"],
                        weights["embeddings/position_embeddings"], atol=5e-3)
    # The vocabulary beside the checkpoint was picked up.
    self.assertEqual(builders.vocab_file(exported_ranker.load_config(model_dir).model),
                     vocab)
    proc = run("pipelines.predict", f"--model_dir={model_dir}",
               "--text=title 3\tabstract 3", "--top_k=3")
    self.assertLen(proc.stdout.strip().split("\n"), 3)
    proc = run("pipelines.predict", f"--model_dir={model_dir}",
               "--text=a\tb\tc", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertIn("--text:1: expected at most 2 tab-separated segments",
                  proc.stderr)


class TextFlagsTest(tf.test.TestCase):

  def test_text_dataset_needs_text_encoder(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    proc = run("pipelines.train", "--dataset=goemotions",
               f"--model_dir={model_dir}", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr.strip(), "train: --encoder='small_cnn' "
                     "cannot read the text dataset 'goemotions'; choose one "
                     "of: bert, electra.")
    self.assertFalse(os.path.exists(model_dir))

  def test_missing_checkpoint_writes_nothing(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    proc = run("pipelines.train", "--dataset=goemotions", "--encoder=bert",
               "--encoder_size=tiny", "--init_checkpoint=/nonexistent/ckpt",
               f"--model_dir={model_dir}", check=False)
    self.assertEqual(proc.returncode, 1)
    self.assertIn("/nonexistent/ckpt", proc.stderr)
    self.assertLen(proc.stderr.strip().split("\n"), 1)
    self.assertFalse(os.path.exists(model_dir))


if __name__ == "__main__":
  tf.test.main()
