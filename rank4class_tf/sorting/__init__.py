"""SoDeep: learned differentiable sorters and the rank-based losses on them.

Modules: `ops` (pure tf maths), `synthetic` (training data), `sorters`
(Keras sorter layers, `get`, `load_sorter`), `losses` (Spearman, mAP and
Recall@K Keras losses), `training` (sorter pretraining).
"""
