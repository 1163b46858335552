"""Tests of rank4class_tf.study.claims and study.schedule: claims, heartbeats,
take-overs, shards and the decisions made per group, without training."""

import dataclasses
import os
import tempfile
import threading
from unittest import mock
import uuid

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf import fileio
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import extend as study_extend
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import runner as study
from rank4class_tf.study import settings as study_settings
from rank4class_tf.study import schedule
from rank4class_tf.study import summary as study_summary
import test_study

Run = study_grid.Run


def study_dir(storage):
  if storage == "ram":
    return f"ram://claims-test-{uuid.uuid4().hex[:8]}"
  return tempfile.mkdtemp()


class FakeClock:

  def __init__(self):
    self.now = 0.

  def __call__(self):
    return self.now


class SummaryStorageTest(absltest.TestCase):

  def test_summaries_need_local_folders(self):
    with self.assertRaisesRegex(ValueError, r"^`summary_dir` needs local "
                                r"folders, and ram://s is not one: copy"):
      study_summary.check_summary_dir("ram://s", tempfile.mkdtemp())
    with self.assertRaisesRegex(ValueError, r"^`from_summary` needs local "
                                r"folders, and gs://b/s is not one"):
      study_summary.start_from_summary(tempfile.mkdtemp(), "gs://b/s")
    with self.assertRaisesRegex(ValueError, r"^`study_dir` needs local "
                                r"folders, and ram://r is not one"):
      study_summary.check_report("ram://r")


class ShardFromEnvironmentTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("none", None, None, {}, (1, 0)),
      ("flags", 4, 3, {}, (4, 3)),
      ("slurm", None, None, {"SLURM_ARRAY_TASK_COUNT": "3",
                             "SLURM_ARRAY_TASK_ID": "2"}, (3, 2)),
      ("slurm_from_1", None, None, {"SLURM_ARRAY_TASK_COUNT": "3",
                                    "SLURM_ARRAY_TASK_ID": "3",
                                    "SLURM_ARRAY_TASK_MIN": "1"}, (3, 2)),
      ("flags_win", 2, 0, {"SLURM_ARRAY_TASK_COUNT": "3",
                           "SLURM_ARRAY_TASK_ID": "2"}, (2, 0)),
      ("k8s", 5, None, {"JOB_COMPLETION_INDEX": "4"}, (5, 4)))
  def test_shards(self, num_shards, shard_index, env, want):
    self.assertEqual(study_claims.shard_from_environment(num_shards,
                                                         shard_index, env),
                     want)

  @parameterized.named_parameters(
      ("k8s_without_count", None, None, {"JOB_COMPLETION_INDEX": "1"},
       r"^JOB_COMPLETION_INDEX is set .* give `num_shards`"),
      ("index_out_of_range", 3, 3, {},
       r"^`shard_index`=3 must be in \[0, 3\) \(`num_shards`=3\)\.$"),
      ("zero_shards", 0, None, {}, r"^`num_shards`=0 must be >= 1\.$"),
      ("bad_variable", None, None, {"SLURM_ARRAY_TASK_COUNT": "x"},
       r"^environment variable SLURM_ARRAY_TASK_COUNT='x' is not an "
       r"integer\.$"))
  def test_refused(self, num_shards, shard_index, env, message):
    with self.assertRaisesRegex(ValueError, message):
      study_claims.shard_from_environment(num_shards, shard_index, env)


