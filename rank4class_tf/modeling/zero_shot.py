"""Generalized zero-shot remedies inside the model: calibrated stacking and
the fusion with the untrained cosine.

A text class encoder trained on the seen classes (`--holdout_classes`)
scores them higher than any unseen class (the GZSL bias: Chao et al.
2016), and its learned projection forgets part of what the sentence
embeddings know about an unseen name. Two post-hoc remedies, applied to the
scores s_i of every class at inference:

```
  s'_i = (1 - w) s_i + w cos(h, t_i) - m [class i seen in training]
```

* `seen_margin` m (calibrated stacking): subtracted from the seen
  classes' scores;
* `cosine_fusion` w in [0, 1]: the trained score mixed with the cosine of
  the instance's encoding h and the class text's tower output t_i (the
  untrained zero-shot baseline `zero_shot_baselines.cosine_scores`): w = 0
  is the trained score, w = 1 the cosine.

Both are chosen after training on a validation split whose pseudo-unseen
classes were held out of training as well (`pipelines.zero_shot_fit`,
`ranking.gzsl.choose`), and given to the run as `--seen_margin` /
`--cosine_fusion`. They apply at inference only (validation, evaluation,
export): a training step sees s_i, so the trained weights are those of a
run without them.

The layer lives in the model (`model.ClassRankingHead`), so the exported
`serving_default` and `rank_classes` signatures serve exactly the scores
that evaluation scores. It needs t_i and whether class i was seen for any
class list: the text class encoder then returns its table as
[c_i | t_i | seen_i] (`TextClassEncoder` with `carry_features`), and a
served class text is seen when its tokens are those of a training class
that was not held out.

>>> scores = tf.constant([[2., 1., 0.]])
>>> calibrated_stacking(scores, tf.constant([1., 1., 0.]), 1.5).numpy()
array([[ 0.5, -0.5,  0. ]], dtype=float32)
"""

from typing import Any, Dict

import tensorflow as tf


def cosine_similarity(h: tf.Tensor, classes: tf.Tensor) -> tf.Tensor:
  """cos(h_b, t_i): h [batch_size, dim], classes [k, dim] ->
  [batch_size, k]."""
  return tf.matmul(tf.math.l2_normalize(h, axis=-1),
                   tf.math.l2_normalize(classes, axis=-1), transpose_b=True)


def calibrated_stacking(scores: tf.Tensor, seen: tf.Tensor,
                        margin: float) -> tf.Tensor:
  """s_i - m [i seen]: scores [batch_size, k], seen [k] (1. seen, 0. not)."""
  return scores - margin * tf.cast(seen, scores.dtype)[tf.newaxis, :]


def cosine_fusion(scores: tf.Tensor, cosine: tf.Tensor,
                  weight: float) -> tf.Tensor:
  """(1 - w) s + w cos: 0 gives the trained scores, 1 the cosine."""
  return (1.0 - weight) * scores + weight * tf.cast(cosine, scores.dtype)


@tf.keras.utils.register_keras_serializable(package="rank4class_tf")
class ZeroShotCalibration(tf.keras.layers.Layer):
  """s' = (1 - w) s + w cos(h, t) - m seen, at inference.

  Called as `layer([scores, h, class_features, seen])`:

  * scores: [batch_size, k] the trained scores;
  * h: [batch_size, dim] the instances' encodings (before the bias
    coordinate);
  * class_features: [k, dim] the classes' tower outputs t_i;
  * seen: [k] 1. for a class seen in training, 0. otherwise;

  returns [batch_size, k]; a training call returns `scores` unchanged.

  Args:
    seen_margin: m.
    cosine_fusion: w in [0, 1].
  """

  def __init__(self, seen_margin: float = 0.0, cosine_fusion: float = 0.0,
               **kwargs):
    super().__init__(**kwargs)
    if not 0.0 <= cosine_fusion <= 1.0:
      raise ValueError(f"`cosine_fusion`={cosine_fusion!r} must be in "
                       "[0, 1].")
    self.seen_margin = float(seen_margin)
    self.cosine_fusion = float(cosine_fusion)

  def call(self, inputs, training=None):
    scores, h, class_features, seen = inputs
    if training:
      return scores
    if self.cosine_fusion:
      scores = cosine_fusion(scores, cosine_similarity(
          tf.cast(h, tf.float32), tf.cast(class_features, tf.float32)),
                             self.cosine_fusion)
    if self.seen_margin:
      scores = calibrated_stacking(scores, seen, self.seen_margin)
    return scores

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update({"seen_margin": self.seen_margin,
                   "cosine_fusion": self.cosine_fusion})
    return config
