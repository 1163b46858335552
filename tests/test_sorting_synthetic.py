"""Tests of rank4class_tf.sorting.synthetic."""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from rank4class_tf.sorting import synthetic


class SyntheticTest(tf.test.TestCase):

  def test_ranks_are_an_exact_sort(self):
    scores, ranks = synthetic.sample_batch(64, 20, [1, 2])
    scores, ranks = scores.numpy(), ranks.numpy()
    # Independent ground truth: position in the descending numpy sort.
    order = np.argsort(-scores, axis=1, kind="stable")
    for b in range(64):
      expected = np.empty(20)
      expected[order[b]] = np.arange(1, 21) / 20
      np.testing.assert_allclose(ranks[b], expected, rtol=1e-6)

  def test_seeded_and_reproducible(self):
    a, _ = synthetic.fixed_set(50, 10, 3)
    b, _ = synthetic.fixed_set(50, 10, 3)
    c, _ = synthetic.fixed_set(50, 10, 4)
    self.assertAllEqual(a, b)
    self.assertNotAllClose(a, c)

  def test_same_set_whatever_the_thread_count(self):
    # The thread count is fixed before TensorFlow starts: one process each.
    code = ("import sys, tensorflow as tf; "
            "tf.config.threading.set_intra_op_parallelism_threads("
            "int(sys.argv[1])); "
            "from rank4class_tf.sorting import synthetic; "
            "x, _ = synthetic.fixed_set(2000, 10, 5); "
            "print(repr(x.numpy().astype('float64').sum()), "
            "repr((x.numpy() ** 2).astype('float64').sum()))")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=repo, TF_CPP_MIN_LOG_LEVEL="3")
    sums = [subprocess.run([sys.executable, "-c", code, str(threads)],
                           capture_output=True, text=True, env=env,
                           check=True).stdout.split()[-2:]
            for threads in (1, 2)]
    self.assertEqual(sums[0], sums[1])

  def test_families_appear(self):
    scores = synthetic.sample_scores(2000, 30, [0, 0]).numpy()
    inside = np.all(np.abs(scores) <= 1., axis=1)
    # uniform and linspace rows stay in [-1, 1], normal rows mostly do not.
    self.assertBetween(inside.mean(), 0.4, 0.9)
    # linspace rows: equal consecutive gaps once sorted.
    gaps = np.diff(np.sort(scores, axis=1), axis=1)
    evenly = np.all(np.abs(gaps - gaps[:, :1]) < 1e-5, axis=1)
    self.assertBetween(evenly.mean(), 0.15, 0.35)

  def test_dataset_batches(self):
    batches = list(synthetic.dataset(8, 5, seed=1).take(2))
    self.assertLen(batches, 2)
    self.assertEqual(batches[0][0].shape, (8, 5))
    self.assertEqual(batches[0][1].shape, (8, 5))
    self.assertNotAllClose(batches[0][0], batches[1][0])


if __name__ == "__main__":
  tf.test.main()
