"""Tests of `--patience` (training.callbacks.EarlyStopping, run_state's
final_epoch / converged, trainer's already_finished): a run stops exactly `patience`
validations after its best, a resumed run stops where the uninterrupted one
does, a stopped run is finished and says `converged`.

The validation metric is a stand-in sequence written over Keras' logs
before any callback reads them, so the stop is known in advance."""

import json
import os
import tempfile
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from rank4class_tf import config as config_lib
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.training import builders
from rank4class_tf.training import callbacks as callbacks_lib
from rank4class_tf.training import pipeline as pipeline_lib
from rank4class_tf.training import run_guard
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training

MONITOR = "val_top1_accuracy"


class _Model:
  """What EarlyStopping touches of a model."""
  stop_training = False


def stopped_after(values, patience, resume_after=0, directory=""):
  """The 1-based epoch after which EarlyStopping stops a run whose
  validations give `values` (None: it never stops), the run resuming after
  `resume_after` epochs from the best.json in `directory`."""
  callback = callbacks_lib.EarlyStopping(
      directory, MONITOR, patience, steps_per_epoch=10,
      resume_after=resume_after, model_dir=directory)
  callback.set_model(_Model())
  callback.on_train_begin()
  for epoch in range(resume_after, len(values)):
    callback.on_epoch_end(epoch, {MONITOR: values[epoch]})
    if callback.model.stop_training:
      return epoch + 1
  return None


class EarlyStoppingTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      # Best at epoch 2; 3 ties it (not better), 4 is worse: stopped after
      # 2 + 2 validations; the 0.9 of epoch 5 is never seen.
      ([0.2, 0.5, 0.5, 0.45, 0.9, 0.9], 2, 4),
      ([0.2, 0.5, 0.5, 0.45, 0.9, 0.9], 3, None),
      ([0.2, 0.5, 0.5, 0.45, 0.9, 0.3, 0.3, 0.3], 3, 8),
      ([0.1, 0.2, 0.3, 0.4], 1, None),  # Still improving at the ceiling.
      ([0.4, 0.3, 0.2, 0.1], 1, 2),
  )
  def test_stops_patience_validations_after_the_best(self, values, patience,
                                                     stop):
    self.assertEqual(stopped_after(values, patience), stop)

  @parameterized.parameters(1, 2, 3)
  def test_resumed_run_stops_where_the_whole_run_does(self, resume_after):
    # best.json as BestCheckpoint leaves it after `resume_after` epochs.
    values = [0.2, 0.5, 0.5, 0.45, 0.9]
    folder = tempfile.mkdtemp()
    best = int(np.argmax(values[:resume_after])) + 1
    with open(os.path.join(folder, "best.json"), "w") as f:
      json.dump({"epoch": best, "monitor": MONITOR,
                 "value": values[best - 1]}, f)
    self.assertEqual(stopped_after(values, 2, resume_after, folder), 4)
    # Keras' own, which forgets: resumed after 3 epochs it takes epoch 4's
    # 0.45 as its best and trains on.
    keras_stop = tf.keras.callbacks.EarlyStopping(MONITOR, patience=2,
                                                  mode="max")
    keras_stop.set_model(_Model())
    keras_stop.on_train_begin()
    for epoch in range(3, len(values)):
      keras_stop.on_epoch_end(epoch, {MONITOR: values[epoch]})
    self.assertFalse(keras_stop.model.stop_training)


class StandIn(tf.keras.callbacks.Callback):
  """Writes `values[epoch]` over the validation metric before the other
  callbacks read it (placed first; Keras hands every callback the same
  logs)."""

  def __init__(self, values):
    super().__init__()
    self._supports_tf_logs = True  # Given Keras' own logs, not a copy.
    self.values = values

  def on_epoch_end(self, epoch, logs=None):
    logs[MONITOR] = self.values[epoch]


class Killed(Exception):
  pass


class KillAfter(tf.keras.callbacks.Callback):
  """Stops the run as SIGKILL would, once epoch `epochs` is backed up."""

  def __init__(self, epochs):
    super().__init__()
    self.epochs = epochs

  def on_epoch_end(self, epoch, logs=None):
    if epoch + 1 == self.epochs:
      raise Killed()


