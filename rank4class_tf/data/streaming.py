"""A user's text files larger than memory, streamed by tf.data (`text_files`).

`text_files` reads its splits into memory (`user_files`) unless one split's
file is larger than `STREAM_BYTES` (256 MiB on disk): then every split
streams from its file and training never holds a split in Python.

* **Reading**: CSV and TSV (optionally gzipped) through
  `tf.data.experimental.CsvDataset`, TensorFlow's C++ RFC 4180 reader (quoted
  fields with the delimiter, doubled quotes and line breaks inside), only the
  text and label columns parsed; JSONL line by line through
  `tf.data.TextLineDataset` with each line parsed by Python's `json`.
* **One streaming pass** counts the rows and the classes of every split and
  checks every row as the in-memory reader does (an empty text, bad UTF-8, a
  label that is not a class, a row the reader cannot parse): errors name the
  file and the record (the row's number after the header, 1-based; a CSV
  record may span lines). Its result is cached under `cache_dir()`, keyed by
  the files' SHA-256 and the reading options, so the next run on the same
  data skips it (hashing 2 GB takes seconds; the pass, minutes).
* **Training** streams the file through a `SHUFFLE_BUFFER` of rows; the
  class names become ids in the graph (a `tf.lookup.StaticHashTable`).
* **A missing split** is cut from train by a seeded hash of the record
  number (`bucket`, 10% each): deterministic, but not stratified (that would
  need the labels of every row in memory), unlike the in-memory cut.
* **Multi-worker** training shards the file by record (tf.data's automatic
  `DATA` sharding: every worker reads the file and keeps its share).

* **Class names** follow the in-memory rules (`labels.clean_labels`,
  `labels.read_as`): the pass counts labels as written, `load` strips
  them and refuses a control character, two spellings of one name, or an
  ambiguous numeric label, naming the record (found by a second pass, on
  that error only).

Limits, each refused with one line: multi-label rows (a list label, or a
`label_separator`, which makes every label a list), integer class ids, the
Keras folder layout (it is many small files, read in memory), and
`--class_encoder=text` or the feature cache, which need every text.
"""

import collections
import csv
import dataclasses
import gzip
import hashlib
import json
import logging
import os
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from rank4class_tf import fileio
from rank4class_tf.data import contract
from rank4class_tf.data import file_hashes
from rank4class_tf.data import splits
from rank4class_tf.data import labels as labels_lib
from rank4class_tf.data import user_files

# A split file larger than this (bytes on disk) makes every split stream.
STREAM_BYTES = 256 * 2**20
# Rows mixed by the training shuffle of a streamed split.
SHUFFLE_BUFFER = 10_000
# Where the pass's counts are cached: this variable, else ~/.cache/....
CACHE_ENV = "RANK4CLASS_CACHE_DIR"
# The held-out share per missing split, in tenths (`bucket`).
BUCKETS = 10
_PASS_BATCH = 4096


def cache_dir() -> str:
  """The folder of the cached counts: $RANK4CLASS_CACHE_DIR, else
  ~/.cache/rank4class_tf/streaming."""
  return os.environ.get(CACHE_ENV) or os.path.join(
      os.path.expanduser("~"), ".cache", "rank4class_tf", "streamed_files")


def should_stream(files: Dict[str, str]) -> bool:
  """Whether a split's file is larger than `STREAM_BYTES`."""
  return any(os.path.isfile(path) and os.path.getsize(path) > STREAM_BYTES
             for path in files.values())


@dataclasses.dataclass(frozen=True)
class Source:
  """One split's file and where its text and label are.

  Attributes:
    path: the file.
    delimiter: `,` or a tab; None for JSONL.
    text_index: the text column's index (CSV / TSV).
    label_index: the label column's index (CSV / TSV).
  """
  path: str
  delimiter: Optional[str]
  text_index: int = 0
  label_index: int = 0

  @property
  def compression(self) -> str:
    return "GZIP" if self.path.endswith(".gz") else ""


def source(path: str, options: user_files.Options) -> Source:
  """The `Source` of a split's file, its header read for the columns.

  Raises:
    ValueError: naming the file: a folder, an empty file, a missing column.
  """
  if os.path.isdir(path):
    raise ValueError(f"{path}: a folder of texts is read in memory; a split "
                     "file larger than memory streams only as CSV, TSV or "
                     "JSONL.")
  stem = path[:-3] if path.endswith(".gz") else path
  if stem.endswith(".jsonl"):
    return Source(path, None)
  delimiter = "\t" if stem.endswith(".tsv") else ","
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8-sig", newline="") as f, (
      user_files.no_field_limit()):
    header = next(csv.reader(f, delimiter=delimiter), None)
  if not header:
    raise ValueError(f"{path}: empty file (a header row is needed).")
  user_files.check_header(path, header)
  user_files.check_columns(f"{path}:1", ((options.text, "text_column"),
                                         (options.label, "label_column")),
                           header)
  return Source(path, delimiter, header.index(options.text),
                header.index(options.label))


