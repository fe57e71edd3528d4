"""The package's shape, as docs/architecture.md describes it: checked from the source, not trusted.

- no import cycle between the package's modules (function-level and
  ``TYPE_CHECKING`` imports included: a cycle hidden in a function is still one);
- layers depend downward only: storage backends never import the dataset,
  Spark or Dagster layers; the dataset layer never imports Spark or Dagster;
- no module outside ``dataset/`` imports a private (``_``-prefixed) dataset module:
  the Spark, Dagster and CLI layers use public names (``dataset``, ``dataset.engine``);
- ``dataset/store.py`` stays a thin facade (<= 450 lines), no module exceeds 700 lines;
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


def test_module_sizes() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    assert sizes[f"{PACKAGE}.dataset.store"] <= 450
    assert {name: n for name, n in sizes.items() if n > 700} == {}


def test_no_fault_injection_in_the_package() -> None:
    needles = ("FAIL_AFTER_PART", "InjectedTaskFailure", f"{PACKAGE}.testing", "test knob", "test-only")
    hits = [
        (name, needle)
        for name, path in MODULES.items()
        for needle in needles
        if needle.lower() in path.read_text(encoding="utf-8").lower()
    ]
    assert hits == []


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_module_imports_another_layers_private_module() -> None:
    """Across layers only public modules are imported (e.g. the Spark layer never reaches into
    ``dagster_io._backfill``; the Spark type handler lives in the Dagster layer)."""
    bad = {
        (m, dep)
        for m, deps in GRAPH.items()
        for dep in deps
        if _layer(dep) != _layer(m) and any(part.startswith("_") for part in dep.split(".")[1:])
    }
    assert sorted(bad) == []
