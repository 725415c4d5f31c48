"""The cluster's node images: one Azure Compute Gallery image definition per machine role, each built by Azure
VM Image Builder from a pinned marketplace image and the bake script `images/<definition>/bake.sh`.

What each image holds and why is in docs/images.md; the versions of what they hold are here, each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.images import UBUNTU_2204, UBUNTU_CVM_2404, UBUNTU_HPC_2204, UBUNTU_HPC_2404_GB
from gpucluster.catalog.in_cluster import (
    CSR_APPROVER_IMAGE,
    DCGM_IMAGE,
    KUEUE_IMAGE,
    KUEUE_VERSION,
    PAUSE_IMAGE,
    cloud_controller_manager_image,
    cluster_autoscaler_image,
    coredns_image,
)
from gpucluster.catalog.metrics import KUBE_STATE_METRICS_IMAGE, PROMETHEUS_IMAGE
from gpucluster.catalog.versions import MINOR_COUPLED, minor_of
from gpucluster.spec import ImageRef, PoolKind

TRUSTED_LAUNCH_SUPPORTED = "TrustedLaunchSupported"
CONFIDENTIAL_VM_SUPPORTED = "ConfidentialVmSupported"
"""Gallery image definition `SecurityType` features. Image Builder builds from TrustedLaunchSupported and
ConfidentialVMSupported sources, and a TrustedLaunchSupported source must be distributed to a TrustedLaunchSupported
definition (azure-compute-docs articles/virtual-machines/image-builder-overview.md, "Confidential VM and Trusted
Launch Support"). Both still boot as a Standard VM."""

CONTAINERD = {"jammy": "2.2.1-0ubuntu1~22.04.2", "noble": "2.2.1-0ubuntu1~24.04.3"}
"""Ubuntu's own containerd 2.x (source package containerd-app), amd64, from jammy-updates and noble-updates
(packages.ubuntu.com/jammy-updates/amd64/containerd, /noble-updates/amd64/containerd). containerd 2.0 added the CRI
`RuntimeConfig` call through which kubelet 1.34+ reads the cgroup driver (KEP-4033; kubernetes/kubeadm#3229:
Kubernetes 1.36 is the last minor that supports containerd 1.y), so the images carry 2.x."""

UBUNTU_SNAPSHOT = "20261123T105649Z"
"""The moment the bakes read Ubuntu's archive at, through Ubuntu's snapshot service (snapshot.ubuntu.com: the archive
as it was at any time after 2023-03-01, for at least two years back; documentation.ubuntu.com/server/how-to/software/
snapshot-service): when the `CONTAINERD` versions above were read (commit 02003cb, 2026-11-23T10:56:49Z). A pocket's
index keeps only its newest version, so an exact pin fails on the live archive at its next update; on the snapshot it
holds, and the same stack bakes the same packages (images/lib/bake.sh `use_ubuntu_snapshot`). Move it forward, and
the versions with it, to take updates; the bake fails naming it when a pinned version is not in it."""

CUDA_DRIVER_MINIMUMS = {11: 450, 12: 525, 13: 580}
"""The lowest driver branch each CUDA major runs on (docs.nvidia.com/deploy/cuda-compatibility/
minor-version-compatibility.html, Table 1 "CUDA Toolkit 11.x, 12.x, and 13.x Minimum and Maximum Required Driver
Versions": 13.x >= 580, 12.x >= 525, 11.x >= 450; a newer driver runs an older toolkit by backward compatibility).
The GPU bake checks every CUDA toolkit the base image carries against the driver it installs."""

CONTAINERD_CONFIG_VERSION = 3
"""The config version containerd 2.2.1 reads natively and `containerd config dump` writes: containerd v2.2.1 (commit
dea7da59) `version/version.go` `ConfigVersion = 3`. The images' config.toml says it (components/bake/content.py)."""

NVIDIA_BRANCH = "580"
"""R580, a production branch and NVIDIA's long-term support branch (docs.nvidia.com/datacenter/tesla/drivers/
driver-lifecycle.html: "Every LTSB is a production branch"; LTSBs get fixes for 3 years). CUDA 13.0 needs
driver >= 580.65.06 and CUDA 12.x runs on it by minor-version compatibility (CUDA Toolkit release notes, table
"CUDA Toolkit and Corresponding Driver Versions"). The GPU image takes Ubuntu's `-server-open` build with
DKMS-built modules for the base image's held kernel, and Ubuntu's fabric manager, which depends on
nvidia-kernel-common-580-server at the driver's exact version (Launchpad bug 2129682); the confidential image takes
Canonical's signed precompiled modules for the -azure-fde kernel, as Azure/az-cgpu-onboarding does
(docs/confidential.md)."""


@dataclass(frozen=True)
class ReleaseBinary:
    """A program the bake installs from a project's GitHub release (no package carries it)."""
    name: str
    """The file name it is installed as."""
    repository: str
    tag: str
    asset: str
    """The release asset's name, `{arch}` for the Debian architecture (amd64, arm64)."""
    directory: str

    @property
    def path(self) -> str:
        return f"{self.directory}/{self.name}"

    def asset_for(self, arch: str) -> str:
        return self.asset.format(arch=arch)


ACR_CREDENTIAL_PROVIDER = ReleaseBinary(
    "acr-credential-provider", "kubernetes-sigs/cloud-provider-azure", "v1.36.5",
    "azure-acr-credential-provider-linux-{arch}", "/usr/local/libexec/kubernetes/kubelet-plugins/credential-provider")
"""The kubelet's image credential provider for the cluster's registry (components/bootstrap/registry.py).
kubernetes-sigs/cloud-provider-azure v1.36.5 (commit 9da15999): `.github/workflows/release.yaml` job
build-acr-credential-provider builds `bin/azure-acr-credential-provider-linux-<arch>` for amd64, arm and arm64, and
`.agents/skills/release/scripts/release.py` `EXPECTED_ASSETS` uploads those bare binaries to the GitHub release,
with no checksum file. The bake checks each download against the sha256 digest GitHub computes for every release
asset at upload and serves with the release (the REST API's `assets[].digest`, GitHub changelog 2025-06-03 "Releases
now expose digests for release assets"), and records the digest in the image (images/lib/bake.sh
`install_release_binary`). No digest is pinned here: none could be read where this catalogue was written.
Installed outside /var/lib/kubelet, which `kubeadm reset` (the join's retry path) empties (kubeadm
`cmd/kubeadm/app/cmd/phases/reset/cleanupnode.go`), in the kubelet plugins' libexec tree."""

DEBIAN_ARCH = {"x64": "amd64", "Arm64": "arm64"}
"""The gallery definition's architecture as Debian (and the release assets) name it."""



@dataclass(frozen=True)
class PackageFiles:
    """Files a package installs that a boot document or an image's unit names."""
    package: str
    files: tuple[str, ...]
    source: str


BASE_PACKAGE_FILES = (
    PackageFiles("util-linux", ("/bin/mountpoint",), "`dpkg -S` against Debian 12's util-linux 2.38.1-5+deb12u3 "
                                                     "(Essential: yes), the package Ubuntu's is built from"),
    PackageFiles("coreutils", ("/bin/mkdir", "/bin/chown", "/bin/rm"), "`dpkg -S` against Debian 12's coreutils 9.1-1 "
                                                                       "(Essential: yes)"),
)
"""Essential packages of every base image. The images are merged-/usr (/bin a link to /usr/bin), so each file
answers under /usr too (`MERGED_USR`)."""
DRIVER_PACKAGE_FILES = (
    PackageFiles(f"nvidia-compute-utils-{NVIDIA_BRANCH}-server", ("/usr/bin/nvidia-persistenced",),
                 "packages.ubuntu.com questing/amd64/nvidia-compute-utils-580-server/filelist"),
    PackageFiles(f"nvidia-utils-{NVIDIA_BRANCH}-server", ("/usr/bin/nvidia-smi",),
                 "packages.ubuntu.com questing/arm64/nvidia-utils-580-server/filelist"),
)
"""What the confidential image's units run from the driver (read at Ubuntu's questing file lists, not noble's); the
bake checks each is there once its packages are in (images/lib/bake.sh `require_package_files`)."""


def package_files(definition: str) -> tuple[PackageFiles, ...]:
    return BASE_PACKAGE_FILES + (DRIVER_PACKAGE_FILES if definition == "confidential" else ())


MERGED_USR = {"/bin/": "/usr/bin/", "/sbin/": "/usr/sbin/", "/lib/": "/usr/lib/"}

GALLERY_PUBLISHER = "gpucluster"
GALLERY_OFFER = "node-images"


@dataclass(frozen=True)
class NodeImageDefinition:
    name: str
    """The gallery image definition's name, the `images/<name>/bake.sh` it is built with, and the spec's
    `image.definition`."""
    description: str
    source: ImageRef
    ubuntu: str
    """The source's Ubuntu release codename (its package pins differ per release)."""
    security_type: str
    version: str
    """The version the repository's bake builds unless a stack names another (docs/images.md: a new bake is a new
    version)."""
    kubernetes: bool = True
    """Carries containerd, runc, kubelet and kubeadm."""
    build_vm_size: str = "Standard_D8ds_v5"
    """The build VM: DKMS builds and image pulls want more than Image Builder's default Standard_D2ds_v4 (Gen2)
    (azure-compute-docs articles/virtual-machines/linux/image-builder-json.md, "vmSize")."""
    architecture: str = "x64"
    """The gallery image definition's `architecture` (x64 or Arm64); an Arm64 image is built on an Arm64 VM
    (Standard_D8pds_v5: Ampere Altra, azure-compute-docs sizes/general-purpose/dpdsv5-series.md)."""


NODE_IMAGES: dict[str, NodeImageDefinition] = {d.name: d for d in (
    NodeImageDefinition("gpu", "GPU nodes with InfiniBand: NVIDIA R580 open driver, fabric manager, DOCA OFED, "
                        "containerd 2, kubelet", UBUNTU_HPC_2204, "jammy", TRUSTED_LAUNCH_SUPPORTED, "1.0.0"),
    NodeImageDefinition("rack", "NVLink rack nodes (GB300/GB200, Grace arm64): the base image's NVIDIA driver, "
                        "IMEX and DOCA, containerd 2, kubelet", UBUNTU_HPC_2404_GB, "noble", TRUSTED_LAUNCH_SUPPORTED,
                        "1.0.0", build_vm_size="Standard_D8pds_v5", architecture="Arm64"),
    NodeImageDefinition("cpu", "CPU and system nodes: containerd 2, kubelet", UBUNTU_2204, "jammy",
                        TRUSTED_LAUNCH_SUPPORTED, "1.0.0"),
    NodeImageDefinition("confidential", "Confidential GPU nodes: R580 open modules for the -azure-fde kernel, "
                        "GPU attestation, containerd 2, kubelet", UBUNTU_CVM_2404, "noble",
                        CONFIDENTIAL_VM_SUPPORTED, "1.0.0"),
    NodeImageDefinition("apiserver", "API servers: containerd 2, kubelet, kubeadm, control-plane images",
                        UBUNTU_2204, "jammy", TRUSTED_LAUNCH_SUPPORTED, "1.0.0"),
    NodeImageDefinition("etcd", "etcd members: etcd, etcdctl, etcdutl", UBUNTU_2204, "jammy", TRUSTED_LAUNCH_SUPPORTED,
                        "1.0.0", kubernetes=False),
)}

POOL_KIND_IMAGE: dict[PoolKind, str] = {PoolKind.SYSTEM: "cpu", PoolKind.CPU: "cpu", PoolKind.GPU: "gpu",
                                        PoolKind.CONFIDENTIAL: "confidential", PoolKind.RACK: "rack"}
"""The image definition each pool kind boots (the spec may name it; it must be this one)."""


def prepull_images(definition: str, kubernetes_version: str) -> tuple[str, ...]:
    """Container images baked into an image, so its machines start their pods without pulling: the sandbox image
    on every Kubernetes machine, and the images the library's own manifests run on that machine's pools
    (tests/test_node_images.py compares this with the rendered manifests). Chart-rendered images (Cilium, the GPU
    operator) are rendered by Helm at deploy time and pulled then."""
    minor = minor_of(kubernetes_version)
    node = (PAUSE_IMAGE,)
    if definition in ("gpu", "rack", "confidential"):
        return (*node, DCGM_IMAGE)
    if definition == "cpu":
        # The system pool runs on the CPU image: cluster add-ons and the library's controllers live there.
        return (*node, coredns_image(minor), cluster_autoscaler_image(minor), f"{KUEUE_IMAGE}:v{KUEUE_VERSION}",
                CSR_APPROVER_IMAGE, cloud_controller_manager_image(minor), KUBE_STATE_METRICS_IMAGE, PROMETHEUS_IMAGE)
    if definition == "apiserver":
        # kubeadm's static pods (`kubeadm config images list`): etcd is external and kube-proxy is skipped.
        return (*node, *(f"registry.k8s.io/{c}:v{kubernetes_version}"
                         for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")))
    return ()


def etcd_version(kubernetes_version: str) -> str:
    return MINOR_COUPLED[minor_of(kubernetes_version)].etcd.version