# A JSONL row's label that carries the reason the row is bad (code 6).
_REASON = b"\x00"


def _jsonl_pair(line: bytes, text: str, label: str) -> Tuple[bytes, bytes]:
  """(text, label) of a JSONL line; (b"", b"") when it is not a JSON object
  with both keys; (b"", `_REASON` + why) when its text or label is bad as
  the in-memory reader says (`user_files.text_problem`, `label_value`)."""
  try:
    record = user_files.JSON_DECODER.decode(line.decode("utf-8-sig"))
    value, instance = record[label], record[text]
  except (ValueError, KeyError, TypeError):
    return b"", b""
  try:
    problem = user_files.text_problem(instance, text)
    if problem:
      raise ValueError(problem)
    name = user_files.label_value(value, label, "")
    if isinstance(name, tuple):
      raise ValueError(f"column {label!r}: {value!r} is a list of classes; "
                       "files larger than memory stream single-label rows "
                       "only.")
  except ValueError as e:
    return b"", _REASON + str(e).encode("utf-8")
  return instance.encode("utf-8"), name.encode("utf-8")


def records(src: Source, options: user_files.Options,
            skip_unreadable: bool = False) -> tf.data.Dataset:
  """(text, label) bytes of every record of `src`, in the file's order.

  With `skip_unreadable`, records the reader cannot parse (CSV: a wrong
  field count, a quoting error) are dropped (`ignore_errors`)."""
  if src.delimiter is None:
    text, label = options.text, options.label

    def parse(line):
      pair = tf.numpy_function(lambda l: _jsonl_pair(l, text, label), [line],
                               [tf.string, tf.string], stateful=False)
      return pair[0], pair[1]

    ds = tf.data.TextLineDataset(src.path, compression_type=src.compression)
    ds = ds.filter(lambda line: tf.strings.length(tf.strings.strip(line)) > 0)
    return ds.map(lambda line: tuple(
        tf.ensure_shape(t, []) for t in parse(line)))
  columns = sorted({src.text_index, src.label_index})
  ds = tf.data.experimental.CsvDataset(
      src.path, [tf.string] * len(columns), header=True,
      field_delim=src.delimiter, select_cols=columns,
      compression_type=src.compression)
  text_at, label_at = columns.index(src.text_index), columns.index(
      src.label_index)
  ds = ds.map(lambda *fields: (fields[text_at], fields[label_at]))
  if skip_unreadable:
    ds = ds.ignore_errors()
  return ds


def bucket(index: tf.Tensor, seed: int) -> tf.Tensor:
  """A record's bucket in [0, BUCKETS): a seeded hash of its number (the
  rule of `split_rule`=by_format, runs before issue 62)."""
  key = tf.strings.join([str(seed), ":", tf.strings.as_string(index)])
  return tf.strings.to_hash_bucket_fast(key, BUCKETS)


def group(index: tf.Tensor, src: Source, options: user_files.Options,
          held_out: int) -> tf.Tensor:
  """A record's group: i < `held_out` the i-th split cut from `src`,
  `held_out` its own rows (`splits.cut_parts`; by_format: `bucket`)."""
  if options.split_rule == "by_format":
    return tf.minimum(bucket(index, options.split_seed), held_out)
  part = splits.cut_parts(splits.cut_keys(
      options.split_seed, os.path.basename(src.path), index), held_out)
  return tf.where(part == 0, held_out, part - 1)


# Why a row is bad, as the pass's per-row code (0: a good row).
_PROBLEMS = {
    1: "not valid UTF-8.",
    2: "column {text!r}: empty text.",
    3: "column {label!r} is empty.",
    4: ("column {label!r}: {value!r} is a list of classes; files larger "
        "than memory stream single-label rows only."),
    5: "not a JSON object with a text {text!r} and a label {label!r}.",
    6: "{reason}",  # `_jsonl_pair`'s reason.
}


