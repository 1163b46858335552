"""Tests of rank4class_tf.config: every bad value names its flag."""

import dataclasses

import tensorflow as tf
from absl.testing import parameterized

from rank4class_tf import config as config_lib


def good(**kwargs):
  return dataclasses.replace(
      config_lib.TrainConfig(model_dir="/tmp/unused"), **kwargs)


class ConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_defaults_are_valid(self):
    good().validate()

  @parameterized.parameters(
      ("dataset", "mnist", r"--dataset='mnist' is not valid; choose one of: "
       "digits"),
      ("loss", "hinge", "--loss='hinge' is not valid; choose one of: softmax"),
      ("interaction", "bilinear", "--interaction='bilinear' .* dot, lc_mlp"),
      ("encoder", "vit", "--encoder='vit' is not valid"),
      ("optimizer", "sgd", "--optimizer='sgd' .* adam, adagrad"),
      ("strategy", "gpu", "--strategy='gpu' .* default, mirrored"),
      ("batch_size", 0, "--batch_size=0 must be > 0"),
      ("train_steps", -5, "--train_steps=-5 must be > 0"),
      ("eval_every", 0, "--eval_every=0 must be > 0"),
      ("mlp_units", -1, "--mlp_units=-1 must be > 0"),
      ("learning_rate", 0.0, "--learning_rate=0.0 must be > 0"),
      ("temperature", -1.0, "--temperature=-1.0 must be > 0"),
      ("dropout", 1.0, r"--dropout=1.0 must be in \[0, 1\)"),
      ("best_metric", "mrr@3", "--metrics/--best_metric: Unknown metric"),
      ("best_metric", "ndcg@3", "--best_metric='ndcg@3' must be one of"),
      ("model_dir", "", "--model_dir must be set"),
      ("strategy", "tpu", "--tpu must name the TPU address"),
      ("dataset", "goemotions", "--encoder='small_cnn' cannot read the text "
       "dataset 'goemotions'; choose one of: bert, electra"),
      ("encoder", "bert", "--encoder='bert' cannot read the numeric dataset "
       "'digits'; choose one of: small_cnn, mlp"),
  )
  def test_bad_value_names_the_flag(self, field, value, message):
    with self.assertRaisesRegex(ValueError, message):
      good(**{field: value}).validate()

  def test_text_flags(self):
    good(dataset="goemotions", encoder="electra").validate()
    with self.assertRaisesRegex(ValueError, "--encoder_size='huge' is not "
                                "valid; choose one of: minilm_l6"):
      good(dataset="mind", encoder="bert", encoder_size="huge").validate()
    with self.assertRaisesRegex(ValueError, "--max_seq_length=2 must be >= 3"):
      good(dataset="goemotions", encoder="bert", max_seq_length=2).validate()

  def test_encoder_kwargs(self):
    self.assertEqual(good().encoder_kwargs(), {"dim": 128, "dropout": 0.1})
    self.assertEqual(
        good(dataset="goemotions", encoder="bert", init_checkpoint="minilm",
             encoder_size="tiny").encoder_kwargs(),
        {"size": "tiny", "init_checkpoint": "minilm", "dropout": 0.1})

  def test_loss_kwargs_pick_the_loss_hyperparameters(self):
    self.assertEqual(good(loss="mse").loss_kwargs(), {})
    self.assertEqual(good(loss="approx_ndcg", temperature=0.5).loss_kwargs(),
                     {"temperature": 0.5})
    self.assertEqual(
        good(loss="rescaled_mse", rescaled_mse_k=15.,
             rescaled_mse_m=30.).loss_kwargs(), {"k": 15., "m": 30.})
    self.assertEqual(
        set(good(loss="gumbel_approx_ndcg").loss_kwargs()),
        {"temperature", "sample_size", "gumbel_temperature", "seed"})

  def test_json_round_trip(self):
    config = good(loss="approx_ndcg", metrics=("mrr", "ndcg@3"),
                  best_metric="mrr")
    self.assertEqual(config_lib.TrainConfig.from_json(config.to_json()),
                     config)


if __name__ == "__main__":
  tf.test.main()
