"""Tests of the multi-label image datasets `coco2017` and `voc2007`.

Two kinds of offline data, both through TFDS's real `coco/2017` and
`voc/2007` builders:

* prepared copies: tiny VOCdevkit / COCO folders written here (JPEG images,
  VOC XML and COCO JSON annotations), turned into TFRecords by the builders'
  own `download_and_prepare` with the download step pointed at them; read
  back without any mock, as a real `--data_dir`;
* `tfds.testing.mock_data`: random examples drawn from the feature spec
  (every split the same examples, 5 to 49 objects per image).
"""

import dataclasses
import json
import os
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rank4class_tf import checks
from rank4class_tf import config as config_lib
from rank4class_tf.data import contract
from rank4class_tf.data import datasets
from rank4class_tf.data.sources import image_catalog
from rank4class_tf import catalog
from rank4class_tf.data import features as features_lib
from rank4class_tf.data import images
from rank4class_tf.serving import exported_ranker
from rank4class_tf.training import trainer as training
import helpers

MEAN = np.array(images.IMAGENET_MEAN_RGB, np.float32)
STD = np.array(images.IMAGENET_STDDEV_RGB, np.float32)
VOC_CLASSES = (
    "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
    "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person",
    "pottedplant", "sheep", "sofa", "train", "tvmonitor")
NAMES = {"coco2017": "coco/2017", "voc2007": "voc/2007"}
# COCO's 80 category ids run from 1 to 90 with gaps, as in the real files.
COCO_IDS = [i for i in range(1, 91)
            if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]


def write_jpeg(path, height, width):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  pixels = np.random.RandomState(height * width).randint(
      0, 256, [height, width, 3]).astype(np.uint8)
  tf.io.write_file(path, tf.io.encode_jpeg(pixels))


def write_voc(root, sets):
  """A VOCdevkit/VOC2007 folder: sets = {set: {image id: (h, w, names)}}."""
  base = os.path.join(root, "VOCdevkit", "VOC2007")
  os.makedirs(os.path.join(base, "ImageSets", "Main"))
  os.makedirs(os.path.join(base, "Annotations"))
  for set_name, members in sets.items():
    with open(os.path.join(base, "ImageSets", "Main", f"{set_name}.txt"),
              "w") as f:
      f.write("".join(f"{image_id}\n" for image_id in members))
    for image_id, (height, width, names) in members.items():
      write_jpeg(os.path.join(base, "JPEGImages", f"{image_id}.jpg"),
                 height, width)
      objects = "".join(
          f"<object><name>{name}</name><pose>Left</pose>"
          "<truncated>0</truncated><difficult>0</difficult><bndbox>"
          f"<xmin>1</xmin><ymin>1</ymin><xmax>{width}</xmax>"
          f"<ymax>{height}</ymax></bndbox></object>" for name in names)
      with open(os.path.join(base, "Annotations", f"{image_id}.xml"),
                "w") as f:
        f.write(f"<annotation><size><width>{width}</width><height>{height}"
                f"</height><depth>3</depth></size>{objects}</annotation>")
  return {"trainval": root, "test": root}


def write_coco(root, splits):
  """COCO's extracted zips: splits = {TFDS split: (folder, {file: (h, w,
  [(category id, is crowd)])})}; returns download_and_extract's result."""
  paths = {}
  for split, (folder, members) in splits.items():
    image_dir = os.path.join(root, f"{split}_images")
    annotation_dir = os.path.join(root, f"{split}_annotations")
    os.makedirs(os.path.join(annotation_dir, "annotations"))
    info = {"images": [], "annotations": [],
            "categories": [{"id": i, "name": f"thing{i}"} for i in COCO_IDS]}
    for image_id, (file_name, (height, width, objects)) in enumerate(
        sorted(members.items()), start=1):
      write_jpeg(os.path.join(image_dir, folder, file_name), height, width)
      info["images"].append({"id": image_id, "file_name": file_name,
                             "height": height, "width": width})
      for category_id, crowd in objects:
        info["annotations"].append({
            "id": len(info["annotations"]) + 1, "image_id": image_id,
            "category_id": category_id, "bbox": [0, 0, width, height],
            "area": width * height, "iscrowd": int(crowd)})
    kind = "image_info" if split == "test" else "instances"
    with open(os.path.join(annotation_dir, "annotations",
                           f"{kind}_{folder}.json"), "w") as f:
      json.dump(info, f)
    paths.update({f"{split}_images": image_dir,
                  f"{split}_annotations": annotation_dir})
  return paths


