"""One run, from its config to a model_dir of checkpoints and exports.

`train` checks everything, then trains (or resumes, or extends) the run
through `pipeline.Rank4ClassPipeline` and writes its exports; the functions
beside it answer what the study and the binaries ask of a run: is there
nothing to do (`already_finished`), its checkpoint's scores without an
export (`checkpoint_scores`), its exports written later (`export_run`,
`recalibrate`). What the run's folder says about its training (is it
trained, did it converge, where does an extension start) is
`run_state.py`'s.
"""

import contextlib
import os
import re
from typing import Any, Dict, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import datasets
from rank4class_tf.data import contract
from rank4class_tf.data import identity
from rank4class_tf import distribute
from rank4class_tf import fileio
from rank4class_tf.modeling import stateless_dropout
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.serving import saved_model
from rank4class_tf.training import builders
from rank4class_tf.training import pipeline as pipeline_lib
from rank4class_tf.training import run_guard
from rank4class_tf.training import run_state
from rank4class_tf.training import schedules


def train(config: config_lib.TrainConfig, verbose: int = 0) -> str:
  """Trains, checkpoints and exports one run; returns the best export's path.

  The config, the data, the batch size (against the training split and the
  memory, `checks.check_batch_size`) and model_dir (a folder that can be
  written and holds nothing a run did not write, `run_guard.
  check_model_dir`) are checked before anything is written: each refusal
  is a one-line ValueError that leaves model_dir untouched.

  Started again with the same config (a scheduler restarting the job), a
  run goes on where it stopped and a finished one is left as it is:
  * finished (`already_finished`): nothing is read but the run's small
    files and nothing is written, not even the log or the lock; the best
    export's path is returned;
  * interrupted mid-training (a backup in model_dir/backup): it resumes
    from its last completed validation, with the data stream realigned;
  * interrupted during its exports (the backup is deleted only once both
    are written): it trains no step and writes them (from the final
    checkpoint if the backup is gone).
  A finished run started with more `train_steps` goes on from its final
  checkpoint (`extension_start`; with `export`=False too: it finished at
  that checkpoint), and an interrupted extension resumes like any run.
  With `patience`, training stops once `best_metric` has not improved for
  that many validations (`callbacks.EarlyStopping`, which a resumed or
  extended run continues from best.json: it stops where the uninterrupted
  run would); a run so stopped is finished (`final_epoch`, `converged`) and
  more `train_steps` leave it as it is. Other settings are refused, naming
  them (with fewer `train_steps`, another `top_k`, `patience` or, under a
  decaying `lr_schedule`, other `train_steps`, a run is another run),
  unless `overwrite`, which removes the old run's own files and starts
  afresh.

  A full disk or lost permission mid-run is a one-line ValueError naming
  the file too, and leaves no half-written checkpoint.
  """
  trainer = config.trainer
  distribute.configure_devices(trainer.cpu_devices)  # Before any TF op.
  config = _checked(config)
  run = run_dir_lib.RunDir(trainer.model_dir)
  finished = _finished_line(config)
  if finished:
    # Every task of a cluster reads this and returns: none starts the
    # strategy's collectives.
    logging.info("%s", finished)
    return run.export(run_dir_lib.BEST_EXPORT)
  # Also before any op: a multi-worker strategy's collectives.
  strategy = distribute.get_strategy(trainer.strategy, trainer.tpu)
  if trainer.deterministic:
    tf.config.experimental.enable_op_determinism()
  model_dir = trainer.model_dir
  chief = distribute.is_chief(strategy)
  fresh = (trainer.overwrite or not chief or
           run_state.previous_config(model_dir) is None)
  if not fresh:
    # A run going on (resumed, extended) reads the data it trained on, or
    # stops here: its record is checked (`data.identity`).
    data, _ = builders.load_run_data(
        model_dir, config=config,
        remedy="`overwrite` deletes the run and trains afresh on it.")
  else:
    data = builders.load_data(config)
  checks.check_files(config, data)
  if chief and not trainer.overwrite:
    # `--overwrite` replaces the run there, readable or not.
    run_guard.check_identity(model_dir, run_state.previous_config(model_dir),
                             config.flat(), trainer.overwrite)
  # What this run trains on, written when it starts from step 0.
  record = identity.record(config.data, data) if chief and fresh else None
  extend_from = None
  if not run.has_backup() and not trainer.overwrite and (
      run.has_exports() or _trained_without_export(model_dir)):
    # A run that finished (with a backup: one interrupted in an extension
    # or before deleting its backup, resumed below), yet not under these
    # settings: more `train_steps` extend it, anything else is another run.
    # With `export`=False it finished at its last checkpoint: a study's
    # `--extend_steps` run goes on from there, not from step 0.
    extend_from = run_state.extension_start(config)
    if extend_from is None:
      raise ValueError(_finished_otherwise(config))
  tf.keras.utils.set_random_seed(trainer.seed)
  pipeline = builders.build_pipeline(config, data, strategy)  # Reads vocab, ckpts.
  replicas = distribute.num_replicas(strategy)
  if trainer.batch_size % replicas:
    raise ValueError(f"`batch_size`={trainer.batch_size} must be a multiple "
                     f"of the {replicas} replicas of `strategy`="
                     f"{trainer.strategy}.")
  # Everything is checked: from here on the run writes into model_dir.
  with run_guard.RunLock(model_dir) if chief else contextlib.nullcontext():
    if chief and trainer.overwrite:
      run_guard.clear_state(model_dir)
    elif chief and extend_from:
      # A finished run given more steps: it goes on from its final
      # checkpoint (weights and optimizer state; an extension killed before
      # its first backup: from its newest), the data stream realigned, as
      # one uninterrupted run of the new length would.
      logging.info("Extending the finished run from %s (epoch %d) to %d "
                   "steps.", extend_from[0], extend_from[1],
                   trainer.train_steps)
      pipeline = builders.build_pipeline(config, data, strategy, extend_from)
    elif chief:
      start = run_guard.recover_backup(model_dir)
      if start:
        pipeline = builders.build_pipeline(config, data, strategy, start)
    logging.info(
        "Strategy %s: %d replica(s); global batch %d = %d per replica; "
        "learning rate %g (not scaled with the replicas); resuming after "
        "epoch %d.", trainer.strategy, replicas, trainer.batch_size,
        trainer.batch_size // replicas, trainer.learning_rate,
        pipeline.start_epoch)
    try:
      _train_and_export(config, data, pipeline, strategy, verbose, record)
    except run_guard.Diverged as e:
      done = run.resume_epoch() * trainer.eval_every
      kept = (f"backup/ and checkpoints/ hold the weights of step {done}, "
              "the last validation" if done else
              "no validation had passed, so no checkpoint was written")
      raise ValueError(
          f"training diverged: non-finite loss ({e.value}) by step "
          f"{e.step}; no export written; {kept}. Start again with a lower "
          "`learning_rate` and `overwrite`.") from None
    except run_guard.Terminated as e:
      done = run.resume_epoch() * trainer.eval_every
      raise ValueError(
          f"stopped by SIGTERM at step {e.step}; the backup of step {done} "
          "(the last validation) resumes the run: start the same command "
          "again.") from None
    except OSError as e:
      raise ValueError(
          f"cannot write {e.filename or model_dir}: "
          f"{e.strerror or e}; the checkpoints and exports written before "
          "are intact.") from None
    except tf.errors.OpError as e:
      broken = _unreadable_data(data, e)
      if broken:
        done = run.resume_epoch() * trainer.eval_every
        resumes = (f"the run resumes from step {done}, its last validation"
                   if done else
                   "no validation had passed, so the run starts afresh")
        raise ValueError(
            f"training stopped: {broken} Restore it and start the same "
            f"command again: {resumes}. Data without it, or with it changed, "
            "is not the data the run trained on (its data record): train a "
            "new run on it, with `skip_bad_records` to skip such files.") from None
      # A full disk or a lost permission inside a TensorFlow op (SaveV2 of
      # a checkpoint, the events writer), or memory exhausted: one line.
      # Anything else is a defect and keeps its traceback.
      first = (e.message or str(e)).strip().splitlines()[0]
      if not (isinstance(e, (tf.errors.ResourceExhaustedError,
                             tf.errors.PermissionDeniedError)) or
              "No space left" in first or "Read-only file system" in first):
        raise
      first = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", first)
      _remove_partial_checkpoints(model_dir)
      raise ValueError(
          f"training stopped in {model_dir}: {type(e).__name__}: {first}; "
          "the checkpoints and exports written before are intact.") from None
  for split, places in contract.skipped_reads(data).items():
    logging.warning("%s: skipped %d instance(s) that could not be read when "
                    "training read them (`skip_bad_records`): %s", split,
                    len(places), ", ".join(places[:5]) +
                    (", ..." if len(places) > 5 else ""))
  if not chief:
    # TF-Ranking writes a non-chief worker's copies under workertemp_<id>.
    scratch = run.worker_scratch(strategy.cluster_resolver.task_id)
    if fileio.exists(scratch):
      fileio.rmtree(scratch)
  return run.export(run_dir_lib.BEST_EXPORT)


