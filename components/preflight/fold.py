"""Warnings that repeat per resource, folded into one line per rule: the count, the first few resources, and
one message with the parts that differ between resources written as alternatives (`{1|2|4} IP configurations`).

prod raises the same preflight warning on each of its 43 scale sets; listed one by one it was half the
summary. summary.json keeps every row for machines; people read one line per rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SHOWN_NAMES = 3
SHOWN_ALTERNATIVES = 4
_TOKENS = re.compile(r"\w+|\W")


@dataclass(frozen=True)
class Folded:
    rule: str
    resources: tuple[str, ...]
    message: str

    @property
    def count(self) -> int:
        return len(self.resources)

    @property
    def names(self) -> str:
        return names_text(self.resources)


def names_text(names: tuple[str, ...] | list[str], shown: int = SHOWN_NAMES) -> str:
    """`a, b, c +40 more`."""
    head = ", ".join(names[:shown])
    return head + (f" +{len(names) - shown} more" if len(names) > shown else "")


def _alternatives(values: list[str]) -> str:
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        return distinct[0]
    shown = distinct[:SHOWN_ALTERNATIVES]
    more = f"|+{len(distinct) - len(shown)} more" if len(distinct) > len(shown) else ""
    return "{" + "|".join(shown) + more + "}"


def merged_message(messages: list[str]) -> str:
    """One message for many: identical ones as they are; ones that differ only in some words with those words as
    `{a|b}`; otherwise the first, saying how many other wordings summary.json holds."""
    distinct = list(dict.fromkeys(messages))
    if len(distinct) == 1:
        return distinct[0]
    tokens = [_TOKENS.findall(m) for m in distinct]
    if len({len(t) for t in tokens}) == 1:
        return "".join(_alternatives(list(column)) for column in zip(*tokens, strict=True))
    return f"{distinct[0]} (and {len(distinct) - 1} other wordings; summary.json lists each)"


def fold(rows: Iterable[tuple[str, str, str]]) -> list[Folded]:
    """(rule, resource, message) rows -> one Folded per rule, rules in the order they first appear."""
    resources: dict[str, list[str]] = {}
    messages: dict[str, list[str]] = {}
    for rule, resource, message in rows:
        resources.setdefault(rule, []).append(resource)
        messages.setdefault(rule, []).append(message)
    return [Folded(rule, tuple(resources[rule]), merged_message(messages[rule])) for rule in resources]
