"""Claims: which worker trains which run of a study, across processes and
machines sharing one `study_dir`.

Any number of study workers (`pipelines.study` processes started with the same
command, on one machine or many) share a study: each takes the next run that
is neither finished nor claimed. A claim is a small file,

  <study_dir>/claims/<run>.json   {"run", "worker", "token", "beat", ...}

created exclusively (`fileio.create_exclusively`: of workers racing for a run,
one wins), rewritten every `timeout / 6` seconds by its worker's heartbeat
(`beat` + 1), and removed when the run's record is written. A claim whose
`beat` has not changed for `timeout` seconds, as this worker's own clock
measures it, belongs to a worker that died (killed, preempted, its machine
gone): it is moved aside (`<run>.json.stale-<token>`, kept for inspection) and
claimed anew, and the run resumes from its backup like any interrupted run. A
claim made on this host by a process that no longer exists (the study started
again after a crash) is taken over at once.
Staleness is judged by watching the beat change, never by comparing clocks,
so machines whose clocks differ agree; the price is that a worker watches a
dead claim for `timeout` seconds before taking it over.

Where the storage has no exclusive create and no atomic rename (a bucket
through `tf.io.gfile`), a claim is written if absent and read back: two
workers claiming one run in the same moment may both train it (each run's
files are written atomically, so the cost is time, not a damaged study); a
fixed partition (`--num_shards` / `--shard_index`) never shares a run and is
what to use there when that matters.

Shards (`shard_of`): the study's units of work (a (loss, interaction, seed)
with everything its choice adds: grid extensions, longer steps; with
`--choose_on_seed`, a whole cell with its followers) are dealt round-robin in
grid order, so a shard never waits for another shard's runs. No TensorFlow
here (storage other than local paths imports it through `fileio`).
"""

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
import uuid
from typing import Callable, Dict, Iterator, Mapping, Optional, Tuple

from rank4class_tf import fileio

CLAIMS_DIR = "claims"
STALE_MARK = ".stale-"
DEFAULT_TIMEOUT = 300.


def default_worker_name() -> str:
  """`host:pid`, with the scheduler's task where there is one
  (`host:pid slurm 1234_5`, `host:pid k8s index 3`)."""
  name = f"{socket.gethostname()}:{os.getpid()}"
  env = os.environ
  if env.get("SLURM_ARRAY_TASK_ID"):
    name += (f" slurm {env.get('SLURM_ARRAY_JOB_ID', '?')}_"
             f"{env['SLURM_ARRAY_TASK_ID']}")
  elif env.get("JOB_COMPLETION_INDEX"):
    name += f" k8s index {env['JOB_COMPLETION_INDEX']}"
  return name


def _integer(env: Mapping[str, str], key: str) -> int:
  try:
    return int(env[key])
  except ValueError:
    raise ValueError(f"environment variable {key}={env[key]!r} is not an "
                     "integer.") from None


def shard_from_environment(num_shards: Optional[int],
                           shard_index: Optional[int],
                           env: Mapping[str, str] = os.environ
                          ) -> Tuple[int, int]:
  """(num_shards, shard_index): the arguments where given, else the
  scheduler's:

  * Slurm job array: `SLURM_ARRAY_TASK_COUNT` tasks, this one
    `SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN` (arrays may start at 1);
  * Kubernetes Indexed Job: `JOB_COMPLETION_INDEX`, with `num_shards` given
    (the Job's `completions`: Kubernetes does not export it);
  * neither: (1, 0), one shard (workers share the runs by claims only).

  >>> shard_from_environment(None, None, {"SLURM_ARRAY_TASK_COUNT": "4",
  ...     "SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5"})
  (4, 2)
  >>> shard_from_environment(3, None, {"JOB_COMPLETION_INDEX": "1"})
  (3, 1)

  Raises:
    ValueError: one line naming the argument or variable.
  """
  if num_shards is None and env.get("SLURM_ARRAY_TASK_COUNT"):
    num_shards = _integer(env, "SLURM_ARRAY_TASK_COUNT")
  if shard_index is None:
    if env.get("SLURM_ARRAY_TASK_ID"):
      shard_index = _integer(env, "SLURM_ARRAY_TASK_ID") - (
          _integer(env, "SLURM_ARRAY_TASK_MIN")
          if env.get("SLURM_ARRAY_TASK_MIN") else 0)
    elif env.get("JOB_COMPLETION_INDEX"):
      shard_index = _integer(env, "JOB_COMPLETION_INDEX")
      if num_shards is None:
        raise ValueError("JOB_COMPLETION_INDEX is set (a Kubernetes Indexed "
                         "Job): give `num_shards`, the Job's completions.")
  num_shards = 1 if num_shards is None else num_shards
  shard_index = 0 if shard_index is None else shard_index
  if num_shards < 1:
    raise ValueError(f"`num_shards`={num_shards} must be >= 1.")
  if not 0 <= shard_index < num_shards:
    raise ValueError(f"`shard_index`={shard_index} must be in [0, "
                     f"{num_shards}) (`num_shards`={num_shards}).")
  return num_shards, shard_index


