"""Zero-shot runs read for their GZSL metrics, and the remedies' constants
fitted on pseudo-unseen classes (Chao et al. 2016).

The margin of calibrated stacking (`--seen_margin`) and the weight of the
cosine fusion (`--cosine_fusion`) must not see the test's unseen classes.
They are chosen on *pseudo-unseen* classes: a run trained with the test's
held-out classes H and some seen classes P held out too
(`--holdout_classes=H+P`) is scored on the validation instances of every
class but H (its seen ones and P), with every class ranked; the constants
that maximise `gzsl.gzsl_h` there (seen Top-1 against P's Top-5) are then
given to the runs trained with H alone. The same constants serve every seed
of a method: like a learning rate they are a setting of the method, chosen
on validation.

`run_scores` reads a run's best checkpoint (the model training built, from
the feature cache for a frozen run) and the untrained cosine of the cached
instance vectors with the class texts' vectors, on a whole split.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rank4class_tf import config as config_lib
from rank4class_tf.data import classes as classes_lib
from rank4class_tf.modeling import zero_shot_baselines
from rank4class_tf.ranking import gzsl
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import builders
from rank4class_tf.training import feature_cache
from rank4class_tf.training import run_state
from rank4class_tf.training import trainer as training

# The remedies `fit` chooses constants for: which of (margin, weight) each
# fits.
METHODS = {"stacking": (True, False), "fusion": (False, True),
           "stacking_fusion": (True, True)}


def _held_out(config: config_lib.TrainConfig, class_names) -> Tuple[int, ...]:
  return classes_lib.holdout_ids(config.data.holdout_classes, class_names) \
      if config.data.holdout_classes else ()


def run_scores(model_dir: str, split: str, cosine: bool = True
              ) -> Dict[str, np.ndarray]:
  """A zero-shot run's labels, scores and seen classes on a whole split.

  The validation split is read whole, held-out classes' instances included
  (training left them out); that needs a run without `seen_margin` /
  `cosine_fusion` (whose model reads its held-out classes).

  Returns:
    {"labels" [n], "scores" [n, num_classes], "seen" [num_classes] bool,
    "cosine" [n, num_classes] (with `cosine`)}.

  Raises:
    ValueError: an unfinished run; a calibrated run's validation split.
  """
  config = exported_ranker.load_config(model_dir).replace(model_dir=model_dir)
  if not run_state.is_trained(config):
    raise ValueError(f"`runs`: {model_dir} did not finish training.")
  data, _ = builders.load_run_data(model_dir, config=config)
  held = _held_out(config, data.class_names)
  scored_config = config
  if split != "test" and held:
    if config.model.seen_margin or config.model.cosine_fusion:
      raise ValueError(f"{model_dir}: the {split} split of a run with "
                       "`seen_margin` or `cosine_fusion` cannot be read "
                       "whole; fit on runs without them.")
    scored_config = config.replace(holdout_classes=())
  labels, scores = training.checkpoint_scores(
      scored_config, data, (split,))[split]
  seen = np.ones(data.num_classes, bool)
  seen[list(held)] = False
  result = {"labels": labels, "scores": scores, "seen": seen}
  if cosine:
    result["cosine"] = cosine_scores(config, data, split)
  return result


def cosine_scores(config: config_lib.TrainConfig, data, split: str
                 ) -> np.ndarray:
  """The untrained cosine of every instance of `split` (the feature cache's
  vectors) with every class text's tower output: [n, num_classes]."""
  config = builders.resolve_defaults(config)
  cache = feature_cache.load(builders.feature_cache_dir(config),
                             builders.cache_spec(config), data)
  texts = classes_lib.class_texts(data.class_names,
                                  config.model.class_descriptions)
  classes = builders.frozen_class_features(
      config, builders.build_inputs(config, data), texts)
  return zero_shot_baselines.cosine_scores(
      np.asarray(cache.data.splits[split][0]), classes).astype(np.float32)


def fit(pseudo_runs: Sequence[str], holdout_classes: Sequence[str],
        methods: Sequence[str] = tuple(METHODS),
        split: str = "validation") -> Dict[str, Dict[str, float]]:
  """The constants of each remedy, fitted on pseudo-unseen classes.

  Args:
    pseudo_runs: runs trained with `holdout_classes` and pseudo-unseen
      classes held out (one per seed; their instances are pooled).
    holdout_classes: the test's unseen classes H: their instances are left
      out of the fit (their class names are still ranked).
    methods: names of `METHODS`.
    split: the split fitted on.

  Returns:
    {method: `gzsl.choose`'s dict (seen_margin, cosine_fusion and the
    validation gzsl_h, seen_top1, unseen_top5 at that point)}.

  Raises:
    ValueError: an unknown method; a pseudo run that does not hold out
      every class of `holdout_classes` and at least one more.
  """
  for method in methods:
    if method not in METHODS:
      raise ValueError(f"Unknown remedy {method!r}; valid names: "
                       f"{', '.join(METHODS)}.")
  pooled: Dict[str, List[np.ndarray]] = {}
  seen = None
  for model_dir in pseudo_runs:
    config = exported_ranker.load_config(model_dir)
    names = set(config.data.holdout_classes)
    if not set(holdout_classes) < names:
      raise ValueError(
          f"`pseudo_runs`: {model_dir} holds out {sorted(names)}: a pseudo "
          f"run holds out every class of `holdout_classes` "
          f"({', '.join(holdout_classes)}) and some seen ones.")
    run = run_scores(model_dir, split)
    class_names = exported_ranker.load_class_names(model_dir)
    test_unseen = classes_lib.holdout_ids(holdout_classes, class_names)
    keep = ~classes_lib.holdout_mask(run["labels"], test_unseen)
    if seen is not None and not np.array_equal(seen, run["seen"]):
      raise ValueError("`pseudo_runs` hold out different classes.")
    seen = run["seen"]
    for key in ("labels", "scores", "cosine"):
      pooled.setdefault(key, []).append(run[key][keep])
  labels, scores, cosine = (np.concatenate(pooled[k])
                            for k in ("labels", "scores", "cosine"))
  return {method: gzsl.choose(labels, scores, cosine, seen,
                              fit_margin=METHODS[method][0],
                              fit_weight=METHODS[method][1])
          for method in methods}


def gzsl_values(model_dir: str, names: Sequence[str], split: str = "test",
                holdout_classes: Optional[Sequence[str]] = None
               ) -> Dict[str, float]:
  """`gzsl.gzsl_metrics` of a run's best checkpoint on a split (the test
  split: every instance; seen = the classes not held out)."""
  run = run_scores(model_dir, split, cosine=False)
  seen = run["seen"]
  if holdout_classes:
    seen = np.ones_like(seen)
    seen[list(classes_lib.holdout_ids(
        holdout_classes, exported_ranker.load_class_names(model_dir)))] = False
  return gzsl.gzsl_metrics(run["labels"], run["scores"], seen, names)
