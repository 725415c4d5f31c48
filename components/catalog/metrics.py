"""What the metrics pipeline reads and the limits it must fit, with sources (docs/metrics.md).

The exporters' facts (DCGM's field names, dcgm-exporter's default counters, node_exporter's per-CPU modes and
per-port InfiniBand metrics) are extracted from their sources by tools/extract_metrics_facts.py into
components/catalog/facts/metrics_facts.json, which `metrics_facts.py` reads; this module chooses from them and states
the Azure Monitor limits.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from gpucluster.catalog.metrics_facts import NODE_EXPORTER_TAG

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
KSM_REPLICAS = 2
"""Two replicas in two zones, both scraped (each reports every node); the rules take `max by (node)`."""

EDGE_REPLICAS = 2
"""Each edge shard runs as two replicas in different zones, each writing its series with its own `replica` label (a
zone loss leaves every shard writing); the workspace's rules and alerts take `max without (replica)`."""
RULE_INTERVAL_SECONDS = 60
"""Recording rules at the edge and alert rules in the workspace run once a minute (the workspace's default rule-group
interval, and its minimum)."""

PROMETHEUS_VERSION = "v3.14.0"
"""prometheus/prometheus v3.14.0 (d7598b7141418fa35be2b5ec5d0fefb634199610): remote write signs in with a managed
identity (`azuread.managed_identity.client_id`, storage/remote/azuread/azuread.go)."""
PROMETHEUS_IMAGE = f"quay.io/prometheus/prometheus:{PROMETHEUS_VERSION}"
NODE_EXPORTER_IMAGE = f"quay.io/prometheus/node-exporter:{NODE_EXPORTER_TAG}"
KUBE_STATE_METRICS_VERSION = "v2.20.0"
"""kubernetes/kube-state-metrics v2.20.0 (4ffeda2ef866b0fef372849825a803296483b336): `--resources`,
`--metric-allowlist` (pkg/options/options.go); node conditions in three statuses (internal/store/utils.go
addConditionMetrics)."""
KUBE_STATE_METRICS_IMAGE = f"registry.k8s.io/kube-state-metrics/kube-state-metrics:{KUBE_STATE_METRICS_VERSION}"
METRICS_IMAGES = (PROMETHEUS_IMAGE, NODE_EXPORTER_IMAGE, KUBE_STATE_METRICS_IMAGE)

HEAD_BYTES_PER_SERIES = 8 * 1024
"""Memory an edge Prometheus is given per raw series it holds. Prometheus publishes no per-series figure; this is
the sizing assumption for a shard's memory request (its limit is twice that), to be checked on a running cluster
against `process_resident_memory_bytes / prometheus_tsdb_head_series` (docs/metrics.md, "What verify cannot know")."""

MONITORING_METRICS_PUBLISHER = "3913510d-42f4-4e42-8a64-420c390055eb"
"""Built-in role that may publish metrics to a data collection rule (azure-docs articles/role-based-access-control/
built-in-roles.md, Monitoring Metrics Publisher)."""
REMOTE_WRITE_PATH = "/streams/Microsoft-PrometheusMetrics/api/v1/write?api-version=2023-04-24"
"""After `<DCE metrics ingestion endpoint>/dataCollectionRules/<DCR immutable id>`: the workspace's remote-write
endpoint (Microsoft Learn, Azure Monitor managed service for Prometheus remote write)."""


def training_counters_csv() -> str:
    """dcgm-exporter's counter file (`FIELD,type,help` per line), as the GPU operator's chart takes it under
    `dcgmExporter.config.data` (gpu-operator v26.3.3 templates/dcgm_exporter_config.yaml).

    The exporter reads it with Go's encoding/csv (dcgm-exporter internal/pkg/counters/counter_config.go
    ReadCSVFile: Comment '#', no lazy quotes) and refuses a record that is not 3 fields, so a help text with a comma
    is quoted, as RFC 4180 quotes it: Go takes a quote only at a field's very start, hence no space after a comma
    (the exporter trims spaces itself)."""
    sink = io.StringIO()
    writer = csv.writer(sink, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    for c in TRAINING_COUNTERS:
        writer.writerow((c.field, c.kind, c.help))
    return sink.getvalue()
