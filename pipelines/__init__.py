"""absl binaries of rank4class_tf: flags -> TrainConfig -> one library call."""

import os
import warnings

# Keep TensorFlow 2.15's start-up chatter (CUDA plugin registration, CPU
# features) out of the binaries' output so that an error is the one line
# printed. Set TF_CPP_MIN_LOG_LEVEL=0 to see it again.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# google-api-core (pulled in by tensorflow-datasets) warns about Python 3.11's
# end of life on every import.
warnings.filterwarnings("ignore", category=FutureWarning,
                        module="google.api_core")

# Before any binary imports TensorFlow: Keras 2 and the Estimator stand-in on
# TensorFlow 2.16+ (rank4class_tf/compat.py).
import rank4class_tf  # pylint: disable=unused-import,g-import-not-at-top