def _unreadable_data(data: contract.ClassificationData,
                     error: tf.errors.OpError) -> Optional[str]:
  """The instance that stopped training, when `error` came from reading
  the data (an image deleted or damaged since the data was loaded: a
  NotFoundError, `Input is empty.`, `Invalid PNG data`): `FILE: reason` or
  `FILE: record N: reason` (`contract.first_unreadable`). None for any
  other error, or when every instance reads now."""
  if not isinstance(error, (tf.errors.NotFoundError,
                            tf.errors.InvalidArgumentError,
                            tf.errors.DataLossError,
                            tf.errors.PermissionDeniedError,
                            tf.errors.UnknownError)):
    return None
  if "IteratorGetNext" not in str(error):  # Not the input pipeline's.
    return None
  return contract.first_unreadable(data, ("train", "validation"))


def _remove_partial_checkpoints(model_dir: str) -> None:
  """Removes the `<checkpoint>_temp` folders a failed TensorFlow save
  leaves (a full disk mid-`SaveV2`): half-written, never loadable."""
  run = run_dir_lib.RunDir(model_dir)
  for folder in (run.checkpoints, run.best_checkpoints, run.chief_backup):
    for path in tf.io.gfile.glob(os.path.join(folder, "*_temp*")):
      if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)


def _train_and_export(config: config_lib.TrainConfig, data,
                      pipeline: pipeline_lib.Rank4ClassPipeline, strategy,
                      verbose: int,
                      record: Optional[Dict[str, Any]] = None) -> None:
  """Writes the run files (and the data `record` of a run starting from
  step 0, before config.json), trains (or resumes) and exports; the chief
  deletes the backup once both exports are written."""
  trainer = config.trainer
  model_dir = trainer.model_dir
  chief = distribute.is_chief(strategy)
  if chief:
    saved_model.remove_stale_exports(model_dir)
    if record is not None:
      identity.write(model_dir, record)
    saved_model.write_run_files(
        model_dir, config, data.class_names,
        pipeline.dataset_builder.serving_spec)
  end = None if trainer.overwrite else run_state.final_epoch(config)
  run = run_dir_lib.RunDir(model_dir)
  if end and run.resume_epoch() in (0, end):
    # Training finished (at its last step, or stopped by `patience`) but its
    # exports did not (killed during them): the final checkpoint is
    # exported, whether the backup is gone or holds the last epoch (a `fit`
    # of no epoch would restore the backup without the optimizer slots a
    # step creates, and TensorFlow warns about each).
    final = run.checkpoint(end)
    logging.info("Training finished before; exporting from %s.", final)
    pipeline.export_only(final)
  else:
    pipeline.train_and_validate(verbose=verbose)
  if chief and run.has_backup():
    fileio.rmtree(run.backup)  # Both exports are written.


