"""The documentation runs as written: every Python block of README.md and docs/*.md.

Each file's blocks run in file order in one namespace, as a reader pasting
them into one session would, in a fresh temporary working directory (so the
``LocalStore("data")`` of the examples is a temporary store). A block whose
first line is a ``# doc-test:`` mark is treated specially, and such marks are
kept rare:

* ``# doc-test: spark`` -- the block gets the test session's ``spark``
  (a ``SparkSession``) in its namespace, as a reader's own session would be.
* ``# doc-test: skip (why)`` -- the block is not run; the reason is required.

The relative links between the pages are checked too (file and heading).
"""

from __future__ import annotations

import os
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_DIR = Path(__file__).resolve().parent.parent
DOC_FILES = [REPO_DIR / "README.md", *sorted((REPO_DIR / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_MARK = re.compile(r"^#\s*doc-test:\s*(?P<kind>\w+)\s*(?P<rest>.*)$")
_LINK = re.compile(r"\[[^\]]+\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """One fenced Python block: where it starts (1-based line of its first code line), its code, its mark."""

    path: Path
    line: int
    source: str
    mark: str | None
    reason: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_DIR)}:{self.line}"


def python_blocks(path: Path) -> list[Block]:
    """The ``python`` fenced blocks of a Markdown file, in order.

    Raises:
        ValueError: a ``# doc-test:`` mark is not ``spark`` or ``skip (reason)``.
    """
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        if match.group(1) != "python":
            continue
        source = match.group(2)
        line = text.count("\n", 0, match.start(2)) + 1
        first = source.lstrip("\n").splitlines()[0] if source.strip() else ""
        mark = _MARK.match(first.strip())
        kind, reason = (mark.group("kind"), mark.group("rest").strip()) if mark else (None, "")
        if kind not in (None, "spark", "skip"):
            raise ValueError(f"{path.name}:{line}: unknown doc-test mark {kind!r} (use 'spark' or 'skip (why)')")
        if kind == "skip" and not re.fullmatch(r"\(.+\)", reason):
            raise ValueError(f"{path.name}:{line}: '# doc-test: skip' needs a reason in parentheses")
        blocks.append(Block(path, line, source, kind, reason))
    return blocks


def _run_blocks(blocks: list[Block], namespace: dict[str, Any], request: pytest.FixtureRequest) -> None:
    for block in blocks:
        if block.mark == "skip":
            continue
        if block.mark == "spark":
            namespace["spark"] = request.getfixturevalue("spark")
        # dont_inherit: the block must not inherit this module's `from __future__ import annotations`.
        code = compile(block.source, block.where, "exec", dont_inherit=True)
        failure = None
        try:
            exec(code, namespace)
        except Exception as exc:
            # Drop this function's own frame: the traceback starts in the block.
            failure = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
        if failure is not None:
            pytest.fail(f"the Python block at {block.where} fails as written:\n{failure}", pytrace=False)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(REPO_DIR)))
def test_python_blocks_run_as_written(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    blocks = python_blocks(path)
    monkeypatch.chdir(tmp_path)
    # A reader's shell has no Dagster instance configured: runs use an ephemeral one.
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    _run_blocks(blocks, {"__name__": f"doc_{path.stem}"}, request)


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(REPO_DIR)))
def test_relative_links_resolve(path: Path) -> None:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    broken = []
    for match in _LINK.finditer(text):
        target = match.group("target")
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no file {os.path.relpath(linked, REPO_DIR)})")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {linked.name})")
    assert not broken, f"{path.name} has broken links: {broken}"


def test_readme_starts_with_the_two_commands() -> None:
    """Project rule: a title, at most a short description, then exactly ``make run`` and ``make test``."""
    text = (REPO_DIR / "README.md").read_text(encoding="utf-8")
    first_fence = _FENCE.search(text)
    assert first_fence is not None
    before = text[: first_fence.start()].strip().splitlines()
    assert before[0].startswith("# "), "the README opens with its title"
    description = " ".join(line for line in before[1:] if line.strip())
    assert "```" not in description and len(re.findall(r"[.!?](\s|$)", description)) <= 2, description
    commands = [line.split("#")[0].strip() for line in first_fence.group(2).splitlines() if line.strip()]
    assert commands == ["make run", "make test"], commands
