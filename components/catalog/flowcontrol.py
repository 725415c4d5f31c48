"""API Priority and Fairness as the pinned Kubernetes configures it, and the node agents the charts run.

The API server creates these priority levels and flow schemas itself (`apf_configuration_controller`); the
library adds one level and two schemas beside them (components/kubernetes/objects/flowcontrol.py). Every row
here is read from the source named with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.in_cluster import DRA_DRIVER_NAMESPACE, DRANET_NAMESPACE
from gpucluster.catalog.versions import DRA_DRIVER, DRANET, GPU_OPERATOR

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
    rack_nodes_only: bool = False
    """Runs on rack pools' nodes only (RACK_CHART_AGENTS)."""


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

_DRA = f"kubernetes-sigs/dra-driver-nvidia-gpu v{DRA_DRIVER.version} (commit 0882da87)"
_DRA_CHART = f"{_DRA} deployments/helm/nvidia-dra-driver-gpu/templates"
_DRANET = f"kubernetes-sigs/dranet v{DRANET.version} (commit ca195e29)"
RACK_CHART_AGENTS: tuple[ChartAgent, ...] = (
    # Release `nvidia-dra-driver-gpu`: _helpers.tpl fullname is the release name (it contains the chart name),
    # serviceAccountName `<fullname>-service-account` (values.yaml serviceAccount.create true, name "").
    ChartAgent("nvidia-dra-driver-gpu", DRA_DRIVER_NAMESPACE, "nvidia-dra-driver-gpu-kubelet-plugin",
               "nvidia-dra-driver-gpu-service-account-kubeletplugin", True,
               ("nodes", "pods", "resourceclaims", "resourceslices", "computedomains"), None,
               f"{_DRA_CHART}/kubeletplugin.yaml (serviceAccountName <sa>-kubeletplugin), rbac-kubeletplugin.yaml "
               "(ClusterRole: get/list/watch nodes, pods, resourceclaims, computedomains; resourceslices written). "
               "Rate not modelled: informers (resync is local), and a GET per prepared claim every 10 minutes "
               "(cmd/compute-domain-kubelet-plugin/cleanup.go ResourceClaimCleanupInterval)", rack_nodes_only=True),
    # One DaemonSet per ComputeDomain, made by the driver's controller, on the domain's nodes: at most every rack node.
    ChartAgent("nvidia-dra-driver-gpu", DRA_DRIVER_NAMESPACE, "compute-domain-daemon (one per ComputeDomain)",
               "compute-domain-daemon-service-account", True, ("pods", "computedomains", "computedomaincliques"), None,
               f"{_DRA} templates/compute-domain-daemon.tmpl.yaml (serviceAccountName "
               f"compute-domain-daemon-service-account), {_DRA_CHART}/rbac-compute-domain-daemon.yaml "
               "(ClusterRoleBinding: get/list/watch/patch pods, computedomains and cliques cluster-wide). Rate not "
               "modelled: informers (cmd/compute-domain-daemon/common.go informerResyncPeriod, a local resync) and "
               "status writes on change",
               rack_nodes_only=True),
    # Release `dranet`: fullname is the release name; dranet.serviceAccountName is the fullname.
    ChartAgent("dranet", DRANET_NAMESPACE, "dranet", "dranet", True, ("resourceslices",), None,
               f"{_DRANET} deployments/helm/dranet/templates/daemonset.yaml, _helpers.tpl, rbac.yaml (list/watch "
               "resourceslices; get nodes, resourceclaims, deviceclasses). Rate not modelled: it polls its NICs "
               "locally (pkg/inventory/db.go, at most once a minute) and writes ResourceSlices on change",
               rack_nodes_only=True),
)
"""The rack charts' per-node agents (components/kubernetes/rack_devices.py installs the charts on clusters with rack
pools only)."""
