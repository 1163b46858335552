"""Makes TF-Ranking 0.5.5 import and run on TensorFlow 2.16 and newer.

rank4class_tf supports two stacks (README, "Two stacks"):

* the **reference** stack, Python 3.11 with TensorFlow 2.15 (`constraints.txt`),
  the one the committed results were measured on; and
* the **current** stack, Python 3.12 / 3.13 with TensorFlow 2.20 and `tf-keras`
  (`constraints-current.txt`).

TF-Ranking 0.5.5 is TF-Ranking's last release (March 2024). It pins
`tensorflow<2.16` and its package `__init__` imports its Estimator modules,
which run `from tensorflow import estimator` (and
`from tensorflow.compat.v1 import estimator`). TensorFlow 2.16 removed the
Estimator, so on the current stack `import tensorflow_ranking` fails although
none of the Keras API that this package uses (losses, metrics, `ModelBuilder`,
`ModelFitPipeline`, the ranking layers) needs the Estimator. TF-Ranking's
upstream issues asking for TF 2.16+ are open with no fix, so this module does
two things, before anything imports TF-Ranking (`rank4class_tf/__init__.py` and
`pipelines/__init__.py` import it first):

1. Keras 2. TF-Ranking's Keras code is written for Keras 2 (it uses
   `tf.keras.__internal__`, which Keras 3 does not have). On TensorFlow 2.16+
   `tf.keras` is Keras 2 (the `tf-keras` package) only when the environment
   variable `TF_USE_LEGACY_KERAS=1` is set before TensorFlow is imported, so
   it is set here unless the user set it. If TensorFlow was imported without
   it, the import fails with one line saying what to do.
2. A stand-in Estimator. Only when TensorFlow has no Estimator, modules named
   `tensorflow.estimator`, `tensorflow.estimator.export` and
   `tensorflow.compat.v1.estimator` are registered. They carry the one thing
   TF-Ranking uses at import time, `ModeKeys` (a default argument in its
   `feature.py`); every other name raises `EstimatorRemovedError` naming the
   missing Estimator, so TF-Ranking's Estimator entry points fail clearly.

On the reference stack (TensorFlow 2.15, which still has its Estimator and
Keras 2) this module changes none of that.

On both stacks it also tells AutoGraph to leave this package and TF-Ranking
as they are (`leave_unconverted`).

The module imports no TensorFlow, so the light modules (`config`, `catalog`)
stay light.
"""

import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
import types
from typing import Optional, Tuple

# TensorFlow's first release without tf.estimator and with Keras 3 as tf.keras.
FIRST_WITHOUT_ESTIMATOR = (2, 16)
LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
# The values TensorFlow 2.16+ reads as "use tf-keras" (anything else, e.g.
# "TRUE", gives Keras 3).
LEGACY_KERAS_ON = ("1", "true", "True")
# Distributions that install the `tensorflow` module.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu",
                            "tensorflow-intel", "tf-nightly",
                            "tf-nightly-cpu")
STAND_IN_MODULES = ("tensorflow.estimator", "tensorflow.estimator.export",
                    "tensorflow.compat.v1.estimator")
# Packages written for graph mode (tf.cond, tf.while_loop, static shapes; no
# Python control flow on tensors) that AutoGraph need not rewrite, and the
# module that holds AutoGraph's list of such packages.
UNCONVERTED = ("rank4class_tf", "tensorflow_ranking")
AUTOGRAPH_CONFIG = "tensorflow.python.autograph.core.config"


class EstimatorRemovedError(AttributeError):
  """Raised when code reaches for the Estimator on TensorFlow 2.16 or newer."""


class KerasVersionError(ImportError):
  """Raised when TensorFlow was imported with Keras 3 as `tf.keras`."""


class ModeKeys:
  """The Estimator's mode names, with the Estimator's own values."""
  TRAIN = "train"
  EVAL = "eval"
  PREDICT = "infer"


def tensorflow_version() -> Optional[Tuple[int, int]]:
  """(major, minor) of the installed TensorFlow, read without importing it.

  Returns:
    None when no `tensorflow` distribution is installed.

  >>> tensorflow_version() >= (2, 15)
  True
  """
  for distribution in TENSORFLOW_DISTRIBUTIONS:
    try:
      version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
      continue
    major, minor = version.split(".")[:2]
    return int(major), int(minor)
  return None


def has_estimator() -> bool:
  """Whether the installed TensorFlow still ships `tf.estimator` (<= 2.15).

  >>> has_estimator() == (
  ...     importlib.util.find_spec("tensorflow_estimator") is not None)
  True
  """
  version = tensorflow_version()
  return version is not None and version < FIRST_WITHOUT_ESTIMATOR


class _StandInEstimator(types.ModuleType):
  """A module that has `ModeKeys` and raises for every other name."""

  ModeKeys = ModeKeys

  def __getattr__(self, name: str):
    if name.startswith("__"):
      raise AttributeError(name)
    raise EstimatorRemovedError(
        f"{self.__name__}.{name} is not available: TensorFlow "
        f"{'.'.join(map(str, tensorflow_version() or ()))} has no Estimator "
        "(removed in 2.16). rank4class_tf uses TF-Ranking's Keras API only; "
        "TF-Ranking's Estimator API needs the reference stack (Python 3.11, "
        "TensorFlow 2.15).")


