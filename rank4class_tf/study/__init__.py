"""The study: the paper's loss x interaction grid, run, tuned and reported.

  runner        the study loop: its runs trained, extended and followed,
                resumed where it stopped
  settings      each run's config, and every check before a study writes
                anything (the grid, the settings, study.json, run folders)
  grid          the grid, its runs and their names; the paper's grid
  folder        the study folder: study.json, records, test arrays, lock
  evaluation    one run's evaluation and per-instance test arrays
  extend        `--extend_grid`: no chosen value left on an edge
  report        the report: reads a study folder, writes results.csv,
                tables.md, figures and HParams logs (`selection`, `tables`,
                `verdicts`, `paper_effects`, `findings`, `figures`,
                `hparams`, `common`)
  summary       a summary to commit, and a study started from it
  effects       the study's effects against the baseline (hierarchical
                intervals, both paired tests: bootstrap and seed-level
                t-test), fairness of the tuning, Bruch's claim
  significance  the tests and intervals they use: the paired and
                hierarchical bootstrap, the seed-level t-test, Holm's
                adjustment, the sign test, power and the Holm floor
  compare       two exported runs compared on one split
  paper_tables  the paper's published numbers (JSON)

May import everything but the binaries (`pipelines`).
"""
