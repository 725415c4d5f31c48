"""Every version coupled to the Kubernetes minor, in one table, each with the minors it supports and its source.

Read at the sources named in each row (checked 2026-11-22). Where a source could not confirm a fact, the
row says so in `source` instead of guessing. The planner checks a stack against this table
(components/planning/versions.py); docs/versions.md renders it for readers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

RELEASES_SOURCE = ("kubernetes.io/releases/<minor>/ (release status, maintenance mode start, end of life date); the newest "
                   "patch as the Go module proxy serves k8s.io/kubernetes (tools/pin_versions.py, 2026-11-29)")


@dataclass(frozen=True)
class KubernetesRelease:
    minor: str
    latest_patch: str
    """The newest patch release the source listed as released."""
    maintenance_start: date
    end_of_life: date
    source: str = RELEASES_SOURCE


KUBERNETES_RELEASES: dict[str, KubernetesRelease] = {r.minor: r for r in (
    KubernetesRelease("1.33", "1.33.13", date(2026, 4, 28), date(2026, 6, 28)),
    KubernetesRelease("1.34", "1.34.12", date(2026, 8, 27), date(2026, 10, 27)),
    KubernetesRelease("1.35", "1.35.9", date(2026, 12, 28), date(2027, 2, 28)),
    KubernetesRelease("1.36", "1.36.5", date(2027, 4, 28), date(2027, 6, 28)),
    KubernetesRelease("1.37", "1.37.2", date(2027, 8, 28), date(2027, 10, 28)),
)}
DEFAULT_MINOR = "1.36"
"""The minor the shipped stacks run: supported until 2027-06-28, and the newest minor for which
cluster-autoscaler and cloud-provider-azure had published a release of the same minor (docs/versions.md)."""


@dataclass(frozen=True)
class Component:
    key: str
    name: str
    version: str
    minors: tuple[str, ...]
    """Kubernetes minors the component's own project lists as supported (or it is built for)."""
    source: str
    end_of_life: date | None = None
    """Where the project publishes one; None when it does not."""
    in_cluster: bool = True
    """Installed by the in-cluster layer (checked only when the layer is on)."""


@dataclass(frozen=True)
class MinorCoupled:
    """What moves with the minor: one release each, as the minor's own kubeadm or the project's versioning wants."""

    cluster_autoscaler: Component
    cloud_controller_manager: Component
    coredns: Component
    etcd: Component

    @property
    def components(self) -> tuple[Component, ...]:
        return (self.cluster_autoscaler, self.cloud_controller_manager, self.coredns, self.etcd)


_CA_SOURCE = ("kubernetes/autoscaler cluster-autoscaler/README.md 'Releases' (versioning matches Kubernetes minors "
              "exactly since 1.12); tag cluster-autoscaler-{v}, go.mod k8s.io/kubernetes v{minor}.x")
_CCM_SOURCE = ("kubernetes-sigs/cloud-provider-azure tag v{v} (go.mod k8s.io/cloud-provider v0.{m}.x); the "
               "cloud-controller-manager runs its cloud-node-lifecycle controller only (docs/versions.md)")
_ETCD_SOURCE = ("kubeadm cmd/kubeadm/app/constants SupportedEtcdVersion maps 1.34-1.36 to 3.6.x, "
                "MinExternalEtcdVersion 3.5.24; etcd-io/etcd tag v{v} (newest 3.6 patch, 2026-07-23)")


def _coupled(minor: str, ca: str, ccm: str, coredns: str, coredns_source: str, etcd: str) -> MinorCoupled:
    m = minor.split(".")[1]
    return MinorCoupled(
        cluster_autoscaler=Component("cluster-autoscaler", "cluster-autoscaler", ca, (minor,),
                                     _CA_SOURCE.format(v=ca, minor=minor)),
        cloud_controller_manager=Component("cloud-controller-manager", "cloud-provider-azure (cloud-controller-manager)",
                                           ccm, (minor,), _CCM_SOURCE.format(v=ccm, m=m), in_cluster=False),
        coredns=Component("coredns", "CoreDNS", coredns, (minor,), coredns_source),
        etcd=Component("etcd", "etcd (external, VMs)", etcd, ("1.34", "1.35", "1.36"),
                       _ETCD_SOURCE.format(v=etcd), in_cluster=False),
    )


MINOR_COUPLED: dict[str, MinorCoupled] = {
    "1.34": _coupled("1.34", "1.34.5", "1.34.13", "v1.12.1",
                     "kubeadm 1.34 constants CoreDNSVersion v1.12.1 (the previous pin)", "3.6.14"),
    "1.35": _coupled("1.35", "1.35.2", "1.35.8", "v1.13.1",
                     "kubeadm 1.35 CoreDNSVersion v1.13.1: read in third-party test data pinning kubeadm "
                     "constants, not in kubernetes/kubernetes itself", "3.6.14"),
    "1.36": _coupled("1.36", "1.36.1", "1.36.5", "v1.14.2",
                     "kubeadm 1.36 CoreDNSVersion v1.14.2: read in third-party test data pinning kubeadm "
                     "constants; release-1.36 constants.go could not be read here", "3.6.14"),
}

