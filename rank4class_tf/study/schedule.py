"""What a study trains next: its runs so far and the decisions that add runs.

A study's runs are its grid's, plus those its decisions add:

* `--extend_grid`: a (loss, interaction, seed) whose choice is on an edge of
  what it tried gets the run one step beyond (`study_extend.plan`), up to N
  rounds;
* `--extend_steps`: once its grid is settled (no extension to add), a group
  whose chosen run has not converged trains that run on to F times its
  steps, and again while it has not, up to `--extend_steps_limit` steps
  (default F x `--train_steps`: once). Not converged: with `--patience`,
  the record's `converged` is false (its best is followed by fewer than
  `patience` validations); without, its best validation is its last;
* `--choose_on_seed`: once the chosen seed's group of a cell is settled
  (steps included), the other seeds run its choice (followers), with its
  steps; a follower that has not converged is lengthened like a chosen run.

Every decision is made per group from that group's finished runs only
(`plan`), by whichever worker looks first, so the same decisions come out
whatever order the runs finished in and however many workers shared them:
one worker and four give the same runs and the same results. Decisions are
recorded in study.json (`folder.add_extensions`, `add_extended_steps`,
`add_followers`), merged under the folder's lock, so workers that decide at
the same moment write the same thing.

Units of work (`Plan.units`): a (loss, interaction, seed) with what its
decisions add, or with `--choose_on_seed` a whole cell with its followers;
a fixed partition (`--num_shards`) deals units, never runs, so a shard
never waits for another's runs. No TensorFlow, no files: `plan` is pure.
"""

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

from rank4class_tf.study import extend as study_extend
from rank4class_tf.study import grid as study_grid

Run = study_grid.Run


@dataclasses.dataclass
class Plan:
  """The study as its finished runs leave it (`plan`).

  Attributes:
    runs: every run of the command's cells and seeds, in order: the grid's,
      the extensions', the followers'.
    pending: those not finished (or finished with fewer steps than
      `steps` gives them): grid runs, extensions, runs trained on,
      followers, each in the order of `runs` or of the decisions.
    units: {run name: its unit's index} (see the module doc).
    extensions: the grid extensions decided now (not yet in study.json).
    steps: {run: steps} decided now by `--extend_steps`.
    followers: {run: the run it follows} decided now by `--choose_on_seed`.
    all_steps: the steps of every lengthened run, old and new.
  """
  runs: List[Run]
  pending: List[Run]
  units: Dict[str, int]
  extensions: List[study_extend.Extension]
  steps: Dict[str, int]
  followers: Dict[str, str]
  all_steps: Dict[str, int]

  @property
  def decided(self) -> bool:
    """True when this plan made a decision to record."""
    return bool(self.extensions or self.steps or self.followers)


def unit_key(run: Run, choose_on_seed: Optional[int]) -> Tuple:
  """A run's unit: (loss, interaction, seed), or its cell with
  `choose_on_seed` (the followers depend on the chosen seed's runs)."""
  if choose_on_seed is None:
    return run.loss, run.interaction, run.seed
  return run.loss, run.interaction


def lengthened(train_steps: int, eval_every: int, factor: float) -> int:
  """`--extend_steps`' new length: factor x steps, up to a validation.

  >>> lengthened(1000, 300, 1.5)
  1500
  """
  return int(math.ceil(factor * train_steps / eval_every) * eval_every)


def converged(record: Dict, steps: int) -> bool:
  """Whether a finished run of `steps` steps needs no more: its record's
  `converged` (a run under `--patience`), else (a run without patience, or
  a record written before it existed) whether its best validation came
  before its last.

  >>> converged({"converged": False, "best_step": 40}, 100)
  False
  >>> converged({"best_step": 40}, 100), converged({"best_step": 100}, 100)
  (True, False)
  """
  if record.get("converged") is not None:
    return bool(record["converged"])
  return record.get("best_step") != steps


def is_done(run: Run, records: Dict[str, Dict], steps: Dict[str, int]) -> bool:
  """True when the run has a record of the steps it is given."""
  record = records.get(run.name)
  if record is None:
    return False
  if run.name not in steps:
    return True
  return (record.get("extended_steps") or {}).get("to") == steps[run.name]


