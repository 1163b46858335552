"""What a run trained on, recorded when it starts and checked when it is read.

A run writes `data.json` into its folder (`run_dir.DATA_FILE`) when it
starts from step 0 (`training.trainer.train`), beside config.json:

* `dataset`, `data_dir` (absolute), `split_seed`;
* `files`: every file its data set reads, by its path under the data's
  folder (`data_dir`; the package's or scikit-learn's folder for the shipped
  data sets), with its size, modification time and SHA-256
  (`file_hashes`: each version of a file is read once, so checking a 2 GB
  file that has not changed costs a `stat`); a split folder of more than
  `LISTED_FILES` files (an image folder) is recorded whole in `folders`:
  its file count, bytes and one SHA-256 over its files' names and hashes;
* `class_names`, `sizes` (instances per split), `cut` (the splits cut from
  train with `split_seed`), and for a table the standardisation statistics
  (`feature_statistics`: names, mean, std).

For a TFDS data set (`cifar10`, `imagenet2012`, `coco2017`, `voc2007`,
`tfds:<name>`) the file is the prepared version's `dataset_info.json` (its
shards' names, sizes and counts: TFDS never rewrites a prepared version),
not the shards; for `digits`, scikit-learn's `digits.csv.gz`; for
`goemotions`, the four shipped files.

Every later command that reads the run's data again, evaluate, export,
calibrate, a study going on and compare_runs, and training that resumes or
extends the run, loads it through `load_checked` (`training.builders.
load_run_data`): the data's fingerprint is taken again and compared with
the record. The same data passes. Other data stops the command with one
line saying what changed, before it writes anything:

  the data changed since `model_dir`=runs/x trained: train.csv changed
  (sha256 5d41402abc4b -> 7d793037a076, 812 -> 790 bytes), and validation
  and test are cut from it; validation: 4 instances, 6 when the run
  trained. Pass `allow_changed_data` to use it anyway.

`allow_changed_data` lets a user proceed on changed files, and the command
records that it did (its output says `data_changed`); a table's run then
standardises with its recorded statistics, those its weights were trained
with. Another class list is refused even then: a model scores the classes
it was trained on, by id. A run folder without a record (a run trained
before records existed) passes with a warning.
"""

import dataclasses
import hashlib
import json
import logging
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf import catalog
from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.data import contract
from rank4class_tf.data.sources import shipped_text
from rank4class_tf.data.sources import image_catalog
from rank4class_tf.data import file_hashes
from rank4class_tf.data import user_files

FORMAT = 1
# A folder of more files than this is recorded whole (count, bytes, one
# SHA-256), not file by file: data.json stays small for an image folder.
LISTED_FILES = 1000
# Changes named in the one line; the rest are counted.
SHOWN_CHANGES = 3
_DIGITS_FILE = "digits.csv.gz"
# The files `shipped_text` reads for GoEmotions.
_GOEMOTIONS_FILES = {**shipped_text.GOEMOTIONS_FILES,
                     "classes": shipped_text.GOEMOTIONS_CLASSES}


