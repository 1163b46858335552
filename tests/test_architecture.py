"""The package's layers: nothing imports upward (rank4class_tf/__init__.py).

Every `rank4class_tf` import of every module is read from its source (ast, so
imports inside functions count too) and checked against the layer table
below: a module may import its own folder and the layers beneath it, never a
layer above or a sibling at its own layer. A new module must be given a
layer here; a new folder, its line in the table.

No modules import each other in a circle either (STYLE.md): the module
graph of the same imports (`from package import module` counts as an edge
to the module) is searched for strongly connected components (Tarjan's
algorithm), and each one found is named with one of its cycles.
"""

import ast
import os
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "rank4class_tf")

# Unit (a top-level module, or a folder) -> layer; lower layers are imported.
LAYERS = {
    # The foundation: settings, names, files, identity (no TensorFlow in
    # config, catalog, compat).
    "compat": 0, "config": 0, "catalog": 0, "lookup": 0, "fileio": 0,
    "provenance": 0,
    "ops": 1, "distribute": 1, "run_dir": 1,
    "data": 2, "multilabel": 2, "sorting": 2,
    "ranking": 3,
    "modeling": 4,
    "checks": 5, "serving": 5,
    "training": 6,
    "study": 7,
}


def unit_of(module: str) -> str:
  """`rank4class_tf.data.text` -> `data`; `rank4class_tf.config` -> `config`."""
  return module.split(".")[1]


def modules():
  for folder, _, files in os.walk(ROOT):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(folder, name)
        relative = os.path.relpath(path, os.path.dirname(ROOT))[:-3]
        module = relative.replace(os.sep, ".")
        if module.endswith(".__init__"):
          module = module[:-len(".__init__")]
        yield module, path


def imports(path: str, module: str):
  with open(path) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and (
        node.module == "rank4class_tf" or
        node.module.startswith("rank4class_tf.")):
      if node.module == "rank4class_tf":
        for alias in node.names:
          if not alias.name.startswith("__"):  # __version__: the root's.
            yield f"rank4class_tf.{alias.name}"
      else:
        yield node.module
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.startswith("rank4class_tf."):
          yield alias.name


def module_graph():
  """{module: the rank4class_tf modules it imports (function-level imports
  too)}: `from a.b import c` is an edge to `a.b.c` when that is a module,
  else to `a.b`."""
  known = dict(modules())
  graph = {}
  for module, path in known.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    edges = set()
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and node.module and (
          node.module == "rank4class_tf" or
          node.module.startswith("rank4class_tf.")):
        for alias in node.names:
          target = f"{node.module}.{alias.name}"
          edges.add(target if target in known else node.module)
      elif isinstance(node, ast.Import):
        for alias in node.names:
          if alias.name.startswith("rank4class_tf."):
            edges.add(alias.name)
    edges.discard(module)
    graph[module] = sorted(e for e in edges if e in known)
  return graph


def components(graph):
  """The strongly connected components of more than one module (Tarjan's
  algorithm, iterative), each sorted."""
  index, low, on_stack, stack, out = {}, {}, set(), [], []
  counter = [0]
  for root in sorted(graph):
    if root in index:
      continue
    work = [(root, iter(graph[root]))]
    index[root] = low[root] = counter[0]
    counter[0] += 1
    stack.append(root)
    on_stack.add(root)
    while work:
      node, children = work[-1]
      child = next(children, None)
      if child is not None:
        if child not in index:
          index[child] = low[child] = counter[0]
          counter[0] += 1
          stack.append(child)
          on_stack.add(child)
          work.append((child, iter(graph[child])))
        elif child in on_stack:
          low[node] = min(low[node], index[child])
        continue
      work.pop()
      if work:
        low[work[-1][0]] = min(low[work[-1][0]], low[node])
      if low[node] == index[node]:
        component = []
        while True:
          member = stack.pop()
          on_stack.discard(member)
          component.append(member)
          if member == node:
            break
        if len(component) > 1:
          out.append(sorted(component))
  return sorted(out)


def a_cycle(graph, component):
  """One cycle through `component`'s first module: `a -> b -> a`."""
  members = set(component)
  start = component[0]
  paths = {start: [start]}
  queue = [start]
  while queue:
    node = queue.pop(0)
    for child in graph[node]:
      if child == start:
        return " -> ".join(paths[node] + [start])
      if child in members and child not in paths:
        paths[child] = paths[node] + [child]
        queue.append(child)
  return " -> ".join(component)


# Cycles another change is taking apart (modules this change may not edit):
# TODO(issue 62): remove each entry when its cycle is gone.
KNOWN_CYCLES = ()


class CyclesTest(unittest.TestCase):

  def test_components_found(self):
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e"]}
    self.assertEqual(components(graph), [["a", "b", "c"]])
    self.assertEqual(a_cycle(graph, ["a", "b", "c"]), "a -> b -> c -> a")

  def test_no_modules_import_each_other_in_a_circle(self):
    graph = module_graph()
    found = [f"{a_cycle(graph, c)} (in a circle: {', '.join(c)})"
             for c in components(graph)
             if tuple(c) not in KNOWN_CYCLES]
    self.assertEqual(found, [])


# A module keeps to one job at about its siblings' size (STYLE.md): the data
# layer's modules stay under this many lines (issue 62).
MODULE_LINES = 600


class SizeTest(unittest.TestCase):

  def test_modules_keep_to_their_size(self):
    # Every module of the library and every binary (issue 62).
    long = []
    paths = [path for _, path in modules()]
    binaries = os.path.join(os.path.dirname(ROOT), "pipelines")
    paths += [os.path.join(binaries, name) for name in os.listdir(binaries)
              if name.endswith(".py")]
    for path in paths:
      with open(path) as f:
        lines = len(f.read().splitlines())
      if lines > MODULE_LINES:
        long.append(f"{os.path.relpath(path, os.path.dirname(ROOT))}: "
                    f"{lines} lines")
    self.assertEqual(long, [])


class LayersTest(unittest.TestCase):

  def test_every_unit_has_a_layer(self):
    units = {unit_of(m) for m, _ in modules() if m != "rank4class_tf"}
    self.assertEqual(sorted(units - set(LAYERS)), [])
    self.assertEqual(sorted(set(LAYERS) - units), [])

  def test_nothing_imports_upward_or_sideways(self):
    wrong = []
    for module, path in modules():
      if module == "rank4class_tf":
        continue
      own = unit_of(module)
      for target in imports(path, module):
        other = unit_of(target)
        if other != own and not LAYERS[other] < LAYERS[own]:
          wrong.append(f"{module} imports {target} (layer {LAYERS[other]} "
                       f">= {LAYERS[own]})")
    self.assertEqual(wrong, [])

  def test_light_modules_load_no_tensorflow(self):
    # `import rank4class_tf.config` (and catalog) must stay cheap: the
    # package's __init__ imports compat only, and names TF-backed entry
    # points lazily.
    code = ("import sys, rank4class_tf.config, rank4class_tf.catalog; "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    self.assertEqual(out.strip(), "False")


if __name__ == "__main__":
  unittest.main()
