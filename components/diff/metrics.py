"""What a change does to the telemetry budget: each side's summary.json `metrics` (components/report/metrics_report.py,
docs/metrics.md), the series and samples at the edge and in the workspace against the workspace's limits.

Read defensively, as the cost is (components/diff/cost.py): a figure that is not a whole number reads as unknown.
"""

from __future__ import annotations

from typing import Any

from gpucluster.diff.sides import Side

FIGURES = (("raw series at the edge", ("raw", "series")), ("shards", ("edge", "shards")),
           ("series written", ("ingested", "series")), ("samples/min written", ("ingested", "samplesPerMinute")))
"""(what it is, where summary.json `metrics` holds it), in the order the line says them."""
LIMITS = {"series written": "activeSeries", "samples/min written": "eventsPerMinute"}
"""The workspace limit each written figure counts against (`metrics.limits[].key`)."""


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53 else None


def _metrics(side: Side) -> dict[str, Any] | None:
    found = side.summary.get("metrics") if side.summary else None
    return found if isinstance(found, dict) else None


def _figure(metrics: dict[str, Any], where: tuple[str, str]) -> int | None:
    group = metrics.get(where[0])
    return _whole(group.get(where[1])) if isinstance(group, dict) else None


def _limit(metrics: dict[str, Any], key: str) -> int | None:
    limits = metrics.get("limits")
    found = [item for item in limits if isinstance(item, dict) and item.get("key") == key] if isinstance(limits, list) \
        else []
    return _whole(found[0].get("limit")) if found else None


def metrics_delta(base: Side, head: Side) -> dict[str, Any] | None:
    """Each figure base -> head, with the head's limit where it has one; None when neither side has a metrics
    pipeline or nothing changes. A side without one reads as 0 (the pipeline added or removed)."""
    before, after = _metrics(base), _metrics(head)
    if before is None and after is None:
        return None
    figures = []
    for what, where in FIGURES:
        old = _figure(before, where) if before is not None else 0
        new = _figure(after, where) if after is not None else 0
        limit = _limit(after, LIMITS[what]) if after is not None and what in LIMITS else None
        figures.append({"figure": what, "base": old, "head": new, "headLimit": limit})
    if all(f["base"] == f["head"] for f in figures):
        return None
    return {"figures": figures}


def _number(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def metrics_line(delta: dict[str, Any] | None) -> str | None:
    """`metrics: raw series at the edge 6,658,100 -> 6,799,300 (+141,200); ...`, the figures that change, or None
    when none does."""
    if not delta:
        return None
    parts = []
    for f in delta["figures"]:
        old, new, limit = f["base"], f["head"], f["headLimit"]
        if old == new:
            continue
        change = "" if old is None or new is None else f" ({new - old:+,})"
        parts.append(f"{f['figure']} {_number(old)} -> {_number(new)}{change}"
                     + ("" if limit is None else f" of {limit:,}"))
    return "metrics: " + "; ".join(parts)
