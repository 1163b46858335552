"""End-to-end tests of pipelines.study: the grid, skip, kill and resume.

The binary runs as a user runs it (`python -m pipelines.study`), on digits
with few steps: docs/study.md's command with a smaller grid.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
import numpy as np
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.study import evaluation as study_evaluation
from rank4class_tf.study import folder as study_folder
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import settings as study_settings
import helpers

pytestmark = pytest.mark.slow  # End-to-end: the binaries in subprocesses.

REPO = helpers.REPO
# --dropout=0: a resumed run replays exactly only without dropout, whose
# random masks are not part of the backup (as in test_faults.ResumeTest).
SHARED = ["--dataset=digits", "--mlp_units=8", "--train_steps=30",
          "--eval_every=10", "--dropout=0", "--deterministic"]
# 4 runs: two cells of losses x interactions (--cells; both losses, both
# interactions) x 2 seeds. The selection over a learning-rate grid is tested
# on a hand-made study in test_study.py; here one rate keeps the end-to-end
# run short.
CELLS = (("softmax", "dot"), ("approx_ndcg", "lc_mlp"))
GRID = ["--losses=softmax,approx_ndcg", "--interactions=dot,lc_mlp",
        "--cells=" + ",".join(f"{l}.{i}" for l, i in CELLS), "--seeds=0,1",
        "--learning_rates=1e-2"]
# Columns that differ between an interrupted and an uninterrupted run.
TIMING = ("train_seconds", "resumed_at_step")


def command(study_dir, *flags):
  return [sys.executable, "-m", "pipelines.study", f"--study_dir={study_dir}",
          *SHARED, *flags]



run = helpers.run_command


def read_rows(study_dir):
  with open(os.path.join(study_dir, "results.csv")) as f:
    return {r["run"]: r for r in csv.DictReader(f)}


class StudyTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.dir = os.path.join(tempfile.mkdtemp(), "study")
    cls.first = run(command(cls.dir, *GRID))
    cls.rows = read_rows(cls.dir)
    with open(os.path.join(cls.dir, "tables.md")) as f:
      cls.tables = f.read()

  def test_grid_completes_with_one_line_per_run(self):
    self.assertLen(self.rows, 4)
    lines = self.first.stdout.strip().splitlines()
    progress = [l for l in lines if l.startswith("[")]
    self.assertLen(progress, 4)
    self.assertRegex(progress[0], r"^\[1/4\] softmax\.dot\.lr0\.01\.seed0 "
                     r"\(worker [^)]+\): "
                     r"validation top1_accuracy 0\.\d{4}; test top1_accuracy "
                     r"0\.\d{4} top5_accuracy .* mrr 0\.\d{4}; \d+ s; about .* "
                     r"left for 3 planned run\(s\)$")
    self.assertEqual(lines[-1], f"Wrote {self.dir}/results.csv, "
                     f"{self.dir}/tables.md and {self.dir}/figures/.")
    # No TensorFlow INFO wall on the console; the details are in the logs.
    self.assertNotIn("INFO", self.first.stdout + self.first.stderr)
    log = os.path.join(self.dir, "runs", "softmax.dot.lr0.01.seed0",
                       "study.log")
    with open(log) as f:
      self.assertIn("Assets written to", f.read())

  def test_every_run_is_a_pipelines_train_model_dir(self):
    run_dir = os.path.join(self.dir, "runs", "approx_ndcg.lc_mlp.lr0.01.u8."
                           "seed1")
    config = exported_ranker.load_config(run_dir)
    self.assertEqual((config.loss.name, config.model.interaction,
                      config.trainer.learning_rate,
                      config.model.mlp_units, config.trainer.seed,
                      config.trainer.train_steps),
                     ("approx_ndcg", "lc_mlp", 0.01, 8, 1, 30))
    want = helpers.evaluate(run_dir, "test")
    row = self.rows["approx_ndcg.lc_mlp.lr0.01.u8.seed1"]
    for name in ("top1_accuracy", "ndcg@5", "mrr"):
      self.assertAllClose(float(row[f"test_{name}"]), want[name])

  def test_tables_recomputed_from_results_csv(self):
    for loss, interaction in CELLS:
      chosen = []
      for seed in ("0", "1"):
        rows = [r for r in self.rows.values()
                if (r["loss"], r["interaction"], r["seed"]) ==
                (loss, interaction, seed)]
        best = rows[0]
        for r in rows[1:]:  # The first of equal values wins.
          if (float(r["validation_top1_accuracy"]) >
              float(best["validation_top1_accuracy"])):
            best = r
        self.assertEqual(best["selected"], "True")
        chosen.append(float(best["test_ndcg@5"]))
      want = f"{np.mean(chosen):.4f} ± {np.std(chosen, ddof=1):.4f}"
      self.assertIn(want, self.tables, f"{loss} {interaction}")
    self.assertLen([r for r in self.rows.values()
                    if r["selected"] == "True"], 4)
    for r in self.rows.values():
      self.assertEqual(r["ce_bound_holds"], "True")
      self.assertGreaterEqual(float(r["test_softmax_ce"]),
                              float(r["test_neg_log_mrr"]))

  def test_calibration_in_records_and_report(self):
    row = self.rows["approx_ndcg.lc_mlp.lr0.01.u8.seed0"]
    for name in ("test_ece", "test_calibrated_ece", "test_nll",
                 "test_calibrated_nll", "calibration_temperature"):
      self.assertTrue(np.isfinite(float(row[name])), name)
    self.assertLess(float(row["test_calibrated_nll"]), float(row["test_nll"]))
    # The NLL before calibration is the test softmax CE, in every run (one
    # computation from the scores, no clipped probabilities).
    for r in self.rows.values():
      self.assertAllClose(float(r["test_nll"]), float(r["test_softmax_ce"]),
                          rtol=1e-9, msg=r["run"])
    self.assertIn("## Calibration by loss", self.tables)
    self.assertIn("| **approx_ndcg** (every interaction) | 2 |", self.tables)
    # A record written before calibration existed, in a copy of the study:
    # `pipelines.calibrate --study_dir` adds it from the checkpoint.
    copy = os.path.join(tempfile.mkdtemp(), "study")
    shutil.copytree(self.dir, copy)
    result = os.path.join(copy, "runs", "approx_ndcg.lc_mlp.lr0.01.u8.seed0",
                          study_folder.RESULT_FILE)
    with open(result) as f:
      record = json.load(f)
    fitted = record.pop("calibration")
    with open(result, "w") as f:
      json.dump(record, f)
    # Another record's calibration as an older release computed it (here a
    # made-up NLL): kept, unless --recompute.
    stale = os.path.join(copy, "runs", "softmax.dot.lr0.01.seed0",
                         study_folder.RESULT_FILE)
    with open(stale) as f:
      stale_record = json.load(f)
    stale_record["calibration"]["nll"] = 0.0
    with open(stale, "w") as f:
      json.dump(stale_record, f)
    self.assertEqual(study_evaluation.add_calibration(
        copy, progress=lambda line: None), 1)
    with open(result) as f:
      again = json.load(f)["calibration"]
    self.assertAllClose(again["temperature"], fitted["temperature"],
                        rtol=1e-4)
    self.assertAllClose(again["calibrated_ece"], fitted["calibrated_ece"],
                        atol=1e-6)
    with open(stale) as f:
      self.assertEqual(json.load(f)["calibration"]["nll"], 0.0)
    out = run([sys.executable, "-m", "pipelines.calibrate",
               f"--study_dir={copy}", "--recompute"])
    self.assertIn(f"Calibrated {len(self.rows)} run(s)", out.stdout)
    with open(stale) as f:
      self.assertAllClose(json.load(f)["calibration"]["nll"],
                          stale_record["test_softmax_ce"], rtol=1e-9)

  def test_rerun_skips_everything_and_report_only_repeats(self):
    results = [os.path.join(self.dir, "runs", name, study_folder.RESULT_FILE)
               for name in self.rows]
    stamps = [os.path.getmtime(p) for p in results]
    again = run(command(self.dir, *GRID))
    self.assertIn("4 of 4 runs already finished", again.stdout)
    self.assertNotIn("[1/4]", again.stdout)
    self.assertEqual([os.path.getmtime(p) for p in results], stamps)
    run([sys.executable, "-m", "pipelines.study", f"--study_dir={self.dir}",
         "--report_only"])
    with open(os.path.join(self.dir, "tables.md")) as f:
      self.assertEqual(f.read(), self.tables)

  def test_sigkill_mid_grid_then_rerun_equals_uninterrupted(self):
    # A sub-grid of the same study settings, killed while its second run
    # trains: its rows must equal the uninterrupted study's.
    killed = os.path.join(tempfile.mkdtemp(), "killed")
    grid = ["--losses=softmax", "--interactions=dot", "--seeds=0,1",
            "--learning_rates=1e-2"]
    second = os.path.join(killed, "runs", "softmax.dot.lr0.01.seed1")
    proc = subprocess.Popen(command(killed, *grid), cwd=REPO,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while run_dir_lib.RunDir(second).resume_epoch() < 1:
      self.assertIsNone(proc.poll(), "the study ended before it was killed")
      self.assertLess(time.time(), deadline)
      time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    self.assertFalse(os.path.exists(os.path.join(second, study_folder.RESULT_FILE)))

    rerun = run(command(killed, *grid))
    self.assertIn("1 of 2 runs already finished", rerun.stdout)
    got = read_rows(killed)
    self.assertLen(got, 2)
    with open(os.path.join(second, study_folder.RESULT_FILE)) as f:
      self.assertGreater(json.load(f)["resumed_at_step"], 0)
    for name, row in got.items():
      want = self.rows[name]
      for column in row:
        if column not in TIMING:
          self.assertEqual(row[column], want[column], f"{name}: {column}")


class BadInputTest(tf.test.TestCase):
  """One line naming the flag, exit 1, nothing written or changed."""

  def test_one_line_and_nothing_written(self):
    parent = tempfile.mkdtemp()
    existing = os.path.join(parent, "existing")
    study_settings.open_study(existing, config_lib.TrainConfig.create(
        model_dir="x", train_steps=5, eval_every=5),
                     study_grid.Grid(losses=("softmax",), interactions=("dot",)))
    with open(os.path.join(existing, study_folder.STUDY_FILE)) as f:
      before = f.read()
    cases = {
        "unknown_loss": (["--losses=softmax,hinge"],
                         "study: --losses: 'hinge' is not valid; choose "
                         "from: softmax, "),
        "unknown_interaction": (["--interactions=dot,bilinear"],
                                "study: --interactions: 'bilinear' is not "
                                "valid"),
        "empty_list": (["--seeds="], "study: --seeds is empty; give at least "
                       "one value."),
        # Checked with the grid, before study.json or a run folder exists.
        "seed_range": (["--seeds=0,-1"], "study: --seeds: -1 must be between "
                       "0 and 2**32 - 1."),
        "learning_rate": (["--learning_rates=1e-3,fast"],
                          "study: --learning_rates: 'fast' is not a number."),
        "units": (["--mlp_units=64,wide"],
                  "study: --mlp_units: 'wide' is not an integer."),
        "select_metric": (["--select_metric=map"],
                          "study: --select_metric='map' must be one of"),
        "paper_table": (["--paper_table=mnist"],
                        "study: --paper_table=mnist is neither a JSON file"),
        "cells": (["--cells=softmax.dot,mse.nope"],
                  "study: --cells: 'mse.nope' is not loss.interaction with "
                  "an interaction of: dot,"),
        "cells_product": (["--losses=softmax", "--cells=mse.dot"],
                          "study: --cells: 'mse.dot' is not a cell of "
                          "--losses x --interactions"),
        "choose_on_seed": (["--seeds=1,2", "--choose_on_seed=0"],
                           "study: --choose_on_seed=0 is not one of --seeds "
                           "(1,2)."),
        "from_summary": ([f"--from_summary={parent}/no_summary"],
                         f"study: --from_summary={parent}/no_summary holds "
                         "no study.json: not a study summary."),
        "check_report_writes_nothing": (
            ["--check_report", "--report_only"],
            "study: --check_report writes nothing: drop --report_only."),
        "check_report_without_report": (
            ["--check_report"], f"study: --study_dir={parent}/"
            "check_report_without_report holds no report (tables.md): write "
            "it with --report_only first."),
        "train_flag": (["--batch_size=0"],
                       "study: --batch_size=0 must be > 0."),
        "missing_data": (["--dataset=mind", "--encoder=bert",
                          f"--data_dir={parent}/no_data"],
                         f"study: {parent}/no_data"),
    }
    # One process for every case: each calls the binary's main as absl does.
    script = textwrap.dedent("""
        import json, sys
        from absl import flags
        from absl.testing import flagsaver
        from pipelines import study
        results = {}
        for name, (study_dir, argv) in json.loads(sys.argv[1]).items():
          with flagsaver.flagsaver():
            flags.FLAGS.unparse_flags()
            flags.FLAGS(["study", "--study_dir=" + study_dir] + argv)
            try:
              study.main(["study"])
              results[name] = [0, ""]
            except SystemExit as e:
              results[name] = [1 if isinstance(e.code, str) else e.code,
                               str(e.code)]
        print(json.dumps(results))
        """)
    arguments = {name: (os.path.join(parent, name), argv)
                 for name, (argv, _) in cases.items()}
    arguments["other_study"] = (existing, ["--train_steps=10",
                                           "--eval_every=5"])
    proc = run([sys.executable, "-c", script, json.dumps(arguments)])
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, (_, message) in cases.items():
      code, text = results[name]
      self.assertEqual(code, 1, name)
      self.assertTrue(text.startswith(message), f"{name}: {text}")
      self.assertNotIn("\n", text)
      self.assertFalse(os.path.exists(os.path.join(parent, name)), name)
    code, text = results["other_study"]
    self.assertEqual(code, 1)
    self.assertEqual(text, f"study: --train_steps=10 differs from the study "
                     f"in {existing} (train_steps=5); pass the same value, "
                     "or another --study_dir.")
    self.assertEqual(sorted(os.listdir(existing)), ["runs", "study.json"])
    with open(os.path.join(existing, study_folder.STUDY_FILE)) as f:
      self.assertEqual(f.read(), before)


if __name__ == "__main__":
  tf.test.main()


class FrozenTextStudyTest(tf.test.TestCase):
  """Frozen MiniLM cells on a GoEmotions-format subset: one feature cache
  shared by every run, no exports, records scored from the cache equal to
  the export's, and the summary regenerating the report."""

  def test_frozen_cells(self):
    import test_text_pipelines  # pylint: disable=g-import-not-at-top
    data_dir = test_text_pipelines.goemotions_fixture()
    root = tempfile.mkdtemp()
    study_dir = os.path.join(root, "study")
    summary_dir = os.path.join(root, "summary")
    cmd = ([sys.executable, "-m", "pipelines.study",
                  f"--study_dir={study_dir}", "--dataset=goemotions",
                  f"--data_dir={data_dir}", "--encoder=bert",
                  "--init_checkpoint=minilm", "--freeze_encoder",
                  "--export=false", "--max_seq_length=12", "--batch_size=4",
                  "--train_steps=4", "--eval_every=2", "--deterministic",
                  "--losses=softmax,approx_ndcg", "--interactions=dot,lc_mlp",
                  "--cells=softmax.dot,approx_ndcg.lc_mlp", "--mlp_units=8",
                  "--seeds=0", "--learning_rates=1e-2",
                  f"--summary_dir={summary_dir}"])
    lines = run(cmd).stdout.splitlines()
    self.assertRegex(lines[0], r"^feature cache: \w+ \(\d+ instances\) "
                     r"encoded in ")
    self.assertRegex(lines[3], r"^feature cache .*feature_cache/\w+: ready")
    self.assertLen([l for l in lines if l.startswith("[")], 2)
    self.assertLen(os.listdir(os.path.join(study_dir, "feature_cache")), 1)
    name = "softmax.dot.lr0.01.seed0"
    folder = os.path.join(study_dir, "runs", name)
    self.assertFalse(run_dir_lib.RunDir(folder).has_exports())
    config = exported_ranker.load_config(folder)
    self.assertEqual((config.model.pooling, config.model.freeze_encoder),
                     ("mean", True))
    with open(os.path.join(folder, study_folder.RESULT_FILE)) as f:
      record = json.load(f)
    # The record (from the cache) equals the export's metrics.
    helpers.run_module("pipelines.export", f"--model_dir={folder}")
    exported = helpers.evaluate(folder, "test")
    for metric, value in record["test"].items():
      self.assertAllClose(value, exported[metric], atol=1e-6, msg=metric)
    with open(os.path.join(study_dir, "tables.md")) as f:
      tables = f.read()
    self.assertIn("**Frozen encoder**", tables)
    with open(os.path.join(summary_dir, "tables.md")) as f:
      self.assertEqual(f.read(), tables)
    # The same command again trains nothing and reads no cache.
    again = run(cmd).stdout
    self.assertIn("2 of 2 runs already finished", again)
    self.assertNotIn("feature cache", again)
