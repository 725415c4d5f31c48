"""Preflight warnings as report rows: in summary.json, the console summary and report.html."""

from __future__ import annotations

from html import escape
from typing import Any

from rich.console import Console
from rich.table import Table

from components.preflight.model import Finding

KEY = "preflightWarnings"


def warning_rows(findings: list[Finding]) -> list[dict[str, str]]:
    return [{"rule": f.rule, "resource": f.resource, "field": f.field, "message": f.message} for f in findings]


def print_warnings(console: Console, data: dict[str, Any]) -> None:
    rows = data.get(KEY) or []
    if not rows:
        return
    table = Table(title="Azure preflight warnings (what no public source settles)", title_justify="left")
    for column in ("rule", "resource", "what to confirm"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["rule"], row["resource"], row["message"])
    console.print(table)


def html_section(data: dict[str, Any]) -> list[str]:
    rows = data.get(KEY) or []
    if not rows:
        return []
    body = "".join(f"<tr><td>{escape(r['rule'])}</td><td>{escape(r['resource'])}</td><td>{escape(r['field'])}</td>"
                   f"<td>{escape(r['message'])}</td></tr>" for r in rows)
    return ["<h2>Azure preflight warnings</h2>",
            "<table><tr><th>rule</th><th>resource</th><th>field</th><th>what to confirm</th></tr>" + body + "</table>"]
