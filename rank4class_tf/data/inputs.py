"""How a raw instance becomes the model's context features.

The same object serves the tf.data pipeline, the Keras inputs of the model and
the serving signature, so training and serving read instances identically:

* `RawInputs`: a numeric instance (an image) is its own feature.
* `TextInputs`: raw strings are tokenized inside the graph by
  `text.TextPreprocessor` into `input_word_ids`, `input_mask`,
  `input_type_ids` [batch_size, seq_length].
* `images.ImageInputs`: images preprocessed in tf.data, served raw.

All three implement `features.InstanceInputs`.
"""

from typing import Any, Dict, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from rank4class_tf.data import features
from rank4class_tf.data import images
from rank4class_tf.data import text


class RawInputs:
  """A numeric instance passed to the encoder as it is, or standardised.

  Args:
    key: feature name (e.g. `image`).
    shape: shape of one instance.
    dtype: its dtype.
    statistics: (mean, std), each of `shape`: the instance becomes
      (x - mean) / std, in the tf.data pipeline and in the serving signature
      alike (constants in the graph), so a served model takes raw values.
      None: as it is.
  """

  def __init__(self, key: str, shape: Tuple[int, ...], dtype: tf.DType,
               statistics: Optional[Tuple[np.ndarray, np.ndarray]] = None):
    self.key = key
    self.shape = tuple(shape)
    self.dtype = dtype
    self.statistics = statistics

  def __call__(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """[batch_size, ...] raw instances -> context features.

    Float instances with NaN or Inf entries stop the pipeline (or the serving
    call) with an InvalidArgumentError naming the feature.
    """
    if self.dtype.is_floating:
      instance = tf.debugging.assert_all_finite(
          instance, f"{self.key}: NaN or Inf values in the instance")
    if self.statistics is not None:
      mean, std = self.statistics
      instance = ((instance - tf.constant(mean, self.dtype)) /
                  tf.constant(std, self.dtype))
    return {self.key: instance}

  def serving_features(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """Served instances are read as the pipeline's."""
    return self(instance)

  def context_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    return {self.key: tf.io.FixedLenFeature(self.shape, self.dtype)}

  def serving_assets(self) -> Dict[str, Any]:
    return {}

  def serving_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None, *self.shape], self.dtype, name=self.key)

  def encoder_input(self, context: Dict[str, tf.Tensor]) -> tf.Tensor:
    return context[self.key]


# In-memory splits whose token ids would take more than this many bytes
# (2 bytes a position) are tokenized in tf.data instead (`TextInputs.
# token_ids`).
MAX_TOKEN_ID_BYTES = 2 << 30


class TextInputs:
  """Raw text tokenized into BERT inputs.

  An in-memory split is tokenized once per process (`token_ids`, kept per
  split array) and tf.data reads its ids (`from_token_ids`); a streamed
  split is tokenized in tf.data (`__call__`, `packed`).

  Args:
    key: name of the raw-text serving input (e.g. `text`).
    shape: () for one string per instance, (num_segments,) for segments
      packed as [CLS] a [SEP] b [SEP].
    preprocessor: the tokenizer layer.
    length_bucketing: pad each batch to its longest member (rounded up to
      `text.LENGTH_QUANTUM` tokens in the pipeline, exactly in serving)
      instead of to `seq_length`; the model then takes any length up to
      `seq_length`. `datasets.ranking_dataset` also groups training
      examples by length.
  """

  def __init__(self, key: str, shape: Tuple[int, ...],
               preprocessor: text.TextPreprocessor,
               length_bucketing: bool = False):
    self.key = key
    self.shape = tuple(shape)
    self.preprocessor = preprocessor
    self.length_bucketing = bool(length_bucketing)
    # id(instances) -> (instances, their token ids): the array is kept so
    # that its id is not reused.
    self._token_ids: Dict[int, Tuple[np.ndarray, Dict[str, np.ndarray]]] = {}
    # The preprocessor as one tf.function for every split (`text.traced`).
    self._pack = text.traced(self.preprocessor, self.shape)

  def token_ids(self, instances: np.ndarray
               ) -> Optional[Dict[str, np.ndarray]]:
    """The token ids of a split's instances (`text.token_ids`), computed on
    the first call for that array and kept; None when they would take more
    than `MAX_TOKEN_ID_BYTES` (the split is then tokenized in tf.data)."""
    key = id(instances)
    if key not in self._token_ids:
      size = len(instances) * self.preprocessor.seq_length * 2
      if size > MAX_TOKEN_ID_BYTES:
        logging.info("%d texts: their token ids would take %.1f GB; "
                     "tokenizing them in tf.data instead.", len(instances),
                     size / 1e9)
        return None
      self._token_ids[key] = (instances, text.token_ids(self._pack,
                                                        instances))
    return self._token_ids[key][1]

  def from_token_ids(self, ids: Dict[str, tf.Tensor]
                    ) -> Dict[str, tf.Tensor]:
    """A batch of `token_ids` -> context features, as `__call__` gives them
    from the raw texts."""
    packed = text.expand(ids)
    return text.trim(packed) if self.length_bucketing else packed

  def __call__(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    packed = self.preprocessor(instance)
    return text.trim(packed) if self.length_bucketing else packed

  def serving_features(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """Raw strings are tokenized inside the SavedModel (with bucketing,
    padded to the request's longest text)."""
    packed = self.preprocessor(instance)
    return text.trim(packed, 1) if self.length_bucketing else packed

  def packed(self, instance: tf.Tensor) -> Dict[str, tf.Tensor]:
    """[batch] raw strings -> inputs padded to `seq_length` (what
    bucketing groups before it cuts)."""
    return self.preprocessor(instance)

  def token_lengths(self, instances: np.ndarray) -> np.ndarray:
    """Tokens of each raw instance, special tokens included: [n] int32."""
    ids = self.token_ids(instances)
    if ids is not None:
      return ids[text.LENGTH]
    chunk = 1 << 20  # Too many to keep: their lengths, a chunk at a time.
    return np.concatenate([np.zeros([0], np.int32)] + [
        text.token_ids(self._pack, instances[begin:begin + chunk])[
            text.LENGTH]
        for begin in range(0, len(instances), chunk)])

  def serving_assets(self) -> Dict[str, Any]:
    """The tokenizer: the SavedModel tracks its vocabulary table (and file,
    as an asset) so that it tokenizes raw strings on its own."""
    return {"instance_preprocessor": self.preprocessor}

  def context_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    length = [None if self.length_bucketing else self.preprocessor.seq_length]
    return {name: tf.io.FixedLenFeature(length, tf.int32)
            for name in text.BERT_INPUTS}

  def serving_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None, *self.shape], tf.string, name=self.key)

  def encoder_input(self, context: Dict[str, tf.Tensor]
                   ) -> Dict[str, tf.Tensor]:
    return {name: context[name] for name in text.BERT_INPUTS}


def default_inputs(data) -> features.InstanceInputs:
  """The inputs of a numeric dataset (`contract.ClassificationData`): the raw
  instance itself, or for image datasets with a preprocessing the
  preprocessed image (`images.ImageInputs`, whose serving signature takes raw
  uint8 images)."""
  if data.preprocessing is not None:
    return images.ImageInputs(data.instance_key, data.preprocessing)
  return RawInputs(data.instance_key, data.instance_shape,
                   data.instance_dtype,
                   data.feature_statistics)
