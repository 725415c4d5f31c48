"""Text from a plan folder made safe for a terminal: control characters shown as escapes, never sent raw.

A boot file or resource name can hold ESC sequences (colours, cursor moves, OSC 8 links, window titles), a
carriage return that overwrites what came before, or Unicode bidi overrides that reorder what a reviewer
reads. They are shown as Python-style escapes (`\\x1b`, `\\r`, `\\u202e`) instead. Tabs are left as they are.
"""

from __future__ import annotations

import re
import unicodedata

_HIDDEN = ("Cc", "Cf", "Zl", "Zp")
"""Unicode categories that do not print as themselves: controls (C0, DEL, C1), format characters (bidi
overrides, zero-width characters), line and paragraph separators."""

_CANDIDATES = re.compile(r"[^\t\x20-\x7e]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if unicodedata.category(char) not in _HIDDEN:
        return char
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every control, format and separator character (except tab) written as an escape."""
    return _CANDIDATES.sub(_escape, text)
