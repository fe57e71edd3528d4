"""The canonical JSON text of a root manifest, and the fast check of its part paths (large manifests).

``DatasetManifest.to_json`` is byte for byte ``json.dumps(..., sort_keys=True, indent=2,
ensure_ascii=False)``; a long ``parts`` list is rendered by orjson (when installed), which the
pure-Python encoder that ``indent`` selects would take about 0.3 s per million parts to write.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Iterable
from typing import Any

try:  # the ``fast`` extra
    import orjson

    fast_dumps: Callable[..., bytes] | None = orjson.dumps
    _INDENT_2 = orjson.OPT_INDENT_2
    _SORTED_INDENT_2 = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
except ImportError:  # pragma: no cover - depends on install
    fast_dumps = None
    _INDENT_2 = _SORTED_INDENT_2 = 0


def _may_differ(rendered: bytes) -> bool:
    """Whether orjson's text may differ from ``json.dumps``'s: it holds an escape (``\\``; orjson writes
    some escapes differently) or a float below 1e-4 (orjson writes ``0.00001`` and ``1.5e-7``, ``json``
    ``1e-05`` and ``1.5e-07``). A match in a string value only sends the document to ``json.dumps``."""
    if b"\\" in rendered or b"0.0000" in rendered:
        return True
    at = rendered.find(b"e-")
    while at > 0:
        if rendered[at - 1] in _DIGITS:
            return True
        at = rendered.find(b"e-", at + 2)
    return False


_DIGITS = frozenset(b"0123456789")

#: Anything :func:`validate_key` refuses, in part paths joined by newlines (a match, even a false
#: one from a newline inside a path, sends every path through ``validate_key`` for its message).
_UNSAFE_PATHS = re.compile(r"^/|//|/$|^$|\x00|\\|(?:^|/)\.\.?(?:/|$)", re.MULTILINE)
#: ``to_json`` renders ``parts`` with orjson from this many parts on.
_RENDER_PARTS = 1_000
#: Printable ASCII but the quote and the backslash: the characters orjson and ``json`` both write as they are.
_PLAIN_ASCII = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")
#: Stands for ``parts`` while the rest of the manifest is rendered; found again as the top-level line
#: ``\n  "parts": "\u0000parts\u0000"``, which no string value can hold (JSON escapes the newline)
#: and no nested key can (nested keys are indented deeper).
_PARTS_PLACEHOLDER = "\x00parts\x00"
_PARTS_KEY = '\n  "parts": '
_PARTS_LINE = _PARTS_KEY + json.dumps(_PARTS_PLACEHOLDER)


def _render_parts(parts: list[str]) -> str | None:
    """``parts`` as ``json.dumps(..., indent=2)`` renders the value of a top-level key, or ``None`` to let
    ``json.dumps`` do it: for a short list, without orjson, or when a part is not printable ASCII without
    quote and backslash (only for those do orjson and ``json`` write the same bytes: ``"<path>"``). The
    pure-Python encoder that ``indent`` selects cost a commit about 0.3 s per million parts."""
    if fast_dumps is None or len(parts) < _RENDER_PARTS:
        return None
    joined = "".join(parts)
    if not joined.isascii() or joined.encode("ascii").translate(None, _PLAIN_ASCII):
        return None
    rendered = fast_dumps(parts, option=_INDENT_2)  # b'[\n  "a",\n  "b"\n]'
    return rendered[:-1].replace(b'\n  "', b'\n    "').decode("ascii") + "  ]"


def unsafe_paths(joined: str, unique: set[str]) -> bool:
    """Whether the newline-joined part paths (``unique``: the same paths as a set) may hold one that
    ``validate_key`` refuses: substring tests first (a regex over 10,000 paths costs tens of
    milliseconds), the exact pattern only then. Paths without a ``/`` (an unpartitioned dataset) need
    only one-character scans and set lookups: each two-character scan cost 30 ms at a million parts."""
    if "/" not in joined:  # refused only if empty, "." or "..", or with a NUL or a backslash
        return "\x00" in joined or "\\" in joined or not unique.isdisjoint(("", ".", ".."))
    suspicious = ("//", "/.", "\n.", "\n/", "/\n", "\n\n", "\x00", "\\")
    if joined[:1] in ("", "/", ".") or joined[-1:] in ("/", "\n") or any(s in joined for s in suspicious):
        return _UNSAFE_PATHS.search(joined) is not None
    return False


def _finite(value: Any) -> bool:
    """Whether every float in ``value`` (JSON data) is finite (orjson writes NaN and infinities as ``null``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
    return True


def known_finite(entries: Iterable[Any]) -> bool:
    """Whether every float of ``entries`` (``FileEntry`` objects) is finite: an entry parsed by orjson (which
    refuses non-finite numbers) or found finite here once is marked ``_finite`` and not walked again; the others
    are walked. Walking the few hundred inline entries a root carries over cost every commit milliseconds
    (issue 28)."""
    for entry in entries:
        noted = entry.__dict__
        if not noted.get("_finite"):
            if not _finite(entry.to_dict()):
                return False
            noted["_finite"] = True  # entries are frozen: it stays true
    return True


def _orjson_text(document: dict[str, Any], checked: Collection[str] = ()) -> str | None:
    """``document`` rendered by orjson when that gives exactly ``json.dumps``'s bytes, else ``None``. The
    pure-Python encoder ``indent`` selects took 0.15 s per commit for a root with a few hundred inline
    entries (the inline budget), and about 0.3 s per million parts."""
    if fast_dumps is None or not _finite({k: v for k, v in document.items() if k != "parts" and k not in checked}):
        return None
    try:
        rendered = fast_dumps(document, option=_SORTED_INDENT_2)
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits, a lone surrogate, ...
        return None
    return None if _may_differ(rendered) else rendered.decode("utf-8")


def render_manifest(document: dict[str, Any], *, checked: Collection[str] = ()) -> str:
    """``document`` (a root manifest's ``to_dict``) as canonical JSON: sorted keys, 2-space indent; byte for
    byte ``json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False)``. ``checked``: top-level keys
    whose values are known to hold only finite floats (not walked for ``NaN`` again)."""
    fast = _orjson_text(document, checked)
    if fast is not None:
        return fast
    parts = _render_parts(document["parts"]) if "parts" in document else None
    if parts is None:
        return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False)
    document = {**document, "parts": _PARTS_PLACEHOLDER}
    head, _, tail = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False).partition(_PARTS_LINE)
    return f"{head}{_PARTS_KEY}{parts}{tail}"
