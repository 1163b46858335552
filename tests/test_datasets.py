"""Tests of rank4class_tf.datasets."""

import numpy as np
import tensorflow as tf

from rank4class_tf import datasets


class DigitsTest(tf.test.TestCase):

  def test_split_sizes_and_stratification(self):
    data = datasets.get("digits")
    self.assertEqual({s: data.size(s) for s in datasets.SPLITS},
                     {"train": 1257, "validation": 270, "test": 270})
    self.assertEqual(data.num_classes, 10)
    for split in datasets.SPLITS:
      counts = np.bincount(data.splits[split][1], minlength=10)
      share = counts / counts.sum()
      self.assertAllClose(share, np.full(10, 0.1), atol=0.012)

  def test_split_is_fixed_and_disjoint(self):
    a, b = datasets.get("digits"), datasets.get("digits")
    for split in datasets.SPLITS:
      self.assertAllEqual(a.splits[split][0], b.splits[split][0])
    flat = {s: {x.tobytes() for x in a.splits[s][0]} for s in datasets.SPLITS}
    # Digits has a few duplicate images; the splits share almost none.
    self.assertLess(len(flat["train"] & flat["test"]), 5)
    self.assertEqual(a.splits["train"][0].dtype, np.float32)
    self.assertLessEqual(a.splits["train"][0].max(), 1.0)

  def test_ranking_dataset_shapes(self):
    data = datasets.get("digits")
    features, labels = next(iter(
        datasets.ranking_dataset(data, "train", 16, training=True, seed=3)))
    self.assertEqual(features["image"].shape, (16, 8, 8, 1))
    self.assertEqual(features[datasets.CLASS_ID].shape, (16, 10, 1))
    self.assertAllEqual(features[datasets.CLASS_ID][5, :, 0], np.arange(10))
    self.assertAllEqual(features[datasets.MASK], np.ones((16, 10), bool))
    self.assertAllEqual(tf.reduce_sum(labels, axis=1), np.ones(16))

  def test_training_shuffle_is_seeded(self):
    data = datasets.get("digits")
    def first_labels(seed):
      ds = datasets.ranking_dataset(data, "train", 32, training=True,
                                    seed=seed)
      return next(iter(ds))[1].numpy()
    self.assertAllEqual(first_labels(7), first_labels(7))
    self.assertNotAllEqual(first_labels(7), first_labels(8))

  def test_eval_dataset_reads_every_example_once_in_order(self):
    data = datasets.get("digits")
    labels = np.concatenate([
        np.argmax(l, axis=1) for _, l in
        datasets.ranking_dataset(data, "test", 64, training=False)])
    self.assertAllEqual(labels, data.splits["test"][1])

  def test_unknown_name_and_split(self):
    with self.assertRaisesRegex(ValueError, "valid names: digits"):
      datasets.get("mnist")
    with self.assertRaisesRegex(ValueError, "valid splits: train"):
      datasets.get("digits").dataset("dev")


if __name__ == "__main__":
  tf.test.main()
