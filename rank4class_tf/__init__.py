"""rank4class_tf: multiclass classification as learning to rank, on TF-Ranking.

Every instance is a query, every class a document; a model scores and ranks all
classes of an instance. See README.md.

The package, by concern (each folder's `__init__` says what it holds and what
it may import; nothing imports upward):

  config, catalog   the run's settings and the named data sets (no TensorFlow)
  compat            TF-Ranking on TensorFlow 2.16+ (imported first)
  lookup, fileio, provenance, ops, distribute
                    the foundation: names, atomic files, code identity, shared
                    tf maths, tf.distribute strategies
  data/             loaders, tf.data pipelines, instance inputs, tokenization
  multilabel/       multi-label losses, metrics and label-wise attention
  sorting/          SoDeep sorters and their losses
  ranking/          every loss and metric by name
  modeling/         the ranking model: encoders, class encoders, interactions
  checks            every check of a config, before anything is written
  serving/          SavedModel signatures and exports; exported rankers,
                    evaluation
  training/         one run: pipeline, resume, exports, the feature cache
  study/            the paper's grid: runs, tuning, statistics, the report

`import rank4class_tf.config` (or `.catalog`) loads no TensorFlow; the names
below load it on first use.
"""

# First: on TensorFlow 2.16+ it must run before anything imports TF-Ranking.
# It imports no TensorFlow.
from rank4class_tf import compat  # pylint: disable=unused-import

__version__ = "0.1.0"


def __getattr__(name):
  """`rank4class_tf.evaluate_scores`, imported on first use (PEP 562)."""
  if name == "evaluate_scores":
    from rank4class_tf.ranking import metrics  # pylint: disable=g-import-not-at-top
    return metrics.evaluate_scores
  raise AttributeError(f"module 'rank4class_tf' has no attribute {name!r}")
