r"""Runs the Rank4Class study: the paper's loss x interaction grid, tuned.

Example (the paper's grid on digits, learning rate chosen on validation; the
end-to-end test runs it with fewer runs and steps):

  .venv/bin/python -m pipelines.study --study_dir=runs/study_digits \
      --dataset=digits --learning_rates=1e-3,3e-3,1e-2 \
      --train_steps=1000 --eval_every=100 --deterministic

trains 5 losses x 3 interactions x 3 seeds x 3 learning rates = 135 runs
(each an ordinary `pipelines.train` model_dir under study_dir/runs/), prints
one line per finished run, then writes study_dir/results.csv, tables.md,
figures/*.png and TensorBoard HParams logs
(`tensorboard --logdir=runs/study_digits`).

Rerunning the same command after a crash or a kill finishes the grid without
redoing finished runs; a larger grid holding the study's into the same
--study_dir adds runs (a grid that does not hold all of the study's is
refused, naming the flags: its worker would leave the study's other runs
unfinished); `--report_only` rewrites the report from the finished runs, naming the runs
it lacks (not run yet, or a damaged study file, which it names) and the run
folders the grid does not name. Every
`pipelines.train` flag is passed to each run unchanged, except those the grid
sets (--loss, --interaction, --learning_rate, --mlp_units, --seed) and
--model_dir / --overwrite. `--learning_rates=paper` and `--mlp_units=paper`
are the paper's tuning grids (1e-7 ... 0.1 by factors of about 3;
64,128,256,512). `--cells` restricts the grid to some loss.interaction
cells; `--choose_on_seed=0` tunes on seed 0 only and runs the other seeds at
its choices (docs/study.md). `--summary_dir` copies a summary small enough
to commit; `--from_summary` starts a study folder from it on another machine
and goes on where it stopped. `--check_report` writes nothing: it exits 1
naming the report's files that differ from the report this code makes of
the study's runs (`make check-results` checks the committed ones).

Any number of workers may run the same command on one --study_dir, on one
machine or many (a shared folder, or any file system TensorFlow reads:
`gs://...`): each takes the next run nobody holds (a claim with a
heartbeat; a dead worker's run is taken over after --claim_timeout and
resumed), and exits 0 when nothing is left. --num_shards / --shard_index
(default: a Slurm array's SLURM_ARRAY_TASK_COUNT / SLURM_ARRAY_TASK_ID, or a
Kubernetes Indexed Job's JOB_COMPLETION_INDEX) give each worker a fixed part
of the grid instead (docs/distributed.md).
"""

import sys

from absl import app
from absl import flags

from rank4class_tf import config as config_lib
from rank4class_tf.study import claims as study_claims
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_tables
from rank4class_tf.study import report as study_report
from rank4class_tf.study import runner as study_lib
from rank4class_tf.study import significance
from rank4class_tf.study import summary as study_summary
from . import console
from . import train_flags

train_flags.define(skip=study_grid.GRID_FIELDS + ("model_dir", "overwrite"))
# Listed by --helpshort with the binary's own flags.
flags.adopt_module_key_flags(train_flags)

# The study.
flags.DEFINE_string("study_dir", None, "Folder of the study.")
flags.DEFINE_list("losses", list(study_grid.PAPER_LOSSES),
                  "Losses of the grid (default: the paper's five). A SoDeep "
                  "loss may name its sorter, loss@sorter "
                  "(sodeep_spearman@pairwise); unqualified ones use "
                  "--sorter.")
flags.DEFINE_list("interactions", list(study_grid.PAPER_INTERACTIONS),
                  "Interactions of the grid (default: the paper's three).")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds of every cell.")
flags.DEFINE_list("cells", [],
                  "Only these cells of --losses x --interactions, each "
                  "loss.interaction (softmax.dot,approx_ndcg.lc_mlp); "
                  "--losses and --interactions default to theirs. Empty: "
                  "every cell.")
flags.DEFINE_integer("choose_on_seed", None,
                     "Tune the learning rate and width on this seed only; "
                     "the other --seeds then run each cell's choice (and "
                     "its steps). Default: every seed chooses its own, as "
                     "in the paper (App. B).")
flags.DEFINE_list("learning_rates", ["1e-3"],
                  "Learning rates tuned on validation; `paper`: 1e-7, 3e-7, "
                  "..., 3e-2, 0.1.")
flags.DEFINE_list("mlp_units", ["128"],
                  "Widths of lc_mlp / concat_mlp tuned on validation; "
                  "`paper`: 64,128,256,512.")
# The report.
flags.DEFINE_string("select_metric", None,
                    "Validation metric choosing each (loss, interaction, "
                    "seed)'s learning rate and width (default: "
                    "--best_metric).")
