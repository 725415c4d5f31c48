"""The recording rules the edge Prometheus shards evaluate and the alert rules the workspace evaluates.

Raw per-CPU, per-GPU and per-port series stay at the edge: each recording rule aggregates them to one series per
node, domain (scale set), team (namespace), priority level or control-plane member, and only those series (and the
few raw control-plane series named in `KEPT_RAW`) are remote-written to the workspace (docs/metrics.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpucluster.vocabulary import TAINT_PREFLIGHT

Per = Literal["gpuNode", "ibNode", "node", "gpuDomain", "team", "teamShard", "priorityLevel", "apiServer",
              "etcdMember", "cluster", "shard"]
"""What one series of a rule stands for: its count is the number of those in the plan (`teamShard`: a team's
partial sum in each edge shard)."""
Where = Literal["edge", "workspace"]
"""Edge rules run in every Prometheus shard, each over the nodes it scrapes (targets are split by node, so a node's
series are whole in one shard); workspace rules run in the Azure Monitor workspace over what the shards wrote."""

GROUP_GPU, GROUP_NODE, GROUP_CONTROL = "gpu", "node", "control-plane"


@dataclass(frozen=True)
class RecordingRule:
    record: str
    expr: str
    per: Per
    group: str
    where: Where = "edge"


@dataclass(frozen=True)
class AlertRule:
    alert: str
    expr: str
    for_: str
    severity: str
    summary: str
    unverified: str = ""
    """Why the rule's input is not known to count on the fleet's GPUs (an `unverified` annotation on the alert);
    empty: its promtool case and its source settle it."""


_GPU_BY = "node, domain, zone"

RECORDING_RULES: tuple[RecordingRule, ...] = (
    # Per GPU node, over its GPUs (dcgm-exporter: one series per GPU and field)
    RecordingRule("node:gpu_utilisation:avg", f"avg by ({_GPU_BY}) (DCGM_FI_DEV_GPU_UTIL)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_sm_active:avg", f"avg by ({_GPU_BY}) (DCGM_FI_PROF_SM_ACTIVE)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_tensor_active:avg", f"avg by ({_GPU_BY}) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)", "gpuNode",
                  GROUP_GPU),
    RecordingRule("node:gpu_dram_active:avg", f"avg by ({_GPU_BY}) (DCGM_FI_PROF_DRAM_ACTIVE)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_fb_used_mib:sum", f"sum by ({_GPU_BY}) (DCGM_FI_DEV_FB_USED)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_power_watts:sum", f"sum by ({_GPU_BY}) (DCGM_FI_DEV_POWER_USAGE)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_temp_celsius:max", f"max by ({_GPU_BY}) (DCGM_FI_DEV_GPU_TEMP)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_thermal_slowdown:ratio5m",
                  f"max by ({_GPU_BY}) (rate(DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS[5m])) / 1e9",
                  "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_power_capped:ratio5m",
                  f"max by ({_GPU_BY}) (rate(DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP_NS[5m])) / 1e9",
                  "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_xid_errors:max", f"max by ({_GPU_BY}) (DCGM_FI_DEV_XID_ERRORS)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_ecc_sbe_volatile:sum", f"sum by ({_GPU_BY}) (DCGM_FI_DEV_ECC_SBE_VOL_TOTAL)", "gpuNode",
                  GROUP_GPU),
    RecordingRule("node:gpu_ecc_dbe_volatile:sum", f"sum by ({_GPU_BY}) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)", "gpuNode",
                  GROUP_GPU),
    RecordingRule("node:gpu_remapped_rows_uncorrectable:sum",
                  f"sum by ({_GPU_BY}) (DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)", "gpuNode", GROUP_GPU),
    RecordingRule("node:gpu_row_remap_failure:max", f"max by ({_GPU_BY}) (DCGM_FI_DEV_ROW_REMAP_FAILURE)", "gpuNode",
                  GROUP_GPU),
    RecordingRule("node:gpu_nvlink_crc_errors:rate5m",
                  f"sum by ({_GPU_BY}) (rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[5m]))", "gpuNode",
                  GROUP_GPU),
    RecordingRule("node:gpu_pcie_replays:rate5m", f"sum by ({_GPU_BY}) (rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[5m]))",
                  "gpuNode", GROUP_GPU),
    # Per team (namespace: dcgm-exporter labels a GPU with the pod using it), partial in each shard
    RecordingRule("namespace:gpu_utilisation:sum", 'sum by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace!=""})',
                  "teamShard", GROUP_GPU),
    RecordingRule("namespace:gpus_in_use:count", 'count by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace!=""})',
                  "teamShard", GROUP_GPU),
    # Whether the node's dcgm-exporter answered its scrape (Prometheus' `up`): a dead exporter is otherwise silent.
    RecordingRule("node:dcgm_exporter_up:bool", f'max by ({_GPU_BY}) (up{{job="dcgm-exporter"}})', "gpuNode",
                  GROUP_GPU),
    # Per node: CPU (node_cpu_seconds_total: one series per CPU and mode), InfiniBand ports, Ready, preflight
    RecordingRule("node:cpu_busy:ratio5m", 'avg by (node, zone) (1 - rate(node_cpu_seconds_total{mode="idle"}[5m]))',
                  "node", GROUP_NODE),
    RecordingRule("node:ib_link_downed:increase1h",
                  "sum by (node, domain, zone) (increase(node_infiniband_link_downed_total[1h]))", "ibNode",
                  GROUP_NODE),
    RecordingRule("node:ib_link_error_recovery:increase1h",
                  "sum by (node, domain, zone) (increase(node_infiniband_link_error_recovery_total[1h]))", "ibNode",
                  GROUP_NODE),
    # `== bool` keeps a series per node at 0 when every port is down (a count over no series is no series).
    RecordingRule("node:ib_ports_active:count", "sum by (node, domain, zone) (node_infiniband_state_id == bool 4)",
                  "ibNode", GROUP_NODE),
    RecordingRule("node:ready:bool", 'max by (node) (kube_node_status_condition{condition="Ready",status="true"})',
                  "node", GROUP_NODE),
    RecordingRule("node:preflight_tainted:bool", f'max by (node) (kube_node_spec_taint{{key="{TAINT_PREFLIGHT}"}})',
                  "node", GROUP_NODE),
    # The same for node_exporter (Prometheus' `up`, 1 when the target answered).
    RecordingRule("node:node_exporter_up:bool", 'max by (node, zone) (up{job="node-exporter"})', "node", GROUP_NODE),
    # One series per shard replica whatever it scrapes: its absence in the workspace is a shard that writes nothing.
    RecordingRule("shard:up:bool", "vector(1)", "shard", GROUP_NODE),
    # Control plane: API Priority and Fairness rejections per priority level
    RecordingRule("priority_level:apiserver_flowcontrol_rejected:rate5m",
                  "sum by (priority_level) (rate(apiserver_flowcontrol_rejected_requests_total[5m]))",
                  "priorityLevel", GROUP_CONTROL),
)

def one(metric: str) -> str:
    """A written series once, whichever edge replica wrote it (each shard's two replicas differ in `replica` only)."""
    return f"max without (replica) ({metric})"


WORKSPACE_RULES: tuple[RecordingRule, ...] = (
    # Per domain and per team, over every shard's per-node series and partial sums
    RecordingRule("domain:gpu_utilisation:avg", f"avg by (domain, zone) ({one('node:gpu_utilisation:avg')})",
                  "gpuDomain", GROUP_GPU, "workspace"),
    RecordingRule("domain:gpu_power_watts:sum", f"sum by (domain, zone) ({one('node:gpu_power_watts:sum')})",
                  "gpuDomain", GROUP_GPU, "workspace"),
    RecordingRule("team:gpu_utilisation:avg", f"sum by (namespace) ({one('namespace:gpu_utilisation:sum')}) / "
                  f"sum by (namespace) ({one('namespace:gpus_in_use:count')})", "team", GROUP_GPU, "workspace"),
    RecordingRule("team:gpus_in_use:count", f"sum by (namespace) ({one('namespace:gpus_in_use:count')})", "team",
                  GROUP_GPU, "workspace"),
)

KEPT_RAW: tuple[tuple[str, Per, int], ...] = (
    ("apiserver_current_inflight_requests", "apiServer", 2),
    ("etcd_mvcc_db_total_size_in_bytes", "etcdMember", 1),
    ("etcd_server_quota_backend_bytes", "etcdMember", 1),
)
"""Raw control-plane series remote-written as they are: (metric, per, series each). The API server's inflight gauge
has one series per request kind (readOnly, mutating); etcd's two sizes one per member."""

WRITTEN = "[a-z_]+:[a-z0-9_]+:[a-z0-9_]+|" + "|".join(name for name, _, _ in KEPT_RAW)
"""The remote-write allowlist (`write_relabel_configs` keep on `__name__`): recorded series and `KEPT_RAW`."""


NVLINK_UNVERIFIED = ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL is NVML's legacy field, which reports success with "
                     "zero on Hopper (DataDog/datadog-agent PR 55966, which reads the per-link counters nvidia-smi "
                     "uses instead); whether dcgm-exporter 4.5.3-4.8.2 counts on H100 and GB300 is not verified here")


