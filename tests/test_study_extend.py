"""Tests of rank4class_tf.study.extend and `run_study(extend_grid=N)`.

The end-to-end cases use a stand-in trainer: `study.execute_run` replaced by
one that writes a finished run whose validation Top-1 is a known function of
its learning rate and width, so the grid's best value is known and lies
outside the grid.
"""

import csv
import dataclasses
import json
import math
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.study import extend as study_extend
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import report as study_report
from rank4class_tf.study import runner as study
from rank4class_tf.study import selection as study_selection
from rank4class_tf.study import summary as study_summary
from tests import test_study

Run = study_grid.Run


def peak_at(rate, units=None):
  """Validation Top-1 with its maximum at learning rate `rate` (and width
  `units`): 0.9 minus the squared log-distance to the peak."""
  def value(run):
    out = 0.9 - 0.01 * math.log(run.learning_rate / rate) ** 2
    if units is not None and run.mlp_units is not None:
      out -= 0.01 * math.log2(run.mlp_units / units) ** 2
    return out
  return value


def stand_in(value, extended_best_step=15):
  """An `execute_run` that writes a finished run scored by `value`; a run
  trained on to 20 steps peaks at `extended_best_step`."""
  calls = []

  def execute_run(base, run, study_dir, data, earlier=None, extension=None,
                  train_steps=None, follows=None, worker=None):
    del base, data, earlier, worker
    calls.append(run.name if train_steps is None else
                 f"{run.name}->{train_steps}")
    folder = study_folder.run_dir(study_dir, run)
    if os.path.exists(folder):  # Trained on (--extend_steps).
      shutil.rmtree(folder)
    hits = (np.arange(test_study.N) % 2).astype(float)
    record = test_study.fake_run(study_dir, run, hits, value(run))
    record["extension"] = (None if extension is None else
                           {"round": extension.round,
                            "reason": extension.reason})
    record["follows"] = follows
    if train_steps is not None:
      # Still improving at 10 steps (and at 20 with extended_best_step=20).
      record["extended_steps"] = {"from": 10, "to": train_steps}
      record["best_step"] = extended_best_step
    with open(os.path.join(study_folder.run_dir(study_dir, run),
                           study_folder.RESULT_FILE), "w") as f:
      json.dump(record, f)
    return record
  return execute_run, calls


class StepsTest(tf.test.TestCase):

  def test_next_rate_follows_the_paper_ladder(self):
    self.assertEqual(study_extend.next_rate(1e-3, up=False), 3e-4)
    self.assertEqual(study_extend.next_rate(3e-4, up=False), 1e-4)
    self.assertEqual(study_extend.next_rate(1e-2, up=True), 3e-2)
    self.assertEqual(study_extend.next_rate(3e-2, up=True), 0.1)
    self.assertEqual(study_extend.next_rate(1e-7, up=False), 3e-8)
    # Off the ladder: x3 or /3, two significant digits.
    self.assertEqual(study_extend.next_rate(5e-4, up=True), 1.5e-3)
    self.assertEqual(study_extend.next_rate(5e-4, up=False), 1.7e-4)

  def test_next_units(self):
    self.assertEqual(study_extend.next_units(64, up=False), 32)
    self.assertEqual(study_extend.next_units(512, up=True), 1024)
    self.assertIsNone(study_extend.next_units(1, up=False))
    self.assertIsNone(study_extend.next_units(5, up=False))


