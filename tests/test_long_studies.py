"""tools/long_studies.sh and tools/price_long_studies.py: issue 61's two
converged GoEmotions studies, as docs/text.md describes them.

* The script runs the two study commands docs/text.md shows, word for word
  (`--print`).
* Their flags parse as `pipelines.study` parses them and plan the grids the
  price counts (225 and 16 tuned runs on seed 0), with the settings the
  issue asks for; every check the study makes before training passes.
* The price docs/text.md quotes is what the pricing tool prints from the
  committed records.
* A checkout at another commit is refused with one line in its log, and no
  study is started.
* tools/commit_long_summaries.sh commits a summary with new runs, leaves
  one without, and refuses a report that fails in one line.
* The patience probe's committed tables are what tools/patience_probe.py
  makes of its committed CSV files, and docs/text.md quotes them.

No training: the commands are parsed, not run.
"""

import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap

from absl.testing import absltest

import helpers

SCRIPT = os.path.join(helpers.REPO, "tools", "long_studies.sh")
PRICE = os.path.join(helpers.REPO, "tools", "price_long_studies.py")
PROBE = os.path.join(helpers.REPO, "tools", "patience_probe.py")
PROBE_RESULTS = os.path.join(helpers.REPO, "results", "long_studies",
                             "patience_probe")
PROBE_SECTION = "### Is patience 5 long enough?"
DOC = os.path.join(helpers.REPO, "docs", "text.md")
SECTION = "### Trained until they stop improving: the converged studies"


def _section(title=SECTION):
  with open(DOC, encoding="utf-8") as f:
    text = f.read()
  start = text.index(title)
  end = text.find("\n### ", start + 1)
  return text[start:end]


def _blocks(text):
  return re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)


def _printed():
  proc = helpers.run_command(["bash", SCRIPT, "--print"])
  return proc.stdout.splitlines()


