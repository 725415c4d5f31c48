"""Upstream projects the in-cluster layer installs, pinned in the version table (components/catalog/versions.py)."""

from __future__ import annotations

from gpucluster.catalog.versions import CILIUM, DRA_DRIVER, DRANET, GPU_OPERATOR, KUEUE, MINOR_COUPLED, PAUSE_VERSION

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
GPU_OPERATOR_NAMESPACE = "gpu-operator"

DRA_DRIVER_CHART = "nvidia-dra-driver-gpu"
DRA_DRIVER_REPO = GPU_OPERATOR_REPO
"""NGC's Helm repository: kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0 tests/bats/setup_suite.bash (`helm repo add
nvidia https://helm.ngc.nvidia.com/nvidia`, "installing releases from NGC") and demo/clusters/openshift/README.md
(`helm install nvidia-dra-driver-gpu nvidia/nvidia-dra-driver-gpu`)."""
DRA_DRIVER_VERSION = DRA_DRIVER.version
DRA_DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"
"""Not `default`: the chart refuses it (templates/validation.yaml, allowDefaultNamespace false)."""

DRANET_CHART = "oci://registry.k8s.io/networking/charts/dranet"
"""kubernetes-sigs/dranet v1.4.0 README.md "Installation" (`helm install -n kube-system dranet
oci://registry.k8s.io/networking/charts/dranet`) and RELEASE.md (the chart promoted to registry.k8s.io/networking)."""
DRANET_VERSION = DRANET.version
DRANET_NAMESPACE = "kube-system"

PAUSE_IMAGE = f"registry.k8s.io/pause:{PAUSE_VERSION}"
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.5.2-1-ubuntu22.04"
"""The dcgmi client, at the DCGM release the operator runs (gpu-operator v26.3.3 values.yaml `dcgm.version`)."""
NODE_CACHE_IMAGE = "registry.k8s.io/dns/k8s-dns-node-cache:1.26.4"
"""NodeLocal DNSCache, as kubernetes/kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml pins it (read at a
stored revision of that file; the add-on is versioned apart from Kubernetes)."""
RDMA_DEVICE_PLUGIN_IMAGE = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
"""Mellanox/k8s-rdma-shared-dev-plugin v1.5.3 (2025-03-26), as its release workflow publishes it
(.github/workflows/release.yaml: ghcr.io/<repository>:<tag>)."""
RDMA_RESOURCE = "rdma/ib"
"""The extended resource the plugin registers (resourcePrefix `rdma`, resourceName `ib`; objects/rdma.py)."""
RDMA_HCA_MAX = 8
"""Pods per node that may share the node's HCAs (the plugin's rdmaHcaMax): one per GPU at most."""
AGENTS_DIR = "/opt/gpucluster"
"""Where the agents image (agents/Dockerfile) keeps the health agent and the prefix IPAM controller."""


def cluster_autoscaler_image(minor: str) -> str:
    """cluster-autoscaler of the cluster's own minor (its versioning follows Kubernetes minors exactly)."""
    return f"registry.k8s.io/autoscaling/cluster-autoscaler:v{MINOR_COUPLED[minor].cluster_autoscaler.version}"


def cloud_controller_manager_image(minor: str) -> str:
    """cloud-provider-azure's cloud-controller-manager of the cluster's minor (helm/cloud-provider-azure/values.yaml
    imageRepository mcr.microsoft.com/oss/kubernetes, imageName azure-cloud-controller-manager)."""
    version = MINOR_COUPLED[minor].cloud_controller_manager.version
    return f"mcr.microsoft.com/oss/kubernetes/azure-cloud-controller-manager:v{version}"


def provisioning_request_crd(minor: str) -> str:
    """The ProvisioningRequest CRD (autoscaling.x-k8s.io/v1) at the tag of the cluster's autoscaler, which serves
    it; applied by URL at deploy time (kubernetes/autoscaler cluster-autoscaler/FAQ.md "Enabling
    ProvisioningRequest Support", step 5). Kueue starts its provisioning controller only if the API is served
    when it starts (kueue v0.19.2 cmd/kueue/main.go ServerSupportsProvisioningRequest)."""
    version = MINOR_COUPLED[minor].cluster_autoscaler.version
    return ("https://raw.githubusercontent.com/kubernetes/autoscaler/cluster-autoscaler-"
            f"{version}/cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml")


def coredns_image(minor: str) -> str:
    """CoreDNS as the minor's kubeadm release pins it."""
    return f"registry.k8s.io/coredns/coredns:{MINOR_COUPLED[minor].coredns.version}"

CSR_APPROVER_VERSION = "v1.2.14"
"""postfinance/kubelet-csr-approver, tag v1.2.14 (2026-04-09): approves kubelet-serving CSRs, which
kube-controller-manager never approves (components/kubernetes/objects/csr_approver.py)."""
CSR_APPROVER_IMAGE = f"ghcr.io/postfinance/kubelet-csr-approver:{CSR_APPROVER_VERSION}"
