"""Multi-label classification as ranking: losses, metrics, label attention.

  ops              the maths of the multi-label losses (pure tf)
  losses           the Two-way loss and MulCon's label-level loss (Keras)
  metric_ops       the maths of the multi-label metrics
  metrics          multi-label metrics by name, and their Keras metrics
  label_attention  label-wise attention: classes as queries over the instance
                   (MulCon)

May import the foundation modules only.
"""