def train_with(config, values, kill_after=None):
  """`training.train` with the stand-in metric (and a kill)."""
  build = pipeline_lib.Rank4ClassPipeline.build_callbacks
  last = [KillAfter(kill_after)] if kill_after else []
  with mock.patch.object(
      pipeline_lib.Rank4ClassPipeline, "build_callbacks",
      lambda pipeline: [StandIn(values)] + build(pipeline) + last):
    try:
      training.train(config)
    except Killed:
      pass


# Best at epoch 2 (step 10): stopped by --patience=2 after epoch 4, step 20
# of 40.
STALLS = [0.2, 0.5, 0.5, 0.45, 0.9, 0.9, 0.9, 0.9]


def digits(model_dir, **values):
  return config_lib.TrainConfig.create(**dict(
      dict(dataset="digits", train_steps=40, eval_every=5, patience=2,
           batch_size=32, encoder_dim=16, model_dir=model_dir), **values))


class PatienceRunTest(tf.test.TestCase):
  """Digits runs of a few steps, in this process."""

  def test_stalled_run_resumes_stops_and_is_finished(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    config = digits(model_dir)
    train_with(config, STALLS, kill_after=3)  # Killed after epoch 3.
    run = run_dir_lib.RunDir(model_dir)
    self.assertEqual((run.resume_epoch(), run.checkpoint_epochs()),
                     (3, [1, 2, 3]))
    self.assertIsNone(run_state.final_epoch(config))
    self.assertFalse(run_state.converged(config))
    train_with(config, STALLS)  # The same command resumes it.
    # Stopped where the uninterrupted run stops: 2 validations after its
    # best (Keras' own EarlyStopping, restarted, would train to epoch 8).
    self.assertEqual(run.checkpoint_epochs(), [1, 2, 3, 4])
    self.assertEqual(run.best()["epoch"], 2)
    self.assertEqual(run_state.final_epoch(config), 4)
    self.assertTrue(run_state.converged(config))
    self.assertTrue(run.has_exports())  # Exported as after a last step.
    self.assertFalse(run.has_backup())
    self.assertTrue(run_state.is_trained(config))
    line = (f"already finished: `model_dir`={model_dir} stopped at step 20 "
            "of {}, converged (`patience`=2) (best top1_accuracy 0.5000 at "
            f"step 10, exported to {model_dir}/export/best_model_by_metric); "
            "nothing changed.")
    self.assertEqual(training.already_finished(config), line.format(40))
    # Any ceiling above its stop: the same run, finished.
    self.assertEqual(training.already_finished(config.replace(
        train_steps=400)), line.format(400))
    self.assertIsNone(training.already_finished(config.replace(
        train_steps=15)))
    # Another patience is another run.
    self.assertIsNone(training.already_finished(config.replace(patience=3)))
    with self.assertRaisesRegex(ValueError, r"holds a run with other "
                                r"settings: `patience`=3 \(was 2\)"):
      training.train(config.replace(patience=3))

  def test_run_improving_at_its_ceiling_has_not_converged(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    config = digits(model_dir, train_steps=20, export=False)
    train_with(config, [0.1, 0.2, 0.3, 0.4])
    self.assertEqual(run_state.final_epoch(config), 4)
    self.assertFalse(run_state.converged(config))
    self.assertStartsWith(training.already_finished(config),
                          "already finished: `model_dir`="
                          f"{model_dir} trained its 20 steps, not converged "
                          "(`patience`=2) (best top1_accuracy 0.4000 at step "
                          "20, not exported (`export`=False)); nothing "
                          "changed.")
    # More steps extend it from its last checkpoint, the patience counted
    # from its best (epoch 4): it stops 2 validations later, at epoch 6.
    longer = config.replace(train_steps=40)
    self.assertIsNone(training.already_finished(longer))
    train_with(longer, [0.1, 0.2, 0.3, 0.4, 0.35, 0.3, 0.9, 0.9])
    self.assertEqual(run_dir_lib.RunDir(model_dir).checkpoint_epochs(),
                     [1, 2, 3, 4, 5, 6])
    self.assertTrue(run_state.converged(longer))


def fake_run(trained, best, **values):
  """A run folder as training leaves it, without weights: config.json of
  `digits(**values)` (export=False), `checkpoints/` of epochs 1..`trained`
  and best.json of epoch `best`; returns its config."""
  model_dir = os.path.join(tempfile.mkdtemp(), "run")
  config = digits(model_dir, export=False, **values)
  run = run_dir_lib.RunDir(model_dir)
  os.makedirs(run.checkpoints)
  os.makedirs(run.best_checkpoints)
  with open(run.config_file, "w") as f:
    f.write(builders.resolve_defaults(config).to_json())
  for epoch in range(1, trained + 1):
    open(run.checkpoint(epoch) + ".index", "w").close()
  with open(run.best_record, "w") as f:
    json.dump({"epoch": best, "monitor": MONITOR, "value": 0.5}, f)
  return config


class FinishedTest(tf.test.TestCase, parameterized.TestCase):
  """When a run with --patience is finished, read from its files."""

  @parameterized.parameters(
      # (epochs trained, best, ceiling in epochs of 5 steps, the command's
      # ceiling) -> its end, converged, the finished line's middle.
      (4, 2, 8, 8, 4, True, "stopped at step 20 of 40, converged"),
      (4, 2, 8, 80, 4, True, "stopped at step 20 of 400, converged"),
      # Stopped by its patience exactly at its ceiling: the same run under
      # any larger one.
      (4, 2, 4, 4, 4, True, "trained its 20 steps, converged"),
      (4, 2, 4, 8, 4, True, "stopped at step 20 of 40, converged"),
      # Still improving at its ceiling: finished, not converged; more steps
      # extend it.
      (4, 3, 4, 4, 4, False, "trained its 20 steps, not converged"),
      (4, 3, 4, 8, None, False, None),
      # Unfinished: neither stopped nor at its ceiling.
      (3, 2, 8, 8, None, False, None),
  )
  def test_end_converged_and_finished_line(self, trained, best, epochs,
                                           command, end, done, line):
    config = fake_run(trained, best, train_steps=5 * epochs)
    config = config.replace(train_steps=5 * command)
    self.assertEqual(run_state.final_epoch(config), end)
    self.assertEqual(run_state.converged(config), done)
    finished = training.already_finished(config)
    if line is None:
      self.assertIsNone(finished)
    else:
      self.assertEqual(finished, (
          f"already finished: `model_dir`={config.trainer.model_dir} "
          f"{line} (`patience`=2) (best top1_accuracy 0.5000 at step "
          f"{best * 5}, not exported (`export`=False)); nothing changed."))
    if end is None and trained == epochs:
      self.assertEqual(run_state.extension_start(config), (
          run_dir_lib.RunDir(config.trainer.model_dir).checkpoint(trained),
          trained))

  def test_a_decaying_schedule_ties_the_run_to_its_ceiling(self):
    config = fake_run(4, 2, lr_schedule="linear")
    self.assertStartsWith(training.already_finished(config),
                          "already finished: ")
    self.assertIsNone(training.already_finished(config.replace(
        train_steps=80)))

  def test_a_run_without_patience_ends_at_its_ceiling(self):
    config = fake_run(4, 2, patience=0)
    self.assertIsNone(run_state.final_epoch(config))
    self.assertIsNone(run_state.converged(config))
    config = fake_run(8, 2, patience=0)
    self.assertEqual(run_state.final_epoch(config), 8)
    self.assertEqual(training.already_finished(config), (
        f"already finished: `model_dir`={config.trainer.model_dir} trained "
        "its 40 steps (best top1_accuracy 0.5000 at step 10, not exported "
        "(`export`=False)); nothing changed."))


class OldRunTest(tf.test.TestCase):

  def test_config_without_the_new_fields_resumes_as_before(self):
    # A config.json written before --patience and --lr_schedule existed.
    values = json.loads(digits("/run", patience=0).to_json())
    for name in ("patience", "lr_schedule", "warmup_steps"):
      del values["trainer"][name]
    old = config_lib.TrainConfig.from_json(json.dumps(values))
    self.assertEqual((old.trainer.patience, old.trainer.lr_schedule,
                      old.trainer.warmup_steps), (0, "constant", 0))
    self.assertIsNone(run_state.converged(old))
    new = digits("/run", patience=0).flat()
    self.assertEqual(run_guard.differences(old.flat(), new), [])
    run_guard.check_identity("/run", old.flat(), new, overwrite=False)
    # Under a decaying schedule other steps are another run.
    with self.assertRaisesRegex(
        ValueError, r"other settings: `train_steps`=80 \(was 40\) "
        r"\(`lr_schedule`=linear decays to `train_steps`"):
      run_guard.check_identity(
          "/run", dict(old.flat(), lr_schedule="linear"),
          dict(new, lr_schedule="linear", train_steps=80), overwrite=False)

  def _before_issues_60_62(self, **values):
    """The flat config of a run whose config.json predates
    --float32_layers and --split_rule (read as their legacy values)."""
    config = json.loads(digits("/run", **values).to_json())
    del config["trainer"]["float32_layers"], config["data"]["split_rule"]
    old = config_lib.TrainConfig.from_json(json.dumps(config))
    self.assertEqual((old.trainer.float32_layers, old.data.split_rule),
                     (False, "by_format"))
    return old.flat()

  def test_settings_that_change_nothing_let_an_old_run_resume(self):
    # Digits in float32: neither setting changes what the run computes.
    old = self._before_issues_60_62()
    new = digits("/run").flat()
    self.assertEqual((new["float32_layers"], new["split_rule"]),
                     (True, "seed_file_record"))
    run_guard.check_identity("/run", old, new, overwrite=False)
    self.assertEqual(run_guard.effective(old), run_guard.effective(new))

  def test_settings_that_change_the_run_still_refuse(self):
    # A user's streamed text files: the split rule cuts another validation.
    old = self._before_issues_60_62()
    with self.assertRaisesRegex(
        ValueError, r"other settings: `split_rule`='seed_file_record' "
        r"\(was 'by_format'\)\. Its own"):
      run_guard.check_identity(
          "/run", dict(old, dataset="text_files"),
          dict(digits("/run").flat(), dataset="text_files"), overwrite=False)
    # Under bfloat16 the float32 layers change the model's arithmetic.
    with self.assertRaisesRegex(
        ValueError, r"other settings: `float32_layers`=True \(was False\)"):
      run_guard.check_identity(
          "/run", dict(old, mixed_precision="bfloat16"),
          dict(digits("/run").flat(), mixed_precision="bfloat16"),
          overwrite=False)

  def test_old_finished_run_is_finished_under_its_own_flags(self):
    # The same command started again after an upgrade changes nothing.
    config = fake_run(8, 2, patience=0)
    run = run_dir_lib.RunDir(config.trainer.model_dir)
    with open(run.config_file) as f:
      values = json.load(f)
    del values["trainer"]["float32_layers"], values["data"]["split_rule"]
    with open(run.config_file, "w") as f:
      json.dump(values, f)
    self.assertStartsWith(training.already_finished(config),
                          "already finished: ")
    # Other settings still make it another run.
    self.assertIsNone(training.already_finished(config.replace(
        loss="approx_ndcg")))

  def test_effective_values(self):
    flat = {"dataset": "goemotions", "length_bucketing": True,
            "split_rule": "by_format", "mixed_precision": "float32",
            "float32_layers": True}
    self.assertEqual(run_guard.effective(flat), dict(
        flat, split_rule=None, float32_layers=False))
    self.assertEqual(run_guard.effective(dict(flat, dataset="digits")), dict(
        flat, dataset="digits", length_bucketing=False, split_rule=None,
        float32_layers=False))
    self.assertEqual(
        run_guard.effective(dict(flat, dataset="text_files",
                                 mixed_precision="bfloat16")),
        dict(flat, dataset="text_files", mixed_precision="bfloat16"))


if __name__ == "__main__":
  tf.test.main()
