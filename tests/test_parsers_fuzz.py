"""Property-based tests: the data parsers on random bytes.

Whatever the bytes, a parser returns parsed rows or raises ValueError whose
message starts with the file's path; nothing else escapes.
"""

import os
import tempfile

import hypothesis
from hypothesis import strategies as st
import tensorflow as tf

from rank4class_tf.data import datasets
from rank4class_tf.data import user_files
from rank4class_tf.data.sources import shipped_text

SETTINGS = hypothesis.settings(max_examples=150, deadline=None,
                               derandomize=True)
# Bytes biased towards the parsers' structure: tabs, newlines, commas, digits.
STRUCTURED = st.lists(
    st.one_of(st.sampled_from([b"\t", b"\n", b",", b"0", b"27", b"-1", b"x",
                               b"\r\n", b'"', b"\xff", b"\xc3\xa9"]),
              st.binary(max_size=8)),
    max_size=40).map(b"".join)


def write_bytes(content: bytes) -> str:
  fd, path = tempfile.mkstemp(suffix=".tsv")
  with os.fdopen(fd, "wb") as f:
    f.write(content)
  return path


class ParserFuzzTest(tf.test.TestCase):

  @SETTINGS
  @hypothesis.given(st.one_of(st.binary(max_size=200), STRUCTURED))
  def test_goemotions_parser(self, content):
    # GoEmotions is read by the text-file reader with fixed options.
    path = write_bytes(content)
    options = shipped_text.goemotions_options(os.path.dirname(path))
    try:
      rows = user_files.read_rows(path, options)
    except ValueError as e:
      self.assertTrue(str(e).startswith(path), str(e))
    else:
      self.assertEqual(len(rows.texts), len(rows.labels))
      for names in rows.labels:
        self.assertIsInstance(names, tuple)
        self.assertTrue(names and all(n.strip() for n in names))
    finally:
      os.remove(path)

  @SETTINGS
  @hypothesis.given(st.one_of(st.binary(max_size=200), STRUCTURED))
  def test_mind_parser(self, content):
    path = write_bytes(content)
    try:
      instances, categories = shipped_text.read_mind_news(path)
    except ValueError as e:
      self.assertTrue(str(e).startswith(path), str(e))
    else:
      self.assertEqual(len(instances), len(categories))
      self.assertTrue(all(c.strip() for c in categories))
    finally:
      os.remove(path)


if __name__ == "__main__":
  tf.test.main()
