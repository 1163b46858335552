"""Serving: the contract between a trained run and its clients.

  saved_model      what a run writes for serving: the SavedModel
                   signatures, the atomic exports, the calibration fitted
                   beside them, and config.json, classes.json, serving.json
  exported_ranker  what reads them back: `load_config`, `load_class_names`,
                   `ExportedRanker` (ranks raw instances or a class list with
                   an export), `split_scores` and `evaluate`

May import the foundation modules, `data`, `multilabel`, `sorting`,
`ranking` and `modeling`; not `checks`, `training` or `study`.
"""
