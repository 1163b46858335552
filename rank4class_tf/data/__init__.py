"""Data: what goes into a model, from files to batches of ranking features.

  datasets    the loaders of the named data sets (digits, GoEmotions, MIND,
              CIFAR-10, ImageNet, COCO, VOC, ...) and the tf.data pipelines
              that turn them into (instance features, class list, labels)
  inputs      the instance inputs a model takes (Keras inputs, preprocessing)
  features    the ranking features: context (instance) and example (class)
  text        tokenization, length bucketing
  classes     class texts (names, description files) and held-out classes
  images      image decoding and augmentation
  user_files  a user's CSV / TSV / JSONL rows, read and checked
  image_files  a user's text files, image folders and tables as datasets
  records   a user's TFRecords and any TFDS data set; `load` for all
  streaming text files larger than memory, streamed by tf.data
  tfds_download  TFDS's download, failing fast offline, nothing left behind
  inspection  what `pipelines.inspect_data` reports about a dataset
  identity    a run's data record (data.json): what it trained on, checked
              whenever its data is read again
  file_hashes the SHA-256 of data files, cached per version of a file

May import the foundation modules (`config`, `catalog`, `lookup`, `fileio`,
`ops`) and `run_dir` (the record's place in a run folder); nothing from
`modeling`, `ranking`, `training`, `serving` or `study`.
"""