def _checked(config: config_lib.TrainConfig) -> config_lib.TrainConfig:
  """The config validated, with the defaults that depend on other settings
  filled in (as config.json records them), once its model_dir is known to
  be writable and to hold nothing a run did not write
  (`run_guard.check_model_dir`). Writes nothing.

  Raises:
    ValueError: one line naming the setting or the folder.
  """
  checks.validate(config)
  config = builders.resolve_defaults(config)
  run_guard.check_model_dir(config.trainer.model_dir, config.trainer.overwrite)
  return config


def already_finished(config: config_lib.TrainConfig) -> Optional[str]:
  """One line saying that the run of `config` finished, or None when
  training it would do something.

  Finished: config.json holds `config`'s settings (its `train_steps` and
  `top_k` too; only `model_dir` and `overwrite` may differ), the last
  step's checkpoint is written (or, with `patience`, the one `patience`
  validations after the best: the run stopped there, `final_epoch`), the
  backup is gone and, with `export`, both exports are written. A run that
  `patience` stopped (`converged`) is finished for any `train_steps` at or
  above the step it stopped at (it would have stopped there under any of
  them), unless its `lr_schedule` decays (its rates depend on
  `train_steps`). Then `train` has nothing to do, so the same command
  started again (a scheduler restarting a job that ended) changes nothing:
  `pipelines.train` prints this line and exits 0. Not finished: no run in
  model_dir, an unfinished one (`train` resumes it), more `train_steps`
  (it extends it), other settings (it refuses them) or `overwrite` (it
  starts afresh).

  Reads the run's small files and writes nothing in model_dir: not
  config.json, not the log, not the lock.

  Raises:
    ValueError: `config` is invalid, model_dir cannot hold a run
      (`run_guard.check_model_dir`) or its config.json cannot be read.
  """
  return _finished_line(_checked(config))


