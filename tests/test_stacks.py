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

from absl.testing import absltest
from absl.testing import parameterized
import tensorflow as tf

from rank4class_tf import compat
from tests import helpers
from tests import stack_values

# Losses and metrics: the same float32 maths, so equal to rounding.
VALUE_TOLERANCE = 1e-6
# The digits run: measured equal to every digit on TF 2.15.1 and 2.20.0
# (100 steps); the tolerance allows one test digit in 270 to change its rank.
DIGITS_TOLERANCE = 1 / 270


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

  def _python(self, code: str, **env) -> subprocess.CompletedProcess:
    environ = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env)
    environ.pop("TF_USE_LEGACY_KERAS", None)
    environ.update(env)
    return helpers.run_command([sys.executable, "-c", code], check=False,
                               env=environ)

  def test_keras_3_already_in_use_fails_with_one_line(self):
    if compat.has_estimator():
      self.skipTest("TensorFlow 2.15 has Keras 2 as tf.keras")
    proc = self._python("import tensorflow as tf; tf.keras.layers; "
                        "import rank4class_tf")
    self.assertNotEqual(proc.returncode, 0)
    self.assertIn("KerasVersionError: TensorFlow was imported with Keras 3 "
                  "as tf.keras (keras.", proc.stderr)
    self.assertIn("import rank4class_tf before using tf.keras",
                  proc.stderr.strip().splitlines()[-1])

  def test_tensorflow_imported_first_is_fine_until_tf_keras_is_used(self):
    proc = self._python("import tensorflow as tf; import rank4class_tf; "
                        "print(tf.keras.__name__)")
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertEqual(proc.stdout.split(".")[0],
                     "keras" if compat.has_estimator() else "tf_keras")

  def test_legacy_keras_switched_off_is_refused(self):
    if compat.has_estimator():
      self.skipTest("TensorFlow 2.15 ignores TF_USE_LEGACY_KERAS")
    proc = self._python("import rank4class_tf", TF_USE_LEGACY_KERAS="0")
    self.assertNotEqual(proc.returncode, 0)
    self.assertEqual(
        proc.stderr.strip().splitlines()[-1],
        "rank4class_tf.compat.KerasVersionError: rank4class_tf needs Keras 2 "
        "but TF_USE_LEGACY_KERAS=0: unset it or set it to 1.")


if __name__ == "__main__":
  absltest.main()
