"""Preflight warnings as report rows: in summary.json, the console summary and report.html."""

from __future__ import annotations

from html import escape
from typing import Any

from rich.console import Console
from rich.table import Table

from components.preflight.model import Finding

KEY = "preflightWarnings"
SHOWN = 3
"""Resource names a folded row spells out before it counts the rest."""


def fold(names: list[str]) -> str:
    """`a, b, c and 40 more (43 resources)`: one warning row however many resources repeat it."""
    if len(names) <= SHOWN:
        return ", ".join(names)
    return f"{', '.join(names[:SHOWN])} and {len(names) - SHOWN} more ({len(names)} resources)"


def warning_rows(findings: list[Finding]) -> list[dict[str, Any]]:
    """One row per distinct warning (rule and message), with the resources it applies to folded and counted."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.rule, finding.message), []).append(finding)
    rows = []
    for (rule, message), group in groups.items():
        names = sorted({f.resource for f in group})
        fields = sorted({f.field for f in group})
        rows.append({"rule": rule, "resource": fold(names), "field": fields[0] if len(fields) == 1 else
                     f"{fields[0]} (and {len(fields) - 1} more)", "message": message, "count": len(names)})
    return rows


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
