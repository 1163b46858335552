"""The documentation stays true: its commands parse and its examples run.

* Every command in README.md, docs/*.md, rank4class_tf/sorting/README.md,
  data/README.md and the binaries' own module docstrings that runs a binary
  (`python -m pipelines.X ...`, `python -m benchmarks.X ...` or an installed
  console command, `rank4class-x-y ...` for pipelines.x_y, in a fenced
  block or an inline code span, `\\` continuations joined, comment lines
  skipped) names a module that exists and only flags that binary defines:
  `--name=value`, `--name value`, a bare `--name` or `--noname` only for a
  boolean. The binaries' flags come from one subprocess that imports
  TensorFlow once and forks a child per binary to import it and list absl's
  flags (two absl binaries in one process would collide on their flags).
* Every `make X` the documents show is a Makefile target, every test file a
  `pytest` command names exists, and every relative link (and its `#anchor`)
  resolves.
* The `>>>` examples in every module under rank4class_tf/ run as doctests,
  one test per module.
* The README stays at most 250 lines: what the package is, set-up, the
  commands, the headline results and the layout by folder; the details live
  in docs/*.md, linked from it.
"""

import ast
import doctest
import glob
import importlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = sorted(
    [os.path.join(REPO, "README.md"),
     os.path.join(REPO, "rank4class_tf", "sorting", "README.md"),
     os.path.join(REPO, "data", "README.md")]
    + glob.glob(os.path.join(REPO, "docs", "*.md")))
BINARY_SOURCES = sorted(glob.glob(os.path.join(REPO, "pipelines", "*.py"))
                        + glob.glob(os.path.join(REPO, "benchmarks", "*.py")))


def _rel(path):
  return os.path.relpath(path, REPO)


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


# Commands: fenced shell blocks and inline `code` spans.

_FENCE = re.compile(r"^ *```[^\n]*\n(.*?)^ *```", re.M | re.S)
_INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
_PYTHON = re.compile(r"(^|/)python(3(\.\d+)?)?$")


def _logical_lines(block):
  """Yields (line index, command): `\\` continuations and newlines inside
  quotes joined, comment lines dropped."""
  current, first = "", 0
  for index, line in enumerate(block.splitlines()):
    if not current and line.lstrip().startswith("#"):
      continue
    if not current:
      first = index
    current = f"{current}\n{line}" if current else line
    if current.endswith("\\"):
      current = current[:-1]
      continue
    try:
      shlex.split(current, comments=True)
    except ValueError:  # an open quote: the command goes on
      continue
    yield first, current
    current = ""
  if current:
    yield first, current


def _binary_calls(text):
  """Yields (line offset, module, args) for each `python -m <binary>` in text."""
  candidates = []
  for match in _FENCE.finditer(text):
    start = text.count("\n", 0, match.start(1))
    for index, line in _logical_lines(match.group(1)):
      candidates.append((start + index, line))
  for match in _INLINE.finditer(_FENCE.sub(lambda m: "\n" * m.group(0).count(
      "\n"), text)):
    candidates.append((text.count("\n", 0, match.start()),
                       match.group(1).replace("\n", " ")))
  for offset, line in candidates:
    if " -m " not in line and "rank4class-" not in line:
      continue
    try:
      tokens = shlex.split(line, comments=True)
    except ValueError:
      continue
    for i, token in enumerate(tokens):
      command = re.fullmatch(r"rank4class-([a-z][a-z-]*)", token)
      if command and (i == 0 or tokens[i - 1] in (";", "&&", "||")):
        # An installed console command: `rank4class-train ...`.
        module, first = "pipelines." + command.group(1).replace("-", "_"), i + 1
      elif (i + 2 < len(tokens) and (token == "$PY" or _PYTHON.search(token))
            and tokens[i + 1] == "-m"
            and re.fullmatch(r"(pipelines|benchmarks)\.\w+", tokens[i + 2])):
        module, first = tokens[i + 2], i + 3
      else:
        continue
      # Arguments up to a shell operator (`|`, `;`, `&&`, `>`).
      args = []
      for arg in tokens[first:]:
        if arg in ("|", ";", "&&", "||", ">", "<") or arg.startswith(">"):
          break
        args.append(arg)
      yield offset, module, args


