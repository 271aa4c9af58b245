"""The package's layering, checked from the source with ``ast`` (nothing is imported).

Imports run one way (DESIGN.md, docs/decisions.md 16)::

    errors/io/registry/resources/version -> space -> images -> supernet -> runtimes -> devices -> latency -> data
        -> nag/search -> export -> app -> cli (and the package's __init__, the Python API)

A module may import modules of its own layer or of a lower one, never of a higher one, not
even inside a function; and no two modules may import each other, directly or through others.
Every import counts: module level, inside functions, under ``if TYPE_CHECKING`` and
``importlib.import_module("nagkit....")`` with a literal name.

Size: no module over 500 lines, no function over 80 lines (from its ``def`` line; the decorators,
e.g. a click command's option declarations, do not count).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nagkit"

# Lowest first. The key is the first component below ``nagkit`` (a subpackage or a top module).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "io", "progress", "registry", "resources", "version"),
    ("space",),
    ("images",),
    ("supernet",),
    ("runtimes",),
    ("devices",),
    ("latency",),
    ("data",),
    ("nag", "search"),
    ("export",),
    ("app",),
    ("cli", "__main__", "__init__", "api"),  # nagkit/__init__.py, api.py: the Python API (lazy imports)
)
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module (or package) that ``name`` lives in, or None when it is not nagkit's."""
    mods = _modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The nagkit modules one import node names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            src = f"{base}.{node.module}" if node.module else base
        else:
            src = node.module or ""
        # `from pkg import sub` depends on pkg.sub when that is a module, else on pkg itself
        return [f"{src}.{a.name}" if f"{src}.{a.name}" in _modules() else src for a in node.names]
    if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
        return [node.args[0].value]
    return []


@lru_cache(maxsize=1)
def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported nagkit module: first line}, function-local imports included."""
    graph: dict[str, dict[str, int]] = {}
    for mod, path in _modules().items():
        out = graph.setdefault(mod, {})
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for name in _imported(node, mod, path.name == "__init__.py"):
                if not name.startswith("nagkit"):
                    continue
                target = _resolve(name)
                if target and target != mod and target not in out:
                    out[target] = node.lineno
    return graph


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")


# --------------------------------------------------------------------------------------------


def test_every_package_has_a_layer():
    unknown = sorted({layer_of(m) for m in _modules()} - set(RANK))
    assert not unknown, f"modules outside the layer table: {unknown}; add them to LAYERS (and DESIGN.md)"


def test_no_import_cycles():
    found = cycles(import_graph())
    graph = import_graph()
    detail = ["  " + " <-> ".join(c) + ": " + "; ".join(
        f"{a} -> {b} (line {graph[a][b]})" for a in c for b in c if b in graph[a]) for c in found]
    assert not found, "import cycles:\n" + "\n".join(detail)


def test_imports_follow_the_layer_order():
    bad = []
    for mod, targets in sorted(import_graph().items()):
        for target, line in sorted(targets.items()):
            if RANK[layer_of(mod)] < RANK[layer_of(target)]:
                bad.append(f"  {mod} (line {line}) imports {target}: {layer_of(mod)} sits below {layer_of(target)}")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_module_and_function_sizes():
    big_modules, big_functions = [], []
    for path in _modules().values():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n > MAX_MODULE_LINES:
            big_modules.append(f"  {rel}: {n} lines")
        for name, node in _functions(ast.parse(text)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                big_functions.append(f"  {rel}:{node.lineno} {name}: {length} lines")
    assert not big_modules and not big_functions, (
        f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(big_modules)
        + f"\nfunctions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(big_functions))


# -- the checker itself catches what it must ---------------------------------------------------


def test_checker_sees_function_local_and_importlib_imports():
    code = ("def f():\n    from nagkit.app.build import build\n"
            "def g():\n    import importlib\n    importlib.import_module('nagkit.cli.main')\n")
    tree = ast.parse(code)
    names = [n for node in ast.walk(tree) for n in _imported(node, "nagkit.space.x", False)]
    assert "nagkit.app.build" in names and "nagkit.cli.main" in names


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}, [["a", "b", "c"]]),
    ({"a": {"b": 1}, "b": {}, "c": {"b": 1}}, []),
    ({"a": {"b": 1}, "b": {"a": 1}, "c": {"d": 1}, "d": {"c": 1}}, [["a", "b"], ["c", "d"]]),
])
def test_cycle_finder(graph, expected):
    assert sorted(cycles(graph)) == expected


def test_readme_layout_table_matches_the_folders():
    """README.md's layout table names every subpackage of nagkit and every top-level folder."""
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Layout"):text.index("## Where it stands")]
    named = set(re.findall(r"^\| `([^`]+)`", table, flags=re.M))
    packages = {f"nagkit/{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {f"{p.name}/" for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")
               and p.name not in ("nagkit", "out", "build", "dist") and not p.name.endswith(".egg-info")}
    assert packages <= named, sorted(packages - named)
    assert folders - {"nagkit/"} <= named | {"docs/"}, sorted(folders - named)
    listed_packages = {n for n in named if n.startswith("nagkit/") and n.endswith("/")}
    assert listed_packages <= packages, sorted(listed_packages - packages)
    for p in ("errors", "io", "registry"):
        assert (PACKAGE / f"{p}.py").is_file() and f"{p}.py`" in table
