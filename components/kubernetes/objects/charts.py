"""Values for the upstream charts of the CNI (Cilium, Azure IPAM) and the NVIDIA GPU operator."""

from __future__ import annotations

from typing import Any

from gpucluster.bootstrap.rack import TOOLKIT_ENV
from gpucluster.catalog.metrics import training_counters_csv
from gpucluster.kubernetes.objects.common import on_system_nodes


def cilium_values(api_host: str, api_port: int, native_cidr: str, azure: dict[str, Any],
                  prefix_mode: bool = False, max_unavailable: int = 1) -> dict[str, Any]:
    """`api_host` is the endpoint's name, not the load balancer's IP: the agent runs on the API servers too, which
    cannot reach their own internal load balancer; the name resolves to 127.0.0.1 there and to the load balancer
    elsewhere (the hosts entry every boot writes; the agent is host-network, so it reads the node's /etc/hosts).
    Pods get the secondary addresses of their node's NIC (the IP configurations the node pools
    declare), routed natively in the VNet: no overlay, no per-node route tables. kube-proxy is not
    installed (kubeadm skips it); Cilium replaces it.

    With /28 blocks on the NICs (`podAddresses: prefixes`), Cilium's Azure IPAM cannot use them (it adds single
    addresses; `IsPrefixDelegated()` is false, cilium#46072): the agents run `ipam.mode: crd` (the chart's
    `ipam.mode` value; Cilium's CRD-backed IPAM, docs.cilium.io network/concepts/ipam/crd) and take the
    addresses our prefix IPAM controller writes into each CiliumNode's `spec.ipam.pool` (objects/prefix_ipam.py).
    Routing stays native in the VNet."""
    placement = on_system_nodes("cilium-operator")
    ipam: dict[str, Any] = {"ipam": {"mode": "crd"}} if prefix_mode else {
        "ipam": {"mode": "azure"},
        "azure": {"enabled": True, "resourceGroup": azure["resource_group"], "subscriptionID": azure["subscription_id"],
                  "tenantID": azure["tenant_id"], "userAssignedIdentityID": azure["client_id"]}}
    return {
        **ipam,
        "routingMode": "native",
        "ipv4NativeRoutingCIDR": native_cidr,
        "enableIPv4Masquerade": True,
        "kubeProxyReplacement": True,
        "k8sServiceHost": api_host,
        "k8sServicePort": api_port,
        # the chart labels operator pods app.kubernetes.io/name=cilium-operator, which the spread selects
        "operator": {"replicas": 2, "nodeSelector": placement["nodeSelector"],
                     "topologySpreadConstraints": placement["topologySpreadConstraints"],
                     "priorityClassName": "system-cluster-critical"},
        "priorityClassName": "system-node-critical",
        # The agent DaemonSet's rolling update (templates/cilium-agent/daemonset.yaml renders `updateStrategy` from this
        # value): `max_unavailable` nodes at a time, sized from the plan (planning/cni_update.py). Helm's wait
        # would need all other agents ready (objects/releases.py): the release does not wait.
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}},
        # The agent must run on nodes that still carry the preflight and pool taints.
        "tolerations": [{"operator": "Exists"}],
    }


DCGM_COUNTERS_CONFIG = "gpucluster-dcgm-counters"
"""The ConfigMap the GPU operator's chart creates from `dcgmExporter.config.data` and the exporter reads."""


def gpu_operator_values(racks: bool = False) -> dict[str, Any]:
    """The node images bring the driver (Ubuntu-HPC; confidential nodes install it in their join gate),
    so the operator runs the toolkit, device plugin and DCGM exporter only. With NVLink rack pools the toolkit
    edits containerd's config from the file only (`RUNTIME_CONFIG_SOURCE=file`, components/bootstrap/rack.py)."""
    toolkit_env = [{"name": k, "value": v} for k, v in TOOLKIT_ENV.items()] if racks else []
    return {
        "driver": {"enabled": False},
        "toolkit": {"enabled": True, **({"env": toolkit_env} if toolkit_env else {})},
        # CDI on: the toolkit adds the `nvidia` runtime for the operator's RuntimeClass without making it containerd's
        # default (v26.3.3 controllers/object_controls.go transformToolkitCtrForCDI sets NVIDIA_RUNTIME_SET_AS_DEFAULT
        # =false); every other pod runs with runc (components/bake/content.py). The chart's default, said here.
        "cdi": {"enabled": True},
        "devicePlugin": {"enabled": True},
        # The training counter set (components/catalog/metrics.py) instead of the exporter's default one.
        "dcgmExporter": {"enabled": True, "config": {"name": DCGM_COUNTERS_CONFIG, "create": True,
                                                     "data": training_counters_csv()}},
        # One DCGM host engine per node, shared by the exporter (DCGM_REMOTE_HOSTENGINE_INFO, set by the operator,
        # controllers/object_controls.go) and the library's health checks (objects/health.py).
        "dcgm": {"enabled": True},
        "migManager": {"enabled": False},
        # v26.3.3 templates read operator.nodeSelector/tolerations (templates/operator.yaml); there is no
        # operator.defaultRuntime value (containerd is detected on the node).
        "operator": {"nodeSelector": on_system_nodes("gpu-operator")["nodeSelector"]},
        "daemonsets": {"tolerations": [{"operator": "Exists"}], "priorityClassName": "system-node-critical"},
        # The NFD subchart has its own tolerations (gpu-operator values.yaml `node-feature-discovery.worker`:
        # control-plane and nvidia.com/gpu only); daemonsets.tolerations does not reach it. Its worker must run
        # on tainted GPU nodes, or the operator never deploys the toolkit there (no NFD labels).
        "node-feature-discovery": {"worker": {"tolerations": [{"operator": "Exists"}]},
                                   "master": {"nodeSelector": on_system_nodes("nfd")["nodeSelector"]},
                                   "gc": {"nodeSelector": on_system_nodes("nfd")["nodeSelector"]}},
    }