class LongStudiesTest(absltest.TestCase):

  def test_the_script_runs_the_documented_commands(self):
    documented = []
    for block in _blocks(_section()):
      joined = re.sub(r"\\\n\s*", "", block)
      documented += [line.strip() for line in joined.splitlines()
                     if "pipelines.study --study_dir=runs/study_goemotions_"
                     in line and "_long " in line and "--report_only"
                     not in line]
    self.assertEqual(documented, _printed())

  def test_the_commands_plan_the_priced_grids(self):
    script = textwrap.dedent("""
        import json, shlex, sys
        from absl import flags
        from absl.testing import flagsaver
        from pipelines import study, train_flags
        from rank4class_tf.study import settings
        out = {}
        for line in json.loads(sys.argv[1]):
          with flagsaver.flagsaver():
            flags.FLAGS.unparse_flags()
            flags.FLAGS(["study"] + shlex.split(line)[3:])
            FLAGS = flags.FLAGS
            base = train_flags.config_from_flags(model_dir=FLAGS.study_dir)
            grid = study.grid_from_flags()
            settings.check_settings(base, grid)
            settings.check_extend_steps(base.trainer, FLAGS.extend_steps,
                                        FLAGS.extend_steps_limit)
            t = base.trainer
            out[FLAGS.study_dir] = [
                len(grid.runs()), len(grid.cell_keys()), list(grid.seeds),
                grid.choose_on_seed, list(grid.learning_rates),
                list(grid.mlp_units), t.train_steps, t.eval_every,
                t.patience, t.lr_schedule, t.warmup_steps,
                t.keep_checkpoints, FLAGS.extend_grid, FLAGS.extend_steps,
                base.model.freeze_encoder, t.batch_size]
        print(json.dumps(out))
        """)
    proc = helpers.run_command([sys.executable, "-c", script,
                                json.dumps(_printed())])
    plans = json.loads(proc.stdout.strip().splitlines()[-1])
    self.assertEqual(plans, {
        "runs/study_goemotions_frozen_long": [
            225, 15, [0, 1, 2], 0, [1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
            [64, 128, 256, 512], 30000, 1000, 5, "constant", 0, 1, 3, 2.0,
            True, 64],
        "runs/study_goemotions_finetuned_long": [
            16, 6, [0, 1, 2], 0, [1e-5, 3e-5], [64, 256], 30000, 1000, 5,
            "linear", 3000, 1, 1, 0.0, False, 32],
    })

  def test_the_prices_are_the_documented_ones(self):
    printed = helpers.run_command([sys.executable, PRICE]).stdout
    self.assertIn(printed, _blocks(_section()))
    self.assertIn("frozen, seed 0 grid at 30000 steps: 225 runs, 18.8 h",
                  printed)

  def test_a_summary_refresh_that_fails_logs_its_reason(self):
    # The script's refresh_summaries and say, run on their own with a
    # stand-in study binary that refuses, then one that succeeds; each
    # stopped once it has logged its first line.
    with open(SCRIPT) as f:
      script = f.read()
    functions = re.search(r"^say\(\) \{.*?\}$", script, re.M).group(0) + (
        "\n" + re.search(r"^refresh_summaries\(\) \{.*?^\}$", script,
                         re.M | re.S).group(0))
    for body, expected in (
        ('echo "a warning"; echo "study: no finished run yet."; exit 1',
         "summary results/s not refreshed (exit 1): study: no finished run "
         "yet."),
        ("echo fine", "summary results/s refreshed (exit 0)")):
      root = tempfile.mkdtemp()
      os.makedirs(os.path.join(root, "runs"))
      python = os.path.join(root, ".venv", "bin", "python")
      os.makedirs(os.path.dirname(python))
      with open(python, "w") as f:
        f.write(f"#!/bin/sh\n{body}\n")
      os.chmod(python, 0o755)
      subprocess.run(
          ["bash", "-c", functions + "\nrefresh_summaries s & pid=$!\n"
           "for _ in $(seq 300); do [ -s \"$LOG\" ] && break; sleep 0.1; "
           "done\nkill $pid"], cwd=root, check=True, timeout=60,
          env=dict(os.environ, LOG="runs/long_studies.log",
                   SUMMARY_EVERY="0.1"))
      with open(os.path.join(root, "runs", "long_studies.log")) as f:
        first = f.read().splitlines()[0]
      self.assertEndsWith(first, " long_studies: " + expected)

  def _run_workers(self, workers, exit_code=0):
    """The script's run_workers on its own, with WORKERS=`workers` and
    THREADS=1, starting a stand-in command that logs its TensorFlow
    threads, niceness and arguments, then exits `exit_code`: (its status,
    {log file: its lines})."""
    with open(SCRIPT) as f:
      function = re.search(r"^run_workers\(\) \{.*?^\}$", f.read(),
                           re.M | re.S).group(0)
    root = tempfile.mkdtemp()
    os.makedirs(os.path.join(root, "runs"))
    with open(os.path.join(root, "worker"), "w") as f:
      f.write('#!/bin/sh\necho "threads=${TF_NUM_INTRAOP_THREADS:-unset},'
              '${TF_NUM_INTEROP_THREADS:-unset} nice=$(nice) args=$*"\n'
              f"exit {exit_code}\n")
    os.chmod(os.path.join(root, "worker"), 0o755)
    proc = subprocess.run(
        ["bash", "-c", "set -u\n" + function +
         "\nrun_workers ./worker --a=1 b; echo status=$?"], cwd=root,
        capture_output=True, text=True, check=True, timeout=60,
        env=dict(os.environ, LOG="runs/long_studies.log",
                 WORKERS=str(workers), THREADS="1"))
    logs = {}
    for name in sorted(os.listdir(os.path.join(root, "runs"))):
      with open(os.path.join(root, "runs", name)) as f:
        logs[name] = f.read().splitlines()
    return proc.stdout.strip(), logs

  def test_workers_share_the_cores_each_with_its_log(self):
    nice = int(subprocess.run(["nice"], capture_output=True, text=True,
                              check=True).stdout)
    line = f"nice={min(19, nice + 19)} args=--a=1 b"
    self.assertEqual(self._run_workers(2), ("status=0", {
        "long_studies.log": ["threads=1,1 " + line],
        "long_studies.worker2.log": ["threads=1,1 " + line]}))
    # One worker: TensorFlow's own threads (every core), the one log.
    self.assertEqual(self._run_workers(1), ("status=0", {
        "long_studies.log": ["threads=unset,unset " + line]}))
    status, logs = self._run_workers(3, exit_code=3)
    self.assertEqual(status, "status=3")
    self.assertEqual(sorted(logs), ["long_studies.log",
                                    "long_studies.worker2.log",
                                    "long_studies.worker3.log"])

  def test_bad_workers_or_threads_are_one_line(self):
    for name, value, line in (
        ("WORKERS", "0", "long_studies: WORKERS=0 is not a whole number of 1 "
         "or more."),
        ("WORKERS", "two", "long_studies: WORKERS=two is not a whole number "
         "of 1 or more."),
        ("THREADS", "-1", "long_studies: THREADS=-1 is not a whole number "
         "of 1 or more."),
        ("THREADS", "0", "long_studies: THREADS=0 is not a whole number "
         "of 1 or more.")):
      root = tempfile.mkdtemp()
      proc = subprocess.run(["bash", SCRIPT, root], capture_output=True,
                            text=True, env=dict(os.environ, **{name: value}))
      self.assertEqual((proc.returncode, proc.stderr), (1, line + "\n"))
      self.assertEqual(os.listdir(root), [])

  def test_the_workers_ratio_is_the_benchmark_s(self):
    path = os.path.join(helpers.REPO, "results", "text_workers",
                        "benchmark.md")
    with open(path, encoding="utf-8") as f:
      rows = {cells[0]: cells for cells in (
          [c.strip() for c in line.strip("|\n").split("|")]
          for line in f if re.match(r"^\| \d+ \|", line))}
    one, two = rows["1"], rows["2"]
    self.assertEqual(two[1], "1")  # One TensorFlow thread each.
    # The machine's steps a second: the sum over its processes' rates.
    for row in (one, two):
      rounds = [[float(ms) for ms in r.split(",")] for r in row[2].split(";")]
      self.assertAlmostEqual(float(row[3]), statistics.median(
          sum(1e3 / ms for ms in r) for r in rounds), delta=0.01)
    ratio = f"{float(two[3]) / float(one[3]):.2f}"
    self.assertEqual(two[4], ratio)
    with open(SCRIPT, encoding="utf-8") as f:
      self.assertIn(f"train {ratio}x the steps a second", " ".join(
          line.lstrip("# ").strip() for line in f))
    self.assertIn(f"two processes of one thread trained {ratio}x the steps "
                  "a second of one process", " ".join(_section().split()))

  def test_the_measured_pace_is_the_first_fine_tuned_run_s(self):
    # docs/text.md quotes this record: its absence fails, not skips.
    path = os.path.join(helpers.REPO, "results",
                        "study_goemotions_finetuned_long", "runs",
                        "softmax.dot.lr1e-05.seed0", "study_result.json")
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
    sys.path.insert(0, os.path.dirname(PRICE))
    try:
      import price_long_studies  # pylint: disable=g-import-not-at-top
    finally:
      sys.path.pop(0)
    last = max(step for curve in record["validation_curve"].values()
               for step, _ in curve)
    doc = " ".join(_section().split())
    self.assertIn(
        f"best at {record['best_step']:,} steps, stopped by `--patience` at "
        f"{last:,}): {price_long_studies.seconds_a_step(record):.2f} s a step "
        f"over the {last - record['resumed_at_step']:,} steps it trained",
        doc)
    self.assertTrue(record["converged"])


    root = tempfile.mkdtemp()
    git = ["git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "x"],
                   check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    proc = helpers.run_command(["bash", SCRIPT, root], check=False)
    self.assertEqual(proc.returncode, 1)
    with open(os.path.join(root, "runs", "long_studies.log")) as f:
      lines = f.read().splitlines()
    self.assertLen(lines, 1)
    self.assertEndsWith(
        lines[0], f" long_studies: {root} is at {head} (or changed), not "
        "the pinned 5d93f13ff88bb8a3ca11d32db8e470d4800f54db: stopped.")
    self.assertEqual(sorted(os.listdir(os.path.join(root, "runs"))),
                     ["long_studies.log"])


COMMIT_TOOL = os.path.join(helpers.REPO, "tools", "commit_long_summaries.sh")

# Stands in for `.venv/bin/python -m pipelines.study --report_only
# --study_dir=DIR`: writes DIR/tables.md from the runs it finds and a new
# hparams event file (its name, like the real one's, holds a time); fails
# with a last line of its own where DIR/runs/bad exists. As
# `pipelines.compare_budgets --long_study=L --short_study=S --metrics=M
# --output=F`, writes F: its header, L's runs and M; fails where
# L/runs/badtable exists.
_FAKE_STUDY = """#!/usr/bin/env bash
if [ "$2" = pipelines.compare_budgets ]; then
  long=${3#--long_study=}
  if [ -e "$long/runs/badtable" ]; then
    echo "a warning" >&2; echo "compare_budgets: bad table" >&2; exit 1
  fi
  { echo "Long: $long; short: ${4#--short_study=}."; ls "$long/runs"
    echo "${5#--metrics=}"; } > "${6#--output=}"
  exit 0
fi
dir=${4#--study_dir=}
if [ -e "$dir/runs/bad" ]; then
  echo "a traceback"; echo "ValueError: bad run"; exit 1
fi
ls "$dir/runs" > "$dir/tables.md"
rm -f "$dir"/*.study_hparams
touch "$dir/events.out.tfevents.$(date +%s%N).study_hparams"
"""


class CommitLongSummariesTest(absltest.TestCase):
  """tools/commit_long_summaries.sh in a scratch repository: a fake
  `pipelines.study --report_only` writes the reports."""

  def setUp(self):
    super().setUp()
    self.repo = tempfile.mkdtemp()
    self.git = ["git", "-C", self.repo, "-c", "user.name=t", "-c",
                "user.email=t@t"]
    os.makedirs(os.path.join(self.repo, "tools"))
    for tool in (SCRIPT, COMMIT_TOOL):
      shutil.copy(tool, os.path.join(self.repo, "tools"))
    python = os.path.join(self.repo, ".venv", "bin", "python")
    os.makedirs(os.path.dirname(python))
    with open(python, "w") as f:
      f.write(_FAKE_STUDY)
    os.chmod(python, 0o755)
    with open(os.path.join(self.repo, ".gitignore"), "w") as f:
      f.write(".venv/\n")
    self._git("init", "-q")
    self._git("add", "-A")
    self._git("commit", "-qm", "tools")
    self.pinned = tempfile.mkdtemp()
    self.summary = os.path.join(self.pinned, "results",
                                "study_goemotions_frozen_long")
    self._run_in_pinned("softmax.dot.seed0")

  def _git(self, *args):
    return subprocess.run(self.git + list(args), check=True,
                          capture_output=True, text=True).stdout

  def _run_in_pinned(self, run):
    os.makedirs(os.path.join(self.summary, "runs", run))
    with open(os.path.join(self.summary, "study.json"), "w") as f:
      f.write("{}")

  def _commit(self):
    return subprocess.run(
        ["bash", os.path.join(self.repo, "tools", "commit_long_summaries.sh"),
         self.pinned], capture_output=True, text=True)

  def _committed(self):
    return self._git("log", "--format=%s").splitlines()

  def test_commits_new_runs_only_and_refuses_a_failed_report(self):
    proc = self._commit()
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertLen(self._committed(), 2)
    self.assertStartsWith(self._committed()[0], "Issue 61: the converged "
                          "studies so far")
    tables = os.path.join(self.repo, "results",
                          "study_goemotions_frozen_long", "tables.md")
    with open(tables) as f:
      self.assertEqual(f.read(), "softmax.dot.seed0\n")
    # The same runs again: the report differs only in its event file's
    # name, so nothing is committed and the tree is as committed.
    proc = self._commit()
    self.assertEqual((proc.returncode, proc.stdout),
                     (0, "commit_long_summaries: nothing new to commit.\n"))
    self.assertLen(self._committed(), 2)
    self.assertEqual(self._git("status", "--porcelain"), "")
    # A new run is committed.
    self._run_in_pinned("softmax.dot.seed1")
    self.assertEqual(self._commit().returncode, 0)
    self.assertLen(self._committed(), 3)
    with open(tables) as f:
      self.assertEqual(f.read(), "softmax.dot.seed0\nsoftmax.dot.seed1\n")
    # A report that fails: one line, exit 1, the folder as committed.
    self._run_in_pinned("bad")
    proc = self._commit()
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr, "commit_long_summaries: results/"
                     "study_goemotions_frozen_long: --report_only failed: "
                     "ValueError: bad run\n")
    self.assertLen(self._committed(), 3)
    self.assertEqual(self._git("status", "--porcelain"), "")

  def test_a_budget_table_of_the_study_is_made_again_with_it(self):
    tables = os.path.join(self.repo, "results", "long_studies")
    os.makedirs(tables)
    ours = os.path.join(tables, "frozen_budgets.md")
    other = os.path.join(tables, "other_budgets.md")
    for path, text in (
        (ours, "Long: results/study_goemotions_frozen_long; short: "
         "results/study_goemotions_frozen.\n\n## What each budget chose\n"
         "## top1_accuracy\n## ndcg@5\n"),
        (other, "Long: results/x_long; short: results/x.\n")):
      with open(path, "w") as f:
        f.write(text)
    self._git("add", "-A")
    self._git("commit", "-qm", "tables")
    proc = self._commit()
    self.assertEqual(proc.returncode, 0, proc.stderr)
    with open(ours) as f:  # Made again on its own metrics, in one commit.
      self.assertEqual(f.read(), "Long: results/study_goemotions_frozen_long;"
                       " short: results/study_goemotions_frozen.\n"
                       "softmax.dot.seed0\ntop1_accuracy,ndcg@5\n")
    self.assertEqual(
        [f for f in self._git("show", "--name-only", "--format=",
                              "HEAD").split()
         if not f.endswith(".study_hparams")],
        ["results/long_studies/frozen_budgets.md",
         "results/study_goemotions_frozen_long/study.json",
         "results/study_goemotions_frozen_long/tables.md"])
    with open(other) as f:  # It names no study copied: left alone.
      self.assertEqual(f.read(), "Long: results/x_long; short: results/x.\n")
    # A table that cannot be made: one line, exit 1, all as committed.
    self._run_in_pinned("badtable")
    proc = self._commit()
    self.assertEqual(proc.returncode, 1)
    self.assertEqual(proc.stderr, "commit_long_summaries: results/"
                     "long_studies/frozen_budgets.md: compare_budgets failed: "
                     "compare_budgets: bad table\n")
    self.assertLen(self._committed(), 3)  # tools, tables, the first copy.
    self.assertEqual(self._git("status", "--porcelain"), "")


def _csv(name):
  with open(os.path.join(PROBE_RESULTS, name), newline="",
            encoding="utf-8") as f:
    return list(csv.DictReader(f))


class PatienceProbeTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.runs = _csv("runs.csv")
    self.curves = {}
    for row in _csv("curves.csv"):
      self.curves.setdefault(row["run"], []).append(
          (int(row["step"]), float(row["validation_top1_accuracy"])))
    self.doc = " ".join(_section(PROBE_SECTION).split())

  def test_tables_are_what_the_tool_makes_of_the_csv_files(self):
    folder = tempfile.mkdtemp()
    for name in ("runs.csv", "curves.csv"):
      shutil.copy(os.path.join(PROBE_RESULTS, name), folder)
    helpers.run_command([sys.executable, PROBE, f"--output={folder}"])
    for name in ("tables.md",):
      with open(os.path.join(folder, name), encoding="utf-8") as f, open(
          os.path.join(PROBE_RESULTS, name), encoding="utf-8") as g:
        self.assertEqual(f.read(), g.read())

  def test_bad_folders_are_refused_in_one_line(self):
    empty = tempfile.mkdtemp()
    for flags, line in (
        ([f"--output={empty}"],
         f"patience_probe: {empty}/runs.csv: No such file or directory."),
        ([f"--runs={empty}", f"--output={empty}"],
         f"patience_probe: --runs={empty}: no run folder (with config.json) "
         "in it."),
        ([f"--runs={empty}/none", f"--output={empty}"],
         f"patience_probe: --runs={empty}/none: no such folder.")):
      proc = helpers.run_command([sys.executable, PROBE] + flags,
                                 check=False)
      self.assertEqual(proc.returncode, 1)
      self.assertEqual(proc.stderr.strip().splitlines()[-1], line)
    self.assertEqual(os.listdir(empty), [])

  def test_the_runs_are_the_documented_probe(self):
    self.assertLen(self.runs, 12)
    self.assertEqual(
        sorted((r["loss"], r["patience"], r["seed"]) for r in self.runs),
        sorted((loss, patience, seed) for loss in ("approx_ndcg", "softmax")
               for patience in ("0", "5") for seed in "012"))
    for run in self.runs:
      points = sorted(self.curves[run["run"]])
      values = [v for _, v in points]
      self.assertEqual(int(run["best_step"]),
                       points[values.index(max(values))][0])
      self.assertEqual(int(run["last_step"]), points[-1][0])
      self.assertEqual(int(run["train_steps"]), 30000)
      if run["patience"] == "0":
        self.assertEqual(int(run["last_step"]), 30000)

  def test_the_docs_quote_the_probe(self):
    full = [r for r in self.runs if r["patience"] == "0"]
    for loss, name in (("softmax", "softmax CE"), ("approx_ndcg",
                                                   "ApproxNDCG")):
      steps = [int(r["best_step"]) for r in full if r["loss"] == loss]
      self.assertIn(f"{name} {min(steps):,}-{max(steps):,}", self.doc)
    # What patience 5 and 10 leave, replayed independently of the tool.
    for patience, count, largest in ((5, "4 of 6", "0.0051"),
                                     (10, "0 of 6", None)):
      short = []
      for run in full:
        values = [v for _, v in sorted(self.curves[run["run"]])]
        kept = best = 0
        for i, value in enumerate(values):
          if value > values[best]:
            best = i
          kept = best
          if i - best >= patience:
            break
        short.append(max(values) - values[kept])
      self.assertEqual(f"{sum(s > 0 for s in short)} of 6", count)
      if largest:
        self.assertEqual(f"{max(short):.4f}", largest)
        self.assertIn(f"by at most {largest} validation Top-1", self.doc)
    # Every interval quoted is the committed table's.
    with open(os.path.join(PROBE_RESULTS, "tables.md"),
              encoding="utf-8") as f:
      rows = {tuple(c.strip() for c in line.split("|")[1:3]):
              [c.strip() for c in line.split("|")[4:7]]
              for line in f if line.startswith("| ") and " - " in line}
    for label, metric in (("softmax: full - p5", "top1_accuracy"),
                          ("approx_ndcg: full - p5", "top1_accuracy"),
                          ("approx_ndcg - softmax, p5", "top1_accuracy"),
                          ("approx_ndcg - softmax, full", "top1_accuracy"),
                          ("approx_ndcg - softmax, p5", "top5_accuracy"),
                          ("approx_ndcg - softmax, full", "top5_accuracy")):
      self.assertIn(rows[(label, metric)][0], self.doc)
    top5 = [rows[(f"approx_ndcg - softmax, {b}", "top5_accuracy")]
            for b in ("p5", "full")]
    self.assertIn(f"(p {top5[0][1]} and {top5[1][1]} before Holm, "
                  f"{top5[0][2]} and {top5[1][2]} after", self.doc)
    for label in ("softmax: full - p5", "approx_ndcg: full - p5"):
      self.assertEqual(rows[(label, "top1_accuracy")][2], "1.0000")
    self.assertIn("bash tools/patience_probe.sh runs/patience_probe",
                  self.doc)


if __name__ == "__main__":
  absltest.main()