class ClaimsTest(parameterized.TestCase):

  @parameterized.parameters("local", "ram")
  def test_racing_workers_each_get_a_run_once(self, storage):
    folder = study_dir(storage)
    names = [f"run{i}" for i in range(30)]
    won = {}
    lock = threading.Lock()
    start = threading.Barrier(6)

    def worker(i):
      claims = study_claims.Claims(folder, study_claims.Worker(name=f"w{i}"))
      start.wait()
      for name in names:
        if claims.claim(name, progress=lambda _: None):
          with lock:
            won.setdefault(name, []).append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
    # Exclusive create (O_EXCL; ram:// under a lock): each run won once.
    self.assertEqual(sorted(won), sorted(names))
    self.assertTrue(all(len(v) == 1 for v in won.values()), won)
    on_disk = study_claims.Claims(folder, study_claims.Worker()).all()
    self.assertEqual(sorted(on_disk), sorted(names))
    for name, claim in on_disk.items():
      self.assertIn(int(claim["worker"][1:]), won[name])

  @parameterized.parameters("local", "ram")
  def test_dead_claim_is_taken_over_after_timeout(self, storage):
    folder = study_dir(storage)
    dead = study_claims.Claims(folder, study_claims.Worker(name="dead",
                                                           timeout=10))
    self.assertTrue(dead.claim("r"))
    clock = FakeClock()
    alive = study_claims.Claims(folder, study_claims.Worker(name="alive",
                                                            timeout=10),
                                clock=clock)
    lines = []
    self.assertEqual(alive.holder("r"), "dead")
    self.assertFalse(alive.claim("r", lines.append))
    clock.now = 9.9
    self.assertEqual(alive.holder("r"), "dead")
    clock.now = 10.
    self.assertIsNone(alive.holder("r"))  # Stale.
    self.assertTrue(alive.claim("r", lines.append))
    self.assertEqual(lines, ["r: took over the claim of worker dead (no "
                             "heartbeat for 10 s); the run resumes from its "
                             "backup."])
    self.assertEqual(alive.read("r")["worker"], "alive")
    aside = [n for n in fileio.listdir(alive.folder)
             if study_claims.STALE_MARK in n]
    self.assertLen(aside, 1)  # Kept for inspection.
    # The dead worker, back, holds nothing: its release leaves the claim.
    dead.release("r")
    self.assertEqual(alive.read("r")["worker"], "alive")

  def test_a_beat_resets_the_watch(self):
    folder = study_dir("local")
    holder = study_claims.Claims(folder, study_claims.Worker(name="h",
                                                             timeout=10))
    self.assertTrue(holder.claim("r"))
    clock = FakeClock()
    other = study_claims.Claims(folder, study_claims.Worker(timeout=10),
                                clock=clock)
    self.assertEqual(other.holder("r"), "h")
    clock.now = 8.
    claim = holder.read("r")
    fileio.write_json_atomically(holder.path("r"), dict(claim, beat=1))
    self.assertEqual(other.holder("r"), "h")  # A new beat: watched afresh.
    clock.now = 17.
    self.assertEqual(other.holder("r"), "h")
    clock.now = 18.
    self.assertIsNone(other.holder("r"))

  def test_held_claim_beats_and_is_released(self):
    folder = study_dir("local")
    claims = study_claims.Claims(folder, study_claims.Worker(name="h",
                                                             timeout=0.3))
    self.assertTrue(claims.claim("r"))
    with claims.held("r"):
      event = threading.Event()
      event.wait(0.25)  # About 5 beats of 0.05 s.
      self.assertGreaterEqual(claims.read("r")["beat"], 2)
    self.assertIsNone(claims.read("r"))

  def test_lost_claim_is_said_and_not_beaten(self):
    folder = study_dir("local")
    claims = study_claims.Claims(folder, study_claims.Worker(name="slow",
                                                             timeout=0.3))
    self.assertTrue(claims.claim("r"))
    lines = []
    with claims.held("r", lines.append):
      other = dict(claims.read("r"), worker="thief", token="t")
      fileio.write_json_atomically(claims.path("r"), other)
      threading.Event().wait(0.2)
    self.assertEqual(lines, ["r: this worker's claim was taken over by "
                             "thief; it finishes the run all the same."])
    self.assertEqual(claims.read("r"), other)  # Neither beaten nor removed.

  def test_bad_timeout(self):
    with self.assertRaisesRegex(ValueError,
                                r"^`claim_timeout`=0 must be > 0\.$"):
      study_claims.Worker(timeout=0)