class PlanTest(tf.test.TestCase):

  def runs(self, rates, widths=(None,), seed=0, interaction="dot"):
    return [Run("mse", interaction, r, u, seed) for r in rates
            for u in widths]

  def records(self, runs, value):
    return {r.name: {"validation": {"top1_accuracy": value(r)}}
            for r in runs}

  def test_lowest_rate_chosen_adds_the_one_below(self):
    runs = self.runs((1e-3, 3e-3, 1e-2))
    new = study_extend.plan(runs, [], self.records(runs, peak_at(1e-5)),
                            "top1_accuracy", 2, dataclasses.replace)
    self.assertEqual([e.run.name for e in new], ["mse.dot.lr0.0003.seed0"])
    self.assertEqual(new[0].round, 1)
    self.assertEqual(new[0].reason, "learning_rate 0.001 of the chosen run "
                     "mse.dot.lr0.001.seed0 is the lowest tried")

  def test_interior_choice_adds_nothing_and_waits_for_unfinished_runs(self):
    runs = self.runs((1e-3, 3e-3, 1e-2))
    records = self.records(runs, peak_at(3e-3))
    self.assertEqual(study_extend.plan(runs, [], records, "top1_accuracy",
                                       2, dataclasses.replace), [])
    # The lowest rate would be chosen, but one run is not finished: its
    # choice waits.
    records = self.records(runs[:2], peak_at(1e-9))
    self.assertEqual(study_extend.plan(runs, [], records, "top1_accuracy",
                                       2, dataclasses.replace), [])

  def test_width_edge_extends_at_the_chosen_rate(self):
    runs = self.runs((1e-3, 3e-3), widths=(64, 128), interaction="lc_mlp")
    new = study_extend.plan(runs, [], self.records(runs, peak_at(
        2e-3, units=1024)), "top1_accuracy", 1, dataclasses.replace)
    # 3e-3 beats 1e-3 (closer to 2e-3 in log): high rate edge and high
    # width edge, each extended at the other's chosen value.
    self.assertEqual([e.run.name for e in new],
                     ["mse.lc_mlp.lr0.01.u128.seed0",
                      "mse.lc_mlp.lr0.003.u256.seed0"])

  def test_round_limit(self):
    runs = self.runs((1e-3,))
    first = study_extend.Extension(Run("mse", "dot", 3e-4, None, 0), 1, "r")
    runs.append(first.run)
    records = self.records(runs, peak_at(1e-6))
    self.assertEqual(study_extend.plan(runs, [first], records,
                                       "top1_accuracy", 1,
                                       dataclasses.replace), [])
    again = study_extend.plan(runs, [first], records, "top1_accuracy", 2,
                              dataclasses.replace)
    self.assertEqual([(e.run.name, e.round) for e in again],
                     [("mse.dot.lr0.0001.seed0", 2)])


class StandInStudyCase(tf.test.TestCase):
  """A one-cell study run with the stand-in trainer."""

  def setUp(self):
    super().setUp()
    self.dir = os.path.join(tempfile.mkdtemp(), "study")
    self.grid = study_grid.Grid(losses=("softmax",), interactions=("dot",),
                           seeds=(0, 1), learning_rates=(1e-3, 3e-3, 1e-2))

  def run_study(self, value, extend_grid, extend_steps=0.,
                extended_best_step=15):
    execute_run, calls = stand_in(value, extended_best_step)
    lines = []
    with mock.patch.object(study, "execute_run", execute_run):
      runs = study.run_study(self.dir, test_study.base_config(), self.grid,
                             progress=lines.append, extend_grid=extend_grid,
                             extend_steps=extend_steps)
    return runs, calls, lines


