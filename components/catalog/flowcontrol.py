"""API Priority and Fairness as the pinned Kubernetes configures it, and the node agents the charts run.

The API server creates these priority levels and flow schemas itself (`apf_configuration_controller`); the
library adds one level and two schemas beside them (components/kubernetes/objects/flowcontrol.py). Every row
here is read from the source named with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.versions import GPU_OPERATOR

APF_DEFAULTS_SOURCE = "kubernetes/apiserver v0.36.3 (Kubernetes 1.36) pkg/apis/flowcontrol/bootstrap/default.go"

DEFAULT_SHARES: dict[str, int] = {
    "exempt": 0, "catch-all": 5, "system": 30, "node-high": 40, "leader-election": 10, "workload-high": 40,
    "workload-low": 100, "global-default": 20,
}
"""nominalConcurrencyShares of every built-in priority level (the mandatory `exempt` and `catch-all`, and the
suggested ones). The server's concurrency limit is divided over all of them, ours included."""

DEFAULT_PRECEDENCE: dict[str, tuple[int, str]] = {
    "exempt": (1, "exempt"), "probes": (2, "exempt"), "system-leader-election": (100, "leader-election"),
    "system-node-high": (400, "node-high"), "system-nodes": (500, "system"),
    "kube-controller-manager": (800, "workload-high"), "kube-scheduler": (800, "workload-high"),
    "kube-system-service-accounts": (900, "workload-high"), "service-accounts": (9000, "workload-low"),
    "global-default": (9900, "global-default"), "catch-all": (10000, "catch-all"),
}
"""Built-in FlowSchema -> (matchingPrecedence, priority level). `system-node-high` and `system-nodes` match the
`system:nodes` group (kubelets); `kube-system-service-accounts` every service account in kube-system;
`service-accounts` every other one, DaemonSets' agents beside every controller."""

APF_SEATS_SOURCE = ("kubernetes/apiserver v0.36.3 pkg/util/flowcontrol/apf_controller.go finishQueueSetReconfigsLocked: "
                    "NominalCL = ceil(ServerCL x NCS / sum of NCS); pkg/server/options/feature.go: ServerCL = "
                    "--max-requests-inflight + --max-mutating-requests-inflight")
SLO_LATENCY_S = 1.0
SLO_SOURCE = ("kubernetes/community sig-scalability/slos/api_call_latency.md: p99 <= 1 s for mutating and "
              "single-object read calls")
"""A request holds its seat for as long as it takes; at the SLO's bound, a request per second holds one seat."""


@dataclass(frozen=True)
class ChartAgent:
    """A DaemonSet a pinned chart runs on every node it selects."""

    chart: str
    namespace: str
    daemonset: str
    service_account: str
    gpu_nodes_only: bool
    cluster_wide_watch: tuple[str, ...]
    """Resources its ClusterRole lets it list and watch across the cluster (what the chart grants)."""
    calls_per_minute: float | None
    """Steady API requests per pod per minute, where the agent's source was read; None where it was not."""
    source: str


_GPU_OP = f"NVIDIA/gpu-operator {GPU_OPERATOR.version}"
CHART_AGENTS: tuple[ChartAgent, ...] = (
    ChartAgent("cilium", "kube-system", "cilium", "cilium", False, ("pods", "nodes", "endpointslices"), None,
               "cilium Helm reference (1.15-1.19) serviceAccounts.cilium.name: cilium; the 1.20.3 chart and the "
               "agent's request rate were not read here"),
    ChartAgent("gpu-operator", "gpu-operator", "nvidia-container-toolkit-daemonset", "nvidia-container-toolkit",
               True, (), None, f"{_GPU_OP} assets/state-container-toolkit (a Role only)"),
    ChartAgent("gpu-operator", "gpu-operator", "nvidia-device-plugin-daemonset", "nvidia-device-plugin", True,
               ("nodes",), None, f"{_GPU_OP} assets/state-device-plugin/0210_clusterrole.yaml"),
    ChartAgent("gpu-operator", "gpu-operator", "nvidia-dcgm", "nvidia-dcgm", True, (), None,
               f"{_GPU_OP} assets/state-dcgm"),
    ChartAgent("gpu-operator", "gpu-operator", "nvidia-dcgm-exporter", "nvidia-dcgm-exporter", True, ("pods",), None,
               f"{_GPU_OP} assets/state-dcgm-exporter/0210_clusterrole.yaml"),
    ChartAgent("gpu-operator", "gpu-operator", "nvidia-operator-validator", "nvidia-operator-validator", True,
               ("nodes",), None, f"{_GPU_OP} assets/state-operator-validation/0210_clusterrole.yaml"),
    ChartAgent("gpu-operator", "gpu-operator", "gpu-feature-discovery", "nvidia-gpu-feature-discovery", True,
               ("nodes",), None, f"{_GPU_OP} assets/gpu-feature-discovery (labels through a file every "
                                 "GFD_SLEEP_INTERVAL=60s; its config-manager sidecar not read)"),
    ChartAgent("gpu-operator", "gpu-operator", "gpu-operator-node-feature-discovery-worker", "node-feature-discovery",
               False, (), 2.0,
               f"{_GPU_OP} values.yaml node-feature-discovery.worker.serviceAccount.name; kubernetes-sigs/"
               "node-feature-discovery v0.18.3 pkg/nfd-worker/nfd-worker.go: every core.sleepInterval (60 s) a GET "
               "of its NodeFeature and at most one UPDATE"),
)
