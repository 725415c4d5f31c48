"""cloud-init that joins a scale-set VM to the cluster with kubeadm.

Kept as pure text generation, apart from the resources that carry it (the Kubernetes-the-hard-way
split), so it is tested by parsing what it renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster.bootstrap.boot_unit import MARKER_DIR, done_lines, start_unit
from gpucluster.bootstrap.boot_unit import boot_unit as make_unit
from gpucluster.bootstrap.cloud_config import dump_cloud_config, safe_yaml
from gpucluster.bootstrap.confidential import GATE_UNIT
from gpucluster.bootstrap.host_prep import RETRY_FUNCTION, boot_jitter, hosts_entry, kernel_checks, provider_id_script
from gpucluster.bootstrap.rack import rack_boot_lines
from gpucluster.bootstrap.registry import RegistryBoot, kubelet_args, registry_files
from gpucluster.planning.taints import NodeTaint

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
    """Every taint the node registers with (kubelet `registerWithTaints`), as the plan decides them."""
    join_spread_seconds: int = 60
    """Random delay before the first network fetch, so hundreds of new VMs do not hit IMDS and the API servers at once."""
    confidential_gpu: bool = False
    """Join only after the image's gate finds the GPU in confidential-computing mode and attested."""
    api_server_address: str = ""
    """The internal load balancer's frontend IP, written to /etc/hosts for the endpoint's name."""
    join_attempts: int = 5
    rack: bool = False
    """An NVLink rack VM: checks IMEX and memlock, labels the node with its interconnect ids (bootstrap/rack.py)."""
    registry: RegistryBoot | None = None
    """The cluster's registry: containerd mirrors every upstream there; the kubelet pulls with the VM's identity."""


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
    taints = list(b.taints)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "maxPods": b.max_pods,
        "serializeImagePulls": False,
        # cgroup v2 stated, not inherited from the default (true since 1.35; KubeletConfiguration v1beta1 FailCgroupV1).
        "failCgroupV1": True,
        # A serving certificate from the cluster CA through a CSR (components/kubernetes/objects/csr_approver.py).
        "serverTLSBootstrap": True,
        "clusterDNS": [b.cluster_dns],
        "registerWithTaints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints],
    }


JOIN_COMMAND = "kubeadm join --config /etc/kubernetes/kubeadm-join.yaml"


BOOT_SCRIPT = "/usr/local/sbin/gpucluster-node-boot"
BOOT_UNIT = "gpucluster-node-boot.service"
JOINED_MARKER = f"{MARKER_DIR}/joined"


def boot_unit() -> str:
    """The boot script as a systemd unit (components/bootstrap/boot_unit.py), after containerd: kubeadm's preflight
    needs the CRI socket, and the GB300 branch reads containerd's unit."""
    return make_unit("prepare this machine and join the cluster", BOOT_SCRIPT, JOINED_MARKER,
                     after=("containerd.service",))


def boot_script(b: NodeBootstrap) -> str:
    """Everything the node does at boot, under `set -euo pipefail`: check what the image set up, name the API
    endpoint, wait a random moment, read the providerID from IMDS, pass the confidential gate (confidential
    images), and join, retried (a failed join is reset first, as kubeadm requires before a second attempt).
    Nothing is installed: the node image carries every package (docs/images.md)."""
    lines = [
        "#!/bin/bash",
        "set -euo pipefail",
        RETRY_FUNCTION,
        *kernel_checks(),
        *hosts_entry(b.api_server_address, b.api_server_endpoint.rsplit(":", 1)[0]),
        # Before the first network fetch: hundreds of new VMs do not reach IMDS and the API servers at once.
        boot_jitter(b.join_spread_seconds),
        *provider_id_script(),
        *(rack_boot_lines() if b.rack else []),
    ]
    if b.confidential_gpu:
        # The image's gate unit (CC mode, attestation) runs before the kubelet on every boot; start it here so
        # that a failing GPU stops this boot with the gate's own message. The node then never joins.
        lines.append(f"systemctl start {GATE_UNIT}")
    lines += [
        "join() {",
        f"  {JOIN_COMMAND} || {{ kubeadm reset --force >/dev/null 2>&1 || true; return 1; }}",
        "}",
        f"retry {b.join_attempts} join",
        *done_lines(JOINED_MARKER),
        'echo "gpucluster: joined at $(date -u +%FT%TZ)"',
        "",
    ]
    return "\n".join(lines)


def render_cloud_init(b: NodeBootstrap) -> str:
    """The #cloud-config document a node boots with. Carries the bootstrap token: keep it secret."""
    files: list[dict[str, str]] = [
        {"path": "/etc/kubernetes/kubeadm-join.yaml", "permissions": "0600",
         "content": safe_yaml(_join_configuration(b))},
        {"path": "/etc/kubernetes/patches/kubeletconfiguration+strategic.yaml", "permissions": "0644",
         "content": safe_yaml(kubelet_patch(b))},
    ]
    if b.registry:
        files += registry_files(b.registry)
    files.append({"path": BOOT_SCRIPT, "permissions": "0755", "content": boot_script(b)})
    files.append({"path": f"/etc/systemd/system/{BOOT_UNIT}", "permissions": "0644", "content": boot_unit()})
    document = {"write_files": files,
                "runcmd": start_unit(BOOT_UNIT)}
    return dump_cloud_config(document)