KUEUE = Component(
    "kueue", "Kueue", "0.19.2", tuple(f"1.{m}" for m in range(29, 37)),
    "kubernetes-sigs/kueue v0.19.2: README 'Requires Kubernetes 1.29 or newer', go.mod k8s.io/* v0.36.2; "
    "serves kueue.x-k8s.io/v1beta2 (storage). A 0.20 release (v1beta1 no longer served, issue #13957) could not "
    "be confirmed from the sources read; the library emits v1beta2 only, which both serve")
CILIUM = Component(
    "cilium", "Cilium", "1.20.3", ("1.33", "1.34", "1.35", "1.36"),
    "Cilium 1.20 e2e-tests Kubernetes 1.33-1.36 (thaum-xyz/ankhmorpork PR #1054 quoting the 1.20 compatibility "
    "page; cilium/cilium PR #47846 added 1.36 to CI 2026-08-07); the v1.20 compatibility.rst itself could not be "
    "read here. 1.20.3 named by Rusty-Gopher/kupre v0.4.0 release notes (2026-10-22)")
GPU_OPERATOR = Component(
    "gpu-operator", "NVIDIA GPU operator", "v26.3.3", ("1.34", "1.35", "1.36"),
    "NVIDIA GPU operator release notes 26.3.2: 'Added support for Kubernetes 1.36'; NVIDIA/gpu-operator tag v26.3.3 "
    "(2026-06-23, NFD chart 0.18.3). 1.34/1.35 rows of the 26.3 platform-support page not read here (25.3.x "
    "validated 1.29-1.33). 26.3.x is 'Deprecated' (patch fixes only) since 26.7.0, whose Kubernetes list could not "
    "be read")
ADDONS: tuple[Component, ...] = (KUEUE, CILIUM, GPU_OPERATOR)
_RACK_MINORS = ("1.34", "1.35", "1.36")
DRA_DRIVER = Component(
    "nvidia-dra-driver-gpu", "NVIDIA DRA driver for GPUs (ComputeDomains)", "25.12.0", _RACK_MINORS,
    "kubernetes-sigs/dra-driver-nvidia-gpu (formerly NVIDIA/k8s-dra-driver-gpu) tag v25.12.0 (2026-02-12): "
    "deployments/helm/nvidia-dra-driver-gpu/Chart.yaml version 25.12.0, kubeVersion >=1.32.0-0; go.mod "
    "k8s.io/* v0.34.0 (api, dynamic-resource-allocation, kubelet); its controller renders the ComputeDomain "
    "claim templates as resource.k8s.io/v1 (templates/compute-domain-workload-claim-template.tmpl.yaml), which "
    "Kubernetes serves from 1.34 (DRA GA). 1.37 not listed: not read")
DRANET = Component(
    "dranet", "DRANET (RDMA NICs through DRA)", "1.4.0", _RACK_MINORS,
    "kubernetes-sigs/dranet tag v1.4.0 (2026-07-17): go.mod k8s.io/* v0.36.2 (api, dynamic-resource-allocation, "
    "kubelet: resource.k8s.io/v1, served from 1.34); chart deployments/helm/dranet packaged as version 1.4.0 "
    "(Makefile CHART_VERSION: the tag without v). 1.37 not listed: not read")
RACK_ADDONS: tuple[Component, ...] = (DRA_DRIVER, DRANET)
"""Installed only on clusters with rack pools (components/kubernetes/rack_devices.py)."""
KUBEADM_API = Component(
    "kubeadm-api", "kubeadm configuration API", "kubeadm.k8s.io/v1beta4", tuple(f"1.{m}" for m in range(31, 37)),
    "kubernetes/kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta4 (introduced in 1.31, v1beta3 deprecated); no "
    "v1beta5 in 1.36 in the sources read", in_cluster=False)
KUBELET_CONFIG_API = Component(
    "kubelet-config-api", "kubelet configuration API", "kubelet.config.k8s.io/v1beta1", tuple(f"1.{m}" for m in range(31, 37)),
    "k8s.io/kubelet config/v1beta1 types.go (the only served version)", in_cluster=False)
NODE_APIS: tuple[Component, ...] = (KUBEADM_API, KUBELET_CONFIG_API)
"""Configuration APIs the boot documents use (components/bootstrap), checked like the add-ons."""
PAUSE_VERSION = "3.10.1"
"""Balloon containers only (the pod sandbox image is containerd's own): not coupled to the minor."""


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])