def plan(grid: study_grid.Grid,
         records: Dict[str, Dict],
         extensions: Sequence[study_extend.Extension],
         steps: Dict[str, int],
         followers: Dict[str, str],
         select_metric: str,
         train_steps: int,
         eval_every: int,
         extend_grid: int = 0,
         extend_steps: float = 0.,
         extend_steps_limit: int = 0) -> Plan:
  """The runs and the decisions that the finished runs call for now.

  Args:
    grid: the command's grid (its cells and seeds bound what is planned).
    records: {run name: record} of the finished runs (any steps).
    extensions, steps, followers: what study.json recorded so far.
    select_metric: the validation metric that chooses.
    train_steps, eval_every: the study's.
    extend_grid, extend_steps: `--extend_grid`, `--extend_steps` (0: off).
    extend_steps_limit: `--extend_steps_limit`, the most steps a run is
      lengthened to (0: one lengthening, `extend_steps` x `train_steps`).

  Returns:
    The `Plan`.

  Raises:
    ValueError: a follower recorded for another choice than the chosen
      seed makes now (the study changed under it).
  """
  cells = set(grid.cell_keys())
  in_command = lambda run: run.cell in cells and run.seed in grid.seeds
  runs: List[Run] = []
  names = set()

  def add(run: Run) -> None:
    if run.name not in names and in_command(run):
      names.add(run.name)
      runs.append(run)

  for run in grid.runs():
    add(run)
  extensions = list(extensions)
  for extension in extensions:
    add(extension.run)
  followers = dict(followers)
  for name in followers:
    add(study_grid.parse_run_name(name))
  all_steps = dict(steps)
  new_extensions, new_steps, new_followers = [], {}, {}
  done = lambda run: is_done(run, records, all_steps)

  def choose(tried):
    return study_extend.choose(tried, records, select_metric)

  limit = extend_steps and (extend_steps_limit or
                            lengthened(train_steps, eval_every, extend_steps))

  def longer(run: Run) -> Optional[int]:
    """The steps a finished run that has not converged goes on to; None
    when it has, or has reached the limit."""
    steps = all_steps.get(run.name, train_steps)
    if (not extend_steps or steps >= limit or
        converged(records[run.name], steps)):
      return None
    return min(limit, lengthened(steps, eval_every, extend_steps))

  tuned_groups: Dict[Tuple[str, str, int], List[Run]] = {}
  for run in runs:
    if grid.choose_on_seed is None or run.seed == grid.choose_on_seed:
      if run.name not in followers:
        tuned_groups.setdefault(study_extend.group_key(run), []).append(run)
  for key, tried in tuned_groups.items():
    if not all(map(done, tried)):
      continue
    if extend_grid:
      made = [e for e in extensions + new_extensions
              if study_extend.group_key(e.run) == key]
      new = study_extend.plan(tried, made, records, select_metric,
                              extend_grid, dataclasses.replace)
      if new:
        new_extensions += new
        for extension in new:
          add(extension.run)
        continue
    chosen = choose(tried)
    more = longer(chosen)
    if more and not any(run.name in all_steps for run in tried
                        if run.name != chosen.name):
      all_steps[chosen.name] = new_steps[chosen.name] = more
      continue
    if grid.choose_on_seed is None:
      continue
    for seed in grid.seeds:
      if seed == grid.choose_on_seed:
        continue
      follower = dataclasses.replace(chosen, seed=seed)
      if followers.get(follower.name, chosen.name) != chosen.name:
        raise ValueError(
            f"run {follower.name} follows {followers[follower.name]}, but "
            f"seed {grid.choose_on_seed} now chooses {chosen.name}: the "
            "study changed under it; start another `study_dir`.")
      if follower.name not in followers:
        followers[follower.name] = new_followers[follower.name] = chosen.name
        add(follower)
      if chosen.name in all_steps and follower.name not in all_steps:
        all_steps[follower.name] = new_steps[follower.name] = all_steps[
            chosen.name]
  if extend_steps:
    for name in followers:
      run = study_grid.parse_run_name(name)
      more = in_command(run) and done(run) and longer(run)
      if more:
        all_steps[name] = new_steps[name] = more
  order: Dict[Tuple, int] = {}
  for run in grid.runs():
    order.setdefault(unit_key(run, grid.choose_on_seed), len(order))
  units = {run.name: order.setdefault(unit_key(run, grid.choose_on_seed),
                                      len(order)) for run in runs}
  place = {run.name: i for i, run in enumerate(runs)}

  def rank(run: Run) -> Tuple[int, int, int]:
    # Grid runs first, then extensions, runs trained on, followers (by the
    # run they follow, then seed): the runs of every group before the
    # decisions that wait for them, in grid order.
    if run.name in records and run.name in all_steps:
      return 2, place[run.name], 0
    if run.name in followers:
      return 3, place.get(followers[run.name], 0), run.seed
    if any(e.run.name == run.name for e in extensions + new_extensions):
      return 1, place[run.name], 0
    return 0, place[run.name], 0

  pending = sorted((run for run in runs if not done(run)), key=rank)
  return Plan(runs=runs, pending=pending,
              units=units, extensions=new_extensions, steps=new_steps,
              followers=new_followers, all_steps=all_steps)