def stand_in_run(calls, lock):
  """An `execute_run` that writes a finished run (through `fileio`, so on any
  storage) scored by its learning rate (peak at 5e-4), counting calls."""

  def execute_run(base, run, study_dir, data, earlier=None, extension=None,
                  train_steps=None, follows=None, worker=None):
    del base, data, earlier
    with lock:
      calls.append(run.name)
    threading.Event().wait(0.05)  # A run takes time: workers interleave.
    n = 20
    hits = (np.arange(n) % 2).astype(float)
    arrays = {"top1_accuracy": hits, "top5_accuracy": np.ones(n),
              "ndcg@5": hits, "mrr": hits, "softmax_ce": hits,
              "labels": np.zeros(n, int)}
    value = 0.9 - abs(np.log(run.learning_rate / 5e-4))
    metrics = {m: 0.5 for m in test_study.METRICS}
    record = dict(dataclasses.asdict(run), run=run.name,
                  validation=dict(metrics, top1_accuracy=value), test=metrics,
                  num_test=n, test_softmax_ce=0.5, test_neg_log_mrr=0.7,
                  test_neg_log_ndcg=0.3, ce_bound_holds=True, best_step=5,
                  train_seconds=0.1, resumed_at_step=0,
                  validation_curve={"top1_accuracy": [[5, value]]},
                  extension=None if extension is None else {
                      "round": extension.round, "reason": extension.reason},
                  follows=follows, worker=worker)
    folder = study_folder.run_dir(study_dir, run)
    fileio.makedirs(folder)
    fileio.write_atomically(f"{folder}/{study_folder.TEST_FILE}",
                            lambda f: np.savez(f, **arrays), binary=True)
    fileio.write_json_atomically(f"{folder}/{study_folder.RESULT_FILE}",
                                 record)
    return record

  return execute_run


class ThreadWorkersTest(parameterized.TestCase):
  """Three worker threads on one study (`ram://` is one process's: threads
  are its workers), the runs stood in for: each run once, the same records
  and decisions as one worker."""

  def study(self, study_dir, workers):
    grid = study_grid.Grid(losses=("softmax", "mse"), interactions=("dot",),
                           seeds=(0, 1), learning_rates=(1e-3, 3e-3, 1e-2))
    calls, lock, errors = [], threading.Lock(), []

    def work(i):
      try:
        study.run_study(study_dir, test_study.base_config(), grid,
                        progress=lambda _: None, extend_grid=1,
                        worker=study_claims.Worker(name=f"w{i}", timeout=60),
                        sleep=lambda _: threading.Event().wait(0.01))
      except Exception as e:  # pylint: disable=broad-except
        errors.append(e)

    with mock.patch.object(study, "execute_run", stand_in_run(calls, lock)):
      threads = [threading.Thread(target=work, args=(i,))
                 for i in range(workers)]
      for thread in threads:
        thread.start()
      for thread in threads:
        thread.join()
    self.assertEqual(errors, [])
    records = {r["run"]: r for r in study_folder.load_records(study_dir)}
    return calls, records

  @parameterized.parameters("local", "ram")
  def test_three_workers_equal_one(self, storage):
    calls, records = self.study(study_dir(storage), 3)
    self.assertEqual(sorted(calls), sorted(set(calls)))  # Each run once.
    # 12 grid runs; each (loss, seed) chooses 1e-3, the low edge:
    # `extend_grid` adds 3e-4, decided by whichever worker finished it.
    self.assertLen(calls, 16)
    self.assertLen([c for c in calls if ".lr0.0003." in c], 4)
    self.assertGreaterEqual(len({r["worker"] for r in records.values()}), 2)
    one_calls, one = self.study(study_dir(storage), 1)
    self.assertCountEqual(one_calls, calls)
    strip = lambda rs: {k: {f: v for f, v in r.items() if f != "worker"}
                        for k, r in rs.items()}
    self.assertEqual(strip(records), strip(one))


class FinishedBeforeClaimTest(absltest.TestCase):

  def test_a_run_finished_between_plan_and_claim_is_not_trained_again(self):
    # Another worker finishes a run (record written, claim released) after
    # this worker planned it and before it claims it: a race of three
    # thread workers made this happen now and then.
    folder = tempfile.mkdtemp()
    grid = study_grid.Grid(losses=("softmax",), interactions=("dot",),
                           seeds=(0, 1), learning_rates=(1e-3, 3e-3))
    calls, lock = [], threading.Lock()
    execute_run = stand_in_run(calls, lock)
    raced = "softmax.dot.lr0.003.seed0"
    claim = study_claims.Claims.claim

    def claim_after_the_other_worker(claims, run_name, progress=print):
      if run_name == raced and raced not in calls:
        run = next(r for r in grid.runs() if r.name == raced)
        execute_run(None, run, folder, None, worker="other")
      return claim(claims, run_name, progress)

    with mock.patch.object(study, "execute_run", execute_run), \
        mock.patch.object(study_claims.Claims, "claim",
                          claim_after_the_other_worker):
      study.run_study(folder, test_study.base_config(), grid,
                      progress=lambda _: None,
                      worker=study_claims.Worker(name="this", timeout=60))
    self.assertCountEqual(calls, [run.name for run in grid.runs()])
    records = {r["run"]: r for r in study_folder.load_records(folder)}
    self.assertEqual(records[raced]["worker"], "other")
    self.assertEqual({r["worker"] for n, r in records.items() if n != raced},
                     {"this"})
    self.assertEqual(fileio.listdir(study_claims.Claims(
        folder, study_claims.Worker()).folder), [])  # Its claim released.


