"""What the metrics pipeline reads and the limits it must fit, with sources (docs/metrics.md).

The exporters' facts (DCGM's field names, dcgm-exporter's default counters, node_exporter's per-CPU modes and
per-port InfiniBand metrics) are extracted from their sources by tools/extract_metrics_facts.py into
`metrics_facts.py`; this module chooses from them and states the Azure Monitor limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.metrics_facts import DCGM_EXPORTER_TAG, NODE_EXPORTER_TAG

_AMW_LIMITS = ("Microsoft Learn, Azure Monitor service limits, Prometheus metrics (learn.microsoft.com/azure/"
               "azure-monitor/service-limits, include file 'Ingestion', 'Queries', 'Alert and recording rules' tables)")


@dataclass(frozen=True)
class WorkspaceLimit:
    key: str
    """camelCase key under `cluster.metrics.workspace` that declares a raised value (adjustable limits only)."""
    value: int
    description: str
    adjustable: bool
    source: str = _AMW_LIMITS


WORKSPACE_LIMITS: dict[str, WorkspaceLimit] = {limit.key: limit for limit in (
    WorkspaceLimit("activeSeries", 1_000_000,
                   "active time series per Azure Monitor workspace (reported in the last ~12 hours)", True),
    WorkspaceLimit("eventsPerMinute", 1_000_000, "events (samples) per minute ingested per workspace", True),
    WorkspaceLimit("querySeriesPerMetric", 500_000, "time series one PromQL query may read per metric", False),
    WorkspaceLimit("rulesPerGroup", 20, "rules per rule group", False),
    WorkspaceLimit("ruleGroups", 500, "rule groups per workspace", True),
)}


@dataclass(frozen=True)
class Counter:
    field: str
    """A DCGM field name (go-dcgm's `DCGM_FI` map, the names dcgm-exporter resolves a CSV line through)."""
    kind: str
    """Prometheus type: gauge or counter."""
    help: str


TRAINING_COUNTERS: tuple[Counter, ...] = (
    # Utilisation
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    Counter("DCGM_FI_PROF_SM_ACTIVE", "gauge", "Ratio of cycles an SM has at least one warp assigned."),
    Counter("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    Counter("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    # Throttling: time spent slowed down, in ns (a bitmask of reasons cannot be read in PromQL)
    Counter("DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS", "counter", "Time in hardware thermal slowdown (ns)."),
    Counter("DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP_NS", "counter", "Time held at the power cap (ns)."),
    # Errors
    Counter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    Counter("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors."),
    Counter("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC errors."),
    Counter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for uncorrectable errors."),
    Counter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    Counter("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "NVLink flow-control CRC errors, all lanes."),
    Counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
)
"""The counter set dcgm-exporter runs with on this cluster: utilisation, throttling and errors for training; no
encoder/decoder, clocks, vGPU or PCIe byte rates (dcgm-exporter's default set has them)."""

NODE_EXPORTER_COLLECTORS = ("cpu", "infiniband")
"""node_exporter runs with `--collector.disable-defaults` and only these: CPU busy time per node and InfiniBand port
state and errors; the rest of a node's health is the kubelet's and the GPU health agent's."""

KSM_NODE_METRICS = ("kube_node_spec_taint", "kube_node_status_condition")
"""kube-state-metrics runs with `--resources=nodes` and `--metric-allowlist` of these; of the conditions, only Ready
is kept (metric relabelling), in its three statuses (true, false, unknown)."""
KSM_READY_STATUSES = 3

RULE_INTERVAL_SECONDS = 60
"""Recording rules at the edge and alert rules in the workspace run once a minute (the workspace's default rule-group
interval, and its minimum)."""

VERSIONS = {"dcgm-exporter": DCGM_EXPORTER_TAG, "node_exporter": NODE_EXPORTER_TAG}
