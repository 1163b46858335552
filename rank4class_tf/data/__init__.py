"""Data: what goes into a model, from files to batches of ranking features.

  datasets    the way in and out: `get` / `from_config` (a source by name)
              and `ranking_dataset` (a split as batches of ranking features)
  sources/    the registry of sources, one module per kind: digits, the
              shipped text sets, the TFDS image catalog, a user's text
              files, tables, image folders, TFRecords, any TFDS set
  contract    `ClassificationData` and `Stream`: what every source gives
  splits      stratified splits, a user's labelled splits, and the one hash
              rule that cuts a missing split from streamed data
  classes     class names and texts (names files, descriptions), held-out
              classes
  labels      how a user's labels become class ids
  user_files  a user's CSV / TSV / JSONL rows and folders, read and checked
  streaming   text files larger than memory, streamed by tf.data; the cache
              of every streamed format's counting pass
  records     a user's TFRecord files: their layout and the record checks
  record_streams  TFRecords as streams: the cut, the counting pass, reading
  image_files decoding a user's images, skipping what cannot be decoded
  images      image preprocessing and augmentation
  inputs      the instance inputs a model takes (Keras inputs, preprocessing)
  features    the ranking features: context (instance) and example (class)
  text        tokenization, length bucketing
  tfds_download  TFDS's download, failing fast offline, nothing left behind
  inspection  what `pipelines.inspect_data` reports about a dataset; the
              reading of each split in `inspect_splits`
  identity    a run's data record (data.json): what it trained on, checked
              whenever its data is read again
  file_hashes the SHA-256 of data files, cached per version of a file

No module imports another in a circle (tests/test_architecture.py).

May import the foundation modules (`config`, `catalog`, `lookup`, `fileio`,
`ops`) and `run_dir` (the record's place in a run folder); nothing from
`modeling`, `ranking`, `training`, `serving` or `study`.
"""
