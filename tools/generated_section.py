"""The part of a docs page between two marker lines, which a tool renders from the code."""

from __future__ import annotations


def with_section(page: str, begin: str, end: str, body: str) -> str:
    """The page with the text between `begin` and `end` replaced by `body` (the markers kept)."""
    head, rest = page.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"
