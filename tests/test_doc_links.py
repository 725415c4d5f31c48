"""The docs stand on their own: no link or path in README.md or docs/*.md leads out of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_LINK = re.compile(r"\]\(([^)\s]+)\)")
"""A Markdown link's target."""
_RELATIVE_DOC = re.compile(r"`(\.\./[^`\s]*(?:\.md|/))`")
"""A relative path to a page or a folder written in code, such as `../shared/ARCHITECTURE.md`."""
_MACHINE_PATH = re.compile(r"(?<![\w.])/work/[\w./-]+")
"""A path of the machine the docs were written on rather than of the repository."""


def outside_links(text: str, folder: Path) -> list[str]:
    """Every link or page path in `text` (a page in `folder`) that resolves outside the repository or to nothing."""
    bad = [m.group(0) for m in _MACHINE_PATH.finditer(text)]
    targets = [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:|#", t)] + _RELATIVE_DOC.findall(text)
    for target in targets:
        resolved = (folder / target.split("#", 1)[0]).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            bad.append(target)
    return bad


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_no_link_leaves_the_repository(page: Path) -> None:
    assert outside_links(page.read_text(encoding="utf-8"), page.parent) == []


def test_the_check_sees_a_link_out() -> None:
    text = ("See `../shared/ARCHITECTURE.md`, [the card](../../shared/ARCHITECTURE.md), /work/shared, "
            "[ops](operations.md), `../README.md` and [a source](https://example.org/x.md).")
    assert outside_links(text, ROOT / "docs") == [
        "/work/shared", "../../shared/ARCHITECTURE.md", "../shared/ARCHITECTURE.md"]