class RunStudyTest(StandInStudyCase):

  def test_runs_still_improving_go_on_once(self):
    # Every stand-in run peaks at its last validation (step 10 of 10): the
    # chosen run of each seed goes on to 2 x 10 steps, once.
    _, calls, lines = self.run_study(peak_at(3e-3), 0, extend_steps=2)
    self.assertEqual(calls[6:], ["softmax.dot.lr0.003.seed0->20",
                                 "softmax.dot.lr0.003.seed1->20"])
    # Decided per seed, as soon as that seed's runs are finished.
    self.assertLen([line for line in lines if line.startswith(
        "`extend_steps`: 1 chosen run(s)")], 2, lines)
    with open(os.path.join(self.dir, study_folder.STUDY_FILE)) as f:
      self.assertEqual(json.load(f)["extended_steps"],
                       {"softmax.dot.lr0.003.seed0": 20,
                        "softmax.dot.lr0.003.seed1": 20})
    record = {r["run"]: r for r in study_folder.load_records(self.dir)}[
        "softmax.dot.lr0.003.seed0"]
    self.assertEqual(record["extended_steps"], {"from": 10, "to": 20})
    # Once: the same command again trains nothing.
    _, again, _ = self.run_study(peak_at(3e-3), 0, extend_steps=2)
    self.assertEqual(again, [])
    # The report judges an extended run by its own steps: it peaked at 15
    # of 20, so it is no longer "peaked last".
    paths = study_report.write_report(self.dir, progress=lambda _: None)
    with open(paths["results"]) as f:
      rows = {r["run"]: r for r in csv.DictReader(f)}
    self.assertEqual(rows["softmax.dot.lr0.003.seed0"]["best_is_last"],
                     "False")
    self.assertEqual(rows["softmax.dot.lr0.001.seed0"]["best_is_last"],
                     "True")

  def test_a_run_still_improving_after_its_extension_is_said_to_be_at_the_limit(
      self):
    # Trained on to 20 steps, both chosen runs still peak at their last
    # validation: the report says why they stop there.
    _, calls, _ = self.run_study(peak_at(3e-3), 0, extend_steps=2,
                                 extended_best_step=20)
    self.assertEqual(calls[6:], ["softmax.dot.lr0.003.seed0->20",
                                 "softmax.dot.lr0.003.seed1->20"])
    paths = study_report.write_report(self.dir, progress=lambda _: None)
    with open(paths["tables"]) as f:
      tables = f.read()
    self.assertIn("tried; 2 of 2 peaked at their last validation** (still "
                  "improving when they stopped).", tables)
    self.assertIn("2 of those 2 peaked last after `--extend_steps` had "
                  "trained them on: the extension limit (a study lengthens "
                  "a run once)", tables)
    self.assertIn("| Softmax CE + Dot | 0 | 0.003 | — | 0.9000 | 20 | peaked "
                  "last, extension limit |", tables)
    self.assertEqual(tables.count("| peaked last, extension limit |"), 2)

  def test_bad_extend_steps(self):
    with self.assertRaisesRegex(ValueError, r"^`extend_steps`=0.5 must be 0 "
                                r"\(no extension\) or > 1\.$"):
      self.run_study(peak_at(1e-3), 0, extend_steps=0.5)
    self.assertFalse(os.path.exists(self.dir))

  def test_runs_that_did_not_converge_go_on_up_to_the_limit(self):
    # --patience=2: every stand-in run's record says `converged` false
    # (still improving) until it reaches 40 steps.
    execute_run, calls = stand_in(peak_at(3e-3))

    def not_converged(base, run, study_dir, data, earlier=None,
                      extension=None, train_steps=None, follows=None,
                      worker=None):
      record = execute_run(base, run, study_dir, data, earlier, extension,
                           train_steps, follows, worker)
      record["converged"] = train_steps == 40
      with open(os.path.join(study_folder.run_dir(study_dir, run),
                             study_folder.RESULT_FILE), "w") as f:
        json.dump(record, f)
      return record
    self.grid = dataclasses.replace(self.grid, seeds=(0,))
    lines = []
    with mock.patch.object(study, "execute_run", not_converged):
      study.run_study(self.dir, test_study.base_config(patience=2), self.grid,
                      progress=lines.append, extend_steps=2,
                      extend_steps_limit=40)
    self.assertEqual(calls[3:], ["softmax.dot.lr0.003.seed0->20",
                                 "softmax.dot.lr0.003.seed0->40"])
    self.assertEqual([line for line in lines if "extend_steps" in line], [
        "`extend_steps`: 1 chosen run(s) have not converged (`patience`=2): "
        "trained on to 2 x 10 steps.",
        "`extend_steps`: 1 chosen run(s) have not converged (`patience`=2): "
        "trained on to 40 steps."])
    record = {r["run"]: r for r in study_folder.load_records(self.dir)}[
        "softmax.dot.lr0.003.seed0"]
    self.assertEqual((record["extended_steps"], record["converged"]),
                     ({"from": 10, "to": 40}, True))

  def test_bad_extend_steps_limit_and_a_decaying_schedule(self):
    for kwargs, base, message in (
        (dict(extend_steps_limit=40), {}, r"^`extend_steps_limit`=40 needs "
         r"`extend_steps`\.$"),
        (dict(extend_steps=2, extend_steps_limit=24), {},
         r"^`extend_steps_limit`=24 must be a multiple of `eval_every`=5 "
         r"above `train_steps`=10\.$"),
        (dict(extend_steps=2, extend_steps_limit=10), {},
         r"^`extend_steps_limit`=10 must be"),
        (dict(extend_steps=2), dict(lr_schedule="linear"),
         r"^`extend_steps` trains a run on past `train_steps`, to which "
         r"`lr_schedule`=linear decays \(the rate of the steps trained "
         r"would change\): raise `train_steps` instead, with `patience` to "
         r"stop where the runs converge\.$")):
      with self.assertRaisesRegex(ValueError, message), mock.patch.object(
          study, "execute_run", None):  # Never reached.
        study.run_study(self.dir, test_study.base_config(**base), self.grid,
                        progress=lambda _: None, **kwargs)
      self.assertFalse(os.path.exists(self.dir))

  def test_best_rate_below_the_grid_ends_interior(self):
    # The peak is at 2e-4: 1e-3 -> 3e-4 -> 1e-4, where 3e-4 is interior.
    runs, calls, lines = self.run_study(peak_at(2e-4), extend_grid=3)
    self.assertLen(calls, 6 + 4)  # 2 rounds x 2 seeds.
    self.assertEqual(calls[6:], ["softmax.dot.lr0.0003.seed0",
                                 "softmax.dot.lr0.0003.seed1",
                                 "softmax.dot.lr0.0001.seed0",
                                 "softmax.dot.lr0.0001.seed1"])
    self.assertLen(runs, 10)
    records = {r["run"]: r for r in study_folder.load_records(self.dir)}
    chosen = study_selection.select(list(records.values()), "top1_accuracy")
    for seed in (0, 1):
      self.assertEqual(chosen[("softmax", "dot", seed)]["learning_rate"],
                       3e-4)
    ext = records["softmax.dot.lr0.0001.seed0"]["extension"]
    self.assertEqual(ext["round"], 2)
    self.assertRegex(ext["reason"], "0.0003 .* is the lowest tried")
    with open(os.path.join(self.dir, study_folder.STUDY_FILE)) as f:
      saved = json.load(f)
    self.assertLen(saved["extensions"], 4)
    self.assertIn("git_commit", saved["provenance"])
    self.assertTrue(any("round 2" in line for line in lines))
    # The same command again: everything finished, nothing trained.
    _, again, _ = self.run_study(peak_at(2e-4), extend_grid=3)
    self.assertEqual(again, [])
    # The report reads the extension runs too.
    paths = study_report.write_report(self.dir, progress=lambda _: None)
    with open(paths["results"]) as f:
      self.assertLen(f.read().strip().splitlines(), 1 + 10)

  def test_limit_reached_is_said(self):
    _, calls, lines = self.run_study(peak_at(1e-9), extend_grid=1)
    self.assertLen(calls, 6 + 2)
    self.assertTrue(any("still on the low learning_rate edge after "
                        "`extend_grid`=1 rounds" in line for line in lines),
                    lines)
    # The report says why each choice stays on the edge.
    paths = study_report.write_report(self.dir, progress=lambda _: None)
    with open(paths["tables"]) as f:
      tables = f.read()
    self.assertIn("2 of those 2 on an edge were added by `--extend_grid` "
                  "and are still on an edge: the extension limit", tables)
    self.assertEqual(tables.count(
        "| 0.0003 | — | -0.6905 | 10 | rate low edge, after 1 extension round, "
        "peaked last |"), 2, tables)

  def test_no_extension_by_default(self):
    _, calls, _ = self.run_study(peak_at(1e-9), extend_grid=0)
    self.assertLen(calls, 6)

  def test_negative_is_refused_before_writing(self):
    with self.assertRaisesRegex(ValueError, r"^`extend_grid`=-1 must be"):
      self.run_study(peak_at(1e-3), extend_grid=-1)
    self.assertFalse(os.path.exists(self.dir))



