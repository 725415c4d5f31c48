"""The telemetry budget: what the exporters produce for this stack, what the edge rules write to the Azure Monitor
workspace, and whether that fits the workspace's limits (docs/metrics.md).

Raw series stay in the edge Prometheus shards; the workspace receives only the recording rules' output and a few raw
control-plane gauges (planning/metrics_rules.py). A stack whose written figures exceed a limit is refused with the
limit's key and the figure to request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpucluster.catalog.flowcontrol import DEFAULT_SHARES
from gpucluster.catalog.metrics import (
    EDGE_REPLICAS,
    KSM_READY_STATUSES,
    KSM_REPLICAS,
    RULE_INTERVAL_SECONDS,
    TRAINING_COUNTERS,
    WORKSPACE_LIMITS,
)
from gpucluster.catalog.metrics_facts import (
    DCGM_DEFAULT_COUNTERS,
    NODE_CPU_GUEST_MODES,
    NODE_CPU_MODES,
    NODE_INFINIBAND_PORT_METRICS,
)
from gpucluster.errors import Problem
from gpucluster.planning.control_plane import ControlPlanePlan
from gpucluster.planning.metrics_rules import KEPT_RAW, RECORDING_RULES, WORKSPACE_RULES, Per, alert_rules
from gpucluster.planning.node_template import registered_taints
from gpucluster.planning.placement import PoolPlan
from gpucluster.spec import ClusterSpec
from gpucluster.spec.alerts import MAX_ACTION_GROUPS, AlertsSpec
from gpucluster.vocabulary import TAINT_UNHEALTHY

ALERT_GROUP_SIZE = WORKSPACE_LIMITS["rulesPerGroup"].value


@dataclass(frozen=True)
class SourceFigures:
    """One exporter's raw output at the edge."""

    source: str
    series: int
    samples_per_minute: int
    basis: str


@dataclass(frozen=True)
class Written:
    """One recorded (or kept raw) metric as the workspace receives it."""

    metric: str
    per: Per
    series: int
    samples_per_minute: int


@dataclass(frozen=True)
class LimitFigure:
    key: str
    description: str
    used: int
    limit: int
    default: int
    raised: bool
    adjustable: bool

    @property
    def fits(self) -> bool:
        return self.used <= self.limit


@dataclass(frozen=True)
class MetricsPlan:
    scrape_interval_seconds: int
    rule_interval_seconds: int
    raw: tuple[SourceFigures, ...]
    written: tuple[Written, ...]
    limits: tuple[LimitFigure, ...]
    shards: int
    """Edge Prometheus shards: ceil(raw series / the stack's series per shard); targets split by hashmod. Each runs
    as `EDGE_REPLICAS` replicas."""
    series_per_shard: int
    rule_groups: tuple[int, ...]
    """Rules per workspace rule group, in order: its recording rules, then the alerts in groups of at most the
    workspace's rules-per-group limit."""
    dcgm_default_series: int
    """What dcgm-exporter's default counter set would produce on the same GPUs, for comparison."""
    counts: dict[str, int]
    """How many of each `Per` the plan has."""
    alerts: AlertsSpec
    """Where the alerts are delivered (the stack's receivers and action groups)."""

    @property
    def raw_series(self) -> int:
        return sum(s.series for s in self.raw)

    @property
    def raw_samples_per_minute(self) -> int:
        return sum(s.samples_per_minute for s in self.raw)

    @property
    def ingested_series(self) -> int:
        return sum(w.series for w in self.written)

    @property
    def ingested_samples_per_minute(self) -> int:
        return sum(w.samples_per_minute for w in self.written)

    @property
    def largest(self) -> Written:
        return max(self.written, key=lambda w: (w.series, w.metric))

    @property
    def workspaces_at_default(self) -> int:
        """Workspaces the written figures would need at Azure's default limits."""
        return max(math.ceil(self.ingested_series / WORKSPACE_LIMITS["activeSeries"].value),
                   math.ceil(self.ingested_samples_per_minute / WORKSPACE_LIMITS["eventsPerMinute"].value), 1)


