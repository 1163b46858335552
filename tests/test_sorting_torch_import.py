"""Tests of rank4class_tf.sorting.torch_import, the cnn_reference sorter and
pipelines.import_sorter.

The oracle is PyTorch itself: the fixtures in tests/data/torch_sorters/ were
written by tools/torch_sorter/train_sorter_torch.py (a few training steps on
CPU), with the PyTorch sorter's outputs on 16 check vectors; the shipped
PyTorch-trained sorters' check outputs (from the GPU runs) are in
shipped_checks.npz. CI has no PyTorch: the tests compare against those stored
outputs. The reference CNN's maths is also checked against numpy.
"""

import json
import os
import tempfile

from absl.testing import parameterized
import numpy as np
import pytest
import tensorflow as tf

import helpers
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import synthetic
from rank4class_tf.sorting import torch_import
from rank4class_tf.sorting import training

FIXTURES = os.path.join(os.path.dirname(__file__), "data", "torch_sorters")


def fixture(name):
  return os.path.join(FIXTURES, name)


def numpy_reference_cnn(y, layer):
  """ReferenceCNNSorter in numpy float64, from the layer's weights."""
  x = (y - y.mean(1, keepdims=True)) / (y.std(1, keepdims=True) + 1e-6)
  x = x[:, :, None].astype(np.float64)                  # [batch, d, 1]

  def conv(x, kernel, bias):                            # valid, [k, in, out]
    k = kernel.shape[0]
    steps = x.shape[1] - k + 1
    windows = np.stack([x[:, t:t + k, :] for t in range(steps)], 1)
    return np.einsum("btki,kio->bto", windows, kernel) + bias

  for conv_layer, norm, prelu in layer.blocks:
    x = conv(x, conv_layer.kernel.numpy(), conv_layer.bias.numpy())
    if norm is not None:
      x = ((x - norm.moving_mean.numpy()) /
           np.sqrt(norm.moving_variance.numpy() + 1e-5) *
           norm.gamma.numpy() + norm.beta.numpy())
    alpha = float(prelu.alpha.numpy().reshape(()))
    x = np.where(x > 0, x, alpha * x)
  out = conv(x, layer.output_conv.kernel.numpy(),
             layer.output_conv.bias.numpy())
  return 1. / (1. + np.exp(-out[:, 0, :]))


class ReferenceCNNTest(tf.test.TestCase):

  def _randomized(self, d):
    layer = sorters.get("cnn_reference", d)
    layer(tf.zeros([1, d]))
    rng = np.random.RandomState(0)
    for w in layer.weights:  # Moving statistics too, so BN is not identity.
      value = rng.uniform(0.5, 1.5, w.shape) if "variance" in w.name else (
          0.1 * rng.randn(*w.shape))
      w.assign(value.astype(np.float32))
    return layer

  def test_matches_numpy(self):
    layer = self._randomized(40)
    y = np.random.RandomState(1).randn(3, 40).astype(np.float32)
    got = layer(y, training=False).numpy()
    self.assertEqual(got.shape, (3, 40))
    self.assertAllClose(got, numpy_reference_cnn(y, layer), atol=1e-5)

  def test_layout_at_d100(self):
    layer = sorters.get("cnn_reference", 100)
    layer(tf.zeros([2, 100]))
    self.assertEqual([b[0].kernel_size[0] for b in layer.blocks],
                     [2, 3, 5, 7, 10, 7, 5, 3, 3])
    self.assertEqual(layer.output_conv.kernel.shape, (64, 128, 100))
    self.assertEqual(sum(int(np.prod(w.shape)) for w in layer.weights
                         if "moving" not in w.name), 1_444_725)  # PyTorch counts the same.

  def test_refuses_short_lists(self):
    with self.assertRaisesRegex(ValueError, "needs d >= 37.*not d=28"):
      sorters.get("cnn_reference", 28)

  def test_config_round_trip(self):
    layer = self._randomized(37)
    clone = sorters.ReferenceCNNSorter.from_config(layer.get_config())
    clone(tf.zeros([1, 37]))
    clone.set_weights(layer.get_weights())
    y = np.random.RandomState(2).randn(2, 37).astype(np.float32)
    self.assertAllClose(clone(y, training=False), layer(y, training=False))


class TorchImportTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.parameters("lstm_full_d6.npz", "lstm_shared_d6.npz",
                            "cnn_d12.npz")
  def test_keras_reproduces_pytorch(self, name):
    record, weights, inputs, outputs = torch_import.read(fixture(name))
    sorter = torch_import.to_keras(record, weights)
    self.assertFalse(sorter.trainable)
    got = sorter(inputs, training=False).numpy()
    self.assertAllClose(got, outputs, atol=1e-5)
    # Not a sorter that happens to be constant: the outputs vary.
    self.assertGreater(np.std(outputs), 1e-3)

  def test_shipped_sorters_reproduce_their_pytorch_runs(self):
    with np.load(fixture("shipped_checks.npz")) as checks:
      keys = sorted({k.split("/")[0] for k in checks.files})
      self.assertEqual(keys, ["cnn_d100", "cnn_reference_d100", "lstm_d10",
                              "lstm_d100", "lstm_d28"])
      index = sorters.pretrained_index()
      for key in keys:
        with self.subTest(key):
          self.assertEqual(index[key]["trained_with"], "pytorch")
          sorter = sorters.load_sorter(index[key]["sorter"],
                                       index[key]["seq_len"])
          got = sorter(checks[key + "/inputs"], training=False).numpy()
          self.assertAllClose(got, checks[key + "/outputs"], atol=1e-4)

  def test_weights_that_do_not_fit(self):
    record, weights, _, _ = torch_import.read(fixture("lstm_shared_d6.npz"))
    missing = dict(weights)
    missing.pop("lstm.bias_hh_l0_reverse")
    with self.assertRaisesRegex(ValueError, "lack 'lstm.bias_hh_l0_reverse'"):
      torch_import.to_keras(record, missing)
    extra = dict(weights, **{"lstm.weight_ih_l1": weights["lstm.weight_ih_l0"]})
    with self.assertRaisesRegex(ValueError, "left over: lstm.weight_ih_l1"):
      torch_import.to_keras(record, extra)
    wider = dict(record, hyperparameters=dict(record["hyperparameters"],
                                              units=4))
    with self.assertRaisesRegex(ValueError, "do not fit the lstm sorter"):
      torch_import.to_keras(wider, weights)
    with self.assertRaisesRegex(ValueError, "No PyTorch import for sorter "
                                "'pairwise'"):
      torch_import.to_keras(dict(record, sorter="pairwise"), weights)

  def test_check_refuses_other_outputs(self):
    record, weights, inputs, outputs = torch_import.read(
        fixture("cnn_d12.npz"))
    sorter = torch_import.to_keras(record, weights)
    with self.assertRaisesRegex(ValueError, "differs from the PyTorch one"):
      torch_import.check(sorter, inputs, outputs + 1e-3)

  @parameterized.parameters("lstm_full_d6.npz", "lstm_shared_d6.npz",
                            "cnn_d12.npz")
  def test_keras_back_to_pytorch_names(self, name):
    # The inverse mapping against PyTorch's own state dict: the same names
    # and shapes, the same arrays (an LSTM's two biases as their sum).
    record, weights, _, _ = torch_import.read(fixture(name))
    back = torch_import._EXPORTERS[record["sorter"]](
        torch_import.to_keras(record, weights))
    self.assertCountEqual(back, weights)
    for key, value in weights.items():
      if "bias_hh" in key:
        self.assertAllEqual(back[key], np.zeros_like(value))
      elif "bias_ih" in key:
        self.assertAllClose(back[key],
                            value + weights[key.replace("_ih", "_hh")],
                            atol=0, rtol=0)
      else:
        self.assertAllEqual(back[key], value)

  def test_reference_cnn_back_to_pytorch_names(self):
    layer = ReferenceCNNTest._randomized(self, 37)
    back = torch_import._EXPORTERS["cnn_reference"](layer)
    self.assertLen(back, 9 * 3 + 4 * 4 + 2)  # conv w, b, PReLU; BN x4; out.
    clone = torch_import.to_keras(
        {"sorter": "cnn_reference", "seq_len": 37, "hyperparameters": {}},
        back)
    y = np.random.RandomState(3).randn(2, 37).astype(np.float32)
    self.assertAllEqual(clone(y, training=False), layer(y, training=False))

  def test_write_init_goes_on_from_the_shipped_sorter(self):
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "init", "lstm_d10.npz")
      written = torch_import.write_init("lstm_d10", path, "the command")
      entry = sorters.pretrained_index()["lstm_d10"]
      record, weights, inputs, outputs = torch_import.read(path)
      self.assertEqual(record, written)
      # Its vectors, seconds and curve go on; the command chain too.
      self.assertEqual(record["train_vectors"], entry["train_vectors"])
      self.assertEqual(record["train_seconds"], entry["train_seconds"])
      self.assertEqual(record["curve"], entry["curve"])
      self.assertEqual(record["command"], entry["command"] + " && the command")
      self.assertTrue(record["final"])
      self.assertLen(weights, 4 * 4 + 2)
      shipped = sorters.load_sorter("lstm", 10)
      self.assertAllEqual(outputs, shipped(inputs, training=False))
      sorter = torch_import.to_keras(record, weights)
      self.assertEqual(torch_import.check(sorter, inputs, outputs), 0.)
      self.assertEqual(training.evaluate_l1(sorter, 10, size=500),
                       training.evaluate_l1(shipped, 10, size=500))
      for key, message in (("lstm_d7", "lstm_d7 is not a shipped sorter"),
                           ("pairwise_d10", "PyTorch does not train "
                            "'pairwise'")):
        with self.assertRaisesRegex(ValueError, message):
          torch_import.write_init(key, os.path.join(tmp, "x.npz"), "c")
      self.assertCountEqual(os.listdir(tmp), ["init"])

  def test_write_sets_are_the_package_sets(self):
    with tempfile.TemporaryDirectory() as tmp:
      torch_import.write_sets(tmp, [5])
      self.assertCountEqual(os.listdir(tmp), ["validation_d5.npz",
                                              "test_d5.npz"])
      with np.load(os.path.join(tmp, "test_d5.npz")) as data:
        scores, ranks = synthetic.test_set(5)
        self.assertAllEqual(data["scores"], scores)
        self.assertAllEqual(data["ranks"], ranks)
        self.assertEqual(data["scores"].shape, (10000, 5))
      with np.load(os.path.join(tmp, "validation_d5.npz")) as data:
        scores, _ = synthetic.fixed_set(training.VALIDATION_SIZE, 5,
                                        synthetic.VALIDATION_SEED)
        self.assertAllEqual(data["scores"], scores)


