"""The package's shape, as docs/architecture.md describes it: checked from the source, not trusted.

- no import cycle between the package's modules (function-level and
  ``TYPE_CHECKING`` imports included: a cycle hidden in a function is still one);
- layers depend downward only: storage backends never import the dataset,
  Spark or Dagster layers; the dataset layer never imports Spark or Dagster;
- no module outside ``dataset/`` imports a private (``_``-prefixed) dataset module:
  the Spark, Dagster and CLI layers use public names (``dataset``, ``dataset.engine``);
- the other layers import only the allow-listed dataset modules (``DATASET_API``); the
  sub-packages of ``dataset/`` (``format``, ``expressions``, ``io``, ``commit``, ``ops``) are
  internal to the dataset layer as a whole, so their modules carry no ``_`` prefix;
- no module imports another layer's private module (``KNOWN_PRIVATE_IMPORTS`` lists the
  debts still to pay; it only shrinks);
- ``dataset/`` holds at most 12 entries at its top (its sub-packages map the architecture);
- no module name is used twice in the package (ignoring a leading ``_``);
- no module exceeds 700 lines;
- no function takes more than 5 positional parameters (``self``/``cls`` aside; ``*args`` and
  keyword-only parameters do not count): options past those are keyword-only
  (``KNOWN_POSITIONAL_DEBT`` lists the debts still to pay; it only shrinks);
- one module outside ``storage/`` makes conditional writes and deletes (``Store.write_if``,
  ``Store.delete_if``): ``dataset/commit/conditional.py``; every commit, tombstone, claim and Delta
  log put-if-absent, and a delete's removal of its tombstone, goes through it;
- no test-only (fault injection) names in the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "dagster_parquet_dataset"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(importer: str, node: ast.ImportFrom) -> list[str]:
    """The package modules an ``from X import a, b`` statement loads (X itself, or X.a when it is a module)."""
    if node.level:
        base = importer.split(".") if _is_package(importer) else importer.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *(node.module.split(".") if node.module else [])])
    else:
        target = node.module or ""
    if not (target == PACKAGE or target.startswith(PACKAGE + ".")):
        return []
    found = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        found.append(sub if sub in MODULES else target)
    return [m for m in found if m in MODULES]


def _imports(name: str) -> set[str]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.update(_resolve(name, node))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in MODULES)
    out.discard(name)
    return out


GRAPH = {name: _imports(name) for name in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_imports() -> None:
    # Guard against a checker that passes because it resolves nothing.
    assert f"{PACKAGE}.dataset.store" in GRAPH[f"{PACKAGE}.dataset"]
    assert f"{PACKAGE}.storage.base" in GRAPH[f"{PACKAGE}.dataset.store"]


def test_no_import_cycles() -> None:
    assert _cycles() == []


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("storage", ("dataset", "spark", "dagster_io", "cli")),
        ("dataset", ("spark", "dagster_io", "cli")),
    ],
)
def test_layers_depend_downward(layer: str, forbidden: tuple[str, ...]) -> None:
    prefix = f"{PACKAGE}.{layer}"
    bad = {
        (m, dep)
        for m, deps in GRAPH.items()
        if m == prefix or m.startswith(prefix + ".")
        for dep in deps
        if any(dep == f"{PACKAGE}.{f}" or dep.startswith(f"{PACKAGE}.{f}.") for f in forbidden)
    }
    assert sorted(bad) == []


def test_only_the_dataset_layer_imports_its_private_modules() -> None:
    inside = f"{PACKAGE}.dataset"
    bad = {
        (m, dep)
        for m, deps in GRAPH.items()
        if not (m == inside or m.startswith(inside + "."))
        for dep in deps
        if dep.startswith(inside + ".") and any(part.startswith("_") for part in dep[len(inside) + 1 :].split("."))
    }
    assert sorted(bad) == []


#: The dataset modules the Spark, Dagster and CLI layers (and the package root) may import.
DATASET_API = {f"{PACKAGE}.dataset", f"{PACKAGE}.dataset.engine", f"{PACKAGE}.dataset.manifest"}

#: The layers: top-level sub-packages of the package.
LAYERS = ("storage", "dataset", "spark", "dagster_io", "cli")

#: Imports of another layer's private module still to remove (importer, imported). Only shrinks.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def _layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_other_layers_import_only_the_dataset_api() -> None:
    inside = f"{PACKAGE}.dataset"
    bad = {
        (m, dep)
        for m, deps in GRAPH.items()
        if _layer(m) != "dataset"
        for dep in deps
        if _layer(dep) == "dataset" and dep not in DATASET_API
    }
    assert sorted(bad) == []
    assert DATASET_API <= set(MODULES), sorted(DATASET_API - set(MODULES))
    assert inside in DATASET_API


def test_no_module_imports_another_layers_private_module() -> None:
    found = {
        (m, dep)
        for m, deps in GRAPH.items()
        for dep in deps
        if _layer(dep) is not None
        and _layer(dep) != _layer(m)
        and any(part.startswith("_") for part in dep.split(".")[2:])
    }
    assert sorted(found - KNOWN_PRIVATE_IMPORTS) == []
    # A debt paid is struck off the list, so the list cannot hide a new one.
    assert sorted(KNOWN_PRIVATE_IMPORTS - found) == []


def test_dataset_top_level_stays_small() -> None:
    entries = sorted(p.name for p in (ROOT / "dataset").iterdir() if p.name != "__pycache__")
    assert len(entries) <= 12, entries


def test_no_module_name_used_twice() -> None:
    by_name: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            by_name.setdefault(path.stem.lstrip("_"), []).append(name)
    assert {stem: names for stem, names in by_name.items() if len(names) > 1} == {}


def test_module_sizes() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > 700} == {}


#: The one module outside ``storage/`` that may call ``Store.write_if`` and ``Store.delete_if``.
CONDITIONAL_WRITER = f"{PACKAGE}.dataset.commit.conditional"


@pytest.mark.parametrize("method", ["write_if", "delete_if"])
def test_one_module_outside_storage_makes_conditional_writes(method: str) -> None:
    callers = {
        name
        for name, path in MODULES.items()
        if not name.startswith(f"{PACKAGE}.storage")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == method
    }
    assert callers == {CONDITIONAL_WRITER}


def test_no_fault_injection_in_the_package() -> None:
    needles = ("FAIL_AFTER_PART", "InjectedTaskFailure", f"{PACKAGE}.testing", "test knob", "test-only")
    hits = [
        (name, needle)
        for name, path in MODULES.items()
        for needle in needles
        if needle.lower() in path.read_text(encoding="utf-8").lower()
    ]
    assert hits == []


#: Most positional parameters a function may take (``self``/``cls`` aside).
MAX_POSITIONAL = 5

#: Functions (module, qualified name) still taking more than ``MAX_POSITIONAL`` positional
#: parameters, in modules being rewritten elsewhere. Only shrinks.
KNOWN_POSITIONAL_DEBT: set[tuple[str, str]] = set()


def _positional_offenders(name: str) -> dict[str, int]:
    """Qualified name -> positional parameter count, for each function of a module over the limit."""
    return _positional_offenders_in(MODULES[name].read_text(encoding="utf-8"))


def _positional_offenders_in(source: str) -> dict[str, int]:
    """Qualified name -> positional parameter count, for each function of ``source`` over the limit."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualified = f"{prefix}{child.name}"
                params = [a.arg for a in (*child.args.posonlyargs, *child.args.args)]
                count = len([p for p in params if p not in ("self", "cls")])
                if count > MAX_POSITIONAL:
                    found[qualified] = count
                visit(child, qualified + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_the_positional_checker_counts() -> None:
    # Guard against a checker that passes because it counts nothing (every debt is paid, so no module of the
    # package can serve as the example any more).
    source = """
def six(a, b, c, d, e, f): ...
def five_and_keywords(a, b, c, d, e, *, f, g): ...
def positional_only(a, b, c, /, d, e, f): ...
class C:
    def method(self, a, b, c, d, e): ...
    def too_many(self, a, b, c, d, e, f):
        def inner(a, b, c, d, e, f, g): ...
"""
    assert _positional_offenders_in(source) == {
        "six": 6,
        "positional_only": 6,
        "C.too_many": 6,
        "C.too_many.inner": 7,
    }


def test_no_function_takes_more_than_five_positional_parameters() -> None:
    found = {(m, q): n for m in MODULES for q, n in _positional_offenders(m).items()}
    assert {k: n for k, n in found.items() if k not in KNOWN_POSITIONAL_DEBT} == {}
    # A debt paid is struck off the list, so the list cannot hide a new one.
    assert sorted(KNOWN_POSITIONAL_DEBT - set(found)) == []