def install_estimator_stand_in() -> None:
  """Registers the stand-in Estimator modules (idempotent)."""
  export = _StandInEstimator("tensorflow.estimator.export")
  estimator = _StandInEstimator("tensorflow.estimator")
  estimator.export = export
  for name, module in (("tensorflow.estimator", estimator),
                       ("tensorflow.estimator.export", export),
                       ("tensorflow.compat.v1.estimator", estimator)):
    sys.modules.setdefault(name, module)


def use_legacy_keras() -> None:
  """Makes `tf.keras` Keras 2 (`tf-keras`) on TensorFlow 2.16+, or fails.

  Raises:
    KerasVersionError: `tf-keras` is missing, TensorFlow was imported without
      TF_USE_LEGACY_KERAS=1 (so with Keras 3), or the variable is set to a
      value that TensorFlow does not read as "on".
  """
  set_by_user = LEGACY_KERAS_VARIABLE in os.environ
  os.environ.setdefault(LEGACY_KERAS_VARIABLE, "1")
  if os.environ[LEGACY_KERAS_VARIABLE] not in LEGACY_KERAS_ON:
    raise KerasVersionError(
        f"rank4class_tf needs Keras 2 but {LEGACY_KERAS_VARIABLE}="
        f"{os.environ[LEGACY_KERAS_VARIABLE]}: unset it or set it to 1.")
  try:
    importlib.metadata.version("tf-keras")
  except importlib.metadata.PackageNotFoundError:
    raise KerasVersionError(
        "rank4class_tf needs Keras 2 on TensorFlow 2.16+: pip install "
        "tf-keras (the version of your TensorFlow, see "
        "constraints-current.txt).") from None
  if "tensorflow" in sys.modules:
    # TensorFlow reads the variable when it is imported (it points the
    # module path `tensorflow.keras` at Keras 2 or 3) and again when tf.keras
    # is first used; imported before the variable was set, it serves Keras 3
    # to `from tensorflow.keras import ...` for the rest of the process.
    keras = sys.modules["tensorflow"].keras
    if not set_by_user or not keras.__name__.startswith("tf_keras"):
      raise KerasVersionError(
          "TensorFlow was imported before rank4class_tf without "
          f"{LEGACY_KERAS_VARIABLE}=1, so its Keras is Keras 3; rank4class_tf "
          "needs Keras 2: import rank4class_tf before TensorFlow, or set "
          f"{LEGACY_KERAS_VARIABLE}=1 before importing TensorFlow.")


def leave_unconverted(config) -> None:
  """Adds UNCONVERTED to AutoGraph's list of packages it does not convert
  (`config.CONVERSION_RULES`, the module AUTOGRAPH_CONFIG; idempotent).

  Every function a `tf.function` trace reaches (Keras' train, test and
  predict steps, `Dataset.map`, SavedModel signatures) is rewritten by
  AutoGraph, parsed and transformed as source, unless its module is on that
  list. TensorFlow lists the graph-mode libraries it ships with or beside it
  (keras, tf_keras, tensorflow_probability) there, and neither TF-Ranking
  (written for TF 1 graphs) nor this package needs the rewriting, which
  took 2.9-3.4 s of a 20-step digits run (`benchmarks/autograph.py`,
  results/autograph/benchmark.md). TensorFlow has no public way to list a
  package, hence the private module; a TensorFlow without it only traces
  more slowly.
  """
  for name in UNCONVERTED:
    if not any(isinstance(rule, config.DoNotConvert) and rule.matches(name)
               for rule in config.CONVERSION_RULES):
      config.CONVERSION_RULES = (tuple(config.CONVERSION_RULES) +
                                 (config.DoNotConvert(name),))


class _AutographConfigFinder(importlib.abc.MetaPathFinder):
  """Calls `leave_unconverted` on AUTOGRAPH_CONFIG once TensorFlow's import
  has run it, so that importing this package loads no TensorFlow."""

  def find_spec(self, name, path, target=None):
    if name != AUTOGRAPH_CONFIG:
      return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(name, path, target)
    if spec is not None and spec.loader is not None:
      exec_module = spec.loader.exec_module

      def exec_and_leave_unconverted(module):
        exec_module(module)
        leave_unconverted(module)

      spec.loader.exec_module = exec_and_leave_unconverted
    return spec


def install_autograph_rules() -> None:
  """`leave_unconverted` now if TensorFlow is imported, else once it is."""
  if AUTOGRAPH_CONFIG in sys.modules:
    leave_unconverted(sys.modules[AUTOGRAPH_CONFIG])
  elif not any(type(finder).__name__ == _AutographConfigFinder.__name__
               for finder in sys.meta_path):
    sys.meta_path.insert(0, _AutographConfigFinder())


def install() -> None:
  """Prepares TensorFlow 2.16+ for TF-Ranking; does nothing on 2.15.

  Raises:
    KerasVersionError: see `use_legacy_keras`.
    ImportError: TF-Ranking is not installed. On the current stack it is
      not a declared dependency (its stale `tensorflow<2.16` pin would make
      pip refuse TensorFlow 2.20), so it is installed apart with --no-deps.
  """
  if has_estimator() or tensorflow_version() is None:
    return
  use_legacy_keras()
  install_estimator_stand_in()
  if importlib.util.find_spec("tensorflow_ranking") is None:
    raise ImportError(
        "tensorflow-ranking is not installed: on TensorFlow 2.16+ install it "
        "with `pip install --no-deps tensorflow-ranking==0.5.5` (its "
        "tensorflow<2.16 pin is stale; see constraints-current.txt).")


install_autograph_rules()
install()