def _per_minute(series: int, interval_seconds: int) -> int:
    return series * 60 // interval_seconds


def _ib_ports(pool: PoolPlan) -> int:
    """One InfiniBand HCA port per GPU on the catalogue's InfiniBand sizes (ND H100 v5: 8; ND GB300 v6: 4)."""
    return pool.size.gpus if pool.infiniband else 0


def _counts(spec: ClusterSpec, pools: tuple[PoolPlan, ...], cp: ControlPlanePlan, shards: int) -> dict[str, int]:
    members = len(cp.etcd.members) + (len(cp.events.members) if cp.events is not None else 0)
    return {
        "gpuNode": sum(p.nodes for p in pools if p.size.gpus),
        "ibNode": sum(p.nodes for p in pools if _ib_ports(p)),
        "node": sum(p.nodes for p in pools) + cp.api.count,
        "gpuDomain": sum(len(p.scale_sets) for p in pools if p.size.gpus),
        "team": len(spec.teams),
        "teamShard": len(spec.teams) * shards,
        "priorityLevel": len(DEFAULT_SHARES) + 1,
        "apiServer": cp.api.count,
        "etcdMember": members,
        "cluster": 1,
        "shard": shards,
    }


def _raw(pools: tuple[PoolPlan, ...], cp: ControlPlanePlan, interval: int) -> tuple[SourceFigures, ...]:
    gpus = sum(p.gpus for p in pools)
    dcgm = gpus * len(TRAINING_COUNTERS)
    # node_cpu_guest_seconds_total (NODE_CPU_GUEST_MODES) is dropped at the scrape (the job keeps
    # node_cpu_seconds_total and the InfiniBand metrics only), so the edge never holds it.
    cpu_modes = len(NODE_CPU_MODES)
    cpus = sum(p.nodes * p.size.vcpus for p in pools) + cp.api.count * cp.api.size.vcpus
    ports = sum(p.nodes * _ib_ports(p) for p in pools)
    # kube_node_spec_taint: one per taint a node has (registered, plus the health agent's unhealthy taint);
    # kube_node_status_condition: Ready in its three statuses.
    taints = sum(p.nodes * (len({t.key for t in registered_taints(p)} | {TAINT_UNHEALTHY})) for p in pools)
    nodes = sum(p.nodes for p in pools) + cp.api.count
    ksm = (taints + cp.api.count + nodes * KSM_READY_STATUSES) * KSM_REPLICAS
    rows = (
        ("dcgm-exporter", dcgm, f"{gpus:,} GPUs x {len(TRAINING_COUNTERS)} counters"),
        ("node_exporter cpu", cpus * cpu_modes,
         f"{cpus:,} vCPUs x {cpu_modes} modes of node_cpu_seconds_total (the {len(NODE_CPU_GUEST_MODES)} guest "
         "modes' series are dropped at the scrape)"),
        ("node_exporter infiniband", ports * len(NODE_INFINIBAND_PORT_METRICS),
         f"{ports:,} ports x at most {len(NODE_INFINIBAND_PORT_METRICS)} metrics"),
        ("kube-state-metrics nodes", ksm,
         f"{nodes:,} nodes: Ready x {KSM_READY_STATUSES} statuses, one per taint, from {KSM_REPLICAS} replicas"),
    )
    return tuple(SourceFigures(name, series, _per_minute(series, interval), basis) for name, series, basis in rows)


