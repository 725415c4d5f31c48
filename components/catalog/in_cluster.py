"""Upstream projects the in-cluster layer installs, pinned in the version table (components/catalog/versions.py)."""

from __future__ import annotations

from components.catalog.versions import CILIUM, GPU_OPERATOR, KUEUE, MINOR_COUPLED, PAUSE_VERSION

KUEUE_VERSION = KUEUE.version
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
KUEUE_NAMESPACE = "kueue-system"

CILIUM_CHART = "cilium"
CILIUM_REPO = "https://helm.cilium.io"
CILIUM_VERSION = CILIUM.version

GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_VERSION = GPU_OPERATOR.version

PAUSE_IMAGE = f"registry.k8s.io/pause:{PAUSE_VERSION}"
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.5.2-1-ubuntu22.04"
"""The dcgmi client, at the DCGM release the operator runs (gpu-operator v26.3.3 values.yaml `dcgm.version`)."""
NODE_CACHE_IMAGE = "registry.k8s.io/dns/k8s-dns-node-cache:1.26.4"
"""NodeLocal DNSCache, as kubernetes/kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml pins it (read at a
stored revision of that file; the add-on is versioned apart from Kubernetes)."""
AGENTS_DIR = "/opt/gpucluster"
"""Where the agents image (images/agents/Dockerfile) keeps the health agent and the prefix IPAM controller."""


def cluster_autoscaler_image(minor: str) -> str:
    """cluster-autoscaler of the cluster's own minor (its versioning follows Kubernetes minors exactly)."""
    return f"registry.k8s.io/autoscaling/cluster-autoscaler:v{MINOR_COUPLED[minor].cluster_autoscaler.version}"


def coredns_image(minor: str) -> str:
    """CoreDNS as the minor's kubeadm release pins it."""
    return f"registry.k8s.io/coredns/coredns:{MINOR_COUPLED[minor].coredns.version}"
