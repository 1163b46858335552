"""The current stack (TensorFlow 2.20) against the reference stack (2.15).

The values were recorded on the reference stack by `tests/stack_values.py`;
on the reference stack these tests check that they still hold there, on the
current stack that TF-Ranking, run through `rank4class_tf/compat.py`, gives
the reference's numbers.
"""

import json
import os
import subprocess
import sys
import types

from absl.testing import absltest
from absl.testing import parameterized
import tensorflow as tf

from rank4class_tf import compat
from tests import helpers
from tests import stack_values

# Losses and metrics: the same float32 maths, so equal to rounding.
VALUE_TOLERANCE = 1e-6
# The digits run: measured equal to every digit on TF 2.15.1 and 2.20.0
# (100 steps); the tolerance allows one test digit in 270 to change its rank
# (and the reciprocal-rank metrics to move by a fraction of that).
DIGITS_TOLERANCE = 1.5 / 270


def _recorded():
  with open(stack_values.RECORDED, encoding="utf-8") as f:
    return json.load(f)["values"]


class RecordedValuesTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.recorded = _recorded()
    cls.computed = stack_values.compute()

  def test_every_loss_and_metric_is_recorded(self):
    self.assertEqual(
        sorted(self.computed),
        sorted(k for k in self.recorded if not k.startswith("digits/")))

  def test_values_match_the_reference_stack(self):
    for name, value in self.computed.items():
      with self.subTest(name):
        self.assertAlmostEqual(value, self.recorded[name],
                               delta=VALUE_TOLERANCE * max(1., abs(value)))


class DigitsRunTest(absltest.TestCase):

  def test_test_metrics_match_the_reference_stack(self):
    recorded = {k: v for k, v in _recorded().items()
                if k.startswith("digits/")}
    measured = stack_values.digits_run()
    self.assertEqual(sorted(measured), sorted(recorded))
    for name, value in measured.items():
      with self.subTest(name):
        self.assertAlmostEqual(value, recorded[name], delta=DIGITS_TOLERANCE)


def _python(code: str, **env) -> subprocess.CompletedProcess:
  """`python -c code` in a new process, TF_USE_LEGACY_KERAS unset unless
  `env` sets it."""
  environ = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  environ.pop("TF_USE_LEGACY_KERAS", None)
  environ.update(env)
  return helpers.run_command([sys.executable, "-c", code], check=False,
                             env=environ)


class CompatTest(absltest.TestCase):

  def test_tf_keras_is_keras_2(self):
    self.assertEqual(tf.keras.__name__.split(".")[0],
                     "keras" if compat.has_estimator() else "tf_keras")

  def test_estimator_stand_in_only_without_the_estimator(self):
    from tensorflow import estimator  # pylint: disable=g-import-not-at-top
    if compat.has_estimator():
      self.assertNotIsInstance(estimator, compat._StandInEstimator)  # pylint: disable=protected-access
      return
    self.assertEqual(estimator.ModeKeys.PREDICT, "infer")
    with self.assertRaisesRegex(compat.EstimatorRemovedError,
                                r"tensorflow\.estimator\.Estimator is not "
                                r"available: TensorFlow 2\.\d+ has no "
                                r"Estimator"):
      estimator.Estimator  # pylint: disable=pointless-statement

  def test_tensorflow_imported_first_fails_with_one_line(self):
    proc = _python("import tensorflow as tf; import rank4class_tf")
    if compat.has_estimator():  # TensorFlow 2.15: always Keras 2.
      self.assertEqual(proc.returncode, 0, proc.stderr)
      return
    self.assertNotEqual(proc.returncode, 0)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        "rank4class_tf.compat.KerasVersionError: TensorFlow was imported "
        "before rank4class_tf without TF_USE_LEGACY_KERAS=1, so its Keras is "
        "Keras 3; rank4class_tf needs Keras 2: import rank4class_tf before "
        "TensorFlow, or set TF_USE_LEGACY_KERAS=1 before importing "
        "TensorFlow.")

  def test_variable_set_before_tensorflow_gives_keras_2_everywhere(self):
    proc = _python(
        "import tensorflow as tf; import rank4class_tf; "
        "from tensorflow.keras import layers; "
        "print(tf.keras.layers.__name__, layers.__name__)",
        TF_USE_LEGACY_KERAS="1")
    self.assertEqual(proc.returncode, 0, proc.stderr)
    # TensorFlow 2.15 reads the variable too (tf-keras 2.15 is installed).
    self.assertEqual([name.split(".")[0] for name in proc.stdout.split()],
                     ["tf_keras", "tf_keras"])

  def test_legacy_keras_switched_off_is_refused(self):
    if compat.has_estimator():
      self.skipTest("TensorFlow 2.15 ignores TF_USE_LEGACY_KERAS")
    proc = _python("import rank4class_tf", TF_USE_LEGACY_KERAS="0")
    self.assertNotEqual(proc.returncode, 0)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        "rank4class_tf.compat.KerasVersionError: rank4class_tf needs Keras 2 "
        "but TF_USE_LEGACY_KERAS=0: unset it or set it to 1.")
    proc = _python("import rank4class_tf", TF_USE_LEGACY_KERAS="TRUE")
    self.assertIn("but TF_USE_LEGACY_KERAS=TRUE: unset it",
                  proc.stderr.strip().splitlines()[-1])