def _finished_line(config: config_lib.TrainConfig) -> Optional[str]:
  """`already_finished` of a `_checked` config."""
  trainer = config.trainer
  if trainer.overwrite:
    return None
  model_dir = trainer.model_dir
  run = run_dir_lib.RunDir(model_dir)
  old = run_state.previous_config(model_dir)
  end = run_state.final_epoch(config)
  if (old is None or run.has_backup() or not end or
      (trainer.export and not run.has_exports())):
    return None
  done = run_state.converged(config)
  if run_guard.differences(old, config.flat(), run_guard.STARTED_BY + (
      # A run that `patience` stopped is the run of any ceiling at or above
      # its stop (at a constant rate: a decaying one's rates depend on it).
      ("train_steps",) if done and not schedules.decays(trainer) else ())):
    return None
  stopped = done and end < trainer.train_steps // trainer.eval_every
  try:
    best = run.best()
    best = (f"best {best['monitor'].replace('val_', '', 1)} "
            f"{float(best['value']):.4f} at step "
            f"{int(best['epoch']) * trainer.eval_every}, ")
  except (ValueError, KeyError, TypeError, OSError, tf.errors.OpError):
    best = ""  # best.json is missing or unreadable: the line goes without.
  # With `export`=False, `export_run` may have written them since.
  exported = (f"exported to {run.export(run_dir_lib.BEST_EXPORT)}"
              if run.has_exports() else "not exported (`export`=False)")
  trained = (f"stopped at step {end * trainer.eval_every} of "
             f"{trainer.train_steps}" if stopped else
             f"trained its {trainer.train_steps} steps")
  if trainer.patience:
    trained += (f", {'' if done else 'not '}converged "
                f"(`patience`={trainer.patience})")
  return (f"already finished: `model_dir`={model_dir} {trained} "
          f"({best}{exported}); nothing changed.")


def _trained_without_export(model_dir: str) -> bool:
  """Whether model_dir holds a run trained with `export`=False to its last
  step: its config's last checkpoint (the caller has seen no backup)."""
  old = run_state.previous_config(model_dir)
  if not old or old.get("export", True):
    return False
  return run_state.final_epoch(config_lib.TrainConfig.create(
      **dict(old, model_dir=model_dir))) is not None


def _finished_otherwise(config: config_lib.TrainConfig) -> str:
  """Why a finished run that `config` neither leaves as it is nor extends
  is refused: the settings it finished under, or what it lacks."""
  model_dir = config.trainer.model_dir
  diff = run_guard.differences(run_state.previous_config(model_dir) or {},
                               config.flat(), run_guard.STARTED_BY)
  if diff:
    return (f"`model_dir`={model_dir} holds a finished run with other "
            f"settings: {'; '.join(diff)}. Its own settings leave it as it "
            "is and more `train_steps` extend it; `overwrite` deletes it "
            "and trains afresh under these.")
  return (f"`model_dir`={model_dir} holds the exports of a run without its "
          "config.json or checkpoints: it can be neither resumed nor "
          "extended; `overwrite` deletes it and trains afresh.")


def checkpoint_scores(config: config_lib.TrainConfig,
                      data: contract.ClassificationData,
                      splits: Tuple[str, ...] = ("validation", "test"),
                      checkpoint: Optional[str] = None
                     ) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
  """Labels and scores of a run's checkpoint on splits, without an export.

  The model is the one training built (from the feature cache for a run
  that trained from one, so a frozen run is scored in seconds); scores
  equal the export's up to float rounding (a test checks it).

  Args:
    config: the run's config (as in its config.json).
    data: its dataset.
    splits: the splits to score.
    checkpoint: weights to load; default the best checkpoint.

  Returns:
    {split: (labels [n] or [n, num_classes], scores [n, num_classes])}.

  Raises:
    ValueError: the run has no best checkpoint.
  """
  run = run_dir_lib.RunDir(config.trainer.model_dir)
  checkpoint = checkpoint or run.best_checkpoint()
  if not checkpoint:
    raise ValueError(f"{run.best_checkpoints} holds no checkpoint.")
  pipeline = builders.build_pipeline(builders.resolve_defaults(config), data)
  builder = pipeline.dataset_builder
  model = pipeline.model_builder.build()
  stateless_dropout.restore(model, checkpoint,
                            rebuild=pipeline.model_builder.build)
  results = {}
  for split in splits:
    ds = datasets.ranking_dataset(builder.data, split,
                                  config.trainer.batch_size, training=False,
                                  instance_inputs=builder.instance_inputs)
    if split in builder.data.splits:
      scores = _scores(model.predict(ds.map(lambda features, _: features),
                                     verbose=0))
      # The labels of the split as scored: held-out classes' instances are
      # not in a zero-shot run's validation split.
      labels = np.asarray(builder.data.splits[split][1])
    else:
      # A streamed split (image folders, TFRecords, large text files): its
      # labels are read with its instances, in one pass over its files.
      scores, labels = [], []
      for features, one_hot in ds:
        scores.append(_scores(model.predict_on_batch(features)))
        labels.append(one_hot.numpy())
      scores, labels = np.concatenate(scores), np.concatenate(labels)
      if not builder.data.multi_label:
        labels = labels.argmax(axis=1).astype(np.int64)  # Class ids.
    results[split] = (labels, np.asarray(scores, np.float32))
  return results