def record(run, value, best_step=10, steps=None):
  out = {"run": run.name, "validation": {"top1_accuracy": value},
         "best_step": best_step}
  if steps:
    out["extended_steps"] = {"from": 10, "to": steps}
  return out


def peak(rate):
  return lambda run: 0.9 - abs(run.learning_rate - rate)


class ScheduleTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.grid = study_grid.Grid(losses=("softmax", "mse"),
                                interactions=("dot",), seeds=(0, 1),
                                learning_rates=(1e-3, 3e-3))

  def plan(self, records, **kwargs):
    args = dict(extensions=[], steps={}, followers={})
    args.update(kwargs)
    return schedule.plan(self.grid, records, args.pop("extensions"),
                         args.pop("steps"), args.pop("followers"),
                         "top1_accuracy", 10, 5, **args)

  def test_grid_only(self):
    plan = self.plan({})
    self.assertLen(plan.runs, 8)
    self.assertEqual(plan.pending, plan.runs)
    self.assertFalse(plan.decided)
    # Units: (loss, interaction, seed), in grid order.
    self.assertEqual([plan.units[r.name] for r in plan.runs],
                     [0, 0, 1, 1, 2, 2, 3, 3])

  def test_extension_waits_for_its_group_only(self):
    runs = self.grid.runs()
    value = peak(3e-3)  # Chosen on the high edge.
    # softmax seed 0 finished; mse seed 0 half.
    records = {r.name: record(r, value(r)) for r in runs[:3]}
    plan = self.plan(records, extend_grid=2)
    self.assertEqual([e.run.name for e in plan.extensions],
                     ["softmax.dot.lr0.01.seed0"])
    self.assertEqual(plan.extensions[0].round, 1)
    # Recorded, the extension is pending after the grid's runs.
    plan = self.plan(records, extend_grid=2, extensions=plan.extensions)
    self.assertFalse(plan.decided)
    self.assertEqual(plan.pending[-1].name, "softmax.dot.lr0.01.seed0")
    self.assertEqual(plan.units["softmax.dot.lr0.01.seed0"], 0)

  def test_steps_then_followers_with_their_steps(self):
    self.grid = dataclasses.replace(self.grid, seeds=(0, 1, 2),
                                    choose_on_seed=0)
    runs = self.grid.runs()  # Seed 0 only: 2 cells x 2 rates.
    self.assertLen(runs, 4)
    records = {r.name: record(r, peak(1e-3)(r)) for r in runs}
    plan = self.plan(records, extend_steps=2.)
    self.assertEqual(plan.steps, {"softmax.dot.lr0.001.seed0": 20,
                                  "mse.dot.lr0.001.seed0": 20})
    self.assertEqual(plan.followers, {})  # They wait for the longer runs.
    self.assertEqual([r.name for r in plan.pending],
                     ["softmax.dot.lr0.001.seed0", "mse.dot.lr0.001.seed0"])
    chosen = runs[0]
    records[chosen.name] = record(chosen, 0.95, best_step=15, steps=20)
    plan = self.plan(records, extend_steps=2., steps=plan.steps)
    self.assertEqual(plan.followers, {
        "softmax.dot.lr0.001.seed1": "softmax.dot.lr0.001.seed0",
        "softmax.dot.lr0.001.seed2": "softmax.dot.lr0.001.seed0"})
    self.assertEqual(plan.steps, {"softmax.dot.lr0.001.seed1": 20,
                                  "softmax.dot.lr0.001.seed2": 20})
    # A cell's followers share its unit: a shard never waits for another.
    self.assertEqual(plan.units["softmax.dot.lr0.001.seed2"],
                     plan.units["softmax.dot.lr0.001.seed0"])

  def test_changed_choice_under_a_follower_is_refused(self):
    self.grid = dataclasses.replace(self.grid, choose_on_seed=0)
    records = {r.name: record(r, peak(1e-3)(r)) for r in self.grid.runs()}
    with self.assertRaisesRegex(ValueError, r"^run softmax\.dot\.lr0\.001\."
                                r"seed1 follows softmax\.dot\.lr0\.003\.seed0, "
                                r"but seed 0 now chooses"):
      self.plan(records, followers={
          "softmax.dot.lr0.001.seed1": "softmax.dot.lr0.003.seed0"})

  @parameterized.parameters(1, 2, 3, 5)
  def test_shards_partition_the_units(self, num_shards):
    plan = self.plan({})
    shards = [{r.name for r in plan.runs
               if study_claims.shard_of(plan.units[r.name], num_shards) == i}
              for i in range(num_shards)]
    self.assertEqual(set().union(*shards), {r.name for r in plan.runs})
    self.assertEqual(sum(map(len, shards)), len(plan.runs))
    sizes = sorted(len(s) for s in shards)
    self.assertLessEqual(sizes[-1] - sizes[0], 2)  # 2 runs per unit.

  def test_same_decisions_in_any_order(self):
    # Two orders of finishing give the same extensions once all are done.
    runs = self.grid.runs()
    value = peak(1e-3)
    records = {r.name: record(r, value(r)) for r in runs}
    forward = self.plan(records, extend_grid=1).extensions
    backward = self.plan(dict(reversed(list(records.items()))),
                         extend_grid=1).extensions
    self.assertEqual(forward, backward)
    self.assertLen(forward, 4)
    self.assertTrue(all(isinstance(e, study_extend.Extension)
                        for e in forward))
    self.assertEqual({e.run.learning_rate for e in forward}, {3e-4})

  def test_runs_that_did_not_converge_go_on_until_they_do_up_to_the_limit(
      self):
    # --patience: `converged` decides, not the best's place. Seed 0 of
    # softmax chooses 1e-3, whose best (step 5 of 10) is followed by too few
    # validations; mse's choice converged.
    self.grid = dataclasses.replace(self.grid, seeds=(0, 1),
                                    choose_on_seed=0)
    runs = self.grid.runs()
    records = {r.name: dict(record(r, peak(1e-3)(r), best_step=5),
                            converged=r.loss == "mse") for r in runs}
    chosen = "softmax.dot.lr0.001.seed0"
    steps = {}
    for to in (20, 40):  # x2 each time, up to the limit of 40 steps.
      plan = self.plan(records, steps=steps, extend_steps=2.,
                       extend_steps_limit=40)
      self.assertEqual(plan.steps, {chosen: to})
      self.assertEqual(plan.followers, {"mse.dot.lr0.001.seed1":
                                        "mse.dot.lr0.001.seed0"})
      steps.update(plan.steps)
      records[chosen] = dict(record(runs[0], 0.95, best_step=to, steps=to),
                             converged=False)
    # At the limit, still not converged: its followers run, with its steps.
    plan = self.plan(records, steps=steps, extend_steps=2.,
                     extend_steps_limit=40)
    self.assertEqual(plan.followers, {
        "softmax.dot.lr0.001.seed1": chosen,
        "mse.dot.lr0.001.seed1": "mse.dot.lr0.001.seed0"})
    self.assertEqual(plan.steps, {"softmax.dot.lr0.001.seed1": 40})
    # A follower that did not converge is trained on like a chosen run.
    steps.update(plan.steps)
    follower = study_grid.parse_run_name("mse.dot.lr0.001.seed1")
    records[follower.name] = dict(record(follower, 0.9), converged=False)
    plan = self.plan(records, steps=steps, followers={
        "softmax.dot.lr0.001.seed1": chosen,
        "mse.dot.lr0.001.seed1": "mse.dot.lr0.001.seed0"},
                     extend_steps=2., extend_steps_limit=40)
    self.assertEqual(plan.steps, {"mse.dot.lr0.001.seed1": 20})
    # Without a limit, once (x2), as before --patience.
    records = {r.name: dict(record(r, peak(1e-3)(r)), converged=False)
               for r in runs}
    plan = self.plan(records, extend_steps=2.)
    self.assertEqual(plan.steps, {chosen: 20, "mse.dot.lr0.001.seed0": 20})
    records[chosen] = dict(record(runs[0], 0.95, best_step=20, steps=20),
                           converged=False)
    self.assertNotIn(chosen, self.plan(records, steps=plan.steps,
                                       extend_steps=2.).steps)

  @parameterized.parameters(
      # The committed studies, with their commands' flags (docs/text.md):
      # records without `converged`, lengthened once; nothing more to do.
      ("study_goemotions_frozen", 3, 2.),
      ("study_goemotions_finetuned", 2, 1.5))
  def test_committed_studies_resume_unchanged(self, name, extend_grid,
                                              extend_steps):
    folder = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "results", name)
    shared, grid = study_folder.load_study(folder)
    records = {r["run"]: r for r in study_folder.load_records(folder)}
    plan = schedule.plan(grid, records, study_folder.load_extensions(folder),
                         study_folder.load_extended_steps(folder),
                         study_folder.load_followers(folder),
                         shared["best_metric"], shared["train_steps"],
                         shared["eval_every"], extend_grid, extend_steps)
    self.assertEqual((len(plan.runs), plan.pending, plan.decided),
                     (len(records), [], False))

  def test_a_study_begun_before_patience_takes_the_same_command(self):
    # Its study.json's shared settings have no patience, lr_schedule or
    # warmup_steps: read as 0, constant and 0.
    source = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "results", "study_goemotions_finetuned")
    folder = tempfile.mkdtemp()
    fileio.write_json_atomically(
        os.path.join(folder, study_folder.STUDY_FILE),
        fileio.read_json(os.path.join(source, study_folder.STUDY_FILE)))
    shared, grid = study_folder.load_study(folder)
    self.assertNotIn("patience", shared)
    names = set(config_lib.TrainConfig().flat())
    base = config_lib.TrainConfig.create(**{
        k: v for k, v in shared.items() if k in names})
    self.assertEqual(study_settings.open_study(folder, base, grid), grid)
    with self.assertRaisesRegex(ValueError, r"^`patience`=5 differs from "
                                r"the study in .* \(patience=0\); pass the "
                                r"same value, or another `study_dir`\.$"):
      study_settings.open_study(folder, base.replace(patience=5), grid)
    # float32_layers (issue 60) changes mixed-precision studies only: this
    # float32 study began before it and goes on at its default; a bfloat16
    # study begun before it computed with Keras' policy on every layer.
    self.assertTrue(base.trainer.float32_layers)
    path = os.path.join(folder, study_folder.STUDY_FILE)
    mixed = fileio.read_json(path)
    mixed["shared"]["mixed_precision"] = "bfloat16"
    # (The open above recorded today's settings.)
    del mixed["shared"]["float32_layers"]
    fileio.write_json_atomically(path, mixed)
    # (The CPU check of bfloat16 is tests/test_config.py's.)
    with mock.patch.object(checks, "cpu_has_bfloat16", lambda: True), \
        self.assertRaisesRegex(ValueError, r"^`float32_layers`=True "
                               r"differs from the study in .* "
                               r"\(float32_layers=False\)"):
      study_settings.open_study(
          folder, base.replace(mixed_precision="bfloat16"), grid)

  def test_records_without_converged_peak_last_as_before(self):
    # A study without --patience, or records older than it: lengthened
    # when the best validation is the last.
    self.grid = dataclasses.replace(self.grid, seeds=(0,))
    runs = self.grid.runs()
    records = {r.name: record(r, peak(1e-3)(r), best_step=5) for r in runs}
    self.assertEqual(self.plan(records, extend_steps=2.).steps, {})
    records["softmax.dot.lr0.001.seed0"]["best_step"] = 10
    self.assertEqual(self.plan(records, extend_steps=2.).steps,
                     {"softmax.dot.lr0.001.seed0": 20})


if __name__ == "__main__":
  absltest.main()
