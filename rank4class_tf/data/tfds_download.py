"""TFDS's download (`download`), failing fast and leaving nothing behind.

TFDS's `download_and_prepare` retries a URL that does not answer ten times
with exponential back-off (urllib3's `Retry`, 0.2 s doubling): offline,
`train --dataset=tfds:mnist --download` printed 213 lines over 3 min 20 s,
four ConnectionError tracebacks among them, and left `downloads/*.tmp.*`,
`downloads/extracted/` and `mnist/3.0.1.incomplete*` in the data directory.
Here, with `download`:

* `check_network`, before TFDS's builder is made, checks that the network
  answers (unless the data set's files are downloaded by hand, ImageNet's
  `MANUAL_DOWNLOAD_INSTRUCTIONS`): one TCP connection, at most
  `PROBE_SECONDS`, to TFDS's download host (`DOWNLOAD_HOST`, where TFDS
  keeps its prepared copies and most data sets' files), or to the proxy
  that `HTTPS_PROXY` (`https_proxy`, `ALL_PROXY`) names. Offline this fails
  within a second (the name does not resolve), before anything is written.
  `download` asks for the network even when the data is prepared: without
  `download`, prepared data is read as it is;
* `download_and_prepare` does nothing when the data set is prepared, else
  runs TFDS's download; when that fails (a file gone from its host, the
  network lost midway), or is interrupted, it removes what this download
  wrote in the data directory (entries that were not there before it began:
  temporary downloads, extracted files, the unfinished `*.incomplete*`
  folder, folders it made) and stops with one line saying why.
"""

import os
import socket
from typing import Optional, Set, Tuple
import urllib.parse

from rank4class_tf import fileio

DOWNLOAD_HOST = ("storage.googleapis.com", 443)
PROBE_SECONDS = 10.0
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def _probe_address() -> Tuple[str, int]:
  """The proxy's host and port when one is set, else `DOWNLOAD_HOST`."""
  for variable in _PROXY_VARIABLES:
    proxy = os.environ.get(variable)
    if proxy:
      parts = urllib.parse.urlsplit(proxy if "://" in proxy
                                    else "http://" + proxy)
      if parts.hostname:
        return parts.hostname, parts.port or (
            443 if parts.scheme == "https" else 80)
  return DOWNLOAD_HOST


def network_problem() -> Optional[str]:
  """Why the network cannot download (`host:port does not answer
  (reason)`), or None when it answers."""
  host, port = _probe_address()
  try:
    socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
  except OSError as e:
    reason = e.strerror or str(e) or type(e).__name__
    return f"{host}:{port} does not answer ({reason})"
  return None


def _root(builder) -> str:
  """The data directory the builder prepares its data set under (its
  `data_dir` less `<name>/[<config>/]<version>`)."""
  full_name = builder.info.full_name
  data_dir = os.fspath(builder.data_dir).rstrip("/")
  if data_dir.endswith("/" + full_name):
    return data_dir[:-len(full_name) - 1]
  return os.path.dirname(data_dir)


def _entries(root: str, builder) -> Set[str]:
  """The entries of the folders a download writes into: the data directory,
  `downloads/`, `downloads/extracted/`, and the data set's folders down to
  the version's parent (where `<version>.incomplete*` is made)."""
  folders = [root, os.path.join(root, "downloads"),
             os.path.join(root, "downloads", "extracted")]
  parent = root
  for part in builder.info.full_name.split("/")[:-1]:
    parent = os.path.join(parent, part)
    folders.append(parent)
  found = set()
  for folder in folders:
    if fileio.isdir(folder):
      found.update(os.path.join(folder, name)
                   for name in fileio.listdir(folder))
  return found


def _remove_new(root: str, root_existed: bool, before: Set[str],
                builder) -> None:
  """Removes what the download wrote: the data directory if it made it,
  else every entry that was not there before (a new folder whole)."""
  if not root_existed:
    if fileio.exists(root):
      fileio.rmtree(root)
    return
  for path in sorted(_entries(root, builder) - before, key=len,
                     reverse=True):
    if not fileio.exists(path):
      continue  # Inside a new folder removed before it.
    if fileio.isdir(path):
      fileio.rmtree(path)
    else:
      fileio.remove(path)


def check_network(tfds_name: str, name: str) -> None:
  """Refuses `download` when the network does not answer, before TFDS's
  builder is made (offline, making it takes 18 s of TensorFlow's GCS
  retries, looking up the data set's info in TFDS's bucket).

  Args:
    tfds_name: the TFDS name (`mnist`, `name/config:version`).
    name: the data set as the user named it, for messages.

  Raises:
    ValueError: one line, unless the network answers or the data set's
      files are downloaded by hand (ImageNet's
      `MANUAL_DOWNLOAD_INSTRUCTIONS`: prepared from `manual_dir`, offline).
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  base = tfds_name.split(":")[0].split("/")[0]
  try:
    manual = tfds.builder_cls(base).MANUAL_DOWNLOAD_INSTRUCTIONS is not None
  except Exception:  # pylint: disable=broad-except
    return  # Not a TFDS name: `tfds.builder` says so in its words.
  problem = None if manual else network_problem()
  if problem:
    raise ValueError(
        f"{name}: `download` needs the network, and {problem}; prepare it "
        f"where the network is (`tfds build {base} --data_dir=DIR`) and "
        "pass `data_dir`=DIR without `download`. Nothing was written.")


def download_and_prepare(builder, name: str) -> None:
  """`builder.download_and_prepare()`, cleaning up after a failed download
  (see the module doc); nothing when the data set is prepared already.

  Args:
    builder: a TFDS builder (`tfds.builder(...)`).
    name: the data set as the user named it, for messages.

  Raises:
    ValueError: one line: the download failed (what it wrote removed).
  """
  if builder.is_prepared():
    return
  root = _root(builder)
  root_existed = fileio.exists(root)
  before = _entries(root, builder) if root_existed else set()
  try:
    builder.download_and_prepare()
  except BaseException as e:  # pylint: disable=broad-except
    # requests' ConnectionError, TFDS's DownloadError or checksum error, a
    # full disk, Ctrl-C: nothing half-written stays.
    _remove_new(root, root_existed, before, builder)
    if not isinstance(e, Exception):
      raise
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise ValueError(f"{name}: the download failed ({first}); what it had "
                     f"written in {root} is removed.") from None