def _scores(outputs) -> np.ndarray:
  """The scores of a model's outputs (a dict for some encoders)."""
  return np.asarray(outputs["scores"] if isinstance(outputs, dict)
                    else outputs)


def _finished_run(model_dir: str):
  """(config, RunDir, final checkpoint) of a finished run.

  Raises:
    ValueError: naming model_dir when its last checkpoint is missing or its
      backup remains (training unfinished).
  """
  config = exported_ranker.load_config(model_dir)
  config = config.replace(model_dir=model_dir)
  run = run_dir_lib.RunDir(model_dir)
  final = run_state.final_checkpoint(config)
  if not final or run.has_backup():
    raise ValueError(f"`model_dir`={model_dir} holds no finished run (its "
                     "last checkpoint is missing or its backup remains); "
                     "finish its training first.")
  return config, run, final


def export_run(model_dir: str, allow_changed_data: bool = False
              ) -> Tuple[str, str]:
  """Writes the SavedModels of a finished run that has none
  (`--export=false`), from its final and best checkpoints.

  The data is the run's, checked against its record
  (`builders.load_run_data`): a table's standardisation comes from the
  data, so changed data would change the model's input.

  Args:
    model_dir: the run's folder.
    allow_changed_data: export on changed files anyway (a table's
      recorded statistics are used); the changes are logged in the run's
      log.txt.

  Returns:
    The paths of the latest and best exports.

  Raises:
    ValueError: naming model_dir when the run is unfinished or already
      exported, or saying what changed in its data; nothing is written.
  """
  config, run, final = _finished_run(model_dir)
  if run.has_exports():
    raise ValueError(f"`model_dir`={model_dir} already holds an export.")
  checks.validate(config)
  data, changes = builders.load_run_data(model_dir, allow_changed_data,
                                         config)
  pipeline = builders.build_pipeline(config, data)
  with run_guard.RunLock(model_dir):
    identity.note(model_dir, "export", changes)
    pipeline.export_only(final, force=True)
  return run.export(run_dir_lib.LATEST_EXPORT), run.export(
      run_dir_lib.BEST_EXPORT)


def recalibrate(model_dir: str, allow_changed_data: bool = False
               ) -> Dict[str, Any]:
  """Fits the calibration of a finished run's exports again, without
  training: both exports are written anew from the final and best
  checkpoints (`export_only`), each calibrated on the validation split
  (`saved_model.calibrate_on`). A run trained before calibration existed gets
  its `probabilities` this way.

  Both calibrations are fitted before either export is written: when one
  cannot be (scores that are not finite: a diverged run, NaN weights),
  nothing is written and the exports stay as they were.

  Args:
    model_dir: the run's folder.
    allow_changed_data: as `export_run`'s.

  Returns:
    {export name: its calibration record (`run_dir.CALIBRATION_FILE`)}.

  Raises:
    ValueError: naming model_dir when it holds no finished run; naming the
      export when its scores are not finite; saying what changed in its
      data.
  """
  config, run, final = _finished_run(model_dir)
  checks.validate(config)
  data, changes = builders.load_run_data(model_dir, allow_changed_data,
                                         config)
  pipeline = builders.build_pipeline(config, data)
  with run_guard.RunLock(model_dir):
    pipeline.export_only(final, force=True, calibrated=True,
                         before_writing=lambda: identity.note(
                             model_dir, "calibrate", changes))
  return {name: fileio.read_json(run.calibration_file(name))
          for name in run_dir_lib.EXPORTS}
