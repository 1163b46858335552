"""Sorters trained with PyTorch (`tools/torch_sorter/`) as Keras sorters.

The GPU machines this project is lent have PyTorch and no TensorFlow, so the
long sorter trainings run there with `tools/torch_sorter/train_sorter_torch.py`,
whose sorters are laid out like the Keras ones. Its output file holds the
weights under their PyTorch names (`w/<name>`), the run's record (JSON) and
check vectors with the PyTorch sorter's outputs. This module maps the weights
onto the Keras layers one to one and checks that the Keras sorter gives the
same outputs; it imports no PyTorch.

The mapping (PyTorch -> Keras):

* LSTM: `weight_ih` [4u, in] -> `kernel` [in, 4u] (transposed; both order the
  gates input, forget, cell, output), `weight_hh` -> `recurrent_kernel`
  (transposed), `bias_ih + bias_hh` -> `bias`; `_reverse` is the backward
  layer of `Bidirectional`.
* Linear [out, in] -> Dense kernel [in, out].
* Conv1d [out, in, k] -> Conv1D kernel [k, in, out].
* BatchNorm1d weight, bias, running_mean, running_var -> gamma, beta,
  moving_mean, moving_variance (the epsilons are set alike in both layers).
* PReLU weight [1] -> PReLU alpha [1, 1].
"""

import json
import os
from typing import Any, Dict, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf.sorting import sorters
from rank4class_tf.sorting import synthetic
from rank4class_tf.sorting import training

# The largest |Keras - PyTorch| output difference accepted on the check
# vectors: float32 arithmetic in another order, not another function.
CHECK_TOLERANCE = 1e-4
# Check vectors in an output file (as train_sorter_torch.py writes them).
NUM_CHECK = 16


def read(path: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray],
                              np.ndarray, np.ndarray]:
  """(record, PyTorch weights by name, check inputs, check outputs) of a
  `train_sorter_torch.py` output file.

  Raises:
    ValueError: naming the file, if it is not such an output.
  """
  try:
    with np.load(path) as data:
      record = json.loads(str(data["record"]))
      weights = {k[2:]: data[k] for k in data.files if k.startswith("w/")}
      return (record, weights, data["check_inputs"], data["check_outputs"])
  except (OSError, KeyError, ValueError) as e:
    raise ValueError(f"{path} is not a train_sorter_torch.py output "
                     f"({type(e).__name__}: {e}).") from None


def _lstm(sorter, weights):
  for i, rnn in enumerate(sorter.rnns):
    for suffix, layer in (("", rnn.forward_layer),
                          ("_reverse", rnn.backward_layer)):
      cell = layer.cell
      cell.kernel.assign(weights.pop(f"lstm.weight_ih_l{i}{suffix}").T)
      cell.recurrent_kernel.assign(
          weights.pop(f"lstm.weight_hh_l{i}{suffix}").T)
      cell.bias.assign(weights.pop(f"lstm.bias_ih_l{i}{suffix}") +
                       weights.pop(f"lstm.bias_hh_l{i}{suffix}"))
  dense = (sorter.projection if sorter.projection_kind == "full"
           else sorter.projection.layers[0])
  dense.kernel.assign(weights.pop("projection.weight").T)
  dense.bias.assign(weights.pop("projection.bias"))


def _norm(norm, weights, prefix):
  norm.gamma.assign(weights.pop(f"{prefix}.weight"))
  norm.beta.assign(weights.pop(f"{prefix}.bias"))
  norm.moving_mean.assign(weights.pop(f"{prefix}.running_mean"))
  norm.moving_variance.assign(weights.pop(f"{prefix}.running_var"))


def _conv(conv, weights, prefix):
  conv.kernel.assign(np.transpose(weights.pop(f"{prefix}.weight"), (2, 1, 0)))
  if conv.use_bias:
    conv.bias.assign(weights.pop(f"{prefix}.bias"))


def _cnn(sorter, weights):
  for b, (conv, norm) in enumerate(sorter.blocks):
    _conv(conv, weights, f"convs.{b}")
    _norm(norm, weights, f"norms.{b}")
  sorter.projection.kernel.assign(weights.pop("projection.weight").T)
  sorter.projection.bias.assign(weights.pop("projection.bias"))


def _cnn_reference(sorter, weights):
  for b, (conv, norm, prelu) in enumerate(sorter.blocks):
    _conv(conv, weights, f"convs.{b}")
    if norm is not None:
      _norm(norm, weights, f"norms.{b}")
    prelu.alpha.assign(np.reshape(weights.pop(f"prelus.{b}.weight"), [1, 1]))
  _conv(sorter.output_conv, weights, "output")


_IMPORTERS = {"lstm": _lstm, "cnn": _cnn, "cnn_reference": _cnn_reference}


