"""Training: one run from a config to a model_dir of checkpoints and exports.

  trainer        `train`: checks, resume, extension, exports, a finished
                 run left as it is (`already_finished`); what the study
                 asks of a run (`is_trained`, `checkpoint_scores`)
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
