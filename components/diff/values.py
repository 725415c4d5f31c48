"""Old -> new values of an updated resource, one per changed input path (`a.b[2].c`), for people and for JSON.

Inputs are compared leaf by leaf, so a list or map shows only the entries that differ. Masked secrets stay
`[secret]` (a preview never holds their text; a changed digest says only that they changed); long strings
are cut, with their full length said, around where the two sides first differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpucluster.offline.engine import SECRET_MARK

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
"""The side of a path that has no value there (the input was added or removed)."""

SHOWN_CHARS = 60
"""A value in the terminal and report.html: at most this many characters of its JSON."""
JSON_CHARS = 500
"""A string in `--json`: at most this many characters, then how long it was."""
JSON_VALUES = 100
"""Changed paths per resource in `--json`; the rest are counted."""


@dataclass(frozen=True)
class ValueChange:
    path: str
    old: Any = ABSENT
    new: Any = ABSENT
    secret: bool = False
    """A masked secret whose digest changed: its old and new text are not in the preview."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        start = _first_difference(self.old, self.new, JSON_CHARS) \
            if isinstance(self.old, str) and isinstance(self.new, str) else 0
        for key, value in (("old", self.old), ("new", self.new)):
            if value is not ABSENT:
                out[key] = SECRET_MARK if self.secret else _cut(value, start)
        return out | ({"secret": True} if self.secret else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValueChange:
        return cls(data["path"], data.get("old", ABSENT), data.get("new", ABSENT), bool(data.get("secret")))

    def text(self) -> str:
        """`path: old -> new` in one line, for the terminal and report.html."""
        if self.secret:
            return f"{self.path}: {SECRET_MARK} changed"
        if self.old is ABSENT or self.new is ABSENT or SECRET_MARK in (self.old, self.new):
            return f"{self.path}: {show(self.old)} -> {show(self.new)}"
        old, new = (json.dumps(v, ensure_ascii=False, sort_keys=True) for v in (self.old, self.new))
        start = _first_difference(old, new, SHOWN_CHARS)
        return f"{self.path}: {_window(old, start, SHOWN_CHARS)} -> {_window(new, start, SHOWN_CHARS)}"


def leaves(value: Any, path: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every leaf of `value` by its path; an empty map or list is a leaf of its own."""
    out = {} if out is None else out
    if isinstance(value, dict) and value:
        for key, item in value.items():
            leaves(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            leaves(item, f"{path}[{index}]", out)
    else:
        out[path] = value
    return out


CONTEXT_CHARS = 20
"""Characters kept before the first difference when two long values share their start."""


def _first_difference(old: str, new: str, size: int) -> int:
    """Where a cut of `size` characters starts so both sides show where they differ: 0 when the difference falls
    inside the first `size`, else a little before it (two values cut at the same prefix would read the same)."""
    common = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    return 0 if common < size - CONTEXT_CHARS else common - CONTEXT_CHARS


def _window(text: str, start: int, size: int) -> str:
    if len(text) <= size and start == 0:
        return text
    shown = ("..." if start else "") + text[start:start + size] + ("..." if start + size < len(text) else "")
    return f"{shown} ({len(text):,} characters)"


def _cut(value: Any, start: int = 0) -> Any:
    if isinstance(value, str) and (len(value) > JSON_CHARS or start):
        return _window(value, start, JSON_CHARS)
    return value


def show(value: Any) -> str:
    """One value as a reviewer reads it: JSON, `(none)` when absent, cut past SHOWN_CHARS."""
    if value is ABSENT:
        return "(none)"
    if value == SECRET_MARK:
        return SECRET_MARK
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) > SHOWN_CHARS:
        return f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"
    return text