def to_keras(record: Dict[str, Any],
             weights: Dict[str, np.ndarray]) -> tf.keras.layers.Layer:
  """The Keras sorter of a PyTorch run, with its weights.

  Args:
    record: the run's record (sorter, seq_len, hyperparameters).
    weights: the PyTorch weights by name.

  Returns:
    A built, frozen Keras sorter layer.

  Raises:
    ValueError: for a sorter PyTorch does not train, or weights that do not
      fit (a missing, left-over or misshapen array).
  """
  name = record["sorter"]
  if name not in _IMPORTERS:
    raise ValueError(f"No PyTorch import for sorter {name!r}; importable: "
                     f"{', '.join(_IMPORTERS)}.")
  sorter = sorters.get(name, record["seq_len"], trainable=False,
                       **record["hyperparameters"])
  sorter(tf.zeros([1, record["seq_len"]]))
  remaining = dict(weights)
  try:
    _IMPORTERS[name](sorter, remaining)
  except KeyError as e:
    raise ValueError(f"The PyTorch weights lack {e.args[0]!r}.") from None
  except ValueError as e:  # A shape that does not fit.
    raise ValueError(f"The PyTorch weights do not fit the {name} sorter: "
                     f"{e}") from None
  if remaining:
    raise ValueError("PyTorch weights left over: "
                     f"{', '.join(sorted(remaining))}.")
  return sorter


def _lstm_to_torch(sorter):
  weights = {}
  for i, rnn in enumerate(sorter.rnns):
    for suffix, layer in (("", rnn.forward_layer),
                          ("_reverse", rnn.backward_layer)):
      cell = layer.cell
      weights[f"lstm.weight_ih_l{i}{suffix}"] = cell.kernel.numpy().T
      weights[f"lstm.weight_hh_l{i}{suffix}"] = cell.recurrent_kernel.numpy().T
      # Keras keeps one bias, the sum of PyTorch's two: all of it in bias_ih.
      weights[f"lstm.bias_ih_l{i}{suffix}"] = cell.bias.numpy()
      weights[f"lstm.bias_hh_l{i}{suffix}"] = np.zeros_like(cell.bias.numpy())
  dense = (sorter.projection if sorter.projection_kind == "full"
           else sorter.projection.layers[0])
  weights["projection.weight"] = dense.kernel.numpy().T
  weights["projection.bias"] = dense.bias.numpy()
  return weights


def _norm_to_torch(norm, prefix):
  return {f"{prefix}.weight": norm.gamma.numpy(),
          f"{prefix}.bias": norm.beta.numpy(),
          f"{prefix}.running_mean": norm.moving_mean.numpy(),
          f"{prefix}.running_var": norm.moving_variance.numpy()}


def _conv_to_torch(conv, prefix):
  weights = {f"{prefix}.weight": np.transpose(conv.kernel.numpy(), (2, 1, 0))}
  if conv.use_bias:
    weights[f"{prefix}.bias"] = conv.bias.numpy()
  return weights


def _cnn_to_torch(sorter):
  weights = {}
  for b, (conv, norm) in enumerate(sorter.blocks):
    weights.update(_conv_to_torch(conv, f"convs.{b}"))
    weights.update(_norm_to_torch(norm, f"norms.{b}"))
  weights["projection.weight"] = sorter.projection.kernel.numpy().T
  weights["projection.bias"] = sorter.projection.bias.numpy()
  return weights


def _cnn_reference_to_torch(sorter):
  weights = {}
  for b, (conv, norm, prelu) in enumerate(sorter.blocks):
    weights.update(_conv_to_torch(conv, f"convs.{b}"))
    if norm is not None:
      weights.update(_norm_to_torch(norm, f"norms.{b}"))
    weights[f"prelus.{b}.weight"] = np.reshape(prelu.alpha.numpy(), [1])
  weights.update(_conv_to_torch(sorter.output_conv, "output"))
  return weights


_EXPORTERS = {"lstm": _lstm_to_torch, "cnn": _cnn_to_torch,
              "cnn_reference": _cnn_reference_to_torch}


def check_init(key: str, directory: str = sorters.PRETRAINED_DIR) -> None:
  """Raises ValueError unless `write_init(key, ...)` can succeed: `key` is a
  shipped sorter of a kind PyTorch trains. A binary calls it for every key
  before it writes anything."""
  index = sorters.pretrained_index(directory)
  if key not in index:
    raise ValueError(f"{key} is not a shipped sorter (shipped: "
                     f"{', '.join(sorted(index)) or 'none'}).")
  if index[key]["sorter"] not in _EXPORTERS:
    raise ValueError(f"{key}: PyTorch does not train "
                     f"{index[key]['sorter']!r} sorters (it trains "
                     f"{', '.join(_EXPORTERS)}).")


