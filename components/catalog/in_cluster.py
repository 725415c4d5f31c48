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
AGENTS_DIR = "/opt/gpucluster"
"""Where the agents image (images/agents/Dockerfile) keeps the health agent and the prefix IPAM controller."""


def cluster_autoscaler_image(minor: str) -> str:
    """cluster-autoscaler of the cluster's own minor (its versioning follows Kubernetes minors exactly)."""
    return f"registry.k8s.io/autoscaling/cluster-autoscaler:v{MINOR_COUPLED[minor].cluster_autoscaler.version}"


def coredns_image(minor: str) -> str:
    """CoreDNS as the minor's kubeadm release pins it."""
    return f"registry.k8s.io/coredns/coredns:{MINOR_COUPLED[minor].coredns.version}"

CSR_APPROVER_VERSION = "v1.2.14"
"""postfinance/kubelet-csr-approver, tag v1.2.14 (2026-04-09): approves kubelet-serving CSRs, which
kube-controller-manager never approves (components/kubernetes/objects/csr_approver.py)."""
CSR_APPROVER_IMAGE = f"ghcr.io/postfinance/kubelet-csr-approver:{CSR_APPROVER_VERSION}"