def row_codes(text: tf.Tensor, label: tf.Tensor, jsonl: bool) -> tf.Tensor:
  """Per row, the code of its first problem (`_PROBLEMS`), 0 if good; the
  same tests as the in-memory reader's, in TensorFlow ops."""
  name = tf.strings.strip(label)
  list_label = tf.strings.regex_full_match(name, user_files.LIST_PATTERN)
  empty = tf.equal(text, "")
  checks = [
      (empty & tf.strings.regex_full_match(label, "(?s)\\x00.*") if jsonl
       else tf.zeros_like(text, tf.bool), 6),
      (empty & tf.equal(label, "") if jsonl else
       tf.zeros_like(text, tf.bool), 5),
      (tf.logical_or(
          tf.not_equal(tf.strings.unicode_transcode(
              text, "UTF-8", "UTF-8", errors="replace"), text),
          tf.not_equal(tf.strings.unicode_transcode(
              label, "UTF-8", "UTF-8", errors="replace"), label)), 1),
      (tf.equal(tf.strings.length(tf.strings.strip(text)), 0), 2),
      (tf.equal(tf.strings.length(name), 0), 3),
      (list_label, 4),
  ]
  code = tf.zeros_like(text, tf.int32)
  for bad, value in reversed(checks):  # The first problem wins.
    code = tf.where(bad, value, code)
  return code


def count(src: Source, options: user_files.Options,
          held_out: int) -> Dict[str, object]:
  """One pass over `src`: its rows' label names counted per bucket group.

  Every row is checked by TensorFlow ops in tf.data (`row_codes`); Python
  sees the codes and labels only, in batches. Labels are counted as written
  (`load` strips them, and refuses two spellings of one name).

  Args:
    src: the split's file.
    options: columns, separator, skip_bad_records, split_seed.
    held_out: how many splits are cut from this file (0, 1 or 2): rows whose
      `group` is below `held_out` go to those splits, in order.

  Returns:
    {"parts": [{label as written: rows}] one per part (the held-out splits, then
    the file's own rows), "bad": rows skipped, "first_bad": its reason or
    None, "unreadable": whether unparseable records were skipped}.

  Raises:
    ValueError: `file: record N: reason` for the first bad row (unless
      `options.skip_bad_records`).
  """
  skip = options.skip_bad_records
  jsonl = src.delimiter is None
  parts = [collections.Counter() for _ in range(held_out + 1)]
  bad, first_bad = 0, None
  ds = records(src, options, skip_unreadable=skip).enumerate()
  ds = ds.batch(_PASS_BATCH).map(
      lambda i, pair: (group(i, src, options, held_out),
                       row_codes(pair[0], pair[1], jsonl), pair[1]),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  number = 0
  try:
    for groups, codes, names in ds.prefetch(2).as_numpy_iterator():
      problems = np.flatnonzero(codes)
      if len(problems):
        first = problems[0]
        value = names[first].decode("utf-8", "replace")
        reason = f"{src.path}: record {number + first + 1}: " + _PROBLEMS[
            codes[first]].format(text=options.text, label=options.label,
                                 value=value.strip(), reason=value[1:])
        if not skip:
          raise ValueError(reason)
        bad += len(problems)
        first_bad = first_bad or reason
      good = codes == 0
      for part in range(held_out + 1):
        values, counts = np.unique(names[good & (groups == part)],
                                   return_counts=True)
        parts[part].update({v.decode("utf-8"): int(c)
                             for v, c in zip(values, counts)})
      number += len(codes)
  except tf.errors.InvalidArgumentError as e:
    # The batch that failed: read again one record at a time to name it.
    message, rest = e.message.splitlines()[0], records(src, options)
    try:
      for _ in rest.skip(number).as_numpy_iterator():
        number += 1
    except tf.errors.InvalidArgumentError:
      pass
    raise ValueError(f"{src.path}: record {number + 1}: cannot be read "
                     f"({message}).") from None
  return {"parts": [dict(p) for p in parts], "bad": bad,
          "first_bad": first_bad, "unreadable": skip}


def cached(fields: Dict[str, object], compute: Callable[[], object],
           what: str, place: str,
           encode: Callable[[object], object] = lambda value: value,
           decode: Callable[[object], object] = lambda value: value):
  """`compute()`, cached in `cache_dir()` under a hash of `fields` (which
  hold the SHA-256 of the files counted): the one cache of the counting
  passes of every streamed format (`cached_count`,
  `record_streams.cached_tally`). `encode` / `decode` map the value to and
  from JSON; a damaged cache file is counted again and rewritten."""
  key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()
                      ).hexdigest()[:24]
  path = os.path.join(cache_dir(), key + ".json")
  if os.path.exists(path):
    try:
      with open(path) as f:
        return decode(json.load(f))
    except ValueError:
      pass  # A damaged cache file is counted again and rewritten.
  value = compute()
  try:
    os.makedirs(cache_dir(), exist_ok=True)
    fileio.write_json_atomically(path, encode(value))
  except OSError as e:
    logging.warning("%s: the counts of %s are not cached (%s).", what, place,
                    e)
  return value


