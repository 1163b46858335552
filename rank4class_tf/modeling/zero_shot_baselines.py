"""Scores of untrained baselines for zero-shot classes: the cosine of the
frozen encoder's instance and class-text vectors, and random scores
(`pipelines.zero_shot_baselines` reports them beside a trained model)."""

import numpy as np


def cosine_scores(instances: np.ndarray, classes: np.ndarray) -> np.ndarray:
  """Cosine similarity of every instance vector with every class vector:
  [n, dim] x [k, dim] -> [n, k] (the untrained zero-shot baseline: a
  sentence encoder's embedding of the text against that of the class name).

  >>> cosine_scores(np.array([[1., 0.], [1., 1.]]), np.array([[2., 0.]]))
  array([[1.        ],
         [0.70710678]])
  """
  instances = instances / np.linalg.norm(instances, axis=1, keepdims=True)
  classes = classes / np.linalg.norm(classes, axis=1, keepdims=True)
  return instances @ classes.T


def random_scores(num_instances: int, num_classes: int,
                  seed: int) -> np.ndarray:
  """Uniform random scores [n, k]: a random ranking of the classes per
  instance (the chance baseline), a fixed function of the seed."""
  return np.random.default_rng(seed).random((num_instances, num_classes))
