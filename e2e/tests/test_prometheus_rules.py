"""The metrics pipeline's configuration and rules under Prometheus' own engine (promtool at the pinned Prometheus):
prod's edge prometheus.yml passes `promtool check config` with its rule files where the pod mounts them, the edge and
workspace rule files pass `promtool check rules`, and every alert, fed the series the exporters write through the
edge recording rules and the workspace's rules, fires on the failure it names and stays silent on a healthy node
(`promtool test rules`).

The unit tests feed one shard of prod: two of its GPU nodes (8 GPUs, 8 InfiniBand ports each), the two
kube-state-metrics replicas, the API servers and the etcd members, labelled as the shard's rendered relabelling labels
them. The edge rules run once per replica of the shard with its external labels, as the workspace receives them; the
raw series the shards write as they are (`KEPT_RAW`) are fed as written, one copy per replica.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.consumers import binary
from e2e.promtool import (
    AlertCheck,
    Rendered,
    Series,
    Shape,
    as_written,
    lay_out_pod,
    promtool,
    promtool_version,
    relabel,
    render_stack,
    target_labels,
    unit_test_file,
    unit_test_group,
    workspace_rule_file,
)
from e2e.report import E2EReport
from gpucluster.catalog.in_cluster import GPU_OPERATOR_NAMESPACE
from gpucluster.catalog.metrics import TRAINING_COUNTERS
from gpucluster.kubernetes.objects.flowcontrol import NODE_AGENTS
from gpucluster.kubernetes.objects.metrics import DCGM_EXPORTER_PORT, KSM, KSM_PORT, NAMESPACE, NODE_EXPORTER, NODE_EXPORTER_PORT
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.ip_plan import API_SERVER_PORT
from gpucluster.planning.metrics_rules import KEPT_RAW, alert_rules
from gpucluster.planning.node_template import PREFLIGHT_TAINT, node_labels, node_taints
from gpucluster.planning.taints import NodeTaint

STACK = "prod"
GPU_MODEL = "NVIDIA H100 80GB HBM3"
"""What dcgm-exporter reports as `modelName` on an ND H100 v5 (NVML's device name)."""
IB_DEVICES = tuple(f"mlx5_ib{i}" for i in range(8))
"""An ND H100 v5's InfiniBand HCAs as the VM sees them, one port each."""
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
"""node_exporter's cpu collector: one counter per CPU and mode."""
CPU_BUSY = {"user": 59 / 64, "system": 4 / 64, "idle": 1 / 64}
"""Seconds per second in each mode on a node feeding its GPUs (binary fractions: the counters' steps stay exact)."""


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    if not binary("prometheus", "promtool").exists():
        pytest.fail("promtool is not built: run `python -m e2e.build prometheus`")
    return render_stack(STACK)


@pytest.fixture(scope="module")
def version() -> str:
    return promtool_version()


# What the program declares passes promtool's checks


def test_each_shards_config_passes_promtool(rendered: Rendered, version: str, tmp_path: Path, report: E2EReport) -> None:
    failed = []
    for shard in rendered.shards:
        config = lay_out_pod(rendered, shard, tmp_path / shard)
        run = promtool("check", "config", "--lint-fatal", str(config), env={"POD_NAME": f"{shard}-7c9d8f6b5-k2x7p"})
        if not run.ok:
            failed.append(str(run))
    report.scenario("promtool check config: every edge shard's prometheus.yml with its rule files",
                    "failed" if failed else "passed", shards=rendered.shards, promtool=version.splitlines()[0],
                    failed=failed)
    assert rendered.shards, "no edge Prometheus shard declared"
    assert not failed, "\n\n".join(failed)


def test_every_rule_file_passes_promtool(rendered: Rendered, version: str, tmp_path: Path, report: E2EReport) -> None:
    files = dict(rendered.edge_rules())
    files["workspace.yml"] = yaml.safe_dump(workspace_rule_file(rendered.rule_groups), sort_keys=False)
    runs = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        runs.append(promtool("check", "rules", "--lint-fatal", str(tmp_path / name)))
    failed = [str(r) for r in runs if not r.ok]
    report.scenario("promtool check rules: the edge rule files and the workspace's rule groups",
                    "failed" if failed else "passed", files=sorted(files), promtool=version.splitlines()[0],
                    failed=failed)
    assert not failed, "\n\n".join(failed)


# The slice of prod the unit tests feed


def _meta(label: str) -> str:
    """Prometheus' Kubernetes discovery label for a node label."""
    return "__meta_kubernetes_node_label_" + re.sub("[^a-zA-Z0-9_]", "_", label)


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, digit = divmod(number, 36)
        out = digits[digit] + out
        if not number:
            return out


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    labels: Mapping[str, str]
    exporter_pod: str
    """dcgm-exporter's pod address (node_exporter runs on the host network: the node's)."""


@dataclass(frozen=True)
class Cluster:
    """Shard 0 of prod and what it scrapes, with the names and addresses prod gives them."""

    config: dict[str, Any]
    external: dict[str, str]
    """The shard's external labels but `replica`."""
    replicas: tuple[str, ...]
    """The shard's pods' names (its `replica` external label)."""
    scrape_seconds: int
    evaluation_seconds: int
    nodes: tuple[Node, ...]
    gpus: int
    vcpus: int
    taints: tuple[NodeTaint, ...]
    team: str
    ksm: tuple[str, ...]
    api_servers: tuple[str, ...]
    etcd: dict[str, int]
    """Member target -> its quota-backend-bytes."""
    inflight_limit: int
    alerts: dict[str, dict[str, Any]]
    """The workspace's alert rules by name (Prometheus rule-file shape)."""
    shards: int
    """The stack's edge shards."""

    def job(self, name: str) -> dict[str, Any]:
        return _job(self.config, name)

    def node_target(self, node: Node) -> dict[str, str]:
        """The labels the shard's relabelling gives a GPU node's dcgm-exporter target."""
        labels = target_labels(self.job("dcgm-exporter"), pod_target(GPU_OPERATOR_NAMESPACE, node.name, node.exporter_pod,
                                                                     DCGM_EXPORTER_PORT, node))
        assert labels is not None, f"shard 0 does not scrape {node.name}"
        return labels


def pod_target(namespace: str, node_name: str, address: str, port: int, node: Node | None = None) -> dict[str, str]:
    """The discovery labels of a pod's container port (role pod, with the node's labels where attached)."""
    return {"__address__": f"{address}:{port}", "__meta_kubernetes_namespace": namespace,
            "__meta_kubernetes_pod_node_name": node_name, "__meta_kubernetes_pod_container_port_number": str(port),
            **({_meta(k): v for k, v in node.labels.items()} if node else {})}


def _job(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    return next(j for j in config["scrape_configs"] if j["job_name"] == name)


def _seconds(duration: str) -> int:
    return int(duration.removesuffix("s"))


def _hosts(cidr: str, start: int, count: int, stride: int = 1) -> list[str]:
    network = ipaddress.ip_network(cidr)
    hosts = [network.network_address + start + i * stride for i in range(count)]
    assert all(h in network for h in hosts), (cidr, start, count)
    return [str(h) for h in hosts]


def _cluster(rendered: Rendered, plan: ClusterPlan) -> Cluster:
    shard = rendered.shards[0]
    config = rendered.config(shard)
    external = dict(config["global"]["external_labels"])
    assert external.pop("replica") == "${POD_NAME}", "the replica label is the pod's name"
    pool = next(p for p in plan.pools if p.size.gpus and p.infiniband and not p.confidential)
    scale_set = pool.scale_sets[0]
    block = str(plan.ip.pool_block(pool.name).cidr)
    # Uniform scale sets name their VMs <prefix><6 base-36 characters>; the first two the shard scrapes.
    dcgm = _job(config, "dcgm-exporter")
    nodes: list[Node] = []
    for index in range(1000):
        name = f"{scale_set.name}{_base36(index):0>6}"
        node = Node(name, _hosts(block, 4 + index, 1)[0], node_labels(pool, scale_set, plan.spec.location),
                    _hosts(block, 4096 + 16 * index + 4, 1)[0])
        if target_labels(dcgm, pod_target(GPU_OPERATOR_NAMESPACE, name, node.exporter_pod, DCGM_EXPORTER_PORT, node)):
            nodes.append(node)
        if len(nodes) == 2:
            break
    assert len(nodes) == 2, f"{shard} scrapes fewer than two of {scale_set.name}'s first 1,000 nodes"
    cp = plan.control_plane
    quotas = {"etcd": cp.etcd.quota_backend_bytes, "etcd-events": cp.events.quota_backend_bytes if cp.events else 0}
    member = {address: name for name, address in plan.boot.etcd_addresses.items()}
    workspace = workspace_rule_file(rendered.rule_groups)
    return Cluster(
        config=config, external=external, replicas=(f"{shard}-7c9d8f6b5-k2x7p", f"{shard}-7c9d8f6b5-r4m9q"),
        scrape_seconds=_seconds(config["global"]["scrape_interval"]),
        evaluation_seconds=_seconds(config["global"]["evaluation_interval"]),
        nodes=tuple(nodes), gpus=pool.size.gpus, vcpus=pool.size.vcpus, taints=node_taints(pool),
        team=plan.scheduling.teams[0].namespace, ksm=tuple(_hosts(plan.ip.pins["pool-system"], 2048 + 4, 2, 16)),
        api_servers=tuple(_hosts(plan.ip.pins["controlplane"], 8, cp.api.count)),
        etcd={target: quotas[member[target.rsplit(":", 1)[0]].rsplit("-", 1)[0]]
              for group in _job(config, "etcd")["static_configs"] for target in group["targets"]},
        inflight_limit=cp.api.flags.max_requests_inflight + cp.api.flags.max_mutating_requests_inflight,
        alerts={r["alert"]: r for g in workspace["groups"] for r in g["rules"] if "alert" in r},
        shards=len(rendered.shards))


@pytest.fixture(scope="module")
def cluster(rendered: Rendered) -> Cluster:
    return _cluster(rendered, plan_cluster(rendered.spec))


# Series shapes: a value at each minute of a test, None while the series is absent


def const(value: float) -> Shape:
    return lambda t: value


def step(before: float, after: float, at: float) -> Shape:
    return lambda t: before if t < at else after


def during(inside: float, outside: float, start: float, end: float) -> Shape:
    return lambda t: inside if start <= t < end else outside


def present(value: float, start: float = 0, end: float = math.inf) -> Shape:
    return lambda t: value if start <= t < end else None


def counter(per_second: float, start: float = 0, base: float = 0) -> Shape:
    return lambda t: base + max(0.0, t - start) * 60 * per_second


def events(base: float, *minutes: float) -> Shape:
    """A counter that counts one at each of `minutes`."""
    return lambda t: base + sum(1 for m in minutes if t >= m)


def ramp(start_value: float, end_value: float, start: float, end: float) -> Shape:
    return lambda t: start_value + (end_value - start_value) * min(1.0, max(0.0, (t - start) / (end - start)))


HEALTHY_GPU: dict[str, Shape] = {
    "DCGM_FI_DEV_GPU_UTIL": const(97),
    "DCGM_FI_PROF_SM_ACTIVE": const(0.82),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": const(0.55),
    "DCGM_FI_PROF_DRAM_ACTIVE": const(0.41),
    "DCGM_FI_DEV_FB_USED": const(71234),
    "DCGM_FI_DEV_POWER_USAGE": const(612.5),
    "DCGM_FI_DEV_GPU_TEMP": const(63),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS": const(0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP_NS": counter(2e6),
    "DCGM_FI_DEV_XID_ERRORS": const(0),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": const(3),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": const(0),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": const(0),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": const(0),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": const(12),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": const(0),
}
"""A busy, healthy GPU: every counter the exporter runs with (TRAINING_COUNTERS), at a value a training job shows."""


@dataclass
class World:
    """The raw series of the slice, labelled as the shard's relabelling and remote write label them."""

    cluster: Cluster
    series: list[Series] = field(default_factory=list)

    def scrape(self, job: str, discovered: Mapping[str, str], exposed: Iterable[tuple[str, Mapping[str, str], Shape]],
               written: bool = False) -> None:
        """A target's series after the job's relabelling; `written`: as remote write sends them (per replica, with
        the external labels), for the series the workspace reads as they are."""
        config = self.cluster.job(job)
        target = target_labels(config, discovered)
        assert target is not None, f"job {job} drops the target {discovered['__address__']}"
        # Prometheus writes `up` for every target it scrapes: 1 when the scrape answered.
        if not any(s.metric == "up" and s.labels == target for s in self.series):
            self.series.append(Series("up", target, const(1)))
        for metric, labels, shape in exposed:
            assert not target.keys() & labels.keys(), (job, metric)
            kept = relabel({"__name__": metric, **labels, **target}, config.get("metric_relabel_configs", []))
            assert kept is not None, f"job {job} drops {metric}"
            if not written:
                self.series.append(Series(metric, {k: v for k, v in kept.items() if k != "__name__"}, shape))
                continue
            for replica in self.cluster.replicas:
                out = relabel({**kept, **self.cluster.external, "replica": replica},
                              self.cluster.config["remote_write"][0]["write_relabel_configs"])
                assert out is not None, f"remote write drops {metric}"
                self.series.append(Series(metric, {k: v for k, v in out.items() if k != "__name__"}, shape))

    def set(self, metric: str, shape: Shape, **match: str) -> None:
        """Every series of `metric` whose labels include `match` now has `shape`."""
        hits = [i for i, s in enumerate(self.series) if s.metric == metric and match.items() <= s.labels.items()]
        assert hits, f"no {metric} series with {match}"
        for i in hits:
            self.series[i] = Series(metric, self.series[i].labels, shape)

    def taint(self, node: Node, taint: NodeTaint, shape: Shape) -> None:
        """kube-state-metrics' series for a taint on the node, from each replica."""
        for address in self.cluster.ksm:
            self.scrape(KSM, pod_target(NAMESPACE, "system-z1-00000000", address, KSM_PORT),
                        [("kube_node_spec_taint", {"node": node.name, "key": taint.key, "value": taint.value,
                                                   "effect": taint.effect}, shape)])


def healthy(c: Cluster) -> World:
    world = World(c)
    for index, node in enumerate(c.nodes):
        # The first node runs a team's training pod on its GPUs (dcgm-exporter labels a GPU with its pod).
        pod = {"namespace": c.team, "pod": "pretrain-70b-worker-0", "container": "trainer"} if index == 0 else {}
        world.scrape("dcgm-exporter", pod_target(GPU_OPERATOR_NAMESPACE, node.name, node.exporter_pod, DCGM_EXPORTER_PORT,
                                                 node), [
            (counter_.field, {"gpu": str(gpu), "UUID": f"GPU-{index:08x}-0000-4000-8000-{gpu:012x}",
                              "pci_bus_id": f"00000000:{0x19 + 0x20 * gpu:02X}:00.0", "device": f"nvidia{gpu}",
                              "modelName": GPU_MODEL, "Hostname": node.name, **pod}, HEALTHY_GPU[counter_.field])
            for gpu in range(c.gpus) for counter_ in TRAINING_COUNTERS])
        world.scrape(NODE_EXPORTER, pod_target(NAMESPACE, node.name, node.address, NODE_EXPORTER_PORT, node), [
            *((f"node_infiniband_{metric}", {"device": device, "port": "1"}, shape)
              for device in IB_DEVICES for metric, shape in (("state_id", const(4)), ("link_downed_total", const(1)),
                                                             ("link_error_recovery_total", const(0)))),
            *(("node_cpu_seconds_total", {"cpu": str(cpu), "mode": mode}, counter(CPU_BUSY.get(mode, 0)))
              for cpu in range(c.vcpus) for mode in CPU_MODES)])
        for address in c.ksm:
            world.scrape(KSM, pod_target(NAMESPACE, "system-z1-00000000", address, KSM_PORT), [
                ("kube_node_status_condition", {"node": node.name, "condition": "Ready", "status": status},
                 const(1 if status == "true" else 0)) for status in ("true", "false", "unknown")])
        for taint in c.taints:
            world.taint(node, taint, const(1))
    for index, address in enumerate(c.api_servers):
        discovered = {"__address__": f"{address}:{API_SERVER_PORT}", "__meta_kubernetes_namespace": "default",
                      "__meta_kubernetes_service_name": "kubernetes"}
        world.scrape("apiserver", discovered, [
            ("apiserver_current_inflight_requests", {"request_kind": "readOnly"}, const(420 + 10 * index)),
            ("apiserver_current_inflight_requests", {"request_kind": "mutating"}, const(130))], written=True)
        # Rejections long before the test, at the levels the project configures: the counters stay where they are.
        world.scrape("apiserver", discovered, [
            ("apiserver_flowcontrol_rejected_requests_total",
             {"flow_schema": NODE_AGENTS, "priority_level": NODE_AGENTS, "reason": "queue-full"}, const(40 + index))])
    for target, quota in c.etcd.items():
        world.scrape("etcd", {"__address__": target}, [
            ("etcd_mvcc_db_total_size_in_bytes", {}, const(round(quota * 0.35))),
            ("etcd_server_quota_backend_bytes", {}, const(quota))], written=True)
    return world


# Each alert: what a healthy cluster may do without it firing, and the failures it names


@dataclass(frozen=True)
class Case:
    what: str
    minutes: int
    change: Callable[[World], None]
    silent_at: tuple[int, ...]
    fires_at: tuple[int, ...] = ()
    firing: Callable[[Cluster], dict[str, str]] | None = None
    """The labels of the one alert firing at `fires_at` (the rule's own added)."""


def on_node(c: Cluster) -> dict[str, str]:
    target = c.node_target(c.nodes[0])
    return {"node": target["node"], "domain": target["domain"], "zone": target["zone"], **c.external}


def on_kube_node(c: Cluster) -> dict[str, str]:
    return {"node": c.nodes[0].name, **c.external}


def _gpu(metric: str, shape: Shape, gpu: int) -> Callable[[World], None]:
    return lambda w: w.set(metric, shape, node=w.cluster.nodes[0].name, gpu=str(gpu))


def _port(metric: str, shape: Shape, *devices: str) -> Callable[[World], None]:
    def change(w: World) -> None:
        for device in devices:
            w.set(f"node_infiniband_{metric}", shape, node=w.cluster.nodes[0].name, device=device)
    return change


def _both(*changes: Callable[[World], None]) -> Callable[[World], None]:
    def change(w: World) -> None:
        for each in changes:
            each(w)
    return change


def _ready(true: Shape, false: Shape, unknown: Shape) -> Callable[[World], None]:
    return _both(*(lambda w, s=shape, status=status: w.set("kube_node_status_condition", s, node=w.cluster.nodes[0].name,
                                                            status=status)
                   for status, shape in (("true", true), ("false", false), ("unknown", unknown))))


def _etcd(shape: Callable[[int], Shape]) -> Callable[[World], None]:
    def change(w: World) -> None:
        target, quota = next(iter(w.cluster.etcd.items()))
        w.set("etcd_mvcc_db_total_size_in_bytes", shape(quota), instance=target)
    return change


def _inflight(api_server: int, read_only: Callable[[int], Shape], mutating: Callable[[int], Shape]) -> Callable[[World], None]:
    def change(w: World) -> None:
        instance = f"{w.cluster.api_servers[api_server]}:{API_SERVER_PORT}"
        w.set("apiserver_current_inflight_requests", read_only(w.cluster.inflight_limit), instance=instance,
              request_kind="readOnly")
        w.set("apiserver_current_inflight_requests", mutating(w.cluster.inflight_limit), instance=instance,
              request_kind="mutating")
    return change


def _at_80_percent(limit: int) -> int:
    """The largest load not over 80% of `limit`."""
    return math.floor(limit * 0.8)


def _apiserver_instance(c: Cluster) -> dict[str, str]:
    return {"instance": f"{c.api_servers[2]}:{API_SERVER_PORT}"}


def _etcd_member(c: Cluster) -> dict[str, str]:
    return {"instance": next(iter(c.etcd)), "job": "etcd", **c.external}


def _no_change(w: World) -> None:
    return None


def on_node_exporter(c: Cluster) -> dict[str, str]:
    target = target_labels(c.job(NODE_EXPORTER), pod_target(NAMESPACE, c.nodes[1].name, c.nodes[1].address,
                                                            NODE_EXPORTER_PORT, c.nodes[1]))
    assert target is not None
    return {"node": target["node"], "zone": target["zone"], **c.external}


def _shards_written(shape: Callable[[int, int], Shape]) -> Callable[[World], None]:
    """`shard:up:bool` as each replica of each shard writes it (the workspace-only test of EdgeShardSilent: a shard
    that stops evaluates nothing, which the edge rules run in a unit test cannot show)."""
    def change(w: World) -> None:
        c = w.cluster
        w.series = [Series("shard:up:bool", {**c.external, "shard": str(shard), "replica": f"prometheus-{shard}-{r}"},
                           shape(shard, r)) for shard in range(c.shards) for r in range(2)]
    return change


SCENARIOS: dict[str, tuple[Case, ...]] = {
    "EtcdDatabaseNearQuota": (
        Case("every member at 35% of its quota, one growing to 75%", 60,
             _etcd(lambda q: ramp(q * 0.35, q * 0.75, 0, 40)), silent_at=(10, 40, 60)),
        Case("a member's database past 80% of its quota", 40, _etcd(lambda q: step(q * 0.35, q * 0.85, 20)),
             silent_at=(19,), fires_at=(32, 40), firing=_etcd_member),
    ),
    "ApiServerInflightHigh": (
        Case("an API server holding exactly 80% of its limit, another over it for 5 minutes", 40, _both(
            _inflight(0, lambda limit: const(_at_80_percent(limit) - 300), lambda limit: const(300)),
            _inflight(1, lambda limit: during(limit * 0.9, 430, 10, 15), lambda limit: const(300))),
             silent_at=(12, 20, 40)),
        Case("an API server holding 90% of its limit", 40,
             _inflight(2, lambda limit: step(440, round(limit * 0.6), 10), lambda limit: step(130, round(limit * 0.3), 10)),
             silent_at=(9,), fires_at=(22, 40), firing=_apiserver_instance),
    ),
    "ApiServerFlowControlRejecting": (
        Case("rejections from before the test: the counter stays flat", 30, _no_change, silent_at=(5, 15, 30)),
        Case("a priority level rejecting requests", 30,
             lambda w: w.set("apiserver_flowcontrol_rejected_requests_total", counter(0.5, 10, 40),
                             instance=f"{w.cluster.api_servers[0]}:{API_SERVER_PORT}"),
             silent_at=(9,), fires_at=(18, 30), firing=lambda c: {"priority_level": NODE_AGENTS, **c.external}),
    ),
    "GpuXidError": (
        Case("a GPU whose last XID (13) came before the test: the field keeps it", 40,
             _gpu("DCGM_FI_DEV_XID_ERRORS", const(13), 3), silent_at=(1, 5, 20, 40)),
        Case("a GPU reports XID 79 (fallen off the bus)", 45, _gpu("DCGM_FI_DEV_XID_ERRORS", step(0, 79, 20), 2),
             silent_at=(19, 40), fires_at=(20, 25), firing=on_node),
        Case("a GPU with an old XID 13 reports XID 48 (double-bit ECC)", 45,
             _gpu("DCGM_FI_DEV_XID_ERRORS", step(13, 48, 20), 3), silent_at=(19, 40), fires_at=(21,), firing=on_node),
    ),
    "GpuEccUncorrectable": (
        Case("a GPU's double-bit count from before the test stays where it is", 40,
             _gpu("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", const(2), 4), silent_at=(1, 10, 20, 40)),
        Case("a GPU reports a double-bit ECC error", 40, _gpu("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", step(0, 1, 20), 4),
             silent_at=(19, 35), fires_at=(21, 25), firing=on_node),
    ),
    "GpuRowRemapFailure": (
        Case("a GPU that remapped a row (a remap is no failure)", 30,
             _gpu("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", step(0, 1, 10), 6), silent_at=(5, 15, 30)),
        Case("a GPU fails to remap a row", 30, _gpu("DCGM_FI_DEV_ROW_REMAP_FAILURE", step(0, 1, 10), 6),
             silent_at=(9,), fires_at=(11, 30), firing=on_node),
    ),
    "GpuNvlinkErrors": (
        Case("a trickle of NVLink CRC errors, and a 5-minute burst", 45, _both(
            _gpu("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", counter(0.2, 0, 12), 1),
            _gpu("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                 lambda t: 12 + 60 * 5 * (min(t, 25) - 20 if t >= 20 else 0), 5)),
             silent_at=(15, 25, 30, 45)),
        Case("NVLink CRC errors at 5 a second on a GPU", 40,
             _gpu("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", counter(5, 10, 12), 1),
             silent_at=(9,), fires_at=(28, 40), firing=on_node),
    ),
    "InfinibandLinkFlapping": (
        Case("a port that went down twice in the hour", 100, _both(
            _port("link_downed_total", events(1, 70, 80), "mlx5_ib3"),
            _port("state_id", lambda t: 1 if 70 <= t < 71 or 80 <= t < 81 else 4, "mlx5_ib3")),
             silent_at=(69, 75, 85, 100)),
        Case("a port that went down three times in the hour", 90, _both(
            _port("link_downed_total", events(1, 70, 75, 80), "mlx5_ib3"),
            _port("state_id", lambda t: 1 if any(m <= t < m + 1 for m in (70, 75, 80)) else 4, "mlx5_ib3")),
             silent_at=(69,), fires_at=(82, 90), firing=on_node),
    ),
    "InfinibandPortsDown": (
        Case("a port down for two minutes, back up", 100, _port("state_id", during(1, 4, 70, 72), "mlx5_ib5"),
             silent_at=(60, 72, 80, 100)),
        Case("a port goes down and stays down", 90, _port("state_id", step(4, 1, 70), "mlx5_ib5"),
             silent_at=(69,), fires_at=(87, 90), firing=on_node),
        Case("every port goes down", 90, _port("state_id", step(4, 1, 70), *IB_DEVICES),
             silent_at=(69,), fires_at=(87, 90), firing=on_node),
    ),
    "NodeStuckInPreflight": (
        Case("a new node that passes its checks in 10 minutes", 45,
             lambda w: w.taint(w.cluster.nodes[0], PREFLIGHT_TAINT, present(1, 0, 10)), silent_at=(5, 20, 45)),
        Case("a node that keeps its preflight taint", 45,
             lambda w: w.taint(w.cluster.nodes[0], PREFLIGHT_TAINT, present(1)),
             silent_at=(29,), fires_at=(32, 45), firing=on_kube_node),
    ),
    "GpuExporterDown": (
        Case("dcgm-exporter restarting: its scrapes fail for 4 minutes", 40,
             lambda w: w.set("up", during(0, 1, 10, 14), job="dcgm-exporter", node=w.cluster.nodes[0].name),
             silent_at=(12, 20, 40)),
        Case("dcgm-exporter stops answering", 40,
             lambda w: w.set("up", step(1, 0, 10), job="dcgm-exporter", node=w.cluster.nodes[0].name),
             silent_at=(9,), fires_at=(22, 40), firing=on_node),
    ),
    "GpuExporterMissing": (
        Case("a GPU node removed: its exporter and its Ready series go together", 45, _both(
            lambda w: w.set("up", present(1, 0, 15), job="dcgm-exporter", node=w.cluster.nodes[0].name),
            lambda w: w.set("kube_node_status_condition", present(1, 0, 15), node=w.cluster.nodes[0].name,
                            status="true")), silent_at=(10, 20, 30, 45)),
        # The target's series end with a staleness marker at minute 15 (as Prometheus marks a target that is gone),
        # so the gap shows from minute 15 and the alert fires 10 minutes later.
        Case("a Ready GPU node's dcgm-exporter pod is gone (its target with it)", 45,
             lambda w: w.set("up", present(1, 0, 15), job="dcgm-exporter", node=w.cluster.nodes[0].name),
             silent_at=(14, 24), fires_at=(26, 45), firing=on_node),
    ),
    "NodeExporterDown": (
        Case("node_exporter answers again after 3 minutes", 40,
             lambda w: w.set("up", during(0, 1, 10, 13), job=NODE_EXPORTER, node=w.cluster.nodes[1].name),
             silent_at=(11, 20, 40)),
        Case("node_exporter stops answering", 40,
             lambda w: w.set("up", step(1, 0, 10), job=NODE_EXPORTER, node=w.cluster.nodes[1].name),
             silent_at=(9,), fires_at=(22, 40), firing=on_node_exporter),
    ),
    "EdgeShardSilent": (
        Case("every shard's replicas writing, one of shard 0's stopping", 30,
             _shards_written(lambda shard, replica: present(1, 0, 10) if (shard, replica) == (0, 1) else const(1)),
             silent_at=(5, 15, 30)),
        Case("shard 0 stops writing (both replicas down)", 40,
             _shards_written(lambda shard, replica: present(1, 0, 10) if shard == 0 else const(1)),
             silent_at=(9, 14), fires_at=(27, 40), firing=lambda c: {"shard": c.external["shard"]}),
    ),
    "NodeNotReady": (
        Case("a kubelet restart: NotReady for 5 minutes", 40,
             _ready(during(0, 1, 10, 15), during(1, 0, 10, 15), const(0)), silent_at=(12, 20, 40)),
        Case("a node NotReady", 40, _ready(step(1, 0, 10), step(0, 1, 10), const(0)),
             silent_at=(9,), fires_at=(27, 40), firing=on_kube_node),
        Case("a node whose kubelet stopped reporting (Ready Unknown)", 40,
             _ready(step(1, 0, 10), const(0), step(0, 1, 10)), silent_at=(9,), fires_at=(27, 40), firing=on_kube_node),
    ),
}
"""Per alert: the cases where it must stay silent (a healthy node, with what a healthy node may do) and the failures
it names, where it must fire, with the alert's labels. Minutes count from the start of a test."""
WORKSPACE_ONLY = {"EdgeShardSilent"}
"""Alerts tested on the series the shards write, the workspace's rules alone: a shard that stops runs no edge rule."""


@pytest.fixture(scope="module")
def rule_files(rendered: Rendered, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The edge rules as each replica's output reaches the workspace and the workspace's rule groups, in a folder;
    and the groups in the order they run."""
    folder = tmp_path_factory.mktemp("rules")
    edge = as_written({"groups": [g for text in rendered.edge_rules().values() for g in yaml.safe_load(text)["groups"]]},
                      cluster.external, cluster.replicas)
    workspace = workspace_rule_file(rendered.rule_groups)
    (folder / "edge.yml").write_text(yaml.safe_dump(edge, sort_keys=False))
    (folder / "workspace.yml").write_text(yaml.safe_dump(workspace, sort_keys=False))
    return folder, [g["name"] for g in edge["groups"] + workspace["groups"]]


def _checks(alert: str, case: Case, c: Cluster) -> list[AlertCheck]:
    rule = c.alerts[alert]
    annotations = rule.get("annotations", {})
    firing = ({**case.firing(c), **rule.get("labels", {})},) if case.firing else ()
    return [*(AlertCheck(m, alert, (), annotations) for m in case.silent_at),
            *(AlertCheck(m, alert, firing, annotations) for m in case.fires_at)]


def test_every_alert_has_cases(cluster: Cluster) -> None:
    alerts = {a.alert for a in alert_rules(cluster.inflight_limit, cluster.shards)}
    assert set(cluster.alerts) == alerts, "the workspace's alerts are the plan's"
    assert set(SCENARIOS) == alerts, f"alerts without unit tests: {sorted(alerts - set(SCENARIOS))}"
    for alert, cases in SCENARIOS.items():
        assert any(c.firing for c in cases) and any(not c.firing for c in cases), alert


def test_a_healthy_gpu_feeds_every_exported_counter() -> None:
    assert set(HEALTHY_GPU) == {c.field for c in TRAINING_COUNTERS}
    assert {name for name, _, _ in KEPT_RAW} == {"apiserver_current_inflight_requests", "etcd_mvcc_db_total_size_in_bytes",
                                                 "etcd_server_quota_backend_bytes"}


@pytest.mark.parametrize("alert", [a.alert for a in alert_rules(0, 1)])  # the names, whatever the limit
def test_the_alert_fires_on_its_failure_and_not_on_a_healthy_node(
        alert: str, cluster: Cluster, rule_files: tuple[Path, list[str]], report: E2EReport) -> None:
    folder, order = rule_files
    cases = SCENARIOS.get(alert)
    assert cases, f"{alert} has no unit test: add its cases to SCENARIOS"
    groups = []
    for case in cases:
        world = healthy(cluster)
        case.change(world)
        groups.append(unit_test_group(f"{alert}: {case.what}", cluster.scrape_seconds, case.minutes, world.series,
                                      _checks(alert, case, cluster)))
    path = folder / f"{alert}.test.yml"
    files = ["workspace.yml"] if alert in WORKSPACE_ONLY else ["edge.yml", "workspace.yml"]
    if alert in WORKSPACE_ONLY:
        order = [g for g in order if "@" not in g]  # the edge groups are named <group>@<replica> (as_written)
    path.write_text(yaml.safe_dump(unit_test_file(files, cluster.evaluation_seconds, order, groups),
                                   sort_keys=False, width=1 << 16))
    run = promtool("test", "rules", path.name, cwd=folder)
    report.scenario(f"promtool test rules: {alert} fires on its failure, silent on a healthy node",
                    "passed" if run.ok else "failed", expr=cluster.alerts[alert]["expr"],
                    fires_on=[c.what for c in cases if c.firing], silent_on=[c.what for c in cases if not c.firing],
                    output=run.output)
    assert run.ok, str(run)
