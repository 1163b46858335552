"""absl binaries of rank4class_tf: flags -> TrainConfig -> one library call."""

import os

# Keep TensorFlow's C++ start-up chatter (CUDA probing, CPU features) out of
# the binaries' output; set TF_CPP_MIN_LOG_LEVEL=0 to see it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
