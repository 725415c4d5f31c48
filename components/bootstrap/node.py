"""cloud-init that joins a scale-set VM to the cluster with kubeadm.

Kept as pure text generation, apart from the resources that carry it (the Kubernetes-the-hard-way
split), so it is tested by parsing what it renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from components.bootstrap.confidential import GATE_PATH, gate_script
from components.bootstrap.taints import NodeTaint

PREFLIGHT_TAINT_KEY = "gpucluster.io/preflight"
"""Set at registration; the GPU health DaemonSet removes it once the node passes its checks."""
LABEL_POOL = "gpucluster.io/pool"
LABEL_ROLE = "gpucluster.io/role"
LABEL_IB_DOMAIN = "gpucluster.io/infiniband-domain"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_ACCELERATOR = "accelerator"

ARP_SYSCTLS = {
    # OpenAI, 2018: ARP cache overflow at 2,500 nodes; one neighbour entry per pod IP on a flat network.
    "net.ipv4.neigh.default.gc_thresh1": 80000,
    "net.ipv4.neigh.default.gc_thresh2": 90000,
    "net.ipv4.neigh.default.gc_thresh3": 100000,
}


@dataclass(frozen=True)
class NodeBootstrap:
    kubernetes_version: str
    api_server_endpoint: str
    """host:port of the API servers' internal load balancer."""
    bootstrap_token: str
    ca_cert_hash: str
    """`sha256:<hex>` of the cluster CA's public key, as `kubeadm join` wants it."""
    max_pods: int
    cluster_dns: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    join_spread_seconds: int = 60
    """Random delay before joining, so hundreds of new VMs do not hit the API servers at once."""
    confidential_gpu: bool = False
    preflight: bool = True
    """Register with the preflight taint; only pools whose health checks remove it (GPU pools) do."""
    """Join only after the GPU reports confidential-computing mode on and passes attestation."""


def zone_label(location: str, zone: str) -> str:
    return f"{location}-{zone}"


def _join_configuration(b: NodeBootstrap) -> dict[str, object]:
    return {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "JoinConfiguration",
        "discovery": {"bootstrapToken": {"apiServerEndpoint": b.api_server_endpoint, "token": b.bootstrap_token,
                                         "caCertHashes": [b.ca_cert_hash]}},
        "nodeRegistration": {
            "criSocket": "unix:///run/containerd/containerd.sock",
            "kubeletExtraArgs": [{"name": "node-labels",
                                  "value": ",".join(f"{k}={v}" for k, v in sorted(b.labels.items()))}],
        },
        "patches": {"directory": "/etc/kubernetes/patches"},
    }


def kubelet_patch(b: NodeBootstrap) -> dict[str, object]:
    taints = [*([NodeTaint(PREFLIGHT_TAINT_KEY, "pending", "NoSchedule")] if b.preflight else []), *b.taints]
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "maxPods": b.max_pods,
        "serializeImagePulls": False,
        "clusterDNS": [b.cluster_dns],
        "registerWithTaints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints],
    }


def install_script(version: str) -> str:
    minor = ".".join(version.split(".")[:2])
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        "apt-get update && apt-get install -y apt-transport-https ca-certificates curl gpg containerd",
        f"curl -fsSL https://pkgs.k8s.io/core:/stable:/v{minor}/deb/Release.key"
        " | gpg --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg",
        "echo 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] "
        f"https://pkgs.k8s.io/core:/stable:/v{minor}/deb/ /' > /etc/apt/sources.list.d/kubernetes.list",
        f"apt-get update && apt-get install -y kubelet={version}-* kubeadm={version}-*",
        "apt-mark hold kubelet kubeadm",
        "mkdir -p /etc/containerd && containerd config default"
        " | sed 's/SystemdCgroup = false/SystemdCgroup = true/' > /etc/containerd/config.toml",
        "systemctl restart containerd",
        "",
    ])


JOIN_COMMAND = "kubeadm join --config /etc/kubernetes/kubeadm-join.yaml"


def render_cloud_init(b: NodeBootstrap) -> str:
    """The #cloud-config document a node boots with. Carries the bootstrap token: keep it secret."""
    sysctls = "".join(f"{k} = {v}\n" for k, v in ARP_SYSCTLS.items())
    files: list[dict[str, str]] = [
        {"path": "/etc/sysctl.d/90-gpucluster.conf", "permissions": "0644", "content": sysctls},
        {"path": "/usr/local/sbin/gpucluster-install-kubernetes", "permissions": "0755",
         "content": install_script(b.kubernetes_version)},
        {"path": "/etc/kubernetes/kubeadm-join.yaml", "permissions": "0600",
         "content": yaml.safe_dump(_join_configuration(b), sort_keys=False)},
        {"path": "/etc/kubernetes/patches/kubeletconfiguration+strategic.yaml", "permissions": "0644",
         "content": yaml.safe_dump(kubelet_patch(b), sort_keys=False)},
    ]
    join = JOIN_COMMAND
    if b.confidential_gpu:
        files.append({"path": GATE_PATH, "permissions": "0755", "content": gate_script()})
        # runcmd lines do not stop the script when one fails: the gate and the join are one command.
        join = f"{GATE_PATH} && {JOIN_COMMAND}"
    document = {
        "write_files": files,
        "runcmd": [
            ["sysctl", "--system"],
            ["/usr/local/sbin/gpucluster-install-kubernetes"],
            ["bash", "-c", f"sleep $((RANDOM % {max(1, b.join_spread_seconds)}))"],
            ["bash", "-c", join],
        ],
    }
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False)