@pytest.mark.slow  # End-to-end: the binary in a subprocess.
class ImportSorterBinaryTest(tf.test.TestCase):

  def run_binary(self, *flags):
    return helpers.run_module("pipelines.import_sorter", *flags, check=False,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))

  def test_import_and_ship(self):
    with tempfile.TemporaryDirectory() as tmp:
      proc = self.run_binary(f"--torch_run={fixture('lstm_full_d6.npz')}",
                             f"--export_to={tmp}")
      self.assertEqual(proc.returncode, 0, proc.stderr)
      printed = json.loads(proc.stdout.strip().splitlines()[-1])
      entry = sorters.pretrained_index(tmp)["lstm_d6"]
      self.assertEqual(entry["weights"], "lstm_d6.npz")
      self.assertEqual(entry["hyperparameters"],
                       {"units": 3, "num_layers": 2, "projection": "full"})
      self.assertIn("train_sorter_torch.py --sorter=lstm", entry["command"])
      self.assertIn("pipelines.import_sorter --torch_run=", entry["command"])
      self.assertEqual(printed["l1"], entry["l1"])
      loaded = sorters.load_sorter("lstm", 6, directory=tmp)
      # The L1 recorded is the Keras sorter's on the test set, and PyTorch
      # measured the same on the same set.
      self.assertAllClose(training.evaluate_l1(loaded, 6), entry["l1"],
                          atol=1e-6)
      self.assertAllClose(entry["l1_torch"], entry["l1"], atol=1e-5)

  def test_bad_inputs_stop_in_one_line(self):
    with tempfile.TemporaryDirectory() as tmp:
      snapshot = os.path.join(tmp, "snapshot.npz")
      with np.load(fixture("lstm_shared_d6.npz")) as data:
        arrays = dict(data)
      record = json.loads(str(arrays["record"]))
      arrays["record"] = np.array(json.dumps(dict(record, final=False)))
      np.savez(snapshot, **arrays)
      not_npz = os.path.join(tmp, "notes.txt")
      with open(not_npz, "w") as f:
        f.write("hello")
      shipped = os.path.join(tmp, "shipped")
      for flags, message in [
          ((f"--torch_run={snapshot}", f"--export_to={shipped}"),
           f"import_sorter: {snapshot} is a snapshot of an unfinished run "
           "(64 vectors); import the file the finished run wrote."),
          ((f"--torch_run={not_npz}", f"--export_to={shipped}"),
           f"import_sorter: {not_npz} is not a train_sorter_torch.py output "
           "(ValueError: "),  # numpy's words follow.
          ((), "import_sorter: give one of --write_sets or --torch_run."),
          ((f"--write_sets={shipped}", "--seq_lens=1"),
           "import_sorter: --seq_lens=1 must be whole numbers >= 2."),
          (("--shipped_init=lstm_d10",),
           "import_sorter: --shipped_init needs --write_sets."),
          ((f"--write_sets={shipped}", "--shipped_init=lstm_d10,lstm_d9"),
           "import_sorter: --shipped_init: lstm_d9 is not a shipped sorter "
           "(shipped: " + ", ".join(sorted(sorters.pretrained_index())) +
           ")."),
          ((f"--write_sets={shipped}", "--shipped_init=lstm_d10,pairwise_d10"),
           "import_sorter: --shipped_init: pairwise_d10: PyTorch does not "
           "train 'pairwise' sorters (it trains lstm, cnn, cnn_reference)."),
      ]:
        with self.subTest(message):
          proc = self.run_binary(*flags)
          self.assertEqual(proc.returncode, 1)
          lines = proc.stderr.strip().splitlines()
          self.assertLen(lines, 1, proc.stderr)
          self.assertTrue(lines[0] == message or (
              message.endswith("(ValueError: ") and
              lines[0].startswith(message)), lines[0])
          self.assertFalse(os.path.exists(shipped))


if __name__ == "__main__":
  tf.test.main()
