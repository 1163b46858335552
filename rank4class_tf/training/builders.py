"""The builders of a run: its config mapped onto TF-Ranking's pipeline.

`build_pipeline` turns a `TrainConfig` into the model builder, the dataset
builder and the `PipelineHparams` of a `pipeline.Rank4ClassPipeline`;
`resolve_defaults` fills in the settings whose defaults depend on others;
the feature cache of a frozen encoder is found and keyed here.
"""

import os
from typing import Optional, Tuple

from absl import logging
import numpy as np
import tensorflow_ranking as tfr

from rank4class_tf import catalog
from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import classes as classes_lib
from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data import features
from rank4class_tf.data import identity
from rank4class_tf.data import inputs as inputs_lib
from rank4class_tf.data import text
from rank4class_tf import distribute
from rank4class_tf.modeling import class_encoders
from rank4class_tf.modeling import encoders
from rank4class_tf.modeling import interactions
from rank4class_tf.modeling import model as model_lib
from rank4class_tf.modeling import pretrained
from rank4class_tf.ranking import metrics
from rank4class_tf import run_dir as run_dir_lib
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import feature_cache
from rank4class_tf.training import pipeline as pipeline_lib


def vocab_file(config: config_lib.ModelConfig) -> str:
  """The run's WordPiece vocabulary (see `ModelConfig.vocab_file`)."""
  if config.vocab_file:
    return config.vocab_file
  if config.init_checkpoint and config.init_checkpoint != "minilm":
    folder = config.init_checkpoint
    if not os.path.isdir(folder):
      folder = os.path.dirname(folder)
    candidate = os.path.join(folder, "vocab.txt")
    if os.path.exists(candidate):
      return candidate
  return pretrained.minilm_files()[1]


def build_inputs(config: config_lib.TrainConfig,
                 data: contract.ClassificationData
                ) -> features.InstanceInputs:
  """Raw numeric inputs, or in-graph tokenization for text datasets."""
  if not data.is_text:
    return inputs_lib.default_inputs(data)
  preprocessor = text.TextPreprocessor(
      vocab_file(config.model), seq_length=config.model.max_seq_length)
  return inputs_lib.TextInputs(
      data.instance_key, data.instance_shape, preprocessor,
      length_bucketing=config.trainer.length_bucketing)


def steps_per_execution(trainer: config_lib.TrainerConfig,
                        cached: bool = False) -> int:
  """Keras' `steps_per_execution` of a run: 1, but on a TPU and for a run
  trained from a feature cache (`cached`).

  Keras runs several steps a call in a `tf.range` loop whose result is
  undefined before it, so autograph traces the training step twice (a
  trial to find the loop's variables, then the loop): a 20-step digits run
  takes 0.81-0.90 of the time at 1 step a call that it takes at 10, a
  600-step one the same within the noise (`benchmarks.steps_per_execution`,
  results/steps_per_execution/benchmark.md). On a TPU each call's round
  trip to the host costs more than the trace. A run from a feature cache
  has a step of a few milliseconds, most of it the call itself: 50 steps a
  call (the largest divisor of `eval_every` up to 50, so validations fall
  where they did) take 0.62x its CPU time a step
  (`benchmarks.frozen_steps`, results/text_speed/frozen_steps.md), the
  same steps on the same batches (`tests/test_feature_cache.py`).
  """
  if trainer.strategy == "tpu":
    return min(10, trainer.eval_every)
  if cached:
    return max(d for d in range(1, 51) if trainer.eval_every % d == 0)
  return 1


