"""The rules parse in a real PromQL parser, read only what the exporters export, and the workspace's alerts read
only what the edge writes to it."""

from __future__ import annotations

import re
from typing import Any

import promql_parser
import pytest

from gpucluster.catalog.metrics import KSM_NODE_METRICS, TRAINING_COUNTERS, WORKSPACE_LIMITS
from gpucluster.catalog.metrics_facts import DCGM_FIELD_NAMES, NODE_INFINIBAND_PORT_METRICS
from gpucluster.planning.metrics_rules import KEPT_RAW, RECORDING_RULES, WORKSPACE_RULES, WRITTEN, alert_rules

EXPORTED = (
    {c.field for c in TRAINING_COUNTERS} | {"node_cpu_seconds_total"}
    | {f"node_infiniband_{name}" for name in NODE_INFINIBAND_PORT_METRICS} | set(KSM_NODE_METRICS)
    | {"apiserver_flowcontrol_rejected_requests_total"} | {name for name, _, _ in KEPT_RAW} | {"up"}
)
"""What the edge scrapes: the DCGM counter set, node_exporter's cpu and infiniband collectors, kube-state-metrics'
node allowlist, the API servers' and etcd's gauges, and the `up` series Prometheus writes for every target."""


def selectors(node: Any) -> set[str]:
    """Every metric name a parsed expression reads (the parser's AST, walked by its attributes)."""
    kind = type(node).__name__
    if kind == "VectorSelector":
        return {node.name}
    if kind == "MatrixSelector":
        return selectors(node.vector_selector)
    if kind == "Call":
        return set().union(*(selectors(a) for a in node.args))
    if kind == "BinaryExpr":
        return selectors(node.lhs) | selectors(node.rhs)
    if kind in ("AggregateExpr", "ParenExpr", "UnaryExpr", "SubqueryExpr"):
        return selectors(node.expr)
    return set()


def test_a_typo_does_not_parse() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("avg by (node (DCGM_FI_DEV_GPU_UTIL)")


def test_training_counters_are_dcgm_fields() -> None:
    assert {c.field for c in TRAINING_COUNTERS} <= set(DCGM_FIELD_NAMES)
    assert "DCGM_FI_DEV_NOT_A_FIELD" not in DCGM_FIELD_NAMES
    assert not any(c.field.endswith(("ENC_UTIL", "DEC_UTIL")) or "VGPU" in c.field for c in TRAINING_COUNTERS)


def test_recording_rules_read_only_what_is_exported_or_recorded_before() -> None:
    recorded: set[str] = set()
    for rule in RECORDING_RULES:
        read = selectors(promql_parser.parse(rule.expr))
        assert read or rule.expr == "vector(1)", rule.record  # a constant: the shard is alive
        assert read <= EXPORTED | recorded, (rule.record, read - EXPORTED - recorded)
        assert re.fullmatch(WRITTEN, rule.record), rule.record
        recorded.add(rule.record)
    assert len(recorded) == len(RECORDING_RULES)


def test_workspace_rules_read_only_what_the_edge_writes() -> None:
    recorded: set[str] = set()
    for rule in WORKSPACE_RULES:
        read = selectors(promql_parser.parse(rule.expr))
        assert read and all(re.fullmatch(WRITTEN, name) or name in recorded for name in read), (rule.record, read)
        assert {name for name in read if name not in recorded} <= {r.record for r in RECORDING_RULES}
        recorded.add(rule.record)
    assert len(WORKSPACE_RULES) <= WORKSPACE_LIMITS["rulesPerGroup"].value


def test_a_rule_on_an_unexported_metric_is_caught() -> None:
    read = selectors(promql_parser.parse("avg by (node) (DCGM_FI_DEV_ENC_UTIL)"))
    assert not read <= EXPORTED


def test_alerts_read_only_what_the_edge_writes() -> None:
    alerts = alert_rules(3000, 4)
    assert len(alerts) <= WORKSPACE_LIMITS["rulesPerGroup"].value
    for alert in alerts:
        read = selectors(promql_parser.parse(alert.expr))
        workspace = {r.record for r in WORKSPACE_RULES}
        assert read and all(re.fullmatch(WRITTEN, name) or name in workspace for name in read), (alert.alert, read)
    assert len({a.alert for a in alerts}) == len(alerts)


def test_an_alert_on_a_field_not_known_to_count_says_so() -> None:
    """NVML's legacy NVLink CRC field reads zero on Hopper (DataDog/datadog-agent PR 55966): the alert is marked."""
    from gpucluster.planning.metrics_rules import NVLINK_UNVERIFIED

    marked = {a.alert: a.unverified for a in alert_rules(3000, 4) if a.unverified}
    assert marked == {"GpuNvlinkErrors": NVLINK_UNVERIFIED} and "Hopper" in NVLINK_UNVERIFIED
