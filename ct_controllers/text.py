"""Refusal messages that stay short whatever the input's size: a client that sends 10,000 bad
names gets the first few and a count, not a megabyte echoed back."""

from __future__ import annotations

from collections.abc import Sequence

MAX_NAMED = 3  # offenders named in a message
MAX_NAME_CHARS = 64  # characters of one client-supplied string quoted in a message


def name_few(items: Sequence[str], limit: int = MAX_NAMED, separator: str = "; ") -> str:
    """The first ``limit`` items joined, then "... and N more" (N with thousands separators)."""
    shown = separator.join(items[:limit])
    rest = len(items) - limit
    return shown if rest <= 0 else f"{shown}{separator}... and {rest:,} more"


def quoted(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """``text`` as a repr, cut to ``limit`` characters: control characters show escaped."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text):,} chars)"


def control_characters(text: str) -> bool:
    """True if ``text`` holds a C0 control character or DEL (never part of a name or frame)."""
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)
