"""End-to-end tests of the SoDeep binaries, run as their docstrings show."""

import json
import os
import tempfile
import unittest

import pytest
import helpers
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import training

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.


def run(module, *flags):
  """Runs `python -m module flags`; returns (returncode, stdout, stderr).

  In this process's environment, so that the binary is forked from the warm
  interpreter (`helpers.run_module`): the checks read stdout's JSON lines
  and stderr's refusal, not TensorFlow's log lines.
  """
  proc = helpers.run_module(module, *flags, check=False)
  return proc.returncode, proc.stdout, proc.stderr


def last_json(stdout):
  return json.loads(stdout.strip().splitlines()[-1])


class SorterPipelinesTest(unittest.TestCase):

  def test_train_then_evaluate_sorter(self):
    with tempfile.TemporaryDirectory() as tmp:
      code, out, err = run(
          "pipelines.train_sorter", "--sorter=lstm", "--seq_len=10",
          "--units=4", "--num_layers=1", "--batch_size=32",
          "--train_vectors=64", "--epoch_vectors=64", "--threads=1",
          f"--model_dir={tmp}")
      self.assertEqual(code, 0, err)
      record = last_json(out)
      self.assertEqual((record["sorter"], record["seq_len"]), ("lstm", 10))
      code, out, err = run("pipelines.evaluate_sorter", "--sorter=lstm",
                           "--seq_len=10", f"--model_dir={tmp}")
      self.assertEqual(code, 0, err)
      self.assertAlmostEqual(last_json(out)["l1"], record["l1"], places=4)

  def test_evaluate_handcrafted_and_shipped(self):
    code, out, err = run("pipelines.evaluate_sorter",
                         "--sorter=handcrafted,handcrafted_adaptive",
                         "--seq_len=100", "--num_vectors=1000")
    self.assertEqual(code, 0, err)
    results = [json.loads(line) for line in out.strip().splitlines()
               if line.startswith("{")]
    self.assertEqual([r["sorter"] for r in results],
                     ["handcrafted", "handcrafted_adaptive"])
    for result in results:
      self.assertEqual(set(result),
                       {"sorter", "seq_len", "l1", "num_vectors"})
    # The README's figures on the whole set: 0.0288 and 0.0114.
    self.assertAlmostEqual(results[0]["l1"], 0.029, delta=0.005)
    self.assertAlmostEqual(results[1]["l1"], 0.0114, delta=0.003)
    code, _, err = run("pipelines.evaluate_sorter", "--sorter=lstm,cnn",
                       "--seq_len=10", "--model_dir=/tmp/unused")
    self.assertEqual(code, 1)
    self.assertIn("evaluate_sorter: --model_dir evaluates one run's sorter",
                  err)

  def test_evaluate_smoothness(self):
    code, out, err = run("pipelines.evaluate_sorter", "--sorter=handcrafted",
                         "--seq_len=10", "--num_vectors=100", "--smoothness")
    self.assertEqual(code, 0, err)
    result = last_json(out)
    expected = training.smoothness(sorters.get("handcrafted", 10), 10)
    self.assertEqual(set(result), {"sorter", "seq_len", "l1", "num_vectors",
                                   *expected})
    for key, value in expected.items():
      self.assertAlmostEqual(result[key], value, places=4)
    self.assertEqual(result["wrong_sign_share"], 0.)
    self.assertGreater(result["gradient_median"], 0.1)

  def test_bad_flag_exits_with_one_line(self):
    code, _, err = run("pipelines.train_sorter", "--sorter=handcrafted",
                       "--model_dir=/tmp/unused")
    self.assertEqual(code, 1)
    self.assertIn("--sorter='handcrafted' is not valid", err)

  def test_plot_sorter(self):
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "fig5.png")
      code, out, err = run("pipelines.plot_sorter", "--seq_len=10",
                           "--sorters=handcrafted,lstm", f"--output={path}")
      self.assertEqual(code, 0, err)
      self.assertGreater(os.path.getsize(path), 1000)
      self.assertEqual(set(last_json(out)["mean_abs_rank_error"]),
                       {"handcrafted", "lstm"})

  def test_plot_sorter_curves(self):
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "curves.png")
      code, out, err = run("pipelines.plot_sorter",
                           "--curves=pairwise_d100,lstm_d100",
                           f"--output={path}")
      self.assertEqual(code, 0, err)
      self.assertGreater(os.path.getsize(path), 1000)
      last = last_json(out)["last_point"]
      self.assertEqual(set(last), {"pairwise_d100", "lstm_d100"})
      self.assertEqual(last["lstm_d100"]["vectors"], sorters.pretrained_index()
                       ["lstm_d100"]["train_vectors"])
      old_run = os.path.join(tmp, "old_run")
      os.makedirs(old_run)
      with open(os.path.join(old_run, "sorter.json"), "w") as f:
        json.dump({"sorter": "lstm", "seq_len": 10}, f)
      code, _, err = run("pipelines.plot_sorter", f"--curves={old_run}",
                         f"--output={path}")
      self.assertEqual(code, 1)
      self.assertIn(f"{old_run} has no recorded learning curve", err)

  def test_spearman_regression(self):
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "r.json")
      code, out, err = run(
          "pipelines.spearman_regression", "--methods=mse,sodeep_spearman",
          "--sorter=lstm", "--batch_size=28", "--epochs=2", "--seeds=0",
          f"--output={path}")
      self.assertEqual(code, 0, err)
      with open(path) as f:
        summary = json.load(f)["summary"]
      self.assertEqual(set(summary), {"mse", "sodeep_spearman"})
      for value in summary.values():
        self.assertTrue(-1. <= value["test_spearman_mean"] <= 1.)


if __name__ == "__main__":
  unittest.main()
