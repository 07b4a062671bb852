"""Which ``synperf`` modules a file imports, found by reading its source (``ast``), never by importing it.

Stdlib only, so the Snakefile can use it at parse time: each rule's code inputs are the modules its script
imports, transitively (:func:`code_closure`), so editing the report reruns the report and not the training.
The tests use the same graph to forbid import cycles (:func:`find_cycles`) and the GPU-only package
``synperf.gpu`` in the CPU pipeline.

Every import counts, lazy ones inside functions too; importing a module also runs its packages'
``__init__.py``, so those are part of a closure.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = "synperf"
ROOT = Path(__file__).resolve().parent  # the package folder, for module name <-> file (not configuration)


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of module ``name`` (``synperf.a.b``: ``a/b.py`` or ``a/b/__init__.py``), None if none."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = root.joinpath(*parts[1:])
    for p in (base.with_suffix(".py") if parts[1:] else None, base / "__init__.py"):
        if p is not None and p.is_file():
            return p
    return None


def module_name(path: Path, root: Path = ROOT) -> str:
    """``synperf.a.b`` for ``<root>/a/b.py`` (or ``<root>/a/b/__init__.py``)."""
    rel = Path(path).resolve().relative_to(root).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@lru_cache(maxsize=None)
def imported_modules(path: Path, root: Path = ROOT) -> tuple[str, ...]:
    """The ``synperf`` modules ``path`` imports directly (as names of existing module files), sorted."""
    path = Path(path).resolve()
    tree = ast.parse(path.read_text(), str(path))
    try:
        current = module_name(path, root)
        is_pkg = path.name == "__init__.py"
    except ValueError:  # a file outside the package (a rule script)
        current, is_pkg = None, False
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                if current is None:
                    continue
                pkg = current.split(".") if is_pkg else current.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                mod = ".".join(pkg + ([mod] if mod else []))
            # ``from pkg import submodule`` depends on the submodule (and runs pkg's __init__: see the closure);
            # ``from pkg import name`` depends on pkg itself
            subs = [f"{mod}.{a.name}" for a in node.names]
            names = [n for n in subs if module_file(n, root) is not None]
            if len(names) < len(subs):
                names.append(mod)
        else:
            continue
        for n in names:
            if n.split(".")[0] != PACKAGE:
                continue
            # the longest prefix that is a module file (``from synperf.x import func`` names synperf.x)
            for cand in reversed(_with_parents(n)):
                if module_file(cand, root) is not None:
                    found.add(cand)
                    break
    found.discard(current)
    return tuple(sorted(found))


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every module of the package -> the package modules it imports directly (parents' ``__init__`` excluded)."""
    graph = {}
    for p in sorted(root.rglob("*.py")):
        graph[module_name(p, root)] = set(imported_modules(p, root))
    return graph


def module_closure(path: str | Path, root: Path = ROOT) -> list[str]:
    """Every ``synperf`` module that running ``path`` imports, transitively, with their packages' ``__init__``."""
    seen: set[str] = set()
    todo = [m for m in imported_modules(Path(path), root)]
    while todo:
        m = todo.pop()
        for name in _with_parents(m):
            if name in seen:
                continue
            seen.add(name)
            todo.extend(imported_modules(module_file(name, root), root))
    return sorted(seen)


def code_closure(path: str | Path, root: Path = ROOT) -> list[str]:
    """The files of :func:`module_closure` (sorted paths): a rule's code inputs."""
    return sorted(str(module_file(m, root)) for m in module_closure(path, root))


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (strongly connected components with more than one module, or a module
    importing itself), each as a sorted list of module names."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out