def write_init(key: str, path: str, command: str,
               directory: str = sorters.PRETRAINED_DIR) -> Dict[str, Any]:
  """Writes a shipped sorter as a `train_sorter_torch.py` output file, for
  its `--init_from`: training goes on from the committed weights on a GPU
  machine, where the PyTorch outputs of the earlier run are long gone.

  The file holds the weights under their PyTorch names (the inverse of
  `to_keras`; an LSTM's one Keras bias goes into `bias_ih`, `bias_hh` is 0),
  the shipped entry as its record (vectors, seconds and curve go on; its
  command, then `command`) and 16 check vectors with the Keras outputs, so
  that `read`, `to_keras` and `check` take it back unchanged.

  Returns:
    The record written.

  Raises:
    ValueError: for a key that is not shipped or a sorter PyTorch does not
      train.
  """
  check_init(key, directory)
  entry = sorters.pretrained_index(directory)[key]
  sorter = sorters.load_sorter(entry["sorter"], entry["seq_len"],
                               directory=directory)
  weights = _EXPORTERS[entry["sorter"]](sorter)
  inputs = np.random.default_rng(NUM_CHECK).standard_normal(
      (NUM_CHECK, entry["seq_len"])).astype(np.float32)
  outputs = sorter(tf.constant(inputs), training=False).numpy()
  record = {k: entry[k] for k in ("sorter", "seq_len", "hyperparameters",
                                  "train_vectors", "train_seconds", "curve",
                                  "batch_size", "device") if k in entry}
  record.update(command=" && ".join([entry["command"], command]),
                l1_torch=entry.get("l1_torch"), final=True)
  tf.io.gfile.makedirs(os.path.dirname(os.path.abspath(path)))
  np.savez_compressed(path, record=np.array(json.dumps(record)),
                      check_inputs=inputs, check_outputs=outputs,
                      **{f"w/{k}": v.astype(np.float32)
                         for k, v in weights.items()})
  return record


def check(sorter: tf.keras.layers.Layer, inputs: np.ndarray,
          expected: np.ndarray) -> float:
  """The largest |Keras - PyTorch| output on the check vectors.

  Raises:
    ValueError: when it is over `CHECK_TOLERANCE`.
  """
  got = sorter(tf.constant(inputs), training=False).numpy()
  error = float(np.max(np.abs(got - expected)))
  if not error <= CHECK_TOLERANCE:
    raise ValueError(f"The Keras sorter differs from the PyTorch one by "
                     f"{error:.3g} on the check vectors (tolerance "
                     f"{CHECK_TOLERANCE}).")
  return error


def write_sets(directory: str, seq_lens: Sequence[int]) -> Dict[str, str]:
  """Writes the fixed validation and test sets for the PyTorch trainer.

  `validation_d<d>.npz` (the 2,000 vectors `training.train` validates on)
  and `test_d<d>.npz` (`synthetic.test_set`, the 10,000 of
  `evaluate_sorter`), each with `scores` and `ranks` [n, d] float32.

  Returns:
    File name -> path of what was written.
  """
  tf.io.gfile.makedirs(directory)
  written = {}
  for d in seq_lens:
    for kind, (size, seed) in (
        ("validation", (training.VALIDATION_SIZE, synthetic.VALIDATION_SEED)),
        ("test", (synthetic.TEST_SIZE, synthetic.TEST_SEED))):
      scores, ranks = synthetic.fixed_set(size, d, seed)
      name = f"{kind}_d{d}.npz"
      path = os.path.join(directory, name)
      np.savez(path, scores=scores.numpy(), ranks=ranks.numpy())
      written[name] = path
  return written


def import_run(path: str) -> Tuple[tf.keras.layers.Layer, Dict[str, Any]]:
  """(Keras sorter, record) of a finished PyTorch run, checked and scored.

  The record is the run's, with `l1` measured here by
  `training.evaluate_l1` on the fixed test set, `l1_torch` as PyTorch
  measured it on the same set, `check_error` (`check`) and `trained_with`.

  Raises:
    ValueError: naming the file, for a snapshot of an unfinished run,
      weights that do not fit, or outputs that differ.
  """
  record, weights, inputs, outputs = read(path)
  if not record.get("final"):
    raise ValueError(f"{path} is a snapshot of an unfinished run "
                     f"({record.get('train_vectors')} vectors); import the "
                     "file the finished run wrote.")
  try:
    sorter = to_keras(record, weights)
    error = check(sorter, inputs, outputs)
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from None
  record = dict(record, l1=round(training.evaluate_l1(
      sorter, record["seq_len"]), 6), check_error=error,
                trained_with="pytorch")
  record.pop("final")
  return sorter, record


def ship(sorter: tf.keras.layers.Layer, record: Dict[str, Any],
         directory: str, command: str) -> Dict[str, Any]:
  """Writes an imported sorter as `<sorter>_d<d>.npz` into `directory` and
  its entry (the record, `command`, `weights`, `size_bytes`) into
  `directory/sorters.json`, as `training.export_pretrained` does for a
  TensorFlow run.

  Returns:
    The index entry.
  """
  return training.ship_weights(
      directory, record, command,
      lambda path: sorters.save_weights(sorter, path))
