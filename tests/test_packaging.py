"""Every third-party module the package imports is a declared dependency of the install that needs it.

A module missing from ``pyproject.toml`` passes every test in the dev venv (which has everything) and
fails for a user who installs the package with only the extras they use. The core (``dataset``,
``storage``, ``cli``) must import with the base dependencies alone; ``dagster_io`` and ``spark`` may
add their extras' packages.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dagster_parquet_dataset"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

#: Imports that the code guards (``try: import ... except ImportError``) or makes only for an extra's feature.
OPTIONAL = {"boto3": "s3", "botocore": "s3", "orjson": "fast"}


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def _third_party_imports(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.py") if folder.is_dir() else [folder]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "dagster_parquet_dataset"}


def _distributions(modules: set[str]) -> dict[str, set[str]]:
    mapping = packages_distributions()
    return {m: {d.lower().replace("_", "-") for d in mapping.get(m, [m])} for m in modules}


BASE = _requirement_names(PYPROJECT["dependencies"])
EXTRAS = {name: _requirement_names(reqs) for name, reqs in PYPROJECT["optional-dependencies"].items()}


@pytest.mark.parametrize(
    ("where", "extras"),
    [
        ("dataset", ()),
        ("storage", ()),
        ("cli", ()),
        ("errors.py", ()),
        ("dagster_io", ("dagster", "polars", "spark")),
        ("spark", ("spark", "dagster")),
    ],
)
def test_imports_are_declared(where: str, extras: tuple[str, ...]) -> None:
    allowed = set(BASE)
    for extra in extras:
        allowed |= EXTRAS[extra]
    undeclared = {
        module: dists
        for module, dists in _distributions(_third_party_imports(PACKAGE / where)).items()
        if module not in OPTIONAL and not dists & allowed
    }
    assert undeclared == {}, f"{where} imports packages that its install does not declare: {undeclared}"
