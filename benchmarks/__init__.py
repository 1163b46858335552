"""Benchmarks of rank4class_tf: scripts that print measured tables."""

# Before any benchmark imports TensorFlow (rank4class_tf/compat.py).
import rank4class_tf  # pylint: disable=unused-import
