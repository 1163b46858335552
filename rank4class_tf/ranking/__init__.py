"""Ranking losses and metrics: every loss and metric by name.

  losses         `get_loss(name)`: TF-Ranking's losses, the fast ones, the
                 multi-label losses and the SoDeep losses behind one name
  fast_losses    Keras wrappers of `fast_loss_ops` (O(n log n) / fused losses)
  fast_loss_ops  their maths, pure tf functions
  metrics        ranking metrics (Top-k, NDCG, MRR, ...) by name, and the
                 deterministic `evaluate_scores`
  gzsl           generalized zero-shot metrics (seen / unseen, H, AUSUC)
                 and the choice of a seen margin and a fusion weight
  calibration    probabilities from any loss's scores (temperature / Platt
                 scaling) and their NLL, ECE, Brier score, reliability diagram
  class_report   the per-class report: `class_report` builds it, `write`
                 writes its folder
  class_report_ops     its maths: per-class precision, recall, F1, Top-k,
                       MRR, AP; the confusion matrix, most-confused pairs
  class_report_tables  its files' text (CSV, markdown, JSON)
  class_report_figure  its confusion matrix heat-map

May import the foundation modules, `sorting` and `multilabel`; not `data`,
`modeling`, `training`, `serving` or `study`.
"""