flags.DEFINE_integer("bootstrap_samples", significance.DEFAULT_SAMPLES,
                     "Resamples of the paired bootstrap tests (>= 10000); "
                     "the report raises it until its smallest p survives "
                     "Holm over its largest family, and states the B used.")
flags.DEFINE_string("paper_table", None,
                    "Show the paper's numbers beside ours: "
                    f"{'|'.join(paper_tables.NAMES)} or a JSON "
                    "file (see rank4class_tf/study/paper_tables).")
flags.DEFINE_string(
    "summary_dir", None,
    "Also copy the study's summary here: study.json, every finished run's "
    "study_result.json, the chosen runs' per-instance test arrays and the "
    "report (small enough to commit; --report_only --study_dir=<it> "
    "regenerates the report from it).")
flags.DEFINE_string(
    "from_summary", None,
    "Start a new or empty --study_dir from this summary (the --summary_dir "
    "of an unfinished study, e.g. committed from another machine): its runs "
    "are finished and not trained again. Ignored when --study_dir already "
    "holds a study (it goes on as it is), so one command resumes anywhere.")
flags.DEFINE_integer(
    "extend_grid", 0,
    "After the grid, for each (loss, interaction, seed) whose chosen "
    "learning rate or MLP width is the lowest or highest tried, add the "
    "value beyond it (rates on the 1, 3 x 10^k ladder, widths x2 or /2) and "
    "choose again, up to this many rounds (0: no extension).", lower_bound=0)
flags.DEFINE_float(
    "extend_steps", 0.,
    "Chosen runs that have not converged (with --patience: their best is "
    "followed by fewer than --patience validations; without: their best "
    "validation is their last, still improving) go on to this many times "
    "their --train_steps, and again while they have not, up to "
    "--extend_steps_limit (0: no extension; else > 1; not with a decaying "
    "--lr_schedule).", lower_bound=0.)
flags.DEFINE_integer(
    "extend_steps_limit", 0,
    "The most steps --extend_steps trains a run on to, a multiple of "
    "--eval_every (0: --extend_steps x --train_steps, one lengthening).",
    lower_bound=0)
# Workers.
flags.DEFINE_integer("num_shards", None,
                     "Split the grid into this many fixed parts, one per "
                     "worker (default: SLURM_ARRAY_TASK_COUNT, else 1: the "
                     "workers share every run by claims).")
flags.DEFINE_integer("shard_index", None,
                     "This worker's part, in [0, --num_shards) (default: "
                     "SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, or "
                     "JOB_COMPLETION_INDEX, else 0).")
flags.DEFINE_float("claim_timeout", study_claims.DEFAULT_TIMEOUT,
                   "Seconds without a heartbeat after which another "
                   "worker's claim on a run is taken over (the run resumes "
                   "from its backup).")
flags.DEFINE_string("worker_name", None,
                    "This worker's name in claims, records and progress "
                    "lines (default: host:pid, with the Slurm or Kubernetes "
                    "task).")
flags.DEFINE_bool("report_only", False,
                  "Write the report from the finished runs; train nothing.")
flags.DEFINE_bool("check_report", False,
                  "Write and train nothing: make the report of --study_dir's "
                  "finished runs (a study or its summary) in a scratch "
                  "folder and compare it byte for byte with the one there; "
                  "exit 1 naming the files that differ.")

FLAGS = flags.FLAGS


def _numbers(name: str, cast, paper=None) -> tuple:
  """The values of list flag `name`, or a one-line error naming it."""
  values = FLAGS[name].value
  if paper is not None and values == ["paper"]:
    return tuple(paper)
  parsed = []
  for value in values:
    try:
      parsed.append(cast(value))
    except ValueError:
      kind = "an integer" if cast is int else "a number"
      raise ValueError(f"--{name}: {value!r} is not {kind}.") from None
  return tuple(parsed)


def _canonical_cell(cell: str) -> str:
  """`softmax_loss.dot` -> `softmax.dot` (TF-Ranking's loss names)."""
  loss, dot, interaction = cell.rpartition(".")
  return f"{config_lib.canonical_loss(loss)}.{interaction}" if dot else cell


def grid_from_flags() -> study_grid.Grid:
  # TF-Ranking's loss names (softmax_loss) are stored as ours (softmax).
  losses = tuple(config_lib.canonical_loss(l) for l in FLAGS.losses)
  interactions = tuple(FLAGS.interactions)
  cells = tuple(_canonical_cell(cell) for cell in FLAGS.cells)
  if cells:
    # The cells' losses and interactions, unless the flags name them.
    keys = study_grid.Grid(cells=cells).cell_keys()
    if not FLAGS["losses"].present:
      losses = tuple(dict.fromkeys(loss for loss, _ in keys))
    if not FLAGS["interactions"].present:
      interactions = tuple(dict.fromkeys(i for _, i in keys))
  return study_grid.Grid(
      losses=losses, interactions=interactions,
      cells=cells, choose_on_seed=FLAGS.choose_on_seed,
      seeds=_numbers("seeds", int),
      learning_rates=_numbers("learning_rates", float,
                              study_grid.PAPER_LEARNING_RATES),
      mlp_units=_numbers("mlp_units", int, study_grid.PAPER_MLP_UNITS))


