"""Lines of a binary stream in batches, for binaries that read stdin, and
class names printed one line each.

No flags here, so tests (and other binaries) import it freely.
"""

import re

from rank4class_tf.data import user_files

_LINE_END = re.compile(rb"\r\n|\r|\n")


def lines(stream, chunk_size: int = 1 << 16):
  """The lines of a binary stream, without their ends: `\n`, `\r\n` and a
  lone `\r` (old Mac files) all end a line. Read as data arrives (`read1`),
  so a pipe's lines are ranked before the next ones are written."""
  read = getattr(stream, "read1", stream.read)
  pending = b""
  while True:
    data = read(chunk_size)
    if not data:
      break
    data = pending + data
    # A final \r may be the first half of \r\n: kept for the next chunk.
    tail = b"\r" if data.endswith(b"\r") else b""
    parts = _LINE_END.split(data[:len(data) - len(tail)])
    pending = parts.pop() + tail
    yield from parts
  if pending:
    yield pending[:-1] if pending.endswith(b"\r") else pending


def batches(stream, size):
  """(number of the first line, [up to `size` lines]) of a binary stream,
  read lazily so that memory stays one batch whatever the input's size."""
  batch, first = [], 1
  for number, line in enumerate(lines(stream), start=1):
    batch.append(line)
    if len(batch) == size:
      yield first, batch
      batch, first = [], number + 1
  if batch:
    yield first, batch


def one_line(name):
  """`name` with its control characters escaped (a tab as `\\t`), so that a
  class prints as one line of `name<TAB>score` whatever its name: a run
  refuses such names (`user_files.class_name_problem`), an export made
  before it did may hold them.

  >>> one_line("joy"), one_line("a\\tb\\nc")
  ('joy', 'a\\\\tb\\\\nc')
  """
  if user_files.class_name_problem(name) is None:
    return name
  return "".join(
      char.encode("unicode_escape").decode("ascii")
      if user_files.class_name_problem(char) else char for char in name)