def cached_count(src: Source, options: user_files.Options,
                 held_out: int) -> Dict[str, object]:
  """`count`, cached by the file's SHA-256 (`file_hashes`: read once per
  version of the file) and the options it depends on."""
  return cached({
      "sha256": file_hashes.sha256(src.path), "source": dataclasses.asdict(src),
      "text": options.text, "label": options.label,
      "separator": options.label_separator, "skip": options.skip_bad_records,
      "split_seed": options.split_seed, "held_out": held_out, "version": 2,
      "split_rule": options.split_rule,
  }, lambda: count(src, options, held_out), "text_files", src.path)


def stream(src: Source, options: user_files.Options, class_names,
           part: int, held_out: int, size: int,
           exact: bool) -> contract.Stream:
  """The `contract.Stream` of the rows of `src` in group `part` (`group`):
  i < `held_out` the i-th split cut from the file, `held_out` the file's
  own rows."""
  names = tf.constant(list(class_names))
  jsonl = src.delimiter is None
  skip = options.skip_bad_records

  def read(shuffle_files: bool = False, seed: int = 0) -> tf.data.Dataset:
    del shuffle_files, seed  # One file: the training shuffle buffer mixes.
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        names, tf.range(len(class_names), dtype=tf.int64)), -1)
    ds = records(src, options, skip_unreadable=skip).enumerate()

    def keep_row(index, pair):
      text, label = pair
      good = tf.equal(group(index, src, options, held_out), part)
      good &= tf.equal(row_codes(text, label, jsonl), 0)
      return good & (table.lookup(tf.strings.strip(label)) >= 0)

    ds = ds.filter(keep_row).map(lambda index, pair: (
        pair[0], table.lookup(tf.strings.strip(pair[1]))))
    if exact:  # Keras' validation and the step counts read the length.
      ds = ds.apply(tf.data.experimental.assert_cardinality(size))
    return ds

  return contract.Stream(read=read, size=size, exact_size=exact)


def _first_record(src: Source, options: user_files.Options, label: str,
                  as_written: bool = True) -> int:
  """The number of the first good record of `src` whose label is written
  `label` (or, not `as_written`, is `label` once stripped): a second pass,
  made only to name the record in an error."""
  ds = records(src, options, skip_unreadable=options.skip_bad_records)
  jsonl = src.delimiter is None

  def match(index, pair):
    del index
    written = pair[1] if as_written else tf.strings.strip(pair[1])
    return tf.equal(written, label) & tf.equal(
        row_codes(pair[0], pair[1], jsonl), 0)

  found = ds.enumerate().filter(match)
  for index, _ in found.take(1).as_numpy_iterator():
    return int(index) + 1
  return 0


def _clean_counts(sources: Dict[str, Source], counts, options
                 ) -> Dict[str, list]:
  """Every split's counts per part, keyed by the label stripped, as
  `labels.clean_labels` strips the rows held in memory.

  Raises:
    ValueError: `file: record N` for a label holding a control character,
      or two spellings of one name that differ in surrounding whitespace.
  """
  seen, out = {}, {}
  for split in (s for s in user_files.SPLITS if s in sources):
    src, parts = sources[split], []
    for part in counts[split]["parts"]:
      clean = collections.Counter()
      for label, n in sorted(part.items()):
        problem = user_files.class_name_problem(label)
        if problem:
          raise ValueError(f"{src.path}: record "
                           f"{_first_record(src, options, label)}: label "
                           f"{label!r} {problem}")
        written, first = seen.setdefault(label.strip(), (label, src))
        if written != label:
          raise ValueError(
              f"{src.path}: record {_first_record(src, options, label)}: "
              f"label {label!r} and {written!r} ({first.path}: record "
              f"{_first_record(first, options, written)}) differ only in "
              "surrounding whitespace: one class or two? Write them alike.")
        clean[label.strip()] += n
      parts.append(dict(clean))
    out[split] = parts
  return out