def worker_from_flags() -> study_claims.Worker:
  num_shards, shard_index = study_claims.shard_from_environment(
      FLAGS.num_shards, FLAGS.shard_index)
  kwargs = {"name": FLAGS.worker_name} if FLAGS.worker_name else {}
  return study_claims.Worker(num_shards=num_shards, shard_index=shard_index,
                             timeout=FLAGS.claim_timeout, **kwargs)


def check_report() -> None:
  """`--check_report`: one line, exit 1 where the report differs."""
  others = [name for name in ("report_only", "summary_dir", "from_summary")
            if FLAGS[name].present]
  if others:
    raise ValueError(f"`check_report` writes nothing: drop --{others[0]}.")
  differ = study_summary.check_report(FLAGS.study_dir, FLAGS.select_metric,
                                      FLAGS.bootstrap_samples,
                                      FLAGS.paper_table)
  if differ:
    sys.exit(f"study: {FLAGS.study_dir}: {len(differ)} file(s) of its report "
             f"differ from the report this code makes of its runs: "
             f"{', '.join(differ)} (--report_only rewrites them).")
  print(f"{FLAGS.study_dir}: its report is the one this code makes of its "
        "runs.")


def main(argv):
  if len(argv) > 1:
    sys.exit(f"study: unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.study_dir:
    sys.exit("study: --study_dir must be set.")
  console.quiet()
  try:
    if FLAGS.check_report:
      check_report()
      return
    if FLAGS.summary_dir:
      study_summary.check_summary_dir(FLAGS.study_dir, FLAGS.summary_dir)
    if FLAGS.from_summary:
      copied = study_summary.start_from_summary(FLAGS.from_summary,
                                                FLAGS.study_dir)
      print(f"--from_summary: started {FLAGS.study_dir} from the {copied} "
            f"runs of {FLAGS.from_summary}." if copied else
            f"--from_summary: {FLAGS.study_dir} already holds a study; it "
            "goes on as it is.")
    if not FLAGS.report_only:
      base = train_flags.config_from_flags(model_dir=FLAGS.study_dir)
      study_report.check_options(
          base.trainer.metrics,
          FLAGS.select_metric or base.trainer.best_metric,
          FLAGS.bootstrap_samples, FLAGS.paper_table, base.data.dataset)
      worker = worker_from_flags()
      runs = study_lib.run_study(FLAGS.study_dir, base, grid_from_flags(),
                                 progress=console.say,
                                 extend_grid=FLAGS.extend_grid,
                                 extend_steps=FLAGS.extend_steps,
                                 worker=worker,
                                 extend_steps_limit=FLAGS.extend_steps_limit)
      left = (study_lib.unfinished(FLAGS.study_dir, base, runs)
              if worker.num_shards > 1 else [])
      if left:
        # Other shards' runs: the worker that finishes the last run
        # writes the report (--report_only writes one now).
        print(f"Shard {worker.shard_index} of {worker.num_shards} is "
              f"finished; {len(left)} run(s) of other shards are not: the "
              "last worker to finish writes the report.")
        return
    paths = study_report.write_report(
        FLAGS.study_dir, FLAGS.select_metric, FLAGS.bootstrap_samples,
        FLAGS.paper_table, progress=console.say,
        unless_current=not FLAGS.report_only)
    if paths.get("current"):
      print(f"{paths['results']}, {paths['tables']} and {paths['figures']}/ "
            "are current: another worker wrote them from the same runs.")
    else:
      print(f"Wrote {paths['results']}, {paths['tables']} and "
            f"{paths['figures']}/.")
    if FLAGS.summary_dir:
      count = study_summary.write_summary(FLAGS.study_dir,
                                          FLAGS.summary_dir,
                                          FLAGS.select_metric)
      print(f"Wrote the summary of {count} runs to {FLAGS.summary_dir}.")
  except ValueError as e:
    console.fail("study", e)
  except OSError as e:
    # What the library does not word itself: an unreadable folder, a write
    # inside a training that failed. One line naming the path.
    sys.exit(f"study: {e.filename or FLAGS.study_dir}: {e.strerror or e}.")


if __name__ == "__main__":
  app.run(main)
