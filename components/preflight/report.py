"""Preflight warnings as report rows: in summary.json, the console summary and report.html."""

from __future__ import annotations

from html import escape
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpucluster.preflight.fold import Folded, fold
from gpucluster.preflight.model import Finding

KEY = "preflightWarnings"


def warning_rows(findings: list[Finding]) -> list[dict[str, str]]:
    return [{"rule": f.source, "resource": f.path, "field": f.field, "message": f.message} for f in findings]


def folded_warnings(data: dict[str, Any]) -> list[Folded]:
    """One entry per rule: a warning the preflight raises on each of 43 scale sets is one line, with the count."""
    return fold((r["rule"], r["resource"], r["message"]) for r in data.get(KEY) or [])


def _title(data: dict[str, Any], folded: list[Folded]) -> str:
    return (f"{len(data[KEY])} warnings from {len(folded)} rules, one line per rule (summary.json lists each "
            "resource)")


def print_warnings(console: Console, data: dict[str, Any]) -> None:
    folded = folded_warnings(data)
    if not folded:
        return
    table = Table(title=f"Azure preflight warnings (what no public source settles): {_title(data, folded)}",
                  title_justify="left")
    for column in ("rule", "count", "resources", "what to confirm"):
        table.add_column(column, overflow="fold", justify="right" if column == "count" else "left")
    for f in folded:
        table.add_row(Text(f.rule), str(f.count), Text(f.names), Text(f.message))  # Text: no markup in messages
    console.print(table)


def html_section(data: dict[str, Any]) -> list[str]:
    folded = folded_warnings(data)
    if not folded:
        return []
    body = "".join(f"<tr><td class=l>{escape(f.rule)}</td><td>{f.count}</td><td class=l>{escape(f.names)}</td>"
                   f"<td class=l>{escape(f.message)}</td></tr>" for f in folded)
    return ["<h2>Azure preflight warnings</h2>", f"<p>{escape(_title(data, folded))}</p>",
            "<table><tr><th>rule</th><th>count</th><th>resources</th><th>what to confirm</th></tr>" + body + "</table>"]
