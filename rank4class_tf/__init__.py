"""rank4class_tf: multiclass classification as learning to rank, on TF-Ranking.

Every instance is a query, every class a document; a model scores and ranks all
classes of an instance. See README.md.
"""

from rank4class_tf.metrics import evaluate_scores

__version__ = "0.1.0"