def _commands():
  """Every binary command in the documents, as pytest params."""
  params = []
  for path in DOCS:
    if not os.path.exists(path):
      continue
    text = _read(path)
    for offset, module, args in _binary_calls(text):
      params.append(pytest.param(module, args,
                                 id=f"{_rel(path)}:{offset + 1}:{module}"))
  for path in BINARY_SOURCES:
    doc = _module_docstring(path)
    for offset, module, args in _binary_calls(_as_block(doc)):
      params.append(pytest.param(module, args,
                                 id=f"{_rel(path)}:doc:{offset + 1}:{module}"))
  return params


def _module_docstring(path):
  source = _read(path)
  try:
    return ast.get_docstring(ast.parse(source)) or ""
  except SyntaxError:  # mid-edit: its own test fails when --helpfull runs
    match = re.match(r'\s*[rR]?"""(.*?)"""', source, re.S)
    return match.group(1) if match else ""


def _as_block(doc):
  """A docstring's indented command lines as one fenced block."""
  lines = [line for line in doc.splitlines() if line.startswith("  ")]
  return "```\n" + "\n".join(lines) + "\n```\n"


# Flags of each binary. One subprocess imports TensorFlow once, then forks a
# child per binary that imports it and lists the flags absl then holds: the
# flags `--helpfull` would show, without paying TensorFlow's import per
# binary (two binaries in one process would collide on absl flags).
_LIST_FLAGS = textwrap.dedent("""
    import importlib, json, os, sys
    import tensorflow  # Imported once; every child inherits it.
    from absl import app, flags
    app.define_help_flags()  # --help, --helpshort, ...: absl's, run() adds them.
    out = {}
    for module in sys.argv[1:]:
      read, write = os.pipe()
      pid = os.fork()
      if pid == 0:
        os.close(read)
        try:
          importlib.import_module(module)
          names = sorted(flags.FLAGS)
          result = {"flags": names, "booleans": [
              n for n in names
              if isinstance(flags.FLAGS[n], flags.BooleanFlag)]}
        except BaseException as e:  # pylint: disable=broad-except
          result = {"error": f"{module}: {type(e).__name__}: {e}"}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
      os.close(write)
      data = b""
      while True:
        chunk = os.read(read, 1 << 16)
        if not chunk:
          break
        data += chunk
      os.close(read)
      os.waitpid(pid, 0)
      out[module] = json.loads(data)
    print(json.dumps(out))
""")