def _named_classes(files, sources, options, parts,
                   read_class_names) -> Tuple[str, ...]:
  """The classes of `class_names_file`, every label one of their names.

  Raises:
    ValueError: a label that is not a class, a label that reads as two
      classes (`labels.read_as`), an integer class id (streamed labels
      are names), a class with no train row.
  """
  names_file = options.class_names_file
  class_names = tuple(read_class_names(names_file))
  labels = {}
  for split in (s for s in user_files.SPLITS if s in sources):
    for part in parts[split]:
      for label in part:
        labels.setdefault(label, split)
  how, conflict = labels_lib.read_as(labels, class_names)
  if how is None:
    src = sources[labels[conflict]]
    raise ValueError(labels_lib.ambiguous(
        f"{src.path}: record "
        f"{_first_record(src, options, conflict, as_written=False)}",
        conflict, class_names, names_file))
  train_names = set().union(*parts["train"])
  unknown = [n for n in train_names if n not in class_names and
             labels_lib.as_id(n, len(class_names)) is None]
  if unknown:
    raise ValueError(f"{files['train']}: label {sorted(unknown)[0]!r} is "
                     f"not a class ({len(class_names)} classes).")
  ids = [n for n in labels if n not in class_names and
         labels_lib.as_id(n, len(class_names)) is not None]
  if ids:
    raise ValueError(f"{sources[labels[ids[0]]].path}: integer class ids "
                     f"({ids[0]!r}) in a file larger than memory: name the "
                     "classes in the file.")
  absent = [n for n in class_names if n not in train_names]
  if absent:
    raise ValueError(f"{files['train']}: no train row has the class(es) "
                     f"{', '.join(absent)} of "
                     f"`class_names_file`={names_file}.")
  return class_names


def load(files: Dict[str, str], options: user_files.Options,
         read_class_names):
  """(class names, {split: Stream}) of a user's text files, streamed.

  Raises:
    ValueError: one line naming the file (and record): a `label_separator`
      (every label a list), the pass's errors, a label with a control
      character or spelled two ways, a class no train row has, a validation
      or test label that train never has (skipped with `skip_bad_records`).
  """
  if options.label_separator:
    raise ValueError(
        f"`label_separator`={options.label_separator!r} makes every label a "
        f"list of classes; {', '.join(files.values())}: files larger than "
        "memory stream single-label rows only.")
  sources = {split: source(path, options) for split, path in files.items()}
  missing = [s for s in user_files.SPLITS if s not in files]
  counts = {split: cached_count(src, options,
                                len(missing) if split == "train" else 0)
            for split, src in sources.items()}
  parts = _clean_counts(sources, counts, options)
  if options.class_names_file:
    class_names = _named_classes(files, sources, options, parts,
                                 read_class_names)
  else:
    class_names = tuple(sorted(set().union(*parts["train"])))
    logging.info("text_files: %d classes named by the train labels, sorted: "
                 "%s.", len(class_names), ", ".join(class_names))
  streams, sizes = {}, {}
  for split, src in sources.items():
    if counts[split]["bad"]:
      logging.warning("%s: skipped %d bad row(s) (`skip_bad_records`); the "
                      "first: %s", src.path, counts[split]["bad"],
                      counts[split]["first_bad"])
    own = parts[split][-1]
    unknown = sorted(n for n in own if n not in class_names)
    if unknown and not options.skip_bad_records:
      raise ValueError(f"{src.path}: label {unknown[0]!r}: no train row has "
                       "this class.")
    held_out = len(parts[split]) - 1
    groups = {split: held_out}
    groups.update({m: i for i, m in enumerate(missing)} if split == "train"
                  else {})
    for name, group in groups.items():
      size = sum(n for label, n in parts[split][group].items()
                 if label in class_names)
      if not size:
        raise ValueError(f"{src.path}: no rows for the {name} split.")
      sizes[name] = size
      # Unparseable records skipped by `ignore_errors` are not counted.
      streams[name] = stream(src, options, class_names, group, held_out,
                             size, exact=not counts[split]["unreadable"])
  if missing:
    logging.info("text_files: %s cut from %s by a seeded hash of the record "
                 "number (10%% each, `split_seed`=%d; not stratified: the "
                 "file streams).", " and ".join(missing), files["train"],
                 options.split_seed)
  logging.info("text_files: streaming %s (%s rows).", ", ".join(
      files.values()), ", ".join(f"{s} {n:,}" for s, n in sizes.items()))
  return class_names, {split: streams[split] for split in user_files.SPLITS}
