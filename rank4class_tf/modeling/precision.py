"""Which layers compute in float32 when a run computes in bfloat16.

Keras' `mixed_bfloat16` policy computes every layer in bfloat16 (8 bits of
mantissa, about 2 decimal digits) with float32 weights; the Model Garden
already keeps its layer norms and GELU in float32. Trained that way, the
1,000-step MiniLM fine-tune lost 0.0116 of test Top-1 in 3 of 3 seeds
(results/text_speed/accuracy.md). `benchmarks/bfloat16_error.py` measures,
against float32 on the same weights and batches, the error each part adds
(results/text_speed/bfloat16_error.md): the class scores and the loss
computed from a bfloat16 h, the sum of the three embeddings rounded to
bfloat16 before its layer norm, and the attention softmax in bfloat16.

`keep_float32` gives these the float32 policy, as PyTorch's autocast does
(its matrix products in bfloat16; embeddings, softmax, layer norms, sums
and the loss in float32):

* `head`: every layer outside the encoders' networks: the text encoder's
  pooling and the dropout on h (`encoders.BertInstanceEncoder` itself),
  the class table or class encoder, the interaction and the scores;
* `embeddings`: the word, position and type embeddings and their sum
  (`OnDeviceEmbedding`, `PositionEmbedding`, the `Add` before the
  embeddings' layer norm);
* `attention_softmax`: the softmax of every attention layer
  (`tf.keras.layers.Softmax` inside `MultiHeadAttention`).

The transformer's dense layers (attention projections, feed-forward) stay
in bfloat16: they are nearly all of the step's arithmetic. The optimizer's
update needs nothing: Keras keeps the weights, their gradients and Adam's
slots in float32 under a mixed policy.

A layer's policy can only be given when it is made, and the Model Garden's
`BertEncoder` makes its layers inside one constructor; so the policy is set
on the built model, before its first call (Keras' `Layer._set_dtype_policy`,
the one setter it has; there is no public one). A functional model calls
its layers again at each call, each under its own policy.
"""

from typing import Dict, List, Tuple

import tensorflow as tf
from official.nlp.modeling import layers as nlp_layers
from official.nlp.modeling import networks

from rank4class_tf.modeling import encoders

# The groups `keep_float32` sets, in the order of the module doc.
GROUPS = ("head", "embeddings", "attention_softmax")
# Measured, not kept by default: the residual stream of the Transformer
# blocks in float32 (each block's adds, and the attention's output
# projection that feeds them).
OPTIONAL_GROUPS = ("residual",)
_EMBEDDINGS = (nlp_layers.OnDeviceEmbedding, nlp_layers.PositionEmbedding,
               tf.keras.layers.Add)


def _layers(module: tf.Module) -> List[tf.keras.layers.Layer]:
  """`module` and its Keras layers, each once, in a fixed order."""
  seen, out = set(), []
  for layer in [module, *module.submodules]:
    if isinstance(layer, tf.keras.layers.Layer) and id(layer) not in seen:
      seen.add(id(layer))
      out.append(layer)
  return out


def encoder_parts(model: tf.keras.Model) -> Tuple[set, set]:
  """(ids of the layers inside a Transformer network, ids of the layers
  inside any other encoder): what `keep_float32` leaves to the policy."""
  transformer, other = set(), set()
  for layer in _layers(model):
    if isinstance(layer, networks.BertEncoder):
      transformer.update(id(sub) for sub in _layers(layer))
    elif isinstance(layer, (encoders.SmallCNN, encoders.MLPEncoder,
                            encoders.VGG16Encoder,
                            encoders.ResNet50Encoder)):
      other.update(id(sub) for sub in _layers(layer))
  return transformer, other


def float32_layers(model: tf.keras.Model,
                   groups: Tuple[str, ...] = GROUPS
                  ) -> Dict[str, List[tf.keras.layers.Layer]]:
  """{group: its layers in `model`} for the `groups` of the module doc."""
  for group in groups:
    if group not in GROUPS + OPTIONAL_GROUPS:
      raise ValueError(f"Unknown float32 group {group!r}; valid groups: "
                       f"{', '.join(GROUPS + OPTIONAL_GROUPS)}.")
  transformer, other = encoder_parts(model)
  found = {group: [] for group in groups}
  for layer in _layers(model):
    if id(layer) in transformer:
      if isinstance(layer, _EMBEDDINGS) and "embeddings" in found:
        found["embeddings"].append(layer)
      elif (isinstance(layer, tf.keras.layers.Softmax) and
            "attention_softmax" in found):
        found["attention_softmax"].append(layer)
      elif "residual" in found and (
          isinstance(layer, nlp_layers.TransformerEncoderBlock) or
          (isinstance(layer, tf.keras.layers.EinsumDense) and
           layer.name == "attention_output")):
        found["residual"].append(layer)
        if isinstance(layer, nlp_layers.TransformerEncoderBlock):
          # The dropout on the attention's output, before the residual add
          # (the Model Garden's attribute: no public name).
          found["residual"].append(layer._attention_dropout)  # pylint: disable=protected-access
    elif (id(layer) not in other and "head" in found and
          not isinstance(layer, tf.keras.Model) and
          not isinstance(layer, tf.keras.layers.InputLayer)):
      found["head"].append(layer)
  return found


def keep_float32(model: tf.keras.Model,
                 groups: Tuple[str, ...] = GROUPS) -> int:
  """Gives the layers of `groups` (`float32_layers`) the float32 policy,
  before the model's first call; returns how many changed. Under a
  float32 policy it changes nothing."""
  changed = 0
  for layers in float32_layers(model, groups).values():
    for layer in layers:
      if layer.dtype_policy.name != "float32":
        layer._set_dtype_policy("float32")  # pylint: disable=protected-access
        changed += 1
  return changed