def shards_silent(shards: int) -> str:
    """Each edge shard that wrote nothing for the rule's window, by its `shard` label (absent() keeps the
    selector's equality matchers as its labels)."""
    return " or ".join(f'absent(shard:up:bool{{shard="{shard}"}})' for shard in range(shards))


def alert_rules(inflight_limit: int, shards: int) -> tuple[AlertRule, ...]:
    """The alerts evaluated in the workspace over what is written to it. `inflight_limit`: one API server's
    --max-requests-inflight plus --max-mutating-requests-inflight (the plan's); `shards`: the edge shards."""
    return (
        AlertRule("EtcdDatabaseNearQuota",
                  f"{one('etcd_mvcc_db_total_size_in_bytes')} / {one('etcd_server_quota_backend_bytes')} > 0.8", "10m",
                  "critical",
                  "an etcd member's database is over 80% of its quota: compact and defragment, or raise the quota"),
        AlertRule("ApiServerInflightHigh",
                  f"sum by (instance) ({one('apiserver_current_inflight_requests')}) > {int(inflight_limit * 0.8)}", "10m",
                  "warning", "an API server holds over 80% of its in-flight request limit"),
        AlertRule("ApiServerFlowControlRejecting", f"{one('priority_level:apiserver_flowcontrol_rejected:rate5m')} > 0", "5m",
                  "warning", "API Priority and Fairness is rejecting requests at a priority level"),
        # DCGM_FI_DEV_XID_ERRORS is the last XID a GPU reported and is never reset (NVIDIA/dcgm-exporter#500): a new
        # XID is a change to a non-zero code. Not seen: the same code again, or a code under the node's max.
        AlertRule("GpuXidError", f"{one('changes(node:gpu_xid_errors:max[10m])')} > 0 and {one('node:gpu_xid_errors:max')} > 0",
                  "0m", "warning", "a GPU reported an XID error: check the node's health agent and dmesg"),
        AlertRule("GpuEccUncorrectable", f"increase({one('node:gpu_ecc_dbe_volatile:sum')}[10m:1m]) > 0", "0m", "critical",
                  "a GPU reported uncorrectable (double-bit) ECC errors"),
        AlertRule("GpuRowRemapFailure", f"{one('node:gpu_row_remap_failure:max')} > 0", "0m", "critical",
                  "a GPU failed to remap a row: the GPU needs replacing"),
        AlertRule("GpuNvlinkErrors", f"{one('node:gpu_nvlink_crc_errors:rate5m')} > 1", "15m", "warning",
                  "NVLink CRC errors on a node's GPUs", unverified=NVLINK_UNVERIFIED),
        # increase() extrapolates to the window's ends (two downs read about 2.02): compare whole downs.
        AlertRule("InfinibandLinkFlapping", f"round({one('node:ib_link_downed:increase1h')}) > 2", "0m", "warning",
                  "an InfiniBand port went down more than twice in an hour"),
        AlertRule("InfinibandPortsDown", f"{one('node:ib_ports_active:count')} < on (node) group_left () "
                  f"({one('node:ib_ports_active:count offset 1h')})", "15m", "warning",
                  "a node has fewer active InfiniBand ports than an hour ago"),
        AlertRule("NodeStuckInPreflight", f"{one('node:preflight_tainted:bool')} == 1", "30m", "warning",
                  "a node kept its preflight taint for 30 minutes: its GPU health check has not passed"),
        AlertRule("NodeNotReady", f"{one('node:ready:bool')} == 0", "15m", "warning", "a node has not been Ready for 15 minutes"),
        # Absence: an exporter that stops answering, one that is gone from a Ready node, a shard that writes nothing.
        AlertRule("GpuExporterDown", f"{one('node:dcgm_exporter_up:bool')} == 0", "10m", "warning",
                  "a GPU node's dcgm-exporter does not answer its scrape: that node's GPU alerts cannot fire"),
        AlertRule("GpuExporterMissing", f"{one('last_over_time(node:dcgm_exporter_up:bool[1h])')} unless on (node) "
                  f"{one('node:dcgm_exporter_up:bool')} and on (node) {one('node:ready:bool')} == 1", "10m", "warning",
                  "a Ready GPU node scraped in the last hour has no dcgm-exporter target now (its pod is gone)"),
        AlertRule("NodeExporterDown", f"{one('node:node_exporter_up:bool')} == 0", "10m", "warning",
                  "a node's node_exporter does not answer its scrape: its CPU and InfiniBand alerts cannot fire"),
        AlertRule("EdgeShardSilent", shards_silent(shards), "10m", "critical",
                  "an edge Prometheus shard writes nothing: no alert on the nodes it scrapes can fire"),
    )