def _limits(spec: ClusterSpec, plan: MetricsPlan) -> tuple[LimitFigure, ...]:
    declared = spec.metrics.workspace
    raised = {"activeSeries": declared.active_series, "eventsPerMinute": declared.events_per_minute,
              "ruleGroups": declared.rule_groups}
    used = {"activeSeries": plan.ingested_series, "eventsPerMinute": plan.ingested_samples_per_minute,
            "querySeriesPerMetric": plan.largest.series, "rulesPerGroup": max(plan.rule_groups),
            "ruleGroups": len(plan.rule_groups)}
    return tuple(LimitFigure(key, limit.description, used[key], raised.get(key) or limit.value, limit.value,
                             raised.get(key) is not None, limit.adjustable)
                 for key, limit in WORKSPACE_LIMITS.items())


def plan_metrics(spec: ClusterSpec, pools: tuple[PoolPlan, ...], cp: ControlPlanePlan) -> MetricsPlan:
    interval = spec.metrics.scrape_interval_seconds
    raw = _raw(pools, cp, interval)
    shard_size = spec.metrics.series_per_shard
    shards = max(1, math.ceil(sum(s.series for s in raw) / shard_size))
    counts = _counts(spec, pools, cp, shards)
    # Each edge replica writes its own copy of the edge rules' output and the kept raw gauges; the workspace's own
    # rules write once.
    def row(metric: str, per: Per, series: int, every: int) -> Written:
        return Written(metric, per, series, _per_minute(series, every))

    written = (*(row(r.record, r.per, counts[r.per] * EDGE_REPLICAS, RULE_INTERVAL_SECONDS) for r in RECORDING_RULES),
               *(row(name, per, counts[per] * each * EDGE_REPLICAS, interval) for name, per, each in KEPT_RAW),
               *(row(r.record, r.per, counts[r.per], RULE_INTERVAL_SECONDS) for r in WORKSPACE_RULES))
    alerts = len(alert_rules(cp.api.flags.max_requests_inflight + cp.api.flags.max_mutating_requests_inflight, shards))
    groups = (len(WORKSPACE_RULES),
              *(min(ALERT_GROUP_SIZE, alerts - start) for start in range(0, alerts, ALERT_GROUP_SIZE)))
    plan = MetricsPlan(interval, RULE_INTERVAL_SECONDS, raw, written, (), shards, shard_size, groups,
                       sum(p.gpus for p in pools) * sum(1 for _, kind in DCGM_DEFAULT_COUNTERS if kind != "label"),
                       counts, spec.metrics.alerts)
    return replace(plan, limits=_limits(spec, plan))


def metrics_problems(plan: MetricsPlan) -> list[Problem]:
    problems = _delivery_problems(plan)
    for limit in plan.limits:
        if limit.fits:
            continue
        if limit.adjustable:
            problems.append(Problem(
                f"cluster.metrics.workspace.{limit.key}",
                f"the metrics pipeline writes {limit.used:,} {limit.description} but the workspace allows "
                f"{limit.limit:,}: request an increase to at least {limit.used:,} and record it with `request`, or "
                "write less (docs/metrics.md)"))
        else:
            problems.append(Problem(
                "cluster.metrics",
                f"{plan.largest.metric} has {limit.used:,} series but Azure Monitor caps {limit.description} at "
                f"{limit.limit:,}, which cannot be raised: aggregate it further at the edge (docs/metrics.md)"))
    return problems


def _delivery_problems(plan: MetricsPlan) -> list[Problem]:
    alerts = plan.alerts
    groups = int(alerts.own_group) + len(alerts.action_group_ids)
    if not groups:
        return [Problem("cluster.metrics.alerts", f"the {sum(plan.rule_groups[1:])} alerts would reach no one: set "
                        "emails, webhooks, armRoles (e.g. [Owner]: the subscription's owners, by e-mail) or "
                        "actionGroupIds (docs/metrics.md, \"Alert delivery\")")]
    if groups > MAX_ACTION_GROUPS:
        return [Problem("cluster.metrics.alerts.actionGroupIds", f"an alert rule takes at most {MAX_ACTION_GROUPS} "
                        f"action groups and this stack gives {groups} (the stack's own receivers are one): put "
                        "receivers in fewer groups")]
    return []
