"""The telemetry budget in summary.json (`metrics`), the terminal summary and report.html (docs/metrics.md)."""

from __future__ import annotations

from html import escape
from typing import Any

from rich.console import Console

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.report.html_table import n, table

Data = dict[str, Any]


def metrics_data(plan: ClusterPlan) -> Data:
    m = plan.metrics
    largest = m.largest
    return {
        "scrapeIntervalSeconds": m.scrape_interval_seconds, "ruleIntervalSeconds": m.rule_interval_seconds,
        "raw": {"series": m.raw_series, "samplesPerMinute": m.raw_samples_per_minute,
                "sources": [{"source": s.source, "series": s.series, "samplesPerMinute": s.samples_per_minute,
                             "basis": s.basis} for s in m.raw],
                "dcgmDefaultCountersSeries": m.dcgm_default_series},
        "ingested": {"series": m.ingested_series, "samplesPerMinute": m.ingested_samples_per_minute,
                     "largestMetric": {"metric": largest.metric, "series": largest.series},
                     "metrics": [{"metric": w.metric, "per": w.per, "series": w.series,
                                  "samplesPerMinute": w.samples_per_minute} for w in m.written]},
        "limits": [{"key": limit.key, "description": limit.description, "used": limit.used, "limit": limit.limit,
                    "default": limit.default, "raised": limit.raised, "adjustable": limit.adjustable,
                    "fits": limit.fits} for limit in m.limits],
        "edge": {"shards": m.shards, "seriesPerShard": m.series_per_shard},
        "ruleGroups": list(m.rule_groups),
        "workspacesAtDefault": m.workspaces_at_default,
    }


def print_metrics(console: Console, data: Data) -> None:
    m = data.get("metrics")
    if not m:
        return
    active = next(limit for limit in m["limits"] if limit["key"] == "activeSeries")
    events = next(limit for limit in m["limits"] if limit["key"] == "eventsPerMinute")
    console.print(
        f"Metrics: {m['raw']['series']:,} raw series at the edge ({m['edge']['shards']} Prometheus shard(s)); "
        f"{m['ingested']['series']:,} of {active['limit']:,} active series and "
        f"{m['ingested']['samplesPerMinute']:,} of {events['limit']:,} samples/min written to the workspace; "
        f"largest metric {m['ingested']['largestMetric']['metric']} ({m['ingested']['largestMetric']['series']:,} "
        "series)", soft_wrap=True, markup=False)


def metrics_section(data: Data) -> list[str]:
    m = data.get("metrics")
    if not m:
        return []
    raw = [[escape(s["source"]), n(s["series"]), n(s["samplesPerMinute"]), escape(s["basis"])]
           for s in m["raw"]["sources"]]
    limits = [[escape(limit["description"]), n(limit["used"]), n(limit["limit"]),
               "raised" if limit["raised"] else ("default" if limit["adjustable"] else "fixed"),
               "fits" if limit["fits"] else "OVER"] for limit in m["limits"]]
    return [
        "<h2>Metrics</h2>",
        f"<p>Scraped every {m['scrapeIntervalSeconds']} s by {m['edge']['shards']} edge Prometheus shard(s) of up to "
        f"{n(m['edge']['seriesPerShard'])} series; recording rules every {m['ruleIntervalSeconds']} s write "
        f"{n(m['ingested']['series'])} series to the Azure Monitor workspace (raw: {n(m['raw']['series'])}; "
        f"dcgm-exporter's default counters alone would be {n(m['raw']['dcgmDefaultCountersSeries'])}).</p>",
        table(["raw source", "series", "samples/min", "basis"], raw, left=1, left_last=True),
        table(["workspace limit", "used", "limit", "", ""], limits, left=1),
    ]