def _positive_or_zero(x):
  """A tensor `if`: traced only as AutoGraph rewrites it (to tf.cond)."""
  if tf.reduce_sum(x) > 0:
    return x
  return tf.zeros_like(x)


class AutographTest(tf.test.TestCase):
  """compat.leave_unconverted: AutoGraph leaves the package and TF-Ranking as
  written, and converts the rest as before."""

  def test_package_and_tf_ranking_are_listed_users_code_is_not(self):
    # pylint: disable=g-import-not-at-top
    import tensorflow_ranking as tfr
    from tensorflow.python.autograph.impl import conversion
    from rank4class_tf import ops
    # pylint: enable=g-import-not-at-top
    self.assertTrue(conversion.is_allowlisted(ops.rescaled_mse))
    self.assertTrue(conversion.is_allowlisted(tfr.utils.sort_by_scores))
    self.assertFalse(conversion.is_allowlisted(_positive_or_zero))

  def test_the_package_is_traced_as_written(self):
    x = tf.constant([-1., -2.])
    users = tf.function(lambda: _positive_or_zero(x))
    self.assertAllEqual(users(), [0., 0.])
    # The same function, as a module of the package would hold it: run as
    # written, its tensor `if` fails the trace.
    packaged = types.FunctionType(
        _positive_or_zero.__code__, _positive_or_zero.__globals__)
    packaged.__module__ = "rank4class_tf.ops"
    with self.assertRaises(tf.errors.OperatorNotAllowedInGraphError):
      tf.function(lambda: packaged(x))()

  def test_listed_once_whichever_is_imported_first(self):
    count = (
        "from tensorflow.python.autograph.core import config; "
        "from rank4class_tf import compat; compat.install_autograph_rules(); "
        "print(sum(isinstance(r, config.DoNotConvert) and r.matches(n) "
        "for r in config.CONVERSION_RULES for n in compat.UNCONVERTED), "
        "'tensorflow' in sys.modules, any(type(f).__name__ == "
        "'_AutographConfigFinder' for f in sys.meta_path))")
    # Twice installed (at import, then again): each name listed once.
    for first in ("import rank4class_tf; import tensorflow",
                  "import tensorflow; import rank4class_tf"):
      with self.subTest(first):
        proc = _python(f"import sys; {first}; {count}",
                       TF_USE_LEGACY_KERAS="1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), ["2", "True", "False"])
    # Before TensorFlow, the hook waits: nothing of TensorFlow is loaded.
    proc = _python(
        "import sys; import rank4class_tf; print('tensorflow' in "
        "sys.modules, any(type(f).__name__ == '_AutographConfigFinder' for f "
        "in sys.meta_path))")
    self.assertEqual(proc.stdout.split(), ["False", "True"])


if __name__ == "__main__":
  absltest.main()
