"""The platforms container images are built for, each read at its source, so the plan can hold every pod's images
against the architecture of every node it may run on (components/simulation/image_arch.py). GB300 and GB200 rack
nodes are arm64 (Grace: components/catalog/vm_sizes.py `ARM64_SIZES`), every other size amd64.

An image not listed here is not checked: its platforms were not read (docs/scheduling.md says which). The project's
own agents image is built for the platforms its plan says (`RegistryPlan.agents_platforms`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.vm_sizes import ARM64_SIZES

AMD64 = "linux/amd64"
ARM64 = "linux/arm64"


def node_platform(vm_size: str) -> str:
    return ARM64 if vm_size in ARM64_SIZES else AMD64


@dataclass(frozen=True)
class ImagePlatforms:
    platforms: frozenset[str]
    source: str


UPSTREAM_PLATFORMS: dict[str, ImagePlatforms] = {
    "nvcr.io/nvidia/k8s/container-toolkit": ImagePlatforms(frozenset({AMD64, ARM64}), (
        "NVIDIA/nvidia-container-toolkit v1.19.1 (commit 09ceee5d; the version NVIDIA/gpu-operator v26.3.3 "
        "values.yaml `toolkit.version` names) .github/workflows/image.yaml: application-image for arch amd64 and "
        "arm64, create-manifest joins them")),
    "nvcr.io/nvidia/k8s-device-plugin": ImagePlatforms(frozenset({AMD64, ARM64}), (
        "NVIDIA/k8s-device-plugin v0.19.3 (commit 570e776d; gpu-operator v26.3.3 `devicePlugin.version`) "
        ".github/workflows/image.yaml: build for arch amd64 and arm64, create-manifest joins them")),
    "registry.k8s.io/nfd/node-feature-discovery": ImagePlatforms(frozenset({AMD64, ARM64}), (
        "kubernetes-sigs/node-feature-discovery v0.18.3 (commit f39ef626) Makefile `IMAGE_ALL_PLATFORMS ?= "
        "linux/amd64,linux/arm64,linux/arm/v7,linux/s390x,linux/ppc64le`")),
    "registry.k8s.io/dns/k8s-dns-node-cache": ImagePlatforms(frozenset({AMD64, ARM64}), (
        "kubernetes/dns 1.26.4 (commit 5c70f6ca) rules.mk `ALL_ARCH := amd64 arm arm64 ppc64le s390x`")),
    "nvcr.io/nvidia/k8s/dcgm-exporter": ImagePlatforms(frozenset({AMD64, ARM64}), (
        "NVIDIA/dcgm-exporter 4.5.3-4.8.2 (commit 691c9276; gpu-operator v26.3.3 `dcgmExporter.version`) Makefile "
        "`PLATFORMS := linux/amd64,linux/arm64`")),
    "registry.k8s.io/networking/dranet": ImagePlatforms(frozenset({AMD64, ARM64}), (
        "kubernetes-sigs/dranet v1.4.0 (commit ca195e29) Makefile `PLATFORMS?=linux/amd64,linux/arm64`")),
    "nvcr.io/nvidia/k8s-dra-driver-gpu": ImagePlatforms(frozenset({AMD64, ARM64}), (
        "kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0 (commit 0882da87) deployments/container/Makefile: "
        "`BUILD_MULTI_ARCH_IMAGES` builds `--platform=linux/amd64,linux/arm64` (single-platform builds may not be "
        "pushed)")),
}
"""By repository (no tag), where NVIDIA's images were read at the tags the pinned GPU operator names. The workflows
publish to ghcr.io; that nvcr.io carries the same manifests was not read."""
