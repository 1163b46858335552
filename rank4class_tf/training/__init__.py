"""Training: one run from a config to a model_dir of checkpoints and exports.

  trainer        `train`: checks, resume, extension, exports, a finished
                 run left as it is (`already_finished`); a checkpoint's
                 scores (`checkpoint_scores`), exports written later
  run_state      what a run's folder says about its training: its config,
                 where it ended, converged, trained, where an extension
                 starts (`is_trained`, `converged`, `extension_start`)
  pipeline       TF-Ranking's `ModelFitPipeline` subclass and dataset builder
  builders       a `TrainConfig` mapped onto the pipeline
  callbacks      the best validation's checkpoint and record; `--patience`
  schedules      the learning rate: constant, or the Model Garden's schedules
  run_guard      the run folder's lock, identity and damage checks
  feature_cache  a frozen encoder's outputs, computed once and shared
  zero_shot_fit  a zero-shot run's GZSL metrics; the remedies' constants
                 fitted on pseudo-unseen classes

May import everything but `study` and the binaries (`pipelines`).
"""