class FromSummaryTest(StandInStudyCase):
  """A study goes on from its committed summary on another machine."""

  def test_goes_on_where_it_stopped(self):
    # Machine 1: two of the three rates, then the summary.
    self.grid = dataclasses.replace(self.grid, learning_rates=(1e-3, 3e-3))
    self.run_study(peak_at(3e-3), 0)
    summary = os.path.join(tempfile.mkdtemp(), "summary")
    self.assertEqual(study_summary.write_summary(self.dir, summary), 4)
    with open(os.path.join(summary, study_folder.SUMMARY_FILE)) as f:
      self.assertEqual(json.load(f), {"runs_without_arrays": [
          "softmax.dot.lr0.001.seed0", "softmax.dot.lr0.001.seed1"]})
    # Machine 2: a new folder from the summary; only the third rate and
    # the chosen runs' extension are trained (from scratch: no checkpoint).
    self.dir = os.path.join(tempfile.mkdtemp(), "study")
    self.assertEqual(study_summary.start_from_summary(summary, self.dir), 4)
    self.assertEqual(study_folder.load_summarized(self.dir), {
        "softmax.dot.lr0.001.seed0", "softmax.dot.lr0.001.seed1"})
    self.grid = dataclasses.replace(self.grid,
                                    learning_rates=(1e-3, 3e-3, 1e-2))
    _, calls, lines = self.run_study(peak_at(3e-3), 0, extend_steps=2)
    self.assertEqual(calls, ["softmax.dot.lr0.01.seed0",
                             "softmax.dot.lr0.01.seed1",
                             "softmax.dot.lr0.003.seed0->20",
                             "softmax.dot.lr0.003.seed1->20"])
    self.assertIn("4 of 6 runs already finished in "
                  f"{self.dir}: skipped.", lines)
    # The same command with the folder there: the summary is not read.
    self.assertEqual(study_summary.start_from_summary(summary, self.dir), 0)
    _, again, _ = self.run_study(peak_at(3e-3), 0, extend_steps=2)
    self.assertEqual(again, [])
    # The report of the whole study, from the folder that holds no arrays
    # for the unchosen runs of machine 1.
    paths = study_report.write_report(self.dir, progress=lambda _: None)
    with open(paths["results"]) as f:
      rows = {r["run"]: r for r in csv.DictReader(f)}
    self.assertLen(rows, 6)
    self.assertEqual(rows["softmax.dot.lr0.003.seed0"]["selected"], "True")

  def test_refusals(self):
    summary = os.path.join(tempfile.mkdtemp(), "summary")
    with self.assertRaisesRegex(ValueError, r"^`from_summary`=.*/summary "
                                r"holds no study\.json: not a study "
                                r"summary\.$"):
      study_summary.start_from_summary(summary, self.dir)
    self.assertFalse(os.path.exists(self.dir))
    self.run_study(peak_at(3e-3), 0)
    study_summary.write_summary(self.dir, summary)
    other = tempfile.mkdtemp()
    open(os.path.join(other, "notes.txt"), "w").close()
    with self.assertRaisesRegex(ValueError, r"^`study_dir`=.* is not empty "
                                r"and holds no study\.json"):
      study_summary.start_from_summary(summary, other)
    self.assertEqual(os.listdir(other), ["notes.txt"])
    with open(os.path.join(summary, study_folder.SUMMARY_FILE), "w") as f:
      f.write("{")
    target = os.path.join(tempfile.mkdtemp(), "study")
    study_summary.start_from_summary(summary, target)  # Lists it afresh.
    self.assertEqual(study_folder.load_summarized(target), {
        "softmax.dot.lr0.001.seed0", "softmax.dot.lr0.001.seed1",
        "softmax.dot.lr0.01.seed0", "softmax.dot.lr0.01.seed1"})
    with open(os.path.join(target, study_folder.SUMMARY_FILE), "w") as f:
      f.write("[]")
    self.dir = target
    with self.assertRaisesRegex(ValueError, r"summary\.json cannot be read "
                                r".*copy it again from the summary\.$"):
      self.run_study(peak_at(3e-3), 0)


