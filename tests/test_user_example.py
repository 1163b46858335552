"""The shipped user-format example and docs/data.md's four commands on it.

The commands are read from the document itself (its "Four commands" block)
and run as written, with `runs/` moved to a temporary folder.
"""

import csv
import glob
import importlib.util
import json
import os
import re
import shlex
import sys
import tempfile

import pytest
import tensorflow as tf

import helpers

pytestmark = pytest.mark.slow  # The study trains 6 runs.

EXAMPLE = os.path.join(helpers.REPO, "data", "examples", "emotions_csv")


def walkthrough_commands():
  """The four commands of docs/data.md's walkthrough, as argument lists."""
  with open(os.path.join(helpers.REPO, "docs", "data.md"),
            encoding="utf-8") as f:
    text = f.read()
  section = text[text.index("### Four commands"):]
  block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
  return [shlex.split(command) for command in
          block.replace("\\\n", " ").strip().splitlines()]


class ExampleDataTest(tf.test.TestCase):

  def test_the_tool_rewrites_the_committed_files(self):
    spec = importlib.util.spec_from_file_location(
        "make_emotions_csv", os.path.join(helpers.REPO, "tools",
                                          "example_data",
                                          "make_emotions_csv.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for source, (target, per_class) in tool.ROWS.items():
      with open(os.path.join(EXAMPLE, target), encoding="utf-8",
                newline="") as f:
        self.assertEqual(f.read(), tool.contents(source, per_class), target)
    with open(os.path.join(EXAMPLE, "train.csv"), encoding="utf-8",
              newline="") as f:
      rows = list(csv.DictReader(f))
    self.assertLen(rows, 600)
    self.assertEqual({r["feeling"] for r in rows},
                     {"gratitude", "amusement", "anger", "sadness",
                      "curiosity"})


class WalkthroughTest(tf.test.TestCase):

  def test_inspect_study_predict(self):
    commands = walkthrough_commands()
    self.assertEqual([c[2] for c in commands],
                     ["pipelines.inspect_data", "pipelines.study",
                      "pipelines.export", "pipelines.predict"])
    runs = tempfile.mkdtemp() + "/"
    outputs = []
    for command in commands:
      command = [sys.executable] + [
          arg.replace("=runs/", "=" + runs) for arg in command[1:]]
      outputs.append(helpers.run_command(command))
    inspect, study, export, predict = outputs
    self.assertIn("train", inspect.stdout)
    with open(os.path.join(runs, "emotions_inspection",
                           "inspection.json")) as f:
      report = json.load(f)
    self.assertIn("train", json.dumps(report))
    with open(os.path.join(runs, "emotions_study", "results.csv")) as f:
      rows = list(csv.DictReader(f))
    self.assertEqual(sorted((r["loss"], r["seed"]) for r in rows),
                     [(loss, seed) for loss in ("approx_ndcg", "softmax")
                      for seed in ("0", "1", "2")])
    self.assertIn("[6/6] ", study.stdout)
    # The study exported nothing; the export command the picked run alone.
    exported = sorted(
        os.path.relpath(path, runs) for path in
        glob.glob(os.path.join(runs, "emotions_study", "runs", "*", "export",
                               "*", "saved_model.pb")))
    self.assertEqual(exported, [
        os.path.join("emotions_study", "runs", "softmax.dot.lr0.01.seed0",
                     "export", name, "saved_model.pb")
        for name in ("best_model_by_metric", "latest_model")])
    self.assertEqual(export.stdout.count("Exported "), 2)
    ranked = [line.split("\t") for line in predict.stdout.splitlines()]
    self.assertLen(ranked, 3)
    self.assertEqual(ranked[0][0], "gratitude")


if __name__ == "__main__":
  tf.test.main()