def build_pipeline(config: config_lib.TrainConfig,
                   data: contract.ClassificationData,
                   strategy=None,
                   start_checkpoint: Optional[Tuple[str, int]] = None
                  ) -> pipeline_lib.Rank4ClassPipeline:
  """Maps the config onto TF-Ranking's model builder, data and hparams.

  `strategy` (from `make_strategy`) must be created before any TensorFlow
  op for multi-worker runs; None trains on the default device.
  """
  model, loss, trainer = config.model, config.loss, config.trainer
  # Where training starts: Keras' backup, or a per-validation checkpoint
  # when the backup was unreadable (`recover_backup`).
  # An --overwrite run starts afresh whatever the folder holds.
  checkpoint, start_epoch = start_checkpoint or (
      None, 0 if trainer.overwrite else
      run_dir_lib.RunDir(trainer.model_dir).resume_epoch())
  instance_inputs = build_inputs(config, data)
  held_out = ()
  if config.data.holdout_classes:
    held_out = classes_lib.holdout_ids(config.data.holdout_classes,
                                       data.class_names)
  texts = None
  if model.class_encoder == "text":
    texts = classes_lib.class_texts(data.class_names,
                                       model.class_descriptions)
  model_builder = model_lib.build_model_builder(
      data, model, loss, instance_inputs=instance_inputs, class_texts=texts,
      seed=trainer.seed, held_out=held_out)
  train_data, train_inputs, serving_builder = data, instance_inputs, None
  if uses_feature_cache(config):
    cache = feature_cache.load(feature_cache_dir(config), cache_spec(config),
                               data, length_bucketing=trainer.length_bucketing)
    train_data, train_inputs = cache.data, cache.inputs
    serving_builder = model_builder  # The same model over raw text.
    model_builder = model_lib.build_model_builder(
        cache.data, model, loss, instance_inputs=cache.inputs,
        encoder_fn=lambda: encoders.CachedFeatures(
            model.dropout, seed=trainer.seed, name="encoder"),
        class_texts=texts,
        class_features=(None if texts is None else
                        frozen_class_features(config, instance_inputs,
                                              texts)),
        seed=trainer.seed, held_out=held_out)
  if held_out:
    # Zero-shot training: the held-out classes' instances never reach a
    # training batch or the validation that picks the best checkpoint, and
    # the classes themselves are padding in every list there (not
    # negatives: a model trained to push them down learns their absence).
    train_data = classes_lib.without_classes(train_data, held_out)
  dataset_builder = pipeline_lib.Rank4ClassDatasetBuilder(
      train_data, train_inputs, trainer.batch_size, trainer.seed,
      trainer.top_k, skip_batches=start_epoch * trainer.eval_every,
      serving_inputs=instance_inputs, padded_classes=held_out)
  num_epochs = trainer.train_steps // trainer.eval_every  # Exact.
  hparams = tfr.keras.pipeline.PipelineHparams(
      model_dir=trainer.model_dir,
      num_epochs=num_epochs,
      steps_per_epoch=trainer.eval_every,
      validation_steps=None,
      learning_rate=trainer.learning_rate,
      # TF-Ranking's name where it has the loss (`tfr.keras.losses.get`
      # takes it), else ours.
      loss=config_lib.TFR_LOSS_NAMES.get(loss.name, loss.name),
      optimizer=trainer.optimizer,
      steps_per_execution=steps_per_execution(
          trainer, cached=uses_feature_cache(config)),
      export_best_model=True,
      best_exporter_metric_higher_better=True,
      best_exporter_metric=metrics.keras_name(trainer.best_metric),
      strategy=distribute.TFR_STRATEGIES[trainer.strategy],
      cluster_resolver=distribute.cluster_resolver(trainer.strategy,
                                                   trainer.tpu),
      tpu=trainer.tpu)
  return pipeline_lib.Rank4ClassPipeline(model_builder, dataset_builder, hparams, config,
                            strategy, start_epoch, checkpoint,
                            serving_model_builder=serving_builder)


def frozen_class_features(config: config_lib.TrainConfig,
                          instance_inputs: features.InstanceInputs,
                          texts) -> np.ndarray:
  """The frozen text tower's outputs on the class texts, [num_classes,
  hidden_size]: what a text class encoder trained from a feature cache
  projects (the instances' outputs come from the cache; the class texts are
  few, so they are encoded here, once per build)."""
  kwargs = dict(encoders.config_kwargs(config.model), sequence=False)
  tower = encoders.get(config.model.encoder, layer_name="class_tower",
                       **kwargs)
  inputs = class_encoders.tokenize(instance_inputs.preprocessor, texts)
  outputs = [tower.pooled_features(
      {name: value[i:i + 256] for name, value in inputs.items()},
      training=False).numpy() for i in range(0, len(texts), 256)]
  return np.concatenate(outputs).astype(np.float32)