class TrainOnTest(tf.test.TestCase):
  """`training.train` with more steps on a finished run: it goes on from
  the final checkpoint and ends where one uninterrupted run would."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    from rank4class_tf.training import trainer as training  # pylint: disable=g-import-not-at-top
    cls.root = tempfile.mkdtemp()
    # The uninterrupted 40-step run both tests compare with (read only; its
    # exports change none of its weights).
    training.train(cls.config("straight", 40))

  @classmethod
  def config(cls, folder, steps, **kwargs):
    from rank4class_tf import config as config_lib  # pylint: disable=g-import-not-at-top
    return config_lib.TrainConfig.create(
        dataset="digits", train_steps=steps, eval_every=10, dropout=0.0,
        deterministic=True, model_dir=os.path.join(cls.root, folder),
        **kwargs)

  def test_more_steps_equal_an_uninterrupted_run(self):
    from rank4class_tf.serving import exported_ranker  # pylint: disable=g-import-not-at-top
    from rank4class_tf.training import builders  # pylint: disable=g-import-not-at-top
    from rank4class_tf.training import trainer as training  # pylint: disable=g-import-not-at-top
    root = self.root
    config = self.config
    training.train(config("extended", 20))
    with self.assertRaisesRegex(ValueError, "finished run with other "
                                "settings: `train_steps`=10 \\(was 20\\)"):
      training.train(config("extended", 10))  # Fewer steps: another run.
    training.train(config("extended", 40))
    data = builders.load_data(config("straight", 40))
    got = {name: exported_ranker.evaluate(os.path.join(root, name), data,
                                  export=run_dir_lib.LATEST_EXPORT)
           for name in ("extended", "straight")}
    self.assertAllClose(got["extended"], got["straight"], atol=1e-6)
    self.assertEqual(exported_ranker.load_config(os.path.join(root, "extended"))
                     .trainer.train_steps, 40)
    curves = run_dir_lib.RunDir(
        os.path.join(root, "extended")).validation_curves()
    self.assertEqual(sorted(curves["top1_accuracy"]), [0, 1, 2, 3])


  def test_without_exports_the_extension_goes_on_from_the_last_checkpoint(
      self):
    # `--export=false` (a study's runs): the finished run is its final
    # checkpoint; more steps go on from it (not from step 0) and end where
    # one uninterrupted run would.
    from rank4class_tf.training import builders  # pylint: disable=g-import-not-at-top
    from rank4class_tf.training import run_state  # pylint: disable=g-import-not-at-top
    from rank4class_tf.training import trainer as training  # pylint: disable=g-import-not-at-top
    def config(folder, steps):
      return self.config(folder, steps, export=False)
    training.train(config("unexported", 20))
    with self.assertLogs("absl", level="INFO") as logs:
      training.train(config("unexported", 40))
    folder = os.path.join(self.root, "unexported")
    self.assertIn(f"Extending the finished run from {folder}/checkpoints/"
                  "ckpt-0002 (epoch 2) to 40 steps.", "\n".join(logs.output))
    with self.assertRaisesRegex(ValueError, "finished run with other "
                                "settings: `train_steps`=10 \\(was 40\\)"):
      training.train(config("unexported", 10))
    self.assertFalse(run_dir_lib.RunDir(folder).has_exports())
    # The uninterrupted run is the class's (trained with exports, which
    # are written after its last step).
    straight = self.config("straight", 40)
    data = builders.load_data(straight)
    got = {name: training.checkpoint_scores(
        run, data, ("test",),
        checkpoint=run_state.final_checkpoint(run))["test"][1]
           for name, run in (("extended", config("unexported", 40)),
                             ("straight", straight))}
    self.assertAllClose(got["extended"], got["straight"], atol=1e-6)
    self.assertTrue(run_state.is_trained(config("unexported", 40)))


class ChooseOnSeedTest(tf.test.TestCase):
  """`--cells` and `--choose_on_seed`: a design that is not a product, tuned
  on one seed, the other seeds at its choices."""

  def setUp(self):
    super().setUp()
    self.dir = os.path.join(tempfile.mkdtemp(), "study")
    self.grid = study_grid.Grid(losses=("softmax", "mse"),
                           interactions=("dot", "lc_mlp"),
                           cells=("softmax.dot", "mse.lc_mlp"),
                           seeds=(0, 1, 2), learning_rates=(1e-3, 3e-3, 1e-2),
                           mlp_units=(64,), choose_on_seed=0)

  def test_cells_restrict_the_product(self):
    self.assertEqual([r.name for r in self.grid.runs()], [
        "softmax.dot.lr0.001.seed0", "softmax.dot.lr0.003.seed0",
        "softmax.dot.lr0.01.seed0", "mse.lc_mlp.lr0.001.u64.seed0",
        "mse.lc_mlp.lr0.003.u64.seed0", "mse.lc_mlp.lr0.01.u64.seed0"])
    for grid, message in [
        (dataclasses.replace(self.grid, cells=("softmax.concat_mlp",)),
         r"^`cells`: 'softmax.concat_mlp' is not a cell of `losses` x "
         r"`interactions` \(write loss.interaction, e.g. softmax.dot\)\.$"),
        (dataclasses.replace(self.grid, cells=("softmax.dot",) * 2),
         r"^`cells` repeats a cell: softmax.dot,softmax.dot\.$"),
        (dataclasses.replace(self.grid, choose_on_seed=7),
         r"^`choose_on_seed`=7 is not one of `seeds` \(0,1,2\)\.$")]:
      with self.assertRaisesRegex(ValueError, message):
        grid.validate()

  def test_union_and_json(self):
    more = dataclasses.replace(self.grid, cells=("mse.dot",),
                               learning_rates=(3e-2,))
    union = self.grid.union(more)
    self.assertEqual(union.cells, ("softmax.dot", "mse.lc_mlp", "mse.dot"))
    self.assertEqual(union.learning_rates, (1e-3, 3e-3, 1e-2, 3e-2))
    # A product grid and a restricted one: every cell of both, explicitly.
    product = study_grid.Grid(losses=("pairwise_logistic",), interactions=("dot",),
                         choose_on_seed=0)
    self.assertEqual(self.grid.union(product).cells,
                     ("softmax.dot", "mse.lc_mlp", "pairwise_logistic.dot"))
    with self.assertRaisesRegex(ValueError, r"^`choose_on_seed`=\(not set\) "
                                r"differs from the study's \(0\)"):
      self.grid.union(dataclasses.replace(self.grid, choose_on_seed=None))
    self.assertEqual(study_grid.Grid.from_json(dataclasses.asdict(self.grid)),
                     self.grid)
    # A study.json written before the two fields: every cell, every seed.
    old = {"losses": ["mse"], "interactions": ["dot"], "seeds": [0],
           "learning_rates": [0.001], "mlp_units": [128]}
    self.assertEqual(study_grid.Grid.from_json(old),
                     study_grid.Grid(("mse",), ("dot",), (0,), (1e-3,), (128,)))

  def run_study(self, extend_steps=0., extend_grid=0):
    # Seed 0 peaks at 3e-3, seeds 1 and 2 at 1e-2: the followers must take
    # seed 0's choice, not their own.
    def value(run):
      return peak_at(3e-3 if run.seed == 0 else 1e-2)(run)
    execute_run, calls = stand_in(value)
    lines = []
    with mock.patch.object(study, "execute_run", execute_run):
      study.run_study(self.dir, test_study.base_config(), self.grid,
                      progress=lines.append, extend_steps=extend_steps,
                      extend_grid=extend_grid)
    return calls, lines

  def test_finished_followers_are_not_extended(self):
    # A follower is its cell's only run on its seed, so each of its values
    # is an edge of that seed's one-run grid: `--extend_grid` must leave
    # it alone. The study's commit before the workers (da92c7c) did not:
    # once every follower had finished it planned 52 runs around them in
    # the fine-tuned GoEmotions study.
    calls, _ = self.run_study(extend_grid=2)
    with open(os.path.join(self.dir, study_folder.STUDY_FILE)) as f:
      saved = json.load(f)
    self.assertLen(saved["followers"], 4)
    trained = [call.split("->")[0] for call in calls]
    self.assertEqual(
        sorted(name for name in trained if not name.endswith(".seed0")),
        sorted(saved["followers"]))
    self.assertEqual(
        {e["seed"] for e in saved.get("extensions", [])} - {0}, set())
    again, _ = self.run_study(extend_grid=2)
    self.assertEqual(again, [])

  def test_other_seeds_follow_seed_0s_choice_and_steps(self):
    calls, lines = self.run_study(extend_steps=2)
    self.assertEqual(calls[6:], [
        "softmax.dot.lr0.003.seed0->20", "mse.lc_mlp.lr0.003.u64.seed0->20",
        "softmax.dot.lr0.003.seed1->20", "softmax.dot.lr0.003.seed2->20",
        "mse.lc_mlp.lr0.003.u64.seed1->20", "mse.lc_mlp.lr0.003.u64.seed2->20"])
    # Decided per cell, as soon as its seed 0 is settled.
    self.assertEqual(lines.count("`choose_on_seed`=0: 2 run(s) of the other "
                                 "seeds at each cell's choice."), 2, lines)
    with open(os.path.join(self.dir, study_folder.STUDY_FILE)) as f:
      saved = json.load(f)
    self.assertEqual(saved["followers"]["mse.lc_mlp.lr0.003.u64.seed2"],
                     "mse.lc_mlp.lr0.003.u64.seed0")
    self.assertLen(study_folder.study_runs(self.dir), 10)
    # The same command again trains nothing.
    again, _ = self.run_study(extend_steps=2)
    self.assertEqual(again, [])
    paths = study_report.write_report(self.dir, progress=lambda _: None)
    with open(paths["results"]) as f:
      rows = {r["run"]: r for r in csv.DictReader(f)}
    # A follower has the edges of the run it follows (interior), not
    # "only" (its one value).
    self.assertEqual(rows["softmax.dot.lr0.003.seed1"]["lr_edge"], "")
    self.assertEqual(rows["softmax.dot.lr0.003.seed1"]["selected"], "True")
    self.assertEqual(rows["softmax.dot.lr0.001.seed0"]["lr_edge"], "low")
    with open(paths["tables"]) as f:
      tables = f.read()
    self.assertIn("MLP width from {64} per cell on seed 0's validation "
                  "top1_accuracy, the other seeds run at that choice "
                  "(`--choose_on_seed`)", tables)
    self.assertIn("0 of 6 chosen runs are on an edge", tables)

  def test_missing_follower_is_counted_among_all_the_runs(self):
    # A study in progress: 10 runs (6 of seed 0, 4 followers), one follower
    # without its record. The count is the study's, not seed 0's grid (6).
    self.run_study()
    name = "softmax.dot.lr0.003.seed2"
    os.remove(os.path.join(self.dir, study_folder.RUNS_DIR, name,
                           study_folder.RESULT_FILE))
    lines = []
    paths = study_report.write_report(self.dir, progress=lines.append)
    self.assertEqual(lines[0], "1 of the grid's 10 runs have no result and "
                     f"are reported as missing: {name}.")
    with open(paths["tables"]) as f:
      tables = f.read()
    self.assertIn("9 runs; 2 cells;", tables)
    self.assertIn("**1 of the grid's 10 runs have no result**", tables)
    self.assertIn("## Runs without a result\n\n1 of the 10 runs of the grid "
                  "in study.json have no whole record (not run yet, or their "
                  f"study file is unreadable): `{name}`.", tables)


if __name__ == "__main__":
  tf.test.main()
