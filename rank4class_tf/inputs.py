"""How a raw instance becomes the model's context features.

The same object serves the tf.data pipeline, the Keras inputs of the model and
the serving signature, so training and serving read instances identically:

* `RawInputs`: a numeric instance (an image) is its own feature.
* `TextInputs`: raw strings are tokenized inside the graph by
  `text.TextPreprocessor` into `input_word_ids`, `input_mask`,
  `input_type_ids` [batch_size, seq_length].
"""

from typing import Dict, Tuple, Union

import tensorflow as tf

from rank4class_tf import text


class RawInputs:
  """A numeric instance passed to the encoder as it is.

  Args:
    key: feature name (e.g. `image`).
    shape: shape of one instance.
    dtype: its dtype.
  """

  def __init__(self, key: str, shape: Tuple[int, ...], dtype: tf.DType):
    self.key = key
    self.shape = tuple(shape)
    self.dtype = dtype

  def __call__(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """[batch_size, ...] raw instances -> context features.

    Float instances with NaN or Inf entries stop the pipeline (or the serving
    call) with an InvalidArgumentError naming the feature.
    """
    if self.dtype.is_floating:
      instance = tf.debugging.assert_all_finite(
          instance, f"{self.key}: NaN or Inf values in the instance")
    return {self.key: instance}

  def context_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    return {self.key: tf.io.FixedLenFeature(self.shape, self.dtype)}

  def serving_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None, *self.shape], self.dtype, name=self.key)

  def encoder_input(self, context: Dict[str, tf.Tensor]) -> tf.Tensor:
    return context[self.key]


class TextInputs:
  """Raw text tokenized into BERT inputs.

  Args:
    key: name of the raw-text serving input (e.g. `text`).
    shape: () for one string per instance, (num_segments,) for segments
      packed as [CLS] a [SEP] b [SEP].
    preprocessor: the tokenizer layer.
  """

  def __init__(self, key: str, shape: Tuple[int, ...],
               preprocessor: text.TextPreprocessor):
    self.key = key
    self.shape = tuple(shape)
    self.preprocessor = preprocessor

  def __call__(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    return self.preprocessor(instance)

  def context_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    length = [self.preprocessor.seq_length]
    return {name: tf.io.FixedLenFeature(length, tf.int32)
            for name in text.BERT_INPUTS}

  def serving_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None, *self.shape], tf.string, name=self.key)

  def encoder_input(self, context: Dict[str, tf.Tensor]
                   ) -> Dict[str, tf.Tensor]:
    return {name: context[name] for name in text.BERT_INPUTS}


InstanceInputs = Union[RawInputs, TextInputs]