def prepare(tfds_name, data_dir, extracted):
  """Runs the TFDS builder's own preparation on local `extracted` folders."""
  def download_and_extract(self, urls):
    del self  # Unused.
    return {key: extracted[key] for key in urls}

  with mock.patch.object(tfds.download.DownloadManager,
                         "download_and_extract", download_and_extract):
    tfds.builder(tfds_name, data_dir=data_dir).download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            compute_stats=tfds.download.ComputeStatsMode.SKIP))


def pairs_by_shape(data, split):
  """{image shape: sorted classes of its multi-hot label} of `split`."""
  out = {}
  for image, label in data.dataset(split).as_numpy_iterator():
    assert image.dtype == np.uint8 and label.dtype == np.float32
    assert set(np.unique(label)) <= {0.0, 1.0}, label
    out[image.shape] = np.flatnonzero(label).tolist()
  return out


class MultiHotTest(tf.test.TestCase):

  def test_duplicates_collapse_and_none_is_zeros(self):
    got = image_catalog.multi_hot(tf.constant([2, 0, 2]), 4, "voc/2007")
    self.assertEqual(got.dtype, tf.float32)
    self.assertAllEqual(got, [1., 0., 1., 0.])
    self.assertAllEqual(
        image_catalog.multi_hot(tf.zeros([0], tf.int64), 3, "voc/2007"), [0.] * 3)

  def test_label_outside_the_class_list_stops_the_pipeline(self):
    for name, num_classes, bad in (("coco2017", 80, [3, 80]),
                                   ("voc2007", 20, [-1])):
      tfds_name = NAMES[name]
      element = {"image": tf.zeros([4, 5, 3], tf.uint8),
                 "objects": {"label": tf.constant(bad, tf.int64)}}
      ds = tf.data.Dataset.from_tensors(element).map(
          image_catalog.tfds_pair(image_catalog.TFDS_SOURCES[name], num_classes))
      with self.assertRaisesRegex(
          tf.errors.InvalidArgumentError,
          f"{tfds_name}: object label outside the class list "
          rf"\(0..{num_classes - 1}\)"):
        list(ds.as_numpy_iterator())

  def test_single_label_sources_keep_int64_ids(self):
    to_pair = image_catalog.tfds_pair(image_catalog.TFDS_SOURCES["cifar10"], 10)
    image, label = to_pair({"image": tf.zeros([32, 32, 3], tf.uint8),
                            "label": tf.constant(3, tf.int64)})
    self.assertEqual((image.shape, label.dtype, int(label)),
                     ((32, 32, 3), tf.int64, 3))


