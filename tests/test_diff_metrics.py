"""A change's effect on the telemetry budget (components/diff/metrics.py): growing prod's h100 pool by one InfiniBand
domain adds raw and written series, and the diff says so beside the cost and capacity lines."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from gpucluster.diff.capacity import capacity_delta
from gpucluster.diff.compare import PlanDiff
from gpucluster.diff.metrics import metrics_delta, metrics_line
from gpucluster.diff.render import capacity_lines as render_capacity
from gpucluster.diff.render import diff_section, print_diff
from gpucluster.diff.sides import Side
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.report.metrics_report import metrics_data
from tests.support.plan_sides import stack_raw
from tests.support.stacks import ROOT, spec_of


def _side(label: str, metrics: Any) -> Side:
    return Side(label, {}, {}, {"metrics": metrics} if metrics is not None else {})


@pytest.fixture(scope="module")
def grown() -> tuple[dict[str, Any], dict[str, Any]]:
    """prod's metrics data, and the same with the h100 pool one domain larger (3,125 -> 3,225 VMs: 33 scale sets)."""
    raw = stack_raw("prod")
    base = plan_cluster(spec_of(raw))
    next(p for p in raw["pools"] if p["name"] == "h100")["count"] += 100
    head = plan_cluster(spec_of(raw))
    assert [len(p.scale_sets) for p in head.pools if p.name == "h100"] == [33]
    before, after = metrics_data(base), metrics_data(head)
    assert before is not None and after is not None
    return before, after


def test_one_more_domain_is_a_metrics_line_with_the_series_it_adds(grown: tuple[dict[str, Any], dict[str, Any]]) -> None:
    before, after = grown
    delta = metrics_delta(_side("base", before), _side("head", after))
    line = metrics_line(delta)
    assert line is not None and line.startswith("metrics: raw series at the edge ")
    raw = after["raw"]["series"] - before["raw"]["series"]
    written = after["ingested"]["series"] - before["ingested"]["series"]
    assert raw > 0 and written > 0
    assert f"{before['raw']['series']:,} -> {after['raw']['series']:,} ({raw:+,})" in line
    assert f"series written {before['ingested']['series']:,} -> {after['ingested']['series']:,} ({written:+,}) of " \
           f"{next(lim['limit'] for lim in after['limits'] if lim['key'] == 'activeSeries'):,}" in line
    assert "shards" not in line  # unchanged figures are not repeated
    doc = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8").replace("\n", " ")
    assert f"adds {raw:,} raw series and {written:,} written ones" in doc  # the figures docs/metrics.md states


def test_the_line_is_printed_and_in_the_report(grown: tuple[dict[str, Any], dict[str, Any]]) -> None:
    before, after = grown
    base, head = _side("base", before), _side("head", after)
    diff = PlanDiff("out/prod", "out/prod-grown", capacity=capacity_delta(base, head), metrics=metrics_delta(base, head))
    text = io.StringIO()
    print_diff(Console(file=text, width=400), diff)
    line = metrics_line(diff.metrics)
    assert line is not None and line in text.getvalue()
    assert "metrics: raw series at the edge" in diff_section(diff.as_dict())


def test_no_change_no_line_and_a_pipeline_added_counts_from_zero(grown: tuple[dict[str, Any], dict[str, Any]]) -> None:
    before, _ = grown
    assert metrics_delta(_side("base", before), _side("head", before)) is None
    assert metrics_delta(_side("base", None), _side("head", None)) is None
    added = metrics_line(metrics_delta(_side("base", None), _side("head", before)))
    assert added is not None and f"raw series at the edge 0 -> {before['raw']['series']:,}" in added


def test_a_figure_that_is_not_a_whole_number_reads_as_unknown(grown: tuple[dict[str, Any], dict[str, Any]]) -> None:
    before, _ = grown
    hostile = {**before, "raw": {"series": "6,000,000"}, "limits": "none"}
    line = metrics_line(metrics_delta(_side("base", before), _side("head", hostile)))
    assert line == f"metrics: raw series at the edge {before['raw']['series']:,} -> unknown"


def test_a_summary_without_an_ip_plan_prints_capacity_without_pod_ips() -> None:
    """A summary holding only `metrics` (or pod IP figures that are not numbers): the capacity lines leave pod IPs
    out instead of failing on them."""
    base, head = Side("base", {}, {}, {"ipPlan": {"podIps": {"needed": "many"}}}), Side("head", {}, {}, {})
    capacity = capacity_delta(base, head)
    assert capacity["base"]["podIps"] is None
    assert [line.split(":")[0] for line in render_capacity(capacity)] == ["nodes", "GPUs", "InfiniBand domains"]