def sources(config: config_lib.DataConfig
           ) -> Tuple[str, Dict[str, List[str]]]:
  """(root, {part: files and folders}) that the data set of `config` reads.

  A part is a split, `classes` (a class list file) or `all` (one file
  holding every split). Paths are absolute; the record names them by their
  path under `root`.

  Raises:
    ValueError: as the data set's loader, when its folder or train file is
      missing.
  """
  name, data_dir = config.dataset, config_lib.absolute_path(config.data_dir)
  parts: Dict[str, List[str]] = {}
  root = data_dir
  if name in ("text_files", "tabular_files"):
    parts = {split: [path] for split, path in
             user_files.split_files(data_dir).items()}
  elif name == "image_folder":
    if not data_dir or not os.path.isdir(data_dir):
      raise ValueError(f"`data_dir`={data_dir}: not a folder.")
    parts = {split: [os.path.join(data_dir, split)]
             for split in contract.SPLITS
             if os.path.isdir(os.path.join(data_dir, split))}
  elif name == "tfrecord":
    # Imported here: records imports the loaders that import this.
    from rank4class_tf.data import records  # pylint: disable=g-import-not-at-top
    parts = {split: [f.path for f in files] for split, files in
             records.record_files(data_dir).items()}
  elif name == "mind":
    if not data_dir:
      raise ValueError("`data_dir` must name the folder holding MIND's "
                       "news.tsv for `dataset`=mind.")
    path = (os.path.join(data_dir, "news.tsv") if os.path.isdir(data_dir)
            else data_dir)
    root, parts = os.path.dirname(path), {"all": [path]}
  elif name in ("goemotions", "goemotions_multilabel"):
    root = data_dir or os.path.join(shipped_text.REPO_DATA_DIR, "goemotions")
    parts = {part: [os.path.join(root, file)]
             for part, file in _GOEMOTIONS_FILES.items()}
  elif name in ("digits", "digits32"):
    from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
    root = os.path.join(os.path.dirname(sk_datasets.__file__), "data")
    parts = {"all": [os.path.join(root, _DIGITS_FILE)]}
  elif name in catalog.TFDS_DATASETS or catalog.is_tfds(name):
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    tfds_name = (name[len(catalog.TFDS_PREFIX):] if catalog.is_tfds(name)
                 else image_catalog.TFDS_SOURCES[name].tfds_name)
    try:
      root = tfds.builder(tfds_name, data_dir=data_dir).data_dir
    except ValueError as e:  # The loader says the same, in its words.
      raise ValueError(f"{name}: not a TFDS data set "
                       f"({str(e).strip().splitlines()[0]}).") from None
    parts = {"all": [os.path.join(root, "dataset_info.json")]}
  else:
    raise ValueError(f"Unknown dataset {name!r}; valid names: "
                     f"{', '.join(catalog.DATASET_NAMES)}, tfds:<name>.")
  if config.class_names_file:
    parts["classes"] = [config_lib.absolute_path(config.class_names_file)]
  return root or "", parts


def _name(path: str, root: str) -> str:
  """`path` under `root` (`train/anger/001.png`), or absolute when it is not
  under it."""
  if root and fileio.is_local(path):
    relative = os.path.relpath(path, root)
    if not relative.startswith(os.pardir):
      return relative.replace(os.sep, "/")
  return path


def _folder_files(folder: str) -> List[str]:
  """The files under `folder`, sorted, through folder links (each real
  folder once: a link loop ends), hidden names (`.DS_Store`,
  `.ipynb_checkpoints/`) left out as the loaders leave them."""
  out, seen = [], set()

  def walk(path):
    real = os.path.realpath(path)
    if real in seen:
      return
    seen.add(real)
    for name in sorted(os.listdir(path)):
      if name.startswith("."):
        continue
      child = os.path.join(path, name)
      if os.path.isdir(child):
        walk(child)
      elif os.path.isfile(child):
        out.append(child)

  walk(folder)
  return out


