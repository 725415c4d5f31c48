"""cloud-init that joins a scale-set VM to the cluster with kubeadm.

Kept as pure text generation, apart from the resources that carry it (the Kubernetes-the-hard-way
split), so it is tested by parsing what it renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from components.bootstrap.cloud_config import dump_cloud_config
from components.bootstrap.confidential import GATE_PATH, gate_script
from components.bootstrap.host_prep import (
    APT,
    MODULES_FILE,
    RETRY_FUNCTION,
    SYSCTL_FILE,
    hosts_entry,
    kernel_prerequisites,
    modules_text,
    provider_id_script,
    sysctl_text,
)
from components.bootstrap.registry import RegistryBoot, kubelet_args, registry_files
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
    """name:port of the API servers (kubeadm's controlPlaneEndpoint); the name resolves to `api_server_address`."""
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
    api_server_address: str = ""
    """The internal load balancer's frontend IP, written to /etc/hosts for the endpoint's name."""
    join_attempts: int = 5
    registry: RegistryBoot | None = None
    """The cluster's registry: containerd mirrors every upstream there; the kubelet pulls with the VM's identity."""


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
                                  "value": ",".join(f"{k}={v}" for k, v in sorted(b.labels.items()))},
                                 *(kubelet_args() if b.registry else [])],
        },
        "patches": {"directory": "/etc/kubernetes/patches"},
        # Nodes may boot before the API servers answer: keep looking for the cluster (default 5 minutes).
        "timeouts": {"discovery": "15m0s"},
    }


def kubelet_patch(b: NodeBootstrap) -> dict[str, object]:
    taints = [*([NodeTaint(PREFLIGHT_TAINT_KEY, "pending", "NoSchedule")] if b.preflight else []), *b.taints]
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "maxPods": b.max_pods,
        "serializeImagePulls": False,
        # A serving certificate from the cluster CA through a CSR (components/kubernetes/objects/csr_approver.py).
        "serverTLSBootstrap": True,
        "clusterDNS": [b.cluster_dns],
        "registerWithTaints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints],
    }


def install_script(version: str) -> str:
    """containerd, kubelet and kubeadm at the catalogue's version. Every download and apt call is retried;
    apt waits for the dpkg lock that unattended-upgrades holds at first boot."""
    minor = ".".join(version.split(".")[:2])
    key_url = f"https://pkgs.k8s.io/core:/stable:/v{minor}/deb/Release.key"
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        "export DEBIAN_FRONTEND=noninteractive",
        f"{APT} update",
        f"{APT} install apt-transport-https ca-certificates curl gpg containerd",
        "mkdir -p /etc/apt/keyrings",
        f"curl -fsSL --retry 5 --retry-delay 5 --retry-connrefused -o /tmp/kubernetes-release.key {key_url}",
        "gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg /tmp/kubernetes-release.key",
        "echo 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] "
        f"https://pkgs.k8s.io/core:/stable:/v{minor}/deb/ /' > /etc/apt/sources.list.d/kubernetes.list",
        f"{APT} update",
        f"{APT} install 'kubelet={version}-*' 'kubeadm={version}-*'",
        "apt-mark hold kubelet kubeadm",
        "mkdir -p /etc/containerd",
        "containerd config default > /tmp/containerd-default.toml",
        "sed 's/SystemdCgroup = false/SystemdCgroup = true/' /tmp/containerd-default.toml > /etc/containerd/config.toml",
        "systemctl restart containerd",
        "",
    ])


JOIN_COMMAND = "kubeadm join --config /etc/kubernetes/kubeadm-join.yaml"


BOOT_SCRIPT = "/usr/local/sbin/gpucluster-node-boot"
BOOT_UNIT = "gpucluster-node-boot.service"
JOINED_MARKER = "/var/lib/gpucluster/joined"
INSTALL_SCRIPT = "/usr/local/sbin/gpucluster-install-kubernetes"


def boot_unit() -> str:
    """The boot script as a systemd unit, so that it runs again after a reboot it asked for (a confidential
    node's kernel upgrade) until the node has joined; its output is in `journalctl -u gpucluster-node-boot`."""
    return ("[Unit]\nDescription=gpucluster: prepare this machine and join the cluster\n"
            "Wants=network-online.target\nAfter=network-online.target\n"
            f"ConditionPathExists=!{JOINED_MARKER}\n\n"
            f"[Service]\nType=oneshot\nExecStart={BOOT_SCRIPT}\nRemainAfterExit=yes\nTimeoutStartSec=infinity\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def boot_script(b: NodeBootstrap) -> str:
    """Everything the node does at first boot, under `set -euo pipefail`: kernel prerequisites, the
    endpoint's name, packages, providerID, a random wait, the confidential gate, and a retried join (a
    failed join is reset first, as kubeadm requires before a second attempt)."""
    lines = [
        "#!/bin/bash",
        "set -euo pipefail",
        RETRY_FUNCTION,
        *kernel_prerequisites(),
        *hosts_entry(b.api_server_address, b.api_server_endpoint.rsplit(":", 1)[0]),
        f"retry 5 {INSTALL_SCRIPT}",
        *provider_id_script(),
        f"sleep $((RANDOM % {max(1, b.join_spread_seconds)}))",
    ]
    if b.confidential_gpu:
        # The gate exits non-zero when CC mode is off or attestation fails: the node never joins.
        lines.append(GATE_PATH)
    lines += [
        "join() {",
        f"  {JOIN_COMMAND} || {{ kubeadm reset --force >/dev/null 2>&1 || true; return 1; }}",
        "}",
        f"retry {b.join_attempts} join",
        f"mkdir -p {JOINED_MARKER.rsplit('/', 1)[0]}",
        f"touch {JOINED_MARKER}",
        'echo "gpucluster: joined at $(date -u +%FT%TZ)"',
        "",
    ]
    return "\n".join(lines)


def render_cloud_init(b: NodeBootstrap) -> str:
    """The #cloud-config document a node boots with. Carries the bootstrap token: keep it secret."""
    files: list[dict[str, str]] = [
        {"path": MODULES_FILE, "permissions": "0644", "content": modules_text()},
        {"path": SYSCTL_FILE, "permissions": "0644", "content": sysctl_text(ARP_SYSCTLS)},
        {"path": INSTALL_SCRIPT, "permissions": "0755", "content": install_script(b.kubernetes_version)},
        {"path": "/etc/kubernetes/kubeadm-join.yaml", "permissions": "0600",
         "content": yaml.safe_dump(_join_configuration(b), sort_keys=False)},
        {"path": "/etc/kubernetes/patches/kubeletconfiguration+strategic.yaml", "permissions": "0644",
         "content": yaml.safe_dump(kubelet_patch(b), sort_keys=False)},
    ]
    if b.confidential_gpu:
        files.append({"path": GATE_PATH, "permissions": "0755", "content": gate_script()})
    if b.registry:
        files += registry_files(b.registry)
    files.append({"path": BOOT_SCRIPT, "permissions": "0755", "content": boot_script(b)})
    files.append({"path": f"/etc/systemd/system/{BOOT_UNIT}", "permissions": "0644", "content": boot_unit()})
    document = {"write_files": files,
                "runcmd": [["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", "--no-block", BOOT_UNIT]]}
    return dump_cloud_config(document)
