"""Modeling: the ranking model, instance x classes -> [batch, num_classes].

  model           the Keras ranking model and its builder
  encoders        instance encoders (BERT / ELECTRA, ResNet, VGG, small CNN, MLP)
  stateless_dropout  their dropout, masks keyed by seed, step and layer
  precision       the layers kept in float32 when a run computes in bfloat16
  pretrained      loading pretrained weights offline (MiniLM, BERT checkpoints)
  interactions    dot, cosine, latent cross + MLP, concat + MLP
  class_encoders  classes encoded from their texts (`TextClassEncoder`)
  zero_shot_baselines  untrained zero-shot scores: cosine, random
  zero_shot       calibrated stacking and the cosine fusion, in the model

May import the foundation modules, `data` and `multilabel` (the label-wise
attention interaction and MulCon's projection); not `ranking`, `training`,
`serving` or `study`.
"""
