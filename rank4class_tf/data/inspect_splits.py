"""What `inspection.inspect` reads of each split: the instances, labels and
text lengths of a split in one pass (`_read_split`), the numbers of the
report built from them (`_split_report`), and the duplicates across splits
(`_leakage`).
"""

import hashlib
import io
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import catalog
from rank4class_tf.data import contract
from rank4class_tf.data import text

PERCENTILES = (50, 90, 95, 99)
BATCH_SIZE = 1024
UNKNOWN_TOKEN = "[UNK]"
# Examples (and paths) kept per finding; characters of a text shown.
EXAMPLES = 5
TEXT_CHARS = 80


def percentiles(values: Sequence[int]) -> Dict[str, int]:
  """`p50`, `p90`, `p95`, `p99` and `max` of integers: the q-th percentile
  is the smallest value that at least q% of the values do not exceed.

  >>> percentiles([3, 1, 2, 10])
  {'p50': 2, 'p90': 10, 'p95': 10, 'p99': 10, 'max': 10}
  """
  ordered = np.sort(np.asarray(values))
  if not len(ordered):
    return {}
  n = len(ordered)
  out = {f"p{q}": int(ordered[max(0, -(-q * n // 100) - 1)])
         for q in PERCENTILES}
  out["max"] = int(ordered[-1])
  return out


def _clip(value: Optional[str], chars: int = TEXT_CHARS) -> Optional[str]:
  """The text on one line, cut to `chars` characters (None stays None)."""
  if value is None:
    return None
  value = " ".join(value.split())
  return value if len(value) <= chars else value[:chars - 1] + "\u2026"


def _share(part: int, whole: int) -> float:
  return round(part / whole, 6) if whole else 0.0


def _percent(share: float) -> str:
  """38%, 4.2%, 0.05%: two significant digits below 10%."""
  value = 100.0 * share
  if value >= 10 or value == 0:
    return f"{value:.0f}%"
  return f"{value:.2g}%"


def _unknown_id(vocab_file: str) -> Optional[int]:
  """The line of `[UNK]` in a WordPiece vocabulary (its id), or None."""
  with tf.io.gfile.GFile(vocab_file, "r") as f:
    for number, line in enumerate(f):
      if line.rstrip("\r\n") == UNKNOWN_TOKEN:
        return number
  return None


def _token_counts(preprocessor: text.TextPreprocessor,
                  unknown_id: Optional[int]):
  """Map fn: batched (texts, labels) -> (texts, labels, tokens [batch],
  unknown tokens [batch]); texts are [batch] or [batch, num_segments]."""
  tokenizer = preprocessor.tokenizer

  def counts(texts, labels):
    segments = ([texts] if texts.shape.rank == 1 else
                tf.unstack(texts, axis=1))
    size = tf.shape(texts, out_type=tf.int64)[:1]
    tokens = tf.fill(size, tf.constant(len(segments) + 1, tf.int64))
    unknown = tf.zeros(size, tf.int64)
    for segment in segments:
      pieces = tokenizer(segment).merge_dims(1, 2)  # [batch, (tokens)]
      tokens += pieces.row_lengths()
      if unknown_id is not None:
        unknown += tf.reduce_sum(
            tf.cast(tf.equal(pieces, unknown_id), tf.int64), axis=1)
    return texts, labels, tokens, unknown

  return counts


def _image_facts(image, label):
  """(height, width, 8-byte fingerprint of the pixels, label): the pixels
  stay in the pipeline."""
  fingerprint = tf.fingerprint(tf.reshape(image, [1, -1]))[0]
  shape = tf.shape(image)
  return shape[0], shape[1], fingerprint, label


def _digest(*parts: bytes) -> bytes:
  h = hashlib.blake2b(digest_size=16)
  for part in parts:
    h.update(len(part).to_bytes(8, "little"))
    h.update(part)
  return h.digest()


def _label_key(label: np.ndarray) -> Tuple[int, ...]:
  return tuple(np.flatnonzero(label)) if label.ndim else (int(label),)


class _Split:
  """What one split's batches add up to.

  Args:
    name: the split.
    num_classes: classes of the data set.
    multi_label: labels are multi-hot vectors.
    earlier: the splits read before, whose instances this one's are looked
      up in (leakage), by name.
  """

  def __init__(self, name: str, num_classes: int, multi_label: bool,
               earlier: Dict[str, "_Split"]):
    self.name = name
    self.size = 0
    self.class_counts = np.zeros([num_classes], np.int64)
    self.multi_label = multi_label
    self.labels_per_instance: Dict[int, int] = {}
    # Digest -> [first row, its label, rows]: the only per-instance state.
    self.seen: Dict[bytes, list] = {}
    self.duplicates = 0
    self.conflicts = 0
    self.duplicate_example = None
    self.earlier = earlier
    self.leaks = {split: {"count": 0, "distinct": 0, "example": None}
                  for split in earlier}
    self.lengths: List[np.ndarray] = []  # Tokens per text.
    self.heights: List[np.ndarray] = []
    self.widths: List[np.ndarray] = []
    self.tokens = 0
    self.unknown = 0
    self.truncated = 0
    self.truncated_example = None
    self.empty: List[int] = []
    self.empty_count = 0
    # Feature vectors: count, mean, sum of squared deviations (merged batch
    # by batch, Chan et al.'s update), minimum, maximum per feature.
    self.moments: Optional[Dict[str, Any]] = None

  def add_labels(self, labels: np.ndarray) -> None:
    if self.multi_label:
      self.class_counts += (labels > 0).sum(axis=0).astype(np.int64)
      for count in (labels > 0).sum(axis=1):
        count = int(count)
        self.labels_per_instance[count] = (
            self.labels_per_instance.get(count, 0) + 1)
    else:
      self.class_counts += np.bincount(labels.astype(np.int64),
                                       minlength=len(self.class_counts))

  def add_instance(self, key: bytes, label: np.ndarray,
                   shown: Optional[str]) -> None:
    """One instance, by its digest: a duplicate when this split has had it,
    a leak for each earlier split that has; `shown`: its text, for the
    examples (None for images and vectors: their row is shown)."""
    row = self.size
    self.size += 1
    label_key = _label_key(label)
    entry = self.seen.get(key)
    for split, other in self.earlier.items():
      if key in other.seen:
        leak = self.leaks[split]
        leak["count"] += 1
        if entry is None:
          leak["distinct"] += 1
        if leak["example"] is None:
          leak["example"] = {"row": row, "row_in": other.seen[key][0],
                             "instance": _clip(shown)}
    if entry is None:
      self.seen[key] = [row, label_key, 1]
      return
    entry[2] += 1
    self.duplicates += 1
    if entry[1] != label_key:
      self.conflicts += 1
    if self.duplicate_example is None:
      self.duplicate_example = {"row": row, "first_row": entry[0],
                                "instance": _clip(shown)}


def _read_split(data: contract.ClassificationData, split: str, kind: str,
                preprocessor: Optional[text.TextPreprocessor],
                unknown_id: Optional[int], batch_size: int,
                earlier: Dict[str, _Split]) -> _Split:
  """Reads one split in batches into a `_Split` (`earlier`: the splits read
  before it).

  Raises:
    ValueError: naming the split when tf.data cannot read it.
  """
  out = _Split(split, data.num_classes, data.multi_label, earlier)
  ds = data.dataset(split)
  if kind == "image":
    ds = ds.map(_image_facts, num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True)
  ds = ds.batch(batch_size)
  if kind == "text" and preprocessor is not None:
    ds = ds.map(_token_counts(preprocessor, unknown_id),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  ds = ds.prefetch(2)
  seq_length = preprocessor.seq_length if preprocessor is not None else None
  try:
    for batch in ds.as_numpy_iterator():
      if kind == "text":
        _add_texts(out, batch, seq_length)
      elif kind == "image":
        _add_images(out, batch)
      else:
        _add_vectors(out, batch)
  except tf.errors.OpError as e:
    raise ValueError(f"{data.name}: the {split} split cannot be read "
                     f"({e.message.splitlines()[0]}).") from None
  return out


def _add_texts(out: _Split, batch, seq_length: Optional[int]) -> None:
  texts, labels = batch[0], batch[1]
  out.add_labels(labels)
  if len(batch) == 4:
    tokens, unknown = batch[2], batch[3]
    out.lengths.append(tokens.astype(np.int32))
    out.tokens += int(tokens.sum())
    out.unknown += int(unknown.sum())
  for i, instance in enumerate(texts):
    segments = [instance] if isinstance(instance, bytes) else list(instance)
    row = out.size
    decoded = [segment.decode("utf-8", "replace") for segment in segments]
    shown = " | ".join(decoded)
    if not any(segment.strip() for segment in decoded):
      out.empty_count += 1
      if len(out.empty) < EXAMPLES:
        out.empty.append(row)
    if len(batch) == 4 and tokens[i] > seq_length:
      out.truncated += 1
      if out.truncated_example is None:
        out.truncated_example = {"row": row, "tokens": int(tokens[i]),
                                 "instance": _clip(shown)}
    out.add_instance(_digest(*segments), labels[i], shown)


def _add_images(out: _Split, batch) -> None:
  heights, widths, fingerprints, labels = batch
  out.add_labels(labels)
  out.heights.append(heights.astype(np.int32))
  out.widths.append(widths.astype(np.int32))
  for i in range(len(labels)):
    key = _digest(fingerprints[i].tobytes(),
                  np.array([heights[i], widths[i]], np.int64).tobytes())
    out.add_instance(key, labels[i], None)


def _add_vectors(out: _Split, batch) -> None:
  vectors, labels = batch
  out.add_labels(labels)
  values = vectors.reshape([len(vectors), -1]).astype(np.float64)
  mean = values.mean(axis=0)
  squares = np.square(values - mean).sum(axis=0)
  m = out.moments
  if m is None:
    out.moments = {"n": len(values), "mean": mean, "m2": squares,
                   "min": values.min(axis=0), "max": values.max(axis=0)}
  else:
    n = m["n"] + len(values)
    delta = mean - m["mean"]
    m["mean"] = m["mean"] + delta * len(values) / n
    m["m2"] = m["m2"] + squares + np.square(delta) * m["n"] * len(values) / n
    m["n"] = n
    m["min"] = np.minimum(m["min"], values.min(axis=0))
    m["max"] = np.maximum(m["max"], values.max(axis=0))
  for i, vector in enumerate(vectors):
    out.add_instance(_digest(np.ascontiguousarray(vector).tobytes()),
                     labels[i], None)


def _split_report(split: _Split, data: contract.ClassificationData,
                  kind: str) -> Dict[str, Any]:
  names = data.class_names
  counts = {name: int(c) for name, c in zip(names, split.class_counts)}
  present = [c for c in split.class_counts if c > 0]
  report = {
      "size": split.size,
      "class_counts": counts,
      "imbalance_ratio": (round(float(max(present)) / float(min(present)), 4)
                          if present else None),
      "missing_classes": [n for n, c in counts.items() if c == 0],
      "duplicates": {
          "rows": split.duplicates,
          "distinct": sum(1 for e in split.seen.values() if e[2] > 1),
          "conflicting_labels": split.conflicts,
          "example": split.duplicate_example,
      },
  }
  if split.multi_label:
    per = split.labels_per_instance
    report["labels_per_instance"] = {str(k): per[k] for k in sorted(per)}
    report["mean_labels_per_instance"] = round(
        sum(k * v for k, v in per.items()) / max(1, split.size), 6)
  if kind == "text":
    report["empty"] = {"count": split.empty_count, "rows": split.empty}
    if split.lengths:
      report["tokens"] = percentiles(np.concatenate(split.lengths))
      report["total_tokens"] = split.tokens
      report["unknown_tokens"] = split.unknown
      report["unknown_share"] = _share(split.unknown, split.tokens)
      report["truncated"] = {"count": split.truncated,
                             "share": _share(split.truncated, split.size),
                             "example": split.truncated_example}
  elif kind == "image":
    if split.heights:
      report["image_height"] = percentiles(np.concatenate(split.heights))
      report["image_width"] = percentiles(np.concatenate(split.widths))
  elif split.moments is not None:
    m = split.moments
    mean, low, high = m["mean"], m["min"], m["max"]
    std = np.sqrt(m["m2"] / m["n"])  # The population's, as training's.
    feature_names = data.feature_names or tuple(
        f"feature_{i}" for i in range(len(mean)))
    report["features"] = {
        name: {"mean": float(m), "std": float(s), "min": float(lo),
               "max": float(hi)}
        for name, m, s, lo, hi in zip(feature_names, mean, std, low, high)}
    report["constant_features"] = [
        name for name, lo, hi in zip(feature_names, low, high) if lo == hi]
  return report


def _leakage(read: Dict[str, _Split], data: contract.ClassificationData
            ) -> List[Dict[str, Any]]:
  """For each split after the first, the rows whose instance occurs in each
  earlier split (`count`), the distinct such instances, the first one."""
  out = []
  for split, s in read.items():
    for earlier, leak in s.leaks.items():
      if (data.name in catalog.VALIDATION_IS_TEST and
          {split, earlier} == {"validation", "test"}):
        continue
      out.append(dict({"split": split, "in": earlier}, **leak))
  return out
