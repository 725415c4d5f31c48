"""The files a node image carries, rendered from the plan: kernel modules and sysctls every Kubernetes machine
needs, containerd's configuration, and the confidential image's units. images/lib/bake.sh `install_files` puts them
in place; at boot systemd loads the modules and applies the sysctls (systemd-modules-load, systemd-sysctl).

containerd (config version 3, containerd 2.x; containerd `docs/cri/config.md`, "Config versions" and "Cgroup
Driver"): the runc runtime takes the systemd cgroup driver, and containerd reports it to the kubelet through the CRI
`RuntimeConfig` call, which kubelet 1.34+ reads instead of its own `cgroupDriver` (KEP-4033,
kubernetes/kubernetes#136731); the sandbox image is pinned to the one the image pre-pulls; registry host
configuration is read from /etc/containerd/certs.d (hosts.toml per registry); `imports` lets the GPU operator's
toolkit add its runtime in a drop-in.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.bake.os_guards import NETWORKD_DROPIN, networkd_dropin
from gpucluster.bootstrap.confidential import (
    GATE_PATH,
    GATE_UNIT,
    LKCA_FILE,
    LKCA_MODPROBE,
    NEEDRESTART_FILE,
    PERSISTENCED_OVERRIDE,
    gate_script,
    gate_unit,
    needrestart_conf,
    persistenced_override,
)
from gpucluster.bootstrap.host_prep import MODULES_FILE, SYSCTL_FILE, modules_text, sysctl_text
from gpucluster.bootstrap.node import ARP_SYSCTLS
from gpucluster.bootstrap.rack import CONTAINERD_MEMLOCK_DROP_IN, MEMLOCK_DROP_IN
from gpucluster.catalog.in_cluster import PAUSE_IMAGE
from gpucluster.catalog.node_images import CONTAINERD_CONFIG_VERSION

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_CERTS_DIR = "/etc/containerd/certs.d"


@dataclass(frozen=True)
class ImageFile:
    path: str
    mode: str
    content: str


def containerd_config() -> str:
    return "\n".join([
        f"version = {CONTAINERD_CONFIG_VERSION}",
        "imports = ['/etc/containerd/conf.d/*.toml']",
        "",
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
        f"  sandbox = '{PAUSE_IMAGE}'",
        "",
        "[plugins.'io.containerd.cri.v1.images'.registry]",
        f"  config_path = '{CONTAINERD_CERTS_DIR}'",
        "",
        "[plugins.'io.containerd.cri.v1.runtime'.containerd]",
        "  default_runtime_name = 'runc'",
        "",
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]",
        "  runtime_type = 'io.containerd.runc.v2'",
        "",
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]",
        "  SystemdCgroup = true",
        "",
    ])


def image_files(definition: str) -> tuple[ImageFile, ...]:
    """What `definition`'s image carries besides packages, sorted by path."""
    if definition == "etcd":
        return ()
    node = definition in ("gpu", "rack", "cpu", "confidential")
    files = [
        ImageFile(MODULES_FILE, "0644", modules_text()),
        # Nodes hold one neighbour entry per pod address: the ARP cache thresholds too (OpenAI, 2018).
        ImageFile(SYSCTL_FILE, "0644", sysctl_text(ARP_SYSCTLS if node else None)),
        ImageFile(CONTAINERD_CONFIG, "0644", containerd_config()),
        # Cilium's routes and rules survive a networkd restart (components/bake/os_guards.py).
        ImageFile(NETWORKD_DROPIN, "0644", networkd_dropin()),
    ]
    if definition == "confidential":
        files += [
            ImageFile(LKCA_FILE, "0644", LKCA_MODPROBE + "\n"),
            ImageFile(NEEDRESTART_FILE, "0644", needrestart_conf()),
            ImageFile(PERSISTENCED_OVERRIDE, "0644", persistenced_override()),
            ImageFile(GATE_PATH, "0755", gate_script()),
            ImageFile(f"/etc/systemd/system/{GATE_UNIT}", "0644", gate_unit()),
        ]
    if definition == "rack":
        # RDMA in pods needs unlimited memlock, inherited from containerd (components/bootstrap/rack.py).
        files.append(ImageFile(CONTAINERD_MEMLOCK_DROP_IN, "0644", MEMLOCK_DROP_IN))
    return tuple(sorted(files, key=lambda f: f.path))
