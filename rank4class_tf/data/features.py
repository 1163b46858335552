"""The feature contract between data, model and serving.

A ranking example is one instance (the *query*) with every class listed as a
*document*, in TF-Ranking's terms:

* context features: the instance as an `InstanceInputs` turns it into model
  features (the image itself, or BERT token ids of the text);
* example feature `CLASS_ID`: [batch_size, num_classes, 1] int64, the class
  list of each instance (every class, in id order);
* mask `MASK`: [batch_size, num_classes] bool, all True;
* labels: [batch_size, num_classes] float one-hot (or multi-hot) relevance.

The tf.data pipelines (`datasets`), the model (`model`) and the serving
signatures (`serving`) all read these names from here, so none of them
depends on another for them.

>>> import tensorflow as tf
>>> features = class_list_features({"image": tf.zeros([2, 8, 8, 1])}, 3)
>>> sorted(features)
['class_id', 'example_list_mask', 'image']
>>> features[CLASS_ID][0, :, 0].numpy().tolist()
[0, 1, 2]
"""

from typing import Any, Dict, Protocol, Tuple

import tensorflow as tf

CLASS_ID = "class_id"
MASK = "example_list_mask"


class InstanceInputs(Protocol):
  """How a raw instance becomes the model's context features.

  One object serves the tf.data pipeline, the Keras inputs of the model and
  the serving signature, so training and serving read instances identically.
  Implemented by `inputs.RawInputs` (numeric instances), `inputs.TextInputs`
  (strings tokenized in the graph) and `images.ImageInputs` (images
  preprocessed in tf.data, served raw).

  Attributes:
    key: name of the raw instance feature, and of the serving input.
    shape: shape of one instance as the pipeline yields it.
  """
  key: str
  shape: Tuple[int, ...]

  def __call__(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """A batch from the tf.data pipeline -> context features."""

  def serving_features(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """A batch of raw serving inputs (`serving_spec`) -> context features."""

  def context_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    """The context features' specs (the Keras inputs of the model)."""

  def serving_spec(self) -> tf.TensorSpec:
    """The raw instance the serving signature takes, [None, ...]."""

  def encoder_input(self, context: Dict[str, tf.Tensor]) -> Any:
    """The encoder's input, picked from the context features."""

  def serving_assets(self) -> Dict[str, Any]:
    """Trackable objects the SavedModel must hold to serve raw instances
    (e.g. the tokenizer and its vocabulary file), by attribute name."""


def class_list_features(context: Dict[str, tf.Tensor],
                        num_classes: int) -> Dict[str, tf.Tensor]:
  """Adds the class list and mask to a batch's context features.

  Args:
    context: context features, each [batch_size, ...].
    num_classes: number of classes.

  Returns:
    `context` plus CLASS_ID [batch_size, num_classes, 1] int64 and MASK
    [batch_size, num_classes] bool (all True).
  """
  batch_size = tf.shape(next(iter(context.values())))[0]
  class_ids = tf.range(num_classes, dtype=tf.int64)
  class_ids = tf.tile(class_ids[tf.newaxis, :, tf.newaxis], [batch_size, 1, 1])
  return dict(context, **{
      CLASS_ID: class_ids,
      MASK: tf.ones([batch_size, num_classes], tf.bool),
  })