def uses_feature_cache(config: config_lib.TrainConfig) -> bool:
  """Whether a run trains from a feature cache (--freeze_encoder with
  --feature_cache)."""
  return config.model.freeze_encoder and config.trainer.feature_cache


def feature_cache_dir(config: config_lib.TrainConfig) -> str:
  """--feature_cache_dir, by default `<model_dir>/feature_cache`."""
  return (config.trainer.feature_cache_dir or
          run_dir_lib.RunDir(config.trainer.model_dir).feature_cache)


def cache_spec(config: config_lib.TrainConfig) -> feature_cache.CacheSpec:
  """The frozen encoder of a run, as `feature_cache` keys it."""
  model = config.model
  kwargs = encoders.config_kwargs(model)
  return feature_cache.CacheSpec(
      encoder=model.encoder, encoder_size=model.encoder_size,
      init_checkpoint=model.init_checkpoint, vocab_file=vocab_file(model),
      pooling=kwargs["pooling"], max_seq_length=model.max_seq_length,
      sequence=model.interaction in interactions.SEQUENCE_INTERACTIONS)


def resolve_defaults(config: config_lib.TrainConfig
                    ) -> config_lib.TrainConfig:
  """The config with the defaults that depend on other settings filled in,
  so that config.json records what the run used: a text encoder's pooling
  (`encoders.default_pooling`); `length_bucketing` false for a dataset that
  is not text (it has no lengths); a relative `data_dir` or
  `class_names_file` made absolute (evaluated from another folder, the run
  reads its own data); `mixed_precision`=auto as bfloat16 where the
  hardware computes it natively (`checks.native_bfloat16`, said in one log
  line), else float32."""
  config = config.with_absolute_paths()
  model = config.model
  if config.trainer.mixed_precision == "auto":
    native = checks.native_bfloat16(config.trainer.strategy)
    config = config.replace(mixed_precision="bfloat16" if native
                            else "float32")
    if native:
      logging.info("Computing in bfloat16 (%s computes it natively; "
                   "`mixed_precision`=float32 computes in float32).", native)
  if model.encoder in encoders.TEXT_ENCODERS and not model.pooling:
    config = config.replace(pooling=encoders.default_pooling(
        model.encoder, model.init_checkpoint))
  if (config.trainer.length_bucketing and
      config.data.dataset not in catalog.TEXT_DATASETS):
    config = config.replace(length_bucketing=False)
  return config


def load_run_data(model_dir: str, allow_changed_data: bool = False,
                  config: Optional[config_lib.TrainConfig] = None,
                  remedy: Optional[str] = None
                 ) -> Tuple[contract.ClassificationData, identity.Changes]:
  """The data of a trained run, read again and checked against what the run
  trained on (its data record, `data.identity.load_checked`): the one way
  every command that reads a run's data again gets it (evaluate, export,
  calibrate, a study going on, compare_runs, a resumed run).

  Args:
    model_dir: the run's folder.
    allow_changed_data: proceed on changed files (recorded by the caller:
      the changes are returned); never on another class list.
    config: the run's config (default: its config.json).
    remedy: the end of the refusal's line (default: pass
      `allow_changed_data`).

  Returns:
    (the data, what changed: empty unless `allow_changed_data` let it
    pass).

  Raises:
    ValueError: one line saying what changed, before anything is written.
  """
  if config is None:
    config = exported_ranker.load_config(model_dir)
  kwargs = {} if remedy is None else {"remedy": remedy}
  return identity.load_checked(model_dir, config.data,
                               lambda: load_data(config),
                               allow_changed_data, **kwargs)


def load_data(config: config_lib.TrainConfig) -> contract.ClassificationData:
  """The run's dataset (`datasets.from_config`); for a dataset whose kind
  only its data says (a TFRecord's or a TFDS data set's instances), the
  encoder is checked against it here (`checks.check_data_kind`)."""
  data = datasets.from_config(config.data)
  if catalog.kind(config.data.dataset) is None:
    checks.check_data_kind(config.model.encoder, config.data.dataset,
                           "text" if data.is_text else "image")
  return data