class PreparedDataTest(tf.test.TestCase):
  """Real TFRecords written by TFDS's builders, read without any mock."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    source, cls.data_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    prepare("voc/2007", cls.data_dir, write_voc(os.path.join(source, "voc"), {
        "train": {"000001": (20, 30, ["dog", "dog", "person"]),
                  "000002": (25, 18, ["cat"])},
        "val": {"000003": (16, 16, ["bus", "train"])},
        "test": {"000004": (12, 40, ["aeroplane"]), "000005": (30, 31, [])},
    }))
    prepare("coco/2017", cls.data_dir, write_coco(
        os.path.join(source, "coco"), {
            "train": ("train2017", {
                "a.jpg": (20, 30, [(1, False), (1, False), (90, True)]),
                "b.jpg": (10, 10, []),
                "c.jpg": (15, 12, [(13, False)])}),
            "validation": ("val2017", {"d.jpg": (9, 14, [(2, False)]),
                                       "e.jpg": (11, 11, [])}),
            "test": ("test2017", {"f.jpg": (8, 8, [])}),
        }))

  def test_voc2007(self):
    self.assertEqual(catalog.TFDS_SPLITS["voc2007"], {
        "train": "train+validation", "validation": "test", "test": "test"})
    data = datasets.get("voc2007", self.data_dir)
    self.assertEqual(data.class_names, VOC_CLASSES)
    self.assertTrue(data.multi_label)
    # train = VOC's train + val; validation = test = VOC's test, whose image
    # without an object is dropped; duplicates collapse.
    self.assertEqual(pairs_by_shape(data, "train"), {
        (20, 30, 3): [11, 14], (25, 18, 3): [7], (16, 16, 3): [5, 18]})
    for split in ("validation", "test"):
      self.assertEqual(pairs_by_shape(data, split), {(12, 40, 3): [0]})
    # The train size counts TFDS's examples before the filter, the
    # evaluation sizes (and tf.data lengths) after it.
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 3, "validation": 1, "test": 1})
    self.assertEqual(
        {s: data.streams[s].exact_size for s in contract.SPLITS},
        {"train": False, "validation": True, "test": True})
    self.assertEqual(
        [int(data.dataset(s).cardinality()) for s in contract.SPLITS],
        [tf.data.UNKNOWN_CARDINALITY, 1, 1])

  def test_coco2017(self):
    self.assertEqual(catalog.TFDS_SPLITS["coco2017"], {
        "train": "train", "validation": "validation", "test": "validation"})
    data = datasets.get("coco2017", self.data_dir, image_size=64)
    # Names from the prepared ClassLabel feature, in the files' order.
    self.assertEqual(data.class_names, tuple(f"thing{i}" for i in COCO_IDS))
    self.assertEqual(data.instance_shape, (64, 64, 3))
    # Category 13 is the 12th (id 12 is unused); crowd regions count.
    self.assertEqual(pairs_by_shape(data, "train"), {
        (20, 30, 3): [0, 79], (15, 12, 3): [11]})
    for split in ("validation", "test"):
      self.assertEqual(pairs_by_shape(data, split), {(9, 14, 3): [1]})
    self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                     {"train": 3, "validation": 1, "test": 1})
    features, labels = next(iter(datasets.ranking_dataset(
        data, "train", 2, training=True)))
    self.assertEqual(features["image"].shape, (2, 64, 64, 3))
    self.assertEqual(labels.shape, (2, 80))


class MockDataTest(tf.test.TestCase):
  """TFDS's builders on `tfds.testing.mock_data` (random examples)."""

  def test_classes_and_labels_on_random_examples(self):
    for name, num_classes in (("coco2017", 80), ("voc2007", 20)):
      with tfds.testing.mock_data(num_examples=3):
        data = datasets.get(name, "/unused")
        builder = tfds.builder(NAMES[name], data_dir="/unused")
        raw = [ex["objects"]["label"] for ex in
               builder.as_dataset(split="test").as_numpy_iterator()]
        pairs = list(data.dataset("test").as_numpy_iterator())
        label_names = builder.info.features["objects"]["label"].names
      self.assertEqual(data.num_classes, num_classes)
      self.assertEqual(data.class_names, tuple(label_names))
      self.assertTrue(data.multi_label)
      self.assertEqual(data.split_names, contract.SPLITS)
      self.assertEqual({s: data.size(s) for s in contract.SPLITS},
                       dict.fromkeys(contract.SPLITS, 3))
      self.assertFalse(data.streams["train"].exact_size)
      self.assertTrue(data.streams["test"].exact_size)
      self.assertEqual(data.shuffle_buffer,
                       image_catalog.MULTI_LABEL_SHUFFLE_BUFFER)
      self.assertEqual(data.instance_shape, (224, 224, 3))
      self.assertLen(pairs, 3)
      for (image, label), objects in zip(pairs, raw):
        self.assertEqual((image.dtype, image.ndim, image.shape[-1]),
                         (np.uint8, 3, 3))
        self.assertEqual((label.dtype, label.shape),
                         (np.float32, (num_classes,)))
        want = np.zeros(num_classes, np.float32)
        want[objects] = 1.  # Duplicated objects count once.
        self.assertAllEqual(label, want)
    self.assertEqual(data.class_names, VOC_CLASSES)

  def test_ranking_batches(self):
    with tfds.testing.mock_data(num_examples=4):
      data = datasets.get("voc2007", "/unused", image_size=40)
      for training_, split in ((True, "train"), (False, "validation")):
        features, labels = next(iter(datasets.ranking_dataset(
            data, split, 3, training=training_)))
        self.assertEqual(features["image"].shape, (3, 40, 40, 3))
        self.assertEqual(features["image"].dtype, tf.float32)
        self.assertEqual((labels.shape, labels.dtype), ((3, 20), tf.float32))
        self.assertEqual(features[features_lib.CLASS_ID].shape, (3, 20, 1))
        self.assertAllEqual(features[features_lib.CLASS_ID][0, :, 0],
                            np.arange(20))
        self.assertAllGreaterEqual(tf.reduce_sum(labels, axis=1), 1.)

  def test_existing_datasets_keep_their_label_kind(self):
    self.assertFalse(datasets.get("digits").multi_label)
    self.assertTrue(datasets.get("goemotions_multilabel").multi_label)
    with tfds.testing.mock_data(num_examples=2):
      cifar = datasets.get("cifar10", "/unused")
    self.assertFalse(cifar.multi_label)
    self.assertTrue(cifar.streams["train"].exact_size)

  def test_missing_data_is_one_line_and_downloads_nothing(self):
    empty = tempfile.mkdtemp()
    for name, tfds_name in NAMES.items():
      with self.assertRaises(ValueError) as e:
        datasets.get(name, empty)
      message = str(e.exception)
      self.assertLen(message.splitlines(), 1)
      self.assertStartsWith(message, f"{name} is not prepared in {empty}")
      self.assertIn(f"`tfds build {tfds_name} --data_dir=DIR`", message)
      self.assertIn("`download`", message)
    self.assertEqual(os.listdir(empty), [])


class MultiLabelImagePreprocessingTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.image = np.random.RandomState(0).randint(
        0, 256, size=(37, 53, 3)).astype(np.uint8)

  def normalised_resize(self, image, size):
    resized = tf.image.resize(image, [size, size], method="bilinear")
    return (resized.numpy() - MEAN) / STD

  def test_eval_resizes_the_whole_image_then_normalises(self):
    pre = images.MultiLabelImagePreprocessing(24)
    self.assertEqual(pre.output_shape, (24, 24, 3))
    got = pre(tf.constant(self.image), training=False)
    self.assertEqual((got.shape, got.dtype), ((24, 24, 3), tf.float32))
    self.assertAllClose(got, self.normalised_resize(self.image, 24),
                        atol=1e-5)
    self.assertAllInRange(got, float(np.min(-MEAN / STD)),
                          float(np.max((255. - MEAN) / STD)))
    self.assertEqual(images.MultiLabelImagePreprocessing().size, 224)

  def test_training_only_flips(self):
    pre = images.MultiLabelImagePreprocessing(16)
    plain = self.normalised_resize(self.image, 16)
    flipped = self.normalised_resize(self.image[:, ::-1], 16)
    tf.random.set_seed(0)
    seen = set()
    for _ in range(20):
      got = pre(tf.constant(self.image), training=True).numpy()
      self.assertEqual(got.shape, (16, 16, 3))
      if np.allclose(got, plain, atol=1e-5):
        seen.add("plain")
      else:
        self.assertAllClose(got, flipped, atol=1e-5)
        seen.add("flipped")
      self.assertAllClose(pre(tf.constant(self.image), training=False),
                          plain, atol=1e-5)
    self.assertEqual(seen, {"plain", "flipped"})

  def test_serving_takes_raw_uint8_of_any_size(self):
    pre = images.MultiLabelImagePreprocessing(20)
    batch = np.random.RandomState(1).randint(
        0, 256, size=(3, 50, 37, 3)).astype(np.uint8)
    served = pre.serve(tf.constant(batch))
    for i in range(3):
      self.assertAllClose(served[i], pre(tf.constant(batch[i]), False))
    inputs = images.ImageInputs("image", pre)
    self.assertEqual(inputs.serving_spec().shape.as_list(),
                     [None, None, None, 3])
    self.assertEqual(inputs.serving_features(
        tf.zeros([1, 9, 70, 3], tf.uint8))["image"].shape, (1, 20, 20, 3))


def good(**kwargs):
  return config_lib.TrainConfig.create(**dict({"model_dir": "/tmp/unused"},
                                              **kwargs))


class ConfigTest(tf.test.TestCase):

  def test_image_size_and_download_for_the_new_datasets(self):
    checks.validate(good(dataset="voc2007", image_size=448, download=True))
    checks.validate(good(dataset="coco2017", encoder="resnet50", image_size=64))
    with self.assertRaisesRegex(
        ValueError, "`image_size`=64: only imagenet2012, coco2017, voc2007, "
        "image_folder, tfrecord and tfds:<name> images are resized"):
      checks.validate(good(dataset="cifar10", image_size=64))


class TrainingTest(tf.test.TestCase):

  def test_tiny_voc2007_run_exports_and_evaluates(self):
    model_dir = os.path.join(tempfile.mkdtemp(), "voc2007")
    config = config_lib.TrainConfig.create(
        dataset="voc2007", data_dir=tempfile.mkdtemp(), encoder="small_cnn",
        encoder_dim=8, image_size=32, loss="sigmoid_cross_entropy",
        metrics=("ndcg@5", "mrr"), best_metric="ndcg@5", train_steps=2,
        eval_every=2, batch_size=4, model_dir=model_dir)
    with tfds.testing.mock_data(num_examples=6):
      export = training.train(config)
      results = helpers.evaluate(model_dir, "test")
    self.assertTrue(tf.saved_model.contains_saved_model(export))
    self.assertEqual(exported_ranker.load_class_names(model_dir), list(VOC_CLASSES))
    self.assertEqual(results["num_examples"], 6)
    self.assertBetween(results["ndcg@5"], 0., 1.)
    serve = tf.saved_model.load(export).signatures["serving_default"]
    scores = serve(image=tf.zeros([1, 45, 31, 3], tf.uint8))["scores"]
    self.assertEqual(scores.shape, (1, 20))


if __name__ == "__main__":
  tf.test.main()
