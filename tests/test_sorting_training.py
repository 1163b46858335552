"""Tests of rank4class_tf.sorting.training: a few steps, files, resume."""

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_tf.sorting import ops
from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import synthetic
from rank4class_tf.sorting import training


def tiny_config(model_dir, train_vectors=128):
  return training.SorterConfig(
      sorter="cnn", seq_len=10, width=2, batch_size=32, epoch_vectors=64,
      train_vectors=train_vectors, halve_every_vectors=64, threads=0,
      model_dir=model_dir)


class SorterTrainingTest(tf.test.TestCase):

  def test_train_writes_everything_and_resumes(self):
    with tempfile.TemporaryDirectory() as tmp:
      record = training.train(tiny_config(tmp))
      for name in ("config.json", "sorter.npz", "sorter.json",
                   "progress.json", "checkpoints", "train", "validation"):
        self.assertTrue(os.path.exists(os.path.join(tmp, name)), name)
      self.assertEqual(record["train_vectors"], 128)
      self.assertBetween(record["l1"], 0., 1.)
      # The learning curve: one point per epoch, with the learning rate of
      # its last step (steps 1 and 3; halved every 2 steps).
      self.assertEqual([c["vectors"] for c in record["curve"]], [64, 128])
      self.assertAllClose([c["learning_rate"] for c in record["curve"]],
                          [1e-3, 5e-4])
      for point in record["curve"]:
        self.assertBetween(point["val_l1"], 0., 1.)
      with open(os.path.join(tmp, "progress.json")) as f:
        self.assertEqual(json.load(f)["epochs_done"], 2)
      # Same directory, more vectors: resumes at epoch 3.
      training.train(tiny_config(tmp, train_vectors=192))
      with open(os.path.join(tmp, "progress.json")) as f:
        self.assertEqual(json.load(f)["epochs_done"], 3)
      with open(os.path.join(tmp, "sorter.json")) as f:
        self.assertEqual([c["vectors"] for c in json.load(f)["curve"]],
                         [64, 128, 192])
      # A finished run of the same config is not retrained.
      again = training.train(tiny_config(tmp, train_vectors=192))
      with open(os.path.join(tmp, "progress.json")) as f:
        self.assertEqual(json.load(f)["epochs_done"], 3)
      sorter = training.load_trained(tmp)
      self.assertEqual(sorter.d, 10)
      # Export into a pretrained folder, then load by name and d.
      shipped = os.path.join(tmp, "pretrained")
      entry = training.export_pretrained(tmp, shipped, "the command")
      self.assertEqual(entry["command"], "the command")
      self.assertEqual(entry["l1"], again["l1"])
      self.assertEqual(sorters.pretrained_index(shipped)["cnn_d10"]["weights"],
                       "cnn_d10.npz")
      loaded = sorters.load_sorter("cnn", 10, directory=shipped)
      x = np.random.RandomState(0).randn(3, 10).astype(np.float32)
      self.assertAllClose(loaded(x, training=False), sorter(x, training=False))
      self.assertAllClose(training.evaluate_l1(sorter, 10, size=500),
                          training.evaluate_l1(sorter, 10, size=500))

  def test_init_from_continues_a_finished_run(self):
    with tempfile.TemporaryDirectory() as tmp:
      first = os.path.join(tmp, "first")
      training.train(tiny_config(first, train_vectors=64))
      config = tiny_config(os.path.join(tmp, "second"), train_vectors=64)
      config.init_from = first
      config.learning_rate = 1e-4
      record = training.train(config)
      self.assertEqual(record["train_vectors"], 128)
      self.assertEqual(record["init_from"], first)
      # The curve goes on from the first run's; a new schedule restarts.
      self.assertEqual([c["vectors"] for c in record["curve"]], [64, 128])
      self.assertAllClose([c["learning_rate"] for c in record["curve"]],
                          [1e-3, 1e-4])
      # `continue_schedule`: the schedule goes on after the first run's 2
      # steps: the second run's last step is step 3 of the schedule.
      config = tiny_config(os.path.join(tmp, "continued"), train_vectors=64)
      config.init_from = first
      config.continue_schedule = True
      record = training.train(config)
      self.assertAllClose([c["learning_rate"] for c in record["curve"]],
                          [1e-3, 5e-4])
      config = tiny_config(os.path.join(tmp, "third"))
      config.width = 3
      config.init_from = first
      with self.assertRaisesRegex(ValueError, "`init_from`"):
        training.train(config)
      self.assertFalse(os.path.exists(config.model_dir))
      config.init_from = os.path.join(tmp, "nothing")
      with self.assertRaisesRegex(
          ValueError, r"`init_from`=.*nothing is neither a finished sorter "
          r"run \(no sorter.json\) nor a shipped sorter \(shipped: cnn_d100, "
          r"cnn_reference_d100, lstm_d10"):
        training.train(config)
      self.assertFalse(os.path.exists(config.model_dir))

  def test_init_from_a_shipped_sorter(self):
    # A fresh clone goes on training a committed sorter: its weights start
    # the run, its vectors and curve come first.
    shipped = sorters.pretrained_index()["pairwise_d10"]
    with tempfile.TemporaryDirectory() as tmp:
      config = training.SorterConfig(
          sorter="pairwise", seq_len=10, units=16, num_layers=2,
          max_sharpness=60., batch_size=32, epoch_vectors=32,
          train_vectors=32, learning_rate=1e-9, continue_schedule=True,
          init_from="pairwise_d10", model_dir=tmp)
      record = training.train(config)
      self.assertEqual(record["init_from"], "pairwise_d10")
      self.assertEqual(record["train_vectors"],
                       shipped["train_vectors"] + 32)
      self.assertEqual(record["curve"][:-1], shipped["curve"])
      self.assertEqual(record["curve"][-1]["vectors"],
                       shipped["train_vectors"] + 32)
      # The schedule goes on after the shipped sorter's vectors: 1e-9 is
      # never halved (halve_every_vectors 10 M).
      self.assertAllClose(record["curve"][-1]["learning_rate"], 1e-9)
      # A learning rate of 1e-9 leaves the shipped weights (up to Adam's
      # first steps of size ~1e-9): the same L1 as the shipped sorter.
      self.assertAllClose(record["l1"], shipped["l1"], rtol=1e-4)

  def test_init_from_another_d_with_shared_projection(self):
    with tempfile.TemporaryDirectory() as tmp:
      small = training.SorterConfig(
          sorter="lstm", seq_len=5, units=4, num_layers=1,
          projection="shared", batch_size=16, epoch_vectors=32,
          train_vectors=32, model_dir=os.path.join(tmp, "d5"))
      training.train(small)
      larger = training.SorterConfig(**dict(
          small.__dict__, seq_len=9, init_from=small.model_dir,
          model_dir=os.path.join(tmp, "d9")))
      self.assertEqual(training.train(larger)["seq_len"], 9)

  def test_learning_rate_halves(self):
    config = tiny_config("unused")
    schedule = training.learning_rate_schedule(config)
    self.assertAllClose([schedule(0), schedule(1), schedule(2), schedule(4)],
                        [1e-3, 1e-3, 5e-4, 2.5e-4])
    # 64 vectors = 2 steps of 32 already seen: one halving done.
    shifted = training.learning_rate_schedule(config, offset_vectors=64)
    self.assertAllClose([shifted(0), shifted(2)], [5e-4, 2.5e-4])
    clone = training.ShiftedSchedule.from_config(shifted.get_config())
    self.assertAllClose(clone(1), shifted(1))

  def test_validate_names_the_flag(self):
    config = tiny_config("x")
    config.sorter = "handcrafted"
    with self.assertRaisesRegex(ValueError, "`sorter`='handcrafted'.*lstm, "
                                "cnn"):
      config.validate()
    with self.assertRaisesRegex(ValueError, "`model_dir`"):
      tiny_config("").validate()
    config = tiny_config("x")
    config.continue_schedule = True
    with self.assertRaisesRegex(ValueError, "`continue_schedule` needs "
                                "`init_from`"):
      config.validate()
    for bad in (-1., 5.):
      config = tiny_config("x")
      config.max_sharpness = bad
      with self.assertRaisesRegex(ValueError, rf"`max_sharpness`={bad} must "
                                  r"be 0 \(no bound\) or > 7.0"):
        config.validate()

  def test_evaluate_l1_of_exact_sorter_is_zero(self):
    exact = lambda y, training=False: ops.exact_rank(y)
    self.assertAlmostEqual(training.evaluate_l1(exact, 12, size=300), 0.,
                           places=6)

  def test_self_gradients_of_the_handcrafted_sorter(self):
    # Reference maths: rk_i = (1 + sum_{j != i} sigmoid(lam (y_j - y_i))) / d,
    # so d rk_i / d y_i = -(lam / d) sum_{j != i} s (1 - s); times std(y).
    d, lam = 7, 10.
    g = training.self_gradients(sorters.get("handcrafted", d), d, size=30,
                                batch_size=4)
    y = synthetic.fixed_set(30, d, synthetic.TEST_SEED)[0].numpy().astype(
        np.float64)
    s = 1. / (1. + np.exp(-lam * (y[:, None, :] - y[:, :, None])))
    slope = s * (1. - s) * (1. - np.eye(d))[None]
    expected = -lam / d * slope.sum(-1) * y.std(1, keepdims=True)
    self.assertEqual(g.shape, (30, d))
    self.assertAllClose(g, expected, rtol=1e-4, atol=1e-6)

  def test_smoothness_tells_sharp_from_smooth(self):
    exact = lambda y, training=False: ops.exact_rank(y)
    flat = training.smoothness(exact, 8, size=20)
    self.assertEqual(flat, {"gradient_mean": 0., "gradient_median": 0.,
                            "gradient_p99": 0., "flat_share": 1.,
                            "wrong_sign_share": 0.})
    smooth = training.smoothness(sorters.get("handcrafted", 8,
                                             regularization=1.), 8, size=20)
    sharp = training.smoothness(sorters.get("handcrafted", 8,
                                            regularization=1000.), 8, size=20)
    self.assertEqual(smooth["wrong_sign_share"], 0.)
    self.assertEqual(smooth["flat_share"], 0.)
    # A sharp comparison: most entries flat, a few steep.
    self.assertGreater(sharp["flat_share"], 0.9)
    self.assertGreater(sharp["gradient_p99"], 5 * smooth["gradient_p99"])
    reversed_ranks = lambda y, training=False: 1. - ops.handcrafted_rank(y, 1.)
    self.assertEqual(training.smoothness(reversed_ranks, 8, size=5)[
        "wrong_sign_share"], 1.)

  def test_sweep_exact_is_a_staircase(self):
    values, ranks = training.sweep_first_score(None, 20, step=0.01)
    self.assertLen(values, 201)
    self.assertEqual(ranks[0], 20.)   # y_1 = -1 is the smallest
    self.assertEqual(ranks[-1], 1.)   # y_1 = 1 is the largest
    self.assertTrue(np.all(np.diff(ranks) <= 0))
    self.assertTrue(np.allclose(ranks, np.round(ranks)))


if __name__ == "__main__":
  tf.test.main()
