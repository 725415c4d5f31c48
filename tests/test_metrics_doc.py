"""docs/metrics.md's figures are the planner's (tools/metrics_doc.py regenerates them)."""

from __future__ import annotations

from tools.metrics_doc import DOC, rendered


def test_the_page_shows_what_the_planner_computes() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "docs/metrics.md is stale: run `python -m tools.metrics_doc`"