@dataclasses.dataclass(frozen=True)
class Worker:
  """One study worker.

  Attributes:
    name: who it is in claims, records and progress lines
      (`default_worker_name`).
    num_shards: the fixed partition's size (1: none, claims only).
    shard_index: this worker's shard, in [0, num_shards).
    timeout: seconds without a heartbeat after which a claim is taken over.
  """
  name: str = dataclasses.field(default_factory=default_worker_name)
  num_shards: int = 1
  shard_index: int = 0
  timeout: float = DEFAULT_TIMEOUT

  def __post_init__(self):
    if not self.timeout > 0:
      raise ValueError(f"`claim_timeout`={self.timeout:g} must be > 0.")

  @property
  def label(self) -> str:
    """The name, with the shard when there are several."""
    if self.num_shards == 1:
      return self.name
    return f"{self.name} shard {self.shard_index}/{self.num_shards}"

  @property
  def poll_seconds(self) -> float:
    """How often a waiting worker looks again."""
    return min(30., self.timeout / 10.)


def _process_home() -> Optional[str]:
  """Where this process's pids mean something: host name, kernel boot and
  pid namespace (two containers may share a host name); None where that
  cannot be read (not Linux)."""
  try:
    with open("/proc/sys/kernel/random/boot_id") as f:
      boot = f.read().strip()
    namespace = os.readlink("/proc/self/ns/pid")
  except OSError:
    return None
  return f"{socket.gethostname()}|{boot}|{namespace}"


def _dead_here(claim: Dict[str, object]) -> bool:
  """True when the claim was made in this host's pid namespace by a process
  that has ended (a study started again after a crash need not wait out the
  timeout)."""
  home = _process_home()
  if home is None or claim.get("home") != home:
    return False
  try:
    os.kill(int(claim.get("pid")), 0)
  except ProcessLookupError:
    return True
  except (OSError, TypeError, ValueError):
    return False
  return False


def shard_of(unit_index: int, num_shards: int) -> int:
  """The shard of the study's `unit_index`-th unit (round-robin)."""
  return unit_index % num_shards


