"""The telemetry budget: the series arithmetic by hand, the limits it is judged against, the refusal."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucluster.catalog.metrics import TRAINING_COUNTERS, WORKSPACE_LIMITS
from gpucluster.catalog.metrics_facts import NODE_CPU_GUEST_MODES, NODE_CPU_MODES, NODE_INFINIBAND_PORT_METRICS
from gpucluster.errors import SpecError
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.metrics import metrics_problems
from tests.support.stacks import ALERTS, small_cluster, small_spec, spec_of, stack_spec


def test_the_extracted_facts_are_the_upstream_figures() -> None:
    # node_exporter v1.12.1 cpu_linux.go: 8 modes of node_cpu_seconds_total, 2 of the guest counter.
    assert NODE_CPU_MODES == ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    assert NODE_CPU_GUEST_MODES == ("user", "nice")
    assert "link_downed_total" in NODE_INFINIBAND_PORT_METRICS
    assert len(TRAINING_COUNTERS) == 16


def test_raw_series_by_hand() -> None:
    """150 ND96isr_H100_v5 (8 GPUs, 96 vCPUs, 8 InfiniBand ports) and 3 D4s_v5 system nodes, 3 API servers."""
    plan = plan_cluster(small_spec())
    metrics = plan.metrics
    assert metrics is not None
    raw = {s.source: s.series for s in metrics.raw}
    assert raw["dcgm-exporter"] == 150 * 8 * 16 == 19_200
    api_vcpus = plan.control_plane.api.size.vcpus * 3
    # 8 modes of node_cpu_seconds_total; the guest counter's 2 are dropped at the scrape (below)
    assert raw["node_exporter cpu"] == (150 * 96 + 3 * 4 + api_vcpus) * 8
    assert raw["node_exporter infiniband"] == 150 * 8 * len(NODE_INFINIBAND_PORT_METRICS)
    # 30 s scrapes: two samples a minute per series
    assert metrics.raw_samples_per_minute == 2 * metrics.raw_series
    # dcgm-exporter's default set: 25 fields that are metrics (DCGM_FI_DRIVER_VERSION is a label)
    assert metrics.dcgm_default_series == 150 * 8 * 25


def test_written_series_by_hand() -> None:
    plan = plan_cluster(small_spec())
    metrics = plan.metrics
    assert metrics is not None
    written = {w.metric: w.series for w in metrics.written}
    # Two replicas of every edge shard write their own copy; the workspace's own rules write once.
    assert written["node:gpu_utilisation:avg"] == 150 * 2
    assert written["node:cpu_busy:ratio5m"] == (150 + 3 + 3) * 2  # pool nodes and the API servers' kubelets
    assert written["node:ib_link_downed:increase1h"] == 150 * 2
    assert written["domain:gpu_utilisation:avg"] == len(plan.pools[1].scale_sets)
    assert written["namespace:gpus_in_use:count"] == len(plan.spec.teams) * metrics.shards * 2
    assert written["apiserver_current_inflight_requests"] == 3 * 2 * 2
    assert written["etcd_mvcc_db_total_size_in_bytes"] == 3 * 2
    # Recorded series once a minute; raw control-plane gauges at the scrape interval.
    recorded = sum(w.series for w in metrics.written if ":" in w.metric)
    kept = sum(w.series for w in metrics.written if ":" not in w.metric)
    assert metrics.ingested_samples_per_minute == recorded + 2 * kept


def test_prod_needs_the_edge_aggregation() -> None:
    """prod's raw series are several times the workspace's default; what it writes fits in one workspace."""
    metrics = plan_cluster(stack_spec("prod")).metrics
    assert metrics is not None
    assert metrics.raw_series > 5 * WORKSPACE_LIMITS["activeSeries"].value
    assert metrics.ingested_series < WORKSPACE_LIMITS["activeSeries"].value
    assert metrics.workspaces_at_default == 1
    assert all(limit.fits for limit in metrics.limits)
    assert metrics.shards == -(-metrics.raw_series // 2_000_000)


@pytest.mark.parametrize("key", ["activeSeries", "eventsPerMinute"])
def test_over_an_adjustable_limit_names_the_key_and_the_figure(key: str) -> None:
    metrics = plan_cluster(small_spec()).metrics
    assert metrics is not None
    tight = replace(metrics, limits=tuple(replace(limit, limit=10) if limit.key == key else limit
                                          for limit in metrics.limits))
    [problem] = metrics_problems(tight)
    assert problem.path == f"cluster.metrics.workspace.{key}"
    assert "request an increase to at least" in problem.message


def test_over_the_fixed_query_cap_says_aggregate() -> None:
    metrics = plan_cluster(small_spec()).metrics
    assert metrics is not None
    tight = replace(metrics, limits=tuple(replace(limit, limit=1) if limit.key == "querySeriesPerMetric" else limit
                                          for limit in metrics.limits))
    [problem] = metrics_problems(tight)
    assert "cannot be raised" in problem.message and metrics.largest.metric in problem.message


def test_a_raised_limit_counts_and_needs_its_request() -> None:
    raised = small_cluster(metrics={"workspace": {"activeSeries": 2_000_000, "request": "support case 123"}, "alerts": ALERTS})
    metrics = plan_cluster(spec_of(raised)).metrics
    assert metrics is not None
    active = next(limit for limit in metrics.limits if limit.key == "activeSeries")
    assert active.limit == 2_000_000 and active.raised and active.default == 1_000_000
    with pytest.raises(SpecError, match="request"):
        spec_of(small_cluster(metrics={"workspace": {"activeSeries": 2_000_000}, "alerts": ALERTS}))


def test_shards_follow_the_series_per_shard() -> None:
    spec = spec_of(small_cluster(metrics={"seriesPerShard": 100_000, "alerts": ALERTS}))
    metrics = plan_cluster(spec).metrics
    assert metrics is not None
    assert metrics.shards == -(-metrics.raw_series // 100_000) > 1


def test_the_raw_count_holds_only_what_the_scrape_keeps() -> None:
    """The node_exporter job's metric_relabel_configs keep node_cpu_seconds_total and the InfiniBand metrics: the
    guest-CPU counter never reaches the head block, so the raw count leaves it out."""
    import re

    from gpucluster.kubernetes.objects.metrics import NODE_EXPORTER, prometheus_config

    plan = plan_cluster(small_spec())
    config = prometheus_config(plan.metrics, 0, "test", [], "https://example.invalid/write", "id")
    [keep] = next(j for j in config["scrape_configs"] if j["job_name"] == NODE_EXPORTER)["metric_relabel_configs"]
    assert keep["action"] == "keep" and keep["source_labels"] == ["__name__"]
    assert re.fullmatch(keep["regex"], "node_cpu_seconds_total")
    assert not re.fullmatch(keep["regex"], "node_cpu_guest_seconds_total")
