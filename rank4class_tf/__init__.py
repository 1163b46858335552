"""rank4class_tf: multiclass classification as learning to rank, on TF-Ranking.

Every instance is a query, every class a document; a model scores and ranks all
classes of an instance. See README.md.
"""

# First: on TensorFlow 2.16+ it must run before anything imports TF-Ranking.
from rank4class_tf import compat  # pylint: disable=unused-import
from rank4class_tf.metrics import evaluate_scores  # pylint: disable=g-import-not-at-top

__version__ = "0.1.0"