def _list_flags(modules):
  """{module: (flags, boolean flags) or an AssertionError}."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([sys.executable, "-c", _LIST_FLAGS, *modules],
                        cwd=REPO, capture_output=True, text=True, env=env,
                        timeout=600)
  if proc.returncode != 0:
    raise AssertionError(f"listing the binaries' flags failed:\n"
                         f"{proc.stderr[-3000:]}")
  listed = json.loads(proc.stdout.strip().splitlines()[-1])
  result = {}
  for module, entry in listed.items():
    if "error" in entry:
      result[module] = AssertionError(entry["error"])
    else:
      result[module] = (set(entry["flags"]), set(entry["booleans"]))
  return result


COMMANDS = _commands()


@pytest.fixture(scope="module")
def binary_flags(request):
  """{module: (flags, boolean flags)} for every binary the selected tests run."""
  modules = sorted({
      item.callspec.params["module"] for item in request.session.items
      if getattr(item, "function", None) is test_command_parses
      and os.path.exists(_module_path(item.callspec.params["module"]))})
  # A binary that does not import fails only its own commands.
  return _list_flags(modules)


def _module_path(module):
  return os.path.join(REPO, *module.split(".")) + ".py"


README_MAX_LINES = 250


def test_readme_is_short():
  lines = len(_read(os.path.join(REPO, "README.md")).splitlines())
  assert lines <= README_MAX_LINES, (
      f"README.md has {lines} lines, more than {README_MAX_LINES}: move "
      "details into docs/*.md and link them")


def test_documents_exist_and_show_commands():
  assert os.path.exists(os.path.join(REPO, "README.md"))
  modules = {p.values[0] for p in COMMANDS}
  assert {"pipelines.train", "pipelines.evaluate", "pipelines.predict"} <= modules


@pytest.mark.parametrize("module,args", COMMANDS)
def test_command_parses(module, args, binary_flags):
  assert os.path.exists(_module_path(module)), f"no {_rel(_module_path(module))}"
  if isinstance(binary_flags[module], Exception):
    raise binary_flags[module]
  flags, booleans = binary_flags[module]
  for i, arg in enumerate(args):
    if not arg.startswith("--") or arg == "--":
      continue
    name, has_value, _ = arg[2:].partition("=")
    if name in flags:
      if not has_value and name not in booleans:
        nxt = args[i + 1] if i + 1 < len(args) else None
        assert nxt is not None and not nxt.startswith("--"), (
            f"{module}: --{name} needs a value")
    else:
      assert name.startswith("no") and name[2:] in booleans and not has_value, (
          f"{module} defines no flag {arg}")


# Other commands and links.

def _all_code_lines():
  for path in DOCS:
    if os.path.exists(path):
      text = _read(path)
      for match in _FENCE.finditer(text):
        for _, line in _logical_lines(match.group(1)):
          yield path, line
      for match in _INLINE.finditer(text):
        yield path, match.group(1).replace("\n", " ")


def test_make_targets_exist():
  targets = set(re.findall(r"^([A-Za-z_-]+):", _read(os.path.join(REPO, "Makefile")),
                           re.M))
  for path, line in _all_code_lines():
    for target in re.findall(r"(?:^|[;&|]\s*)make ([a-z_-]+)", line):
      assert target in targets, f"{_rel(path)}: no make target {target!r}"


def test_pytest_paths_exist():
  for path, line in _all_code_lines():
    if "pytest" not in line:
      continue
    try:
      args = shlex.split(line, comments=True)
    except ValueError:
      continue
    for arg in args:
      if arg.startswith("tests/"):
        assert glob.glob(os.path.join(REPO, arg)), f"{_rel(path)}: no {arg}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path):
  """GitHub's heading anchors of a Markdown file."""
  anchors, seen = set(), {}
  for heading in re.findall(r"^#+ (.+)$", _FENCE.sub("", _read(path)), re.M):
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    anchors.add(f"{slug}-{count}" if count else slug)
  return anchors


def test_relative_links_resolve():
  for path in DOCS:
    if not os.path.exists(path):
      continue
    text = _FENCE.sub("", _read(path))
    for target in _LINK.findall(text):
      if re.match(r"[a-z]+:", target):
        continue
      file_part, _, anchor = target.partition("#")
      resolved = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                  if file_part else path)
      assert os.path.exists(resolved), f"{_rel(path)}: broken link {target}"
      if anchor and resolved.endswith(".md"):
        assert anchor in _anchors(resolved), (
            f"{_rel(path)}: no heading #{anchor} in {_rel(resolved)}")


# Doctests.

def _library_modules():
  names = []
  root = os.path.join(REPO, "rank4class_tf")
  for dirpath, _, files in os.walk(root):
    if not os.path.exists(os.path.join(dirpath, "__init__.py")):
      continue
    package = os.path.relpath(dirpath, REPO).replace(os.sep, ".")
    for name in sorted(files):
      if name.endswith(".py"):
        names.append(package if name == "__init__.py"
                     else f"{package}.{name[:-3]}")
  return sorted(names)


@pytest.mark.parametrize("name", _library_modules())
def test_docstring_examples(name):
  module = importlib.import_module(name)
  # The examples print numpy scalars as numpy 1 does (`0.5`); numpy 2 (the
  # current stack) writes `np.float32(0.5)` unless asked not to.
  legacy = {"legacy": "1.25"} if int(np.__version__.split(".")[0]) >= 2 else {}
  runner = doctest.DocTestRunner(
      optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
  out = io.StringIO()
  with np.printoptions(**legacy):
    for test in doctest.DocTestFinder().find(module, name):
      runner.run(test, out=out.write)
  assert not runner.failures, (
      f"{runner.failures} of {runner.tries} examples failed:\n{out.getvalue()}")
