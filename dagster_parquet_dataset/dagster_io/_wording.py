"""Words for what the Dagster UI and logs show: counts with the right noun, byte sizes as the CLI writes them,
identifiers as text.

The UI plots every numeric metadata entry (``MetadataValue.int`` / ``float``)
of an asset's materializations and checks over time. Measures (rows, parts,
bytes, problems) stay numeric; an identifier such as a manifest version is
text, so it is shown but never plotted (a plot of versions 1 -> 2 -> 1 across
partitions means nothing).
"""

from __future__ import annotations

from dagster import MetadataValue, TextMetadataValue


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """``plural(1, "part")`` -> ``"1 part"``; ``plural(2, "part")`` -> ``"2 parts"``; ``plural(0, "problem")``
    -> ``"0 problems"``. ``plural_noun`` for a noun whose plural is not ``noun + "s"``."""
    return f"{count:,} {noun if count == 1 else (plural_noun or noun + 's')}"


def human_bytes(size: int) -> str:
    """``12008`` -> ``"11.7 KiB"``, ``512`` -> ``"512 B"`` (binary units, one decimal, as the CLI shows sizes)."""
    if size < 1024:
        return f"{size} B"
    exponent = min((size.bit_length() - 1) // 10, 5)  # whole powers of 1024 in size
    return f"{size / 1024**exponent:.1f} {('KiB', 'MiB', 'GiB', 'TiB', 'PiB')[exponent - 1]}"


def version_metadata(version: int) -> TextMetadataValue:
    """A manifest version as metadata: text (an identifier, not a measure), so the UI does not plot it."""
    return MetadataValue.text(str(version))


def version_of(value: object) -> int | None:
    """The manifest version recorded in a ``manifest_version`` metadata value: text, or an int as earlier releases
    recorded it; ``None`` when it is neither."""
    raw = getattr(value, "value", value)
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    return None