class Claims:
  """The claims of one worker on one study (see the module doc).

  Thread-safe where it matters: the heartbeat thread only rewrites the claim
  it was started for.
  """

  def __init__(self, study_dir: str, worker: Worker,
               clock: Callable[[], float] = time.monotonic):
    self.folder = f"{study_dir.rstrip('/')}/{CLAIMS_DIR}"
    self.worker = worker
    self._clock = clock
    self._tokens: Dict[str, str] = {}
    # {run: ((token, beat), when this worker first saw that beat)}.
    self._seen: Dict[str, Tuple[Tuple[str, int], float]] = {}
    self._made = False

  def path(self, run_name: str) -> str:
    return f"{self.folder}/{run_name}.json"

  def read(self, run_name: str) -> Optional[Dict[str, object]]:
    """The run's claim; None when it has none. An unreadable one (being
    written, damaged) reads as {"worker": "?", "beat": -1, "token": ""}."""
    path = self.path(run_name)
    try:
      claim = fileio.read_json(path)
      if not isinstance(claim, dict):
        raise ValueError("not an object")
      return claim
    except FileNotFoundError:
      return None
    except (ValueError, OSError):
      if not fileio.exists(path):
        return None
      return {"worker": "?", "beat": -1, "token": ""}

  def all(self) -> Dict[str, Dict[str, object]]:
    """{run: claim} of every claim in the study (for the report)."""
    if not fileio.isdir(self.folder):
      return {}
    out = {}
    for name in sorted(fileio.listdir(self.folder)):
      if name.endswith(".json"):
        claim = self.read(name[:-len(".json")])
        if claim is not None:
          out[name[:-len(".json")]] = claim
    return out

  def holder(self, run_name: str) -> Optional[str]:
    """The other worker holding a live claim on the run (its name); None if
    the run is free, ours, or its claim stale (`timeout` seconds without a
    new beat, as watched by this worker)."""
    claim = self.read(run_name)
    if claim is None or claim.get("token") == self._tokens.get(run_name):
      return None
    return None if self._stale(run_name, claim) else str(claim.get("worker"))

  def _stale(self, run_name: str, claim: Dict[str, object]) -> bool:
    if _dead_here(claim):
      return True
    beat = (str(claim.get("token")), int(claim.get("beat", -1)))
    now = self._clock()
    seen = self._seen.get(run_name)
    if seen is None or seen[0] != beat:
      self._seen[run_name] = (beat, now)
      return False
    return now - seen[1] >= self.worker.timeout

  def claim(self, run_name: str, progress: Callable[[str], None] = print
            ) -> bool:
    """Claims the run for this worker; True if it is now ours. A stale claim
    is moved aside first (one `progress` line naming its worker)."""
    if not self._made:
      fileio.makedirs(self.folder)
      self._made = True
    path = self.path(run_name)
    claim = self.read(run_name)
    if claim is not None:
      if claim.get("token") == self._tokens.get(run_name):
        return True
      if not self._stale(run_name, claim):
        return False
      aside = f"{path}{STALE_MARK}{uuid.uuid4().hex[:8]}"
      try:
        fileio.rename(path, aside)
      except FileNotFoundError:
        return False  # Another worker took it over first.
      why = ("its process has ended" if _dead_here(claim) else
             f"no heartbeat for {self.worker.timeout:g} s")
      progress(f"{run_name}: took over the claim of worker "
               f"{claim.get('worker')} ({why}); the run resumes from its "
               "backup.")
    token = uuid.uuid4().hex
    text = json.dumps({"run": run_name, "worker": self.worker.label,
                       "home": _process_home(), "pid": os.getpid(),
                       "token": token, "beat": 0,
                       "claimed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    if not fileio.create_exclusively(path, text):
      return False
    self._tokens[run_name] = token
    return True

  def release(self, run_name: str) -> None:
    """Removes this worker's claim on the run (after its record is
    written); another worker's claim is left alone."""
    token = self._tokens.pop(run_name, None)
    claim = self.read(run_name)
    if token is not None and claim is not None and claim.get("token") == token:
      try:
        fileio.remove(self.path(run_name))
      except FileNotFoundError:
        pass

  @contextlib.contextmanager
  def held(self, run_name: str,
           progress: Callable[[str], None] = print) -> Iterator[None]:
    """Beats the run's claim every `timeout / 6` seconds while the block
    runs (a thread), then releases it. A claim found taken over (this
    worker was silent for `timeout`, e.g. suspended) is not beaten again,
    and said once."""
    stop = threading.Event()
    token = self._tokens[run_name]

    def beat():
      count = 0
      while not stop.wait(self.worker.timeout / 6.):
        claim = self.read(run_name)
        if claim is None or claim.get("token") != token:
          progress(f"{run_name}: this worker's claim was taken over by "
                   f"{(claim or {}).get('worker', 'nobody')}; it finishes "
                   "the run all the same.")
          return
        count += 1
        try:
          fileio.write_json_atomically(self.path(run_name),
                                       dict(claim, beat=count))
        except OSError:
          pass  # A missed beat; the next one may pass.

    thread = threading.Thread(target=beat, daemon=True,
                              name=f"heartbeat {run_name}")
    thread.start()
    try:
      yield
    finally:
      stop.set()
      thread.join()
      self.release(run_name)
