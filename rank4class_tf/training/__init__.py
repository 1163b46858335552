"""Training: one run from a config to a model_dir of checkpoints and exports.

  trainer        the TF-Ranking pipeline, callbacks, resume and `train`
  run_guard      the run folder's lock, identity and damage checks
  feature_cache  a frozen encoder's outputs, computed once and shared

May import everything but `study` and the binaries (`pipelines`).
"""
