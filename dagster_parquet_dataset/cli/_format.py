"""Human output: byte sizes, ages, aligned tables; and parsing sizes and durations."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone

from ._usage_error import UsageError

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_SIZE_FACTORS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_DURATION_FACTORS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``"1.5 KiB"``; ``None`` -> ``"?"``."""
    if n is None:
        return "?"
    value = float(n)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


#: Characters of a run id a table shows (``--json`` keeps the whole id); a Dagster run id is a 36-character UUID.
RUN_ID_CHARS = 8


def short_run_id(run_id: str | None) -> str:
    """``run_id`` cut to :data:`RUN_ID_CHARS` characters for a table (``-`` when unknown), as git shortens hashes."""
    if not run_id:
        return "-"
    return run_id if len(run_id) <= RUN_ID_CHARS + 2 else run_id[:RUN_ID_CHARS]


def human_count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def human_age(seconds: float | None) -> str:
    """``90`` -> ``"1m"``; ``None`` -> ``"?"``."""
    if seconds is None:
        return "?"
    seconds = max(0.0, seconds)
    for limit, unit, size in ((60, "s", 1), (3600, "m", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds // 86400)}d"


def age_seconds(created_at_utc: str | None, now: datetime | None = None) -> float | None:
    """Seconds since an ISO timestamp (``None`` if it does not parse)."""
    if not created_at_utc:
        return None
    try:
        created = datetime.fromisoformat(created_at_utc)
    except ValueError:
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return ((now or datetime.now(timezone.utc)) - created).total_seconds()


def parse_instant(text: str | None) -> datetime | None:
    """``--as-of``: an ISO-8601 timestamp with its time zone (``Z`` or ``+HH:MM``) -> an aware datetime.

    A timestamp without a zone is refused rather than guessed: the local zone and UTC differ by hours.

    Raises:
        UsageError: not ISO-8601, or no time zone.
    """
    if text is None:
        return None
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--as-of {text!r} is not an ISO-8601 timestamp like 2026-03-01T12:00:00Z") from None
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise UsageError(f"--as-of {text!r} has no time zone; add one, e.g. {text}Z for UTC or {text}+02:00")
    return instant


def parse_size(text: str) -> int:
    """``"128MiB"`` -> ``134217728`` (``K``/``M``/``G`` mean KiB/MiB/GiB; ``KB``/``MB`` are powers of 1000).

    Raises:
        UsageError: not a positive size.
    """
    match = _SIZE.match(text)
    factor = _SIZE_FACTORS.get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        raise UsageError(f"size {text!r} is not a size like 128MiB, 64MB or 1000000")
    size = int(float(match.group(1)) * factor)
    if size <= 0:
        raise UsageError(f"size {text!r} must be positive")
    return size


def parse_duration(text: str, option: str = "duration") -> float:
    """``"90m"`` -> ``5400.0`` seconds (units s, m, h, d, w; a unit is required).

    A bare number is refused: on a destructive command ``7`` meaning seven
    seconds (not days) is a trap, so the unit must be written.

    Raises:
        UsageError: not a duration, or a number without a unit.
    """
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(f"{option} {text!r} is not a duration like 45s, 30m, 12h or 7d")
    number, unit = match.group(1), match.group(2).lower()
    if not unit:
        raise UsageError(
            f"{option} {text!r} has no unit; add one: {number}s, {number}m, {number}h or {number}d "
            "(seconds, minutes, hours, days)"
        )
    if unit not in _DURATION_FACTORS:
        raise UsageError(f"{option} {text!r} has an unknown unit {unit!r}; use s, m, h, d or w")
    return float(number) * _DURATION_FACTORS[unit]


def human_duration(seconds: float) -> str:
    """``3600`` -> ``"1h"``, ``5400`` -> ``"90m"``: the largest unit that divides ``seconds`` exactly."""
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """``plural(1, "file")`` -> ``"1 file"``, ``plural(2, "file")`` -> ``"2 files"`` (counts with thousands commas)."""
    word = noun if count == 1 else (plural_noun or noun + "s")
    return f"{count:,} {word}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Rows as aligned columns under ``headers``; columns whose index is in ``right`` are right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def one_line(text: object) -> str:
    """``str(text)`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())
