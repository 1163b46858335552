"""Multi-label classification as ranking: losses, metrics, label attention.

  ops              the maths of the multi-label losses (pure tf)
  losses           the Two-way loss and its margin variant (Keras)
  metric_ops       the maths of the multi-label metrics
  metrics          multi-label metrics by name, and their Keras metrics
  label_attention  label-wise attention: classes as queries over the instance
                   (MulCon's interaction)
  mulcon           MulCon's label-level contrastive loss, its model, model
                   builder and two-step schedule

May import the foundation modules only.
"""
