"""The console commands an install puts on PATH: `rank4class-train`, ...

`pip install .` installs these binaries as the package `rank4class_tf.pipelines`
(setup.py maps this folder there: the top-level name `pipelines` belongs to
another PyPI project) and one command per binary, `rank4class-<binary>` with
`-` for `_` (setup.py's `console_scripts`). Each command runs its binary
exactly as `python -m` does, with `runpy`: the binary's module is executed
as `__main__`, so its docstring is the usage `--help` prints and
`--helpshort` lists its own flags. The binary is not imported here first:
importing it and then running it would define its absl flags twice.

In a checkout the binaries stay `pipelines.<binary>` (the README's
`python -m pipelines.train ...`); they import each other relatively, so the
same files are `rank4class_tf.pipelines.<binary>` once installed.
"""

import runpy


def _run(binary: str) -> None:
  runpy.run_module(f"{__package__}.{binary}", run_name="__main__",
                   alter_sys=True)


def calibrate():
  _run("calibrate")


def compare_budgets():
  _run("compare_budgets")


def compare_runs():
  _run("compare_runs")


def demo():
  _run("demo")


def evaluate():
  _run("evaluate")


def evaluate_sorter():
  _run("evaluate_sorter")


def export():
  _run("export")


def import_sorter():
  _run("import_sorter")


def inspect_data():
  _run("inspect_data")


def plot_sorter():
  _run("plot_sorter")


def predict():
  _run("predict")


def spearman_regression():
  _run("spearman_regression")


def study():
  _run("study")


def train():
  _run("train")


def train_sorter():
  _run("train_sorter")


def zero_shot_baselines():
  _run("zero_shot_baselines")


def zero_shot_fit():
  _run("zero_shot_fit")