def fingerprint(config: config_lib.DataConfig,
                like: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
  """The part of the record that the files give (see the module doc):
  `dataset`, `data_dir`, `split_seed`, `parts` ({part: the names it
  reads}), `files` and `folders`.

  Args:
    config: the data settings.
    like: a record to compare with: its `folders` are taken whole again
      and every other folder file by file, whatever their sizes now.

  Raises:
    ValueError: as `sources`; naming a file that cannot be read.
  """
  root, parts = sources(config)
  listed: List[str] = []
  whole: Dict[str, List[str]] = {}
  names: Dict[str, List[str]] = {}
  for part, paths in parts.items():
    names[part] = [_name(path, root) for path in paths]
    for path in paths:
      if fileio.is_local(path) and os.path.isdir(path):
        files = _folder_files(path)
        if (len(files) > LISTED_FILES if like is None else
            _name(path, root) in like.get("folders", {})):
          whole[path] = files
          continue
        listed.extend(files)
      else:
        listed.append(path)
  try:
    found = file_hashes.digests(
        [p for p in listed if not fileio.is_local(p) or os.path.exists(p)] +
        [p for files in whole.values() for p in files])
  except OSError as e:
    raise ValueError(f"{e.filename}: cannot be read "
                     f"({e.strerror or e}).") from None
  files = {_name(p, root): {"bytes": found[p].size,
                            "mtime_ns": found[p].mtime_ns,
                            "sha256": found[p].sha256}
           for p in listed if p in found}
  folders = {}
  for folder, members in whole.items():
    digest = hashlib.sha256()
    for path in members:
      digest.update(f"{_name(path, folder)}\t{found[path].sha256}\n"
                    .encode("utf-8"))
    folders[_name(folder, root)] = {
        "files": len(members),
        "bytes": sum(found[p].size for p in members),
        "sha256": digest.hexdigest()}
  return {"format": FORMAT, "dataset": config.dataset,
          "data_dir": config_lib.absolute_path(config.data_dir),
          "split_seed": config.split_seed, "parts": names, "files": files,
          "folders": folders}


def facts(data: contract.ClassificationData) -> Dict[str, Any]:
  """The part of the record that the loaded data gives: `class_names`,
  `sizes` and `feature_statistics` (a table's, else None)."""
  statistics = None
  if data.feature_statistics is not None:
    mean, std = data.feature_statistics
    statistics = {"names": list(data.feature_names),
                  "mean": [float(v) for v in np.ravel(mean)],
                  "std": [float(v) for v in np.ravel(std)]}
  return {"class_names": list(data.class_names),
          "sizes": {split: int(data.size(split))
                    for split in data.split_names},
          "feature_statistics": statistics}


def record(config: config_lib.DataConfig,
           data: contract.ClassificationData) -> Dict[str, Any]:
  """The whole record of a run about to train on `data` (`write` it)."""
  out = fingerprint(config)
  out.update(facts(data))
  out["cut"] = [split for split in contract.SPLITS
                if split not in out["parts"] and "all" not in out["parts"]
                and config.dataset in catalog.USER_DATASETS]
  return out


def write(model_dir: str, value: Dict[str, Any]) -> None:
  """Writes the record into the run folder, atomically (`fileio`)."""
  fileio.write_text_atomically(run_dir_lib.RunDir(model_dir).data_file,
                               json.dumps(value, indent=1, sort_keys=True))


def read(model_dir: str) -> Optional[Dict[str, Any]]:
  """The run's record; None for a run folder without one.

  Raises:
    ValueError: naming data.json when it cannot be read.
  """
  path = run_dir_lib.RunDir(model_dir).data_file
  if not fileio.exists(path):
    return None
  try:
    value = fileio.read_json(path)
    if not isinstance(value, dict) or "files" not in value:
      raise ValueError("not a data record")
  except (ValueError, OSError) as e:
    reason = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    raise ValueError(f"{path} cannot be read as the run's data record "
                     f"({reason}); restore it, or delete it to read the "
                     "data unchecked.") from None
  return value


@dataclasses.dataclass(frozen=True)
class Changes:
  """What differs between a record and the data now.

  Attributes:
    files: changes that `allow_changed_data` accepts (files, folders,
      `data_dir`, split sizes, statistics), each a phrase.
    classes: changes of the class list, which nothing accepts.
  """
  files: Tuple[str, ...] = ()
  classes: Tuple[str, ...] = ()

  def __bool__(self) -> bool:
    return bool(self.files or self.classes)

  def line(self) -> str:
    """The changes in one line: the first `SHOWN_CHANGES`, then a count."""
    every = list(self.classes) + list(self.files)
    shown = "; ".join(every[:SHOWN_CHANGES])
    rest = len(every) - SHOWN_CHANGES
    return shown + (f"; and {rest} more" if rest > 0 else "")


def _short(sha: str) -> str:
  return sha[:12]


def _file_changes(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
  """Changed, added and removed files and folders, by name."""
  out = []
  cut = old.get("cut") or []
  train = set(old.get("parts", {}).get("train", []))
  for kind in ("folders", "files"):
    before, after = old.get(kind, {}), new.get(kind, {})
    for name in sorted(set(before) | set(after)):
      was, now = before.get(name), after.get(name)
      label = name + ("/" if kind == "folders" else "")
      if was is None:
        out.append(f"{label} added")
      elif now is None:
        out.append(f"{label} removed")
      elif was["sha256"] != now["sha256"] or was.get("bytes") != now.get(
          "bytes"):
        unit = "files" if kind == "folders" else "bytes"
        size = ("" if was[unit] == now[unit] else
                f", {was[unit]:,} -> {now[unit]:,} {unit}")
        change = (f"{label} changed (sha256 {_short(was['sha256'])} -> "
                  f"{_short(now['sha256'])}{size})")
        part_of_train = name in train or any(
            name.startswith(t.rstrip("/") + "/") for t in train)
        if cut and part_of_train:
          change += (f", and {' and '.join(cut)} "
                     f"{'are' if len(cut) > 1 else 'is'} cut from it")
        out.append(change)
  return out


def _class_changes(old: Sequence[str], new: Sequence[str]) -> List[str]:
  gone = [name for name in old if name not in new]
  added = [name for name in new if name not in old]
  out = [f"class {name!r} renamed or removed" for name in gone]
  out += [f"class {name!r} added" for name in added]
  if not out and list(old) != list(new):
    out.append("the classes are in another order (other class ids)")
  return out


def _statistics_changes(old: Optional[Dict[str, Any]],
                        new: Optional[Dict[str, Any]]) -> List[str]:
  if old is None or new is None:
    return []
  if old["names"] != new["names"]:
    return [f"feature columns {', '.join(new['names'])}, "
            f"{', '.join(old['names'])} when the run trained"]
  for key in ("mean", "std"):
    for name, was, now in zip(old["names"], old[key], new[key]):
      if was != now:
        return [f"the standardisation {key} of feature {name!r} is "
                f"{now:.6g}, {was:.6g} when the run trained"]
  return []


def compare(old: Dict[str, Any], new: Dict[str, Any]) -> Changes:
  """What changed from the record `old` to the data now, `new` (a whole
  `record`, or a `fingerprint` alone: then the classes, sizes and
  statistics are not compared)."""
  files = []
  for key in ("dataset", "data_dir", "split_seed"):
    if key in old and old[key] != new.get(key):
      files.append(f"`{key}`={new.get(key)}, the run trained on "
                   f"{old[key]}")
  files += _file_changes(old, new)
  classes = []
  if "class_names" in new:
    classes = _class_changes(old.get("class_names", []), new["class_names"])
    sizes = old.get("sizes", {})
    for split in sorted(sizes, key=lambda s: (
        contract.SPLITS.index(s) if s in contract.SPLITS else 3, s)):
      size, now = sizes[split], new["sizes"].get(split)
      if now != size:
        files.append(f"{split}: {now or 'no'} instances, {size} when the "
                     "run trained")
    files += _statistics_changes(old.get("feature_statistics"),
                                 new.get("feature_statistics"))
  return Changes(tuple(files), tuple(classes))


def _recorded_statistics(data: contract.ClassificationData,
                         old: Dict[str, Any]) -> contract.ClassificationData:
  """`data` standardised with the record's statistics (those the run's
  weights were trained with), when the record has them for its columns."""
  recorded = old.get("feature_statistics")
  if (recorded is None or data.feature_statistics is None or
      recorded["names"] != list(data.feature_names)):
    return data
  mean, std = data.feature_statistics
  return dataclasses.replace(data, feature_statistics=(
      np.asarray(recorded["mean"], np.asarray(mean).dtype),
      np.asarray(recorded["std"], np.asarray(std).dtype)))


def _unrecorded(model_dir: str) -> str:
  """The warning for a run folder without a record."""
  line = (f"`model_dir`={model_dir} has no data record "
          f"({run_dir_lib.DATA_FILE}: the run was trained before records "
          "existed): its data is read unchecked")
  try:
    raw = fileio.read_json(run_dir_lib.RunDir(model_dir).config_file)
    data_dir = raw.get("data", raw).get("data_dir")
  except (ValueError, OSError, AttributeError):
    data_dir = None
  if data_dir and fileio.is_local(data_dir) and not os.path.isabs(data_dir):
    line += (f", and its `data_dir`={data_dir} is relative: read from "
             f"{os.path.abspath(data_dir)}")
  return line + "."


def load_checked(model_dir: str, config: config_lib.DataConfig,
                 load: Callable[[], contract.ClassificationData],
                 allow_changed_data: bool = False,
                 remedy: str = "Pass `allow_changed_data` to use it anyway."
                ) -> Tuple[contract.ClassificationData, Changes]:
  """The data a trained run reads again, checked against its record.

  Args:
    model_dir: the run's folder.
    config: its data settings (config.json's).
    load: loads the data set (`training.builders.load_data`).
    allow_changed_data: proceed on changed files (never on another class
      list); the data of a table is then standardised with the recorded
      statistics.
    remedy: the end of the refusal's line (what the user may do).

  Returns:
    (the data, what changed: empty unless `allow_changed_data` let it
    pass).

  Raises:
    ValueError: one line, `the data changed since `model_dir`=... trained:
      <changes>. <remedy>`; or the data's folder is gone.
  """
  old = read(model_dir)
  if old is None:
    logging.warning("%s", _unrecorded(model_dir))
    return load(), Changes()
  data_dir = config_lib.absolute_path(config.data_dir)
  if (old.get("data_dir") and data_dir == old["data_dir"] and
      fileio.is_local(data_dir) and not os.path.exists(data_dir)):
    raise ValueError(f"`data_dir`={data_dir}, where `model_dir`={model_dir} "
                     "trained, is gone (moved or deleted): put the data "
                     "back there.")
  try:
    new = fingerprint(config, like=old)
  except ValueError as e:  # Its train file is gone, say.
    raise ValueError(f"the data changed since `model_dir`={model_dir} "
                     f"trained: {str(e).rstrip('.')}.") from None
  try:
    data = load()
  except ValueError as e:
    early = compare(old, new)
    if not early:
      raise
    # It changed so much that it no longer loads: what changed first.
    raise ValueError(f"the data changed since `model_dir`={model_dir} "
                     f"trained: {early.line()}; it no longer loads "
                     f"({str(e).rstrip('.')}).") from None
  new.update(facts(data))
  changes = compare(old, new)
  if changes.classes:
    raise ValueError(
        f"the data changed since `model_dir`={model_dir} trained: "
        f"{changes.line()}. A model scores the classes it was trained on "
        "(by id): another class list is refused, whatever "
        "`allow_changed_data` says.")
  if changes and not allow_changed_data:
    raise ValueError(f"the data changed since `model_dir`={model_dir} "
                     f"trained: {changes.line()}. {remedy}")
  if changes:
    logging.warning("The data changed since `model_dir`=%s trained, used "
                    "anyway (`allow_changed_data`): %s.", model_dir,
                    changes.line())
    data = _recorded_statistics(data, old)
  return data, changes


def note(model_dir: str, command: str, changes: Changes) -> None:
  """Appends to the run's log.txt that `command` used changed data
  (`allow_changed_data`), and what changed; nothing when `changes` is
  empty. Called once the command's checks passed, before it writes."""
  if not changes:
    return
  path = run_dir_lib.RunDir(model_dir).log_file
  line = (f"{time.strftime('%Y-%m-%d %H:%M:%S')} {command}: the data "
          "changed since the run trained, used anyway "
          f"(`allow_changed_data`): {changes.line()}\n")
  earlier = fileio.read_text(path) if fileio.exists(path) else ""
  fileio.write_text_atomically(path, earlier + line)


def check_runs(model_dirs: Sequence[str], config: config_lib.DataConfig,
               data: contract.ClassificationData) -> None:
  """Refuses data that differs from what any of `model_dirs` (a study's
  runs, which share it) trained on: the fingerprint is taken once.

  Raises:
    ValueError: one line naming the first run whose record differs.
  """
  new = None
  for model_dir in model_dirs:
    old = read(model_dir)
    if old is None:
      continue
    if new is None:  # The runs of a study share one record's layout.
      new = fingerprint(config, like=old)
      new.update(facts(data))
    changes = compare(old, new)
    if changes:
      raise ValueError(
          f"the data changed since `model_dir`={model_dir} trained: "
          f"{changes.line()}. The study's runs must share their data: "
          "restore it, or start the study in a new folder.")
