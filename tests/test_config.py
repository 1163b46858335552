"""Tests of rank4class_tf.config (and its `config/fields.py`): every bad
value names its flag."""

import json
import os
from unittest import mock

import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.modeling import encoders
from rank4class_tf.ranking import losses


def loss_kwargs(**kwargs):
  config = good(**kwargs)
  return losses.config_kwargs(config.loss, 10, config.trainer.seed)


def good(**kwargs):
  return config_lib.TrainConfig.create(**dict({"model_dir": "/tmp/unused"},
                                              **kwargs))


class ConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_defaults_are_valid(self):
    checks.validate(good())

  @parameterized.parameters(
      ("dataset", "mnist", r"`dataset`='mnist' is not valid; choose one of: "
       "digits"),
      ("loss", "hinge", "`loss`='hinge' is not valid; choose one of: softmax"),
      ("interaction", "bilinear", "`interaction`='bilinear' .* dot, lc_mlp"),
      ("encoder", "vit", "`encoder`='vit' is not valid"),
      ("optimizer", "sgd", "`optimizer`='sgd' .* adam, adagrad"),
      ("strategy", "gpu", "`strategy`='gpu' .* default, mirrored"),
      ("batch_size", 0, "`batch_size`=0 must be > 0"),
      ("train_steps", -5, "`train_steps`=-5 must be > 0"),
      ("eval_every", 0, "`eval_every`=0 must be > 0"),
      # Exactly --train_steps steps: epochs of --eval_every steps each.
      ("train_steps", 300, "`train_steps`=300 must be a multiple of "
       "`eval_every`=200"),
      ("mlp_units", -1, "`mlp_units`=-1 must be > 0"),
      ("learning_rate", 0.0, "`learning_rate`=0.0 must be > 0"),
      ("temperature", -1.0, "`temperature`=-1.0 must be > 0"),
      ("dropout", 1.0, r"`dropout`=1.0 must be in \[0, 1\)"),
      ("best_metric", "mrr@3", "`metrics`/`best_metric`: Unknown metric"),
      ("best_metric", "ndcg@3", "`best_metric`='ndcg@3' must be one of"),
      ("model_dir", "", "`model_dir` must be set"),
      ("strategy", "tpu", "`tpu` must name the TPU address"),
      ("dataset", "goemotions", "`encoder`='small_cnn' cannot read the text "
       "dataset 'goemotions'; choose one of: bert, electra"),
      ("encoder", "bert", "`encoder`='bert' cannot read the numeric dataset "
       "'digits'; choose one of: small_cnn, mlp"),
      ("contrastive_normalization", "mean",
       r"^`contrastive_normalization`='mean' is not valid; choose one of: "
       r"mulcon, positive_anchors\.$"),
      ("contrastive_base_temperature", 0.0,
       "`contrastive_base_temperature`=0.0 must be > 0"),
      ("contrastive_base_temperature", -0.2,
       "`contrastive_base_temperature`=-0.2 must be > 0"),
  )
  def test_bad_value_names_the_flag(self, field, value, message):
    with self.assertRaisesRegex(ValueError, message):
      checks.validate(good(**{field: value}))

  def test_text_flags(self):
    checks.validate(good(dataset="goemotions", encoder="electra"))
    with self.assertRaisesRegex(ValueError, "`encoder_size`='huge' is not "
                                "valid; choose one of: minilm_l6"):
      checks.validate(good(dataset="mind", encoder="bert", encoder_size="huge"))
    with self.assertRaisesRegex(ValueError, "`max_seq_length`=2 must be >= 3"):
      checks.validate(good(dataset="goemotions", encoder="bert", max_seq_length=2))

  def test_encoder_kwargs(self):
    self.assertEqual(encoders.config_kwargs(good().model), {"dim": 128, "dropout": 0.1})
    self.assertEqual(
        encoders.config_kwargs(good(
            dataset="goemotions", encoder="bert", init_checkpoint="minilm",
            encoder_size="tiny").model),
        {"size": "tiny", "init_checkpoint": "minilm", "dropout": 0.1,
         "pooling": "mean", "trainable_encoder": True})

  def test_loss_kwargs_pick_the_loss_hyperparameters(self):
    self.assertEqual(loss_kwargs(loss="mse"), {})
    self.assertEqual(loss_kwargs(loss="approx_ndcg", temperature=0.5),
                     {"temperature": 0.5})
    self.assertEqual(
        loss_kwargs(loss="rescaled_mse", rescaled_mse_k=15.,
             rescaled_mse_m=30.), {"k": 15., "m": 30.})
    self.assertEqual(
        set(loss_kwargs(loss="gumbel_approx_ndcg")),
        {"temperature", "sample_size", "gumbel_temperature", "seed"})

  def test_groups_and_flag_names(self):
    config = good(loss="rescaled_mse", rescaled_mse_k=15., learning_rate=0.5,
                  dataset="mind", mlp_units=7)
    self.assertEqual((config.data.dataset, config.model.mlp_units,
                      config.loss.name, config.loss.k,
                      config.trainer.learning_rate),
                     ("mind", 7, "rescaled_mse", 15., 0.5))
    flat = config.flat()
    self.assertEqual((flat["loss"], flat["rescaled_mse_k"]),
                     ("rescaled_mse", 15.))
    self.assertEqual(config.replace(seed=3).trainer.seed, 3)
    self.assertEqual(config.replace(seed=3).replace(seed=42), config)
    with self.assertRaisesRegex(ValueError, "Unknown settings: k, lr."):
      good(lr=1., k=2.)

  def test_every_field_is_a_documented_flag(self):
    fields = list(config_lib.flag_fields(config_lib.TrainConfig))
    flags = [f.flag for f in fields]
    self.assertLen(flags, len(set(flags)))
    self.assertLen(flags, 80)
    for field in fields:
      self.assertTrue(field.help.strip(), field.flag)
    renamed = {f.flag: f.name for f in fields if f.flag != f.name}
    self.assertEqual(renamed, {
        "loss": "name", "rescaled_mse_k": "k", "rescaled_mse_m": "m",
        "recall_margin": "margin",
        "two_way_positive_temperature": "positive_temperature",
        "two_way_negative_temperature": "negative_temperature",
        "two_way_epsilon": "epsilon"})

  def test_loss_settings_are_the_loss_arguments(self):
    # SoDeep's list length d is the class count, given when it is built.
    self.assertEqual(
        loss_kwargs(loss="sodeep_recall", sorter="handcrafted",
                    recall_margin=0.2),
        {"sorter": "handcrafted", "d": 10, "parallel_loss": None,
         "parallel_weight": 1.0, "margin": 0.2})
    loss = losses.build(good(loss="sodeep_spearman",
                             sorter="handcrafted").loss, 7, 0)
    self.assertEqual(loss.get_config()["d"], 7)

  def test_config_imports_nothing_from_the_library(self):
    # Nothing but its own folder (`config/fields.py`).
    folder = os.path.dirname(config_lib.__file__)
    for name in sorted(os.listdir(folder)):
      if name.endswith(".py"):
        with open(os.path.join(folder, name)) as f:
          source = f.read()
        self.assertNotRegex(
            source, r"(?m)^\s*(from|import) rank4class_tf(?!\.config\b)")

  def test_reads_a_flat_config_json(self):
    flat = json.dumps(dict(good(loss="mse").flat(), metrics=["mrr"],
                           best_metric="mrr"))
    config = config_lib.TrainConfig.from_json(flat)
    self.assertEqual((config.loss.name, config.trainer.metrics),
                     ("mse", ("mrr",)))

  def test_reads_a_config_json_without_the_newer_fields(self):
    # A run written before contrastive_normalization and
    # contrastive_base_temperature existed: they take their defaults.
    values = json.loads(good(contrastive_temperature=0.3).to_json())
    del values["loss"]["contrastive_normalization"]
    del values["loss"]["contrastive_base_temperature"]
    config = config_lib.TrainConfig.from_json(json.dumps(values))
    self.assertEqual((config.loss.contrastive_temperature,
                      config.loss.contrastive_normalization,
                      config.loss.contrastive_base_temperature),
                     (0.3, "mulcon", 0.2))
    flat = good().flat()
    del flat["contrastive_normalization"]
    self.assertEqual(config_lib.TrainConfig.from_json(json.dumps(flat)),
                     good())
    checks.validate(config)

  def test_an_older_config_keeps_its_behaviour(self):
    # Before issue 34: no length bucketing, and a boolean mixed precision
    # (true meant mixed_float16). Both layouts of config.json.
    values = json.loads(good().to_json())
    del values["trainer"]["length_bucketing"]
    values["trainer"]["mixed_precision"] = True
    config = config_lib.TrainConfig.from_json(json.dumps(values))
    self.assertEqual((config.trainer.length_bucketing,
                      config.trainer.mixed_precision), (False, "float16"))
    flat = good().flat()
    del flat["length_bucketing"]
    flat["mixed_precision"] = False
    config = config_lib.TrainConfig.from_json(json.dumps(flat))
    self.assertEqual((config.trainer.length_bucketing,
                      config.trainer.mixed_precision), (False, "float32"))
    self.assertEqual((good().trainer.length_bucketing,
                      good().trainer.mixed_precision), (True, "float32"))

  def test_an_older_config_keeps_its_split_rule(self):
    # Before issue 62 streamed text cut its missing splits by its own rule
    # (`split_rule`=by_format); a config without the field reads so, and a
    # new config has the one rule of every streamed format.
    values = json.loads(good().to_json())
    del values["data"]["split_rule"]
    config = config_lib.TrainConfig.from_json(json.dumps(values))
    self.assertEqual(config.data.split_rule, "by_format")
    flat = good().flat()
    del flat["split_rule"]
    config = config_lib.TrainConfig.from_json(json.dumps(flat))
    self.assertEqual(config.data.split_rule, "by_format")
    self.assertEqual(good().data.split_rule, "seed_file_record")
    with self.assertRaisesRegex(ValueError, r"`split_rule`='hash' is not "
                                "valid; choose one of: seed_file_record, "
                                "by_format."):
      good(split_rule="hash").validate()

  def test_bfloat16_needs_a_cpu_with_bfloat16(self):
    folder = self.get_temp_dir()
    paths = {}
    for name, flags in (("old", "fpu sse avx2 avx512f"),
                        ("new", "fpu avx512f avx512_bf16")):
      paths[name] = os.path.join(folder, name)
      with open(paths[name], "w") as f:
        f.write(f"processor\t: 0\nflags\t\t: {flags}\n")
    self.assertFalse(checks.cpu_has_bfloat16(paths["old"]))
    self.assertTrue(checks.cpu_has_bfloat16(paths["new"]))
    self.assertIsNone(checks.cpu_has_bfloat16(os.path.join(folder, "none")))
    config = good(mixed_precision="bfloat16")
    with mock.patch.object(checks, "CPUINFO", paths["old"]):
      with self.assertRaisesRegex(
          ValueError, r"^`mixed_precision`=bfloat16: this CPU has no "
          r"bfloat16 instructions .* Use `mixed_precision`=float32\.$"):
        checks.validate(config)
    with mock.patch.object(checks, "cpu_has_bfloat16", lambda: True):
      checks.validate(config)
    with mock.patch.object(checks, "cpu_has_bfloat16", lambda: False):
      checks.validate(good(mixed_precision="float32"))

  def test_json_round_trip(self):
    config = good(loss="approx_ndcg", metrics=("mrr", "ndcg@3"),
                  best_metric="mrr")
    self.assertEqual(config_lib.TrainConfig.from_json(config.to_json()),
                     config)


if __name__ == "__main__":
  tf.test.main()
