"""Where each pinned chart takes its images from its values, so every one can be served by the cluster's registry.

A chart renders an image from values the library does not set unless it overrides them; an image it misses is
pulled from the public upstream. The library overrides the repository of every image block the chart's
`values.yaml` declares at the pinned version (enabled or not: a later values change must not reach a public
registry), and keeps the chart's own tag (and digest, where the chart pins one) unless a row pins a tag.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.versions import DRA_DRIVER, DRANET, GPU_OPERATOR, KUEUE


@dataclass(frozen=True)
class ChartImage:
    path: tuple[str, ...]
    """Values path of the block holding `repository` (and the tag key)."""
    upstream: str
    """The chart's default repository (for the GPU operator a registry path; the block's `image` names the image)."""
    tag_key: str | None = None
    tag: str | None = None
    """Pinned where the chart would otherwise fall back to its appVersion."""


GPU_OPERATOR_SOURCE = f"NVIDIA/gpu-operator {GPU_OPERATOR.version} deployments/gpu-operator/values.yaml"
_NV, _NV_CN, _NV_K8S = "nvcr.io/nvidia", "nvcr.io/nvidia/cloud-native", "nvcr.io/nvidia/k8s"
_OWN = ("version", GPU_OPERATOR.version)
"""operator, validator and nodeStatusExporter default to the chart's appVersion (templates/_helpers.tpl
`gpu-operator.fullimage`); the library pins the release it installs."""
GPU_OPERATOR_IMAGES: tuple[ChartImage, ...] = (
    ChartImage(("validator",), _NV, *_OWN), ChartImage(("operator",), _NV, *_OWN),
    ChartImage(("driver",), _NV), ChartImage(("driver", "manager"), _NV_CN),
    ChartImage(("toolkit",), _NV_K8S), ChartImage(("devicePlugin",), _NV), ChartImage(("dcgm",), _NV_CN),
    ChartImage(("dcgmExporter",), _NV_K8S), ChartImage(("gfd",), _NV), ChartImage(("migManager",), _NV_CN),
    ChartImage(("nodeStatusExporter",), _NV, *_OWN), ChartImage(("gds",), _NV_CN), ChartImage(("gdrcopy",), _NV_CN),
    ChartImage(("vgpuManager", "driverManager"), _NV_CN), ChartImage(("vgpuDeviceManager",), _NV_CN),
    ChartImage(("vfioManager",), _NV_CN), ChartImage(("vfioManager", "driverManager"), _NV_CN),
    ChartImage(("sandboxDevicePlugin",), _NV), ChartImage(("kataSandboxDevicePlugin",), _NV_CN),
    ChartImage(("ccManager",), _NV_CN),
    # The NFD subchart (Chart.yaml dependency node-feature-discovery 0.18.3): kubernetes-sigs/node-feature-discovery
    # v0.18.3 deployment/helm/node-feature-discovery/values.yaml `image.repository`, tag defaulting to appVersion.
    ChartImage(("node-feature-discovery", "image"), "registry.k8s.io/nfd/node-feature-discovery", "tag", "v0.18.3"),
)
"""`vgpuManager` itself has no default repository (values.yaml `repository: ""`) and is disabled."""

CILIUM_SOURCE = ("cilium/cilium install/kubernetes/cilium/values.yaml image blocks (`repository`, `tag`, `digest`, "
                 "`useDigest`) as in the 1.15-1.19 Helm reference; the 1.20.3 file itself could not be read here")
CILIUM_IMAGES: tuple[ChartImage, ...] = tuple(ChartImage(path, f"quay.io/cilium/{name}") for path, name in (
    (("image",), "cilium"), (("operator", "image"), "operator"), (("envoy", "image"), "cilium-envoy"),
    (("certgen", "image"), "certgen"), (("hubble", "relay", "image"), "hubble-relay"),
    (("hubble", "ui", "backend", "image"), "hubble-ui-backend"), (("hubble", "ui", "frontend", "image"), "hubble-ui"),
    (("preflight", "image"), "cilium"), (("clustermesh", "apiserver", "image"), "clustermesh-apiserver"),
    (("nodeinit", "image"), "startup-script"),
))
"""The operator's repository takes a suffix from the chart (`-azure`, `-generic`): it stays under the same prefix."""

KUEUE_SOURCE = f"kubernetes-sigs/kueue v{KUEUE.version} charts/kueue/values.yaml"
KUEUE_IMAGES: tuple[ChartImage, ...] = (
    ChartImage(("controllerManager", "manager", "image"), "registry.k8s.io/kueue/kueue", "tag", f"v{KUEUE.version}"),
)
"""kueueViz (backend, frontend) is off (`enableKueueViz: false`) and the library never turns it on; its values
default to a staging registry and are left alone."""

DRA_DRIVER_SOURCE = (f"kubernetes-sigs/dra-driver-nvidia-gpu v{DRA_DRIVER.version} deployments/helm/"
                     "nvidia-dra-driver-gpu/values.yaml `image` (the only image block: controller, kubelet plugin and "
                     "the ComputeDomain daemons the controller starts, templates/_helpers.tpl fullimage, IMAGE_NAME)")
DRA_DRIVER_IMAGES: tuple[ChartImage, ...] = (
    ChartImage(("image",), "nvcr.io/nvidia/k8s-dra-driver-gpu", "tag", f"v{DRA_DRIVER.version}"),
)
"""The chart's tag defaults to `v` + appVersion (25.12.0): pinned to the same tag here."""
DRANET_SOURCE = (f"kubernetes-sigs/dranet v{DRANET.version} deployments/helm/dranet/values.yaml `image` (the only "
                 "image block; templates/daemonset.yaml `repository:tag`, tag defaulting to the packaged appVersion)")
DRANET_IMAGES: tuple[ChartImage, ...] = (
    ChartImage(("image",), "registry.k8s.io/networking/dranet", "tag", f"v{DRANET.version}"),
)
"""The image the release promotes (RELEASE.md: registry.k8s.io/networking/dranet:<tag>); the source Chart.yaml's
appVersion is `stable`, replaced at package time (Makefile helm-package `--app-version $(TAG)`): pinned here."""

CHART_IMAGES: dict[str, tuple[ChartImage, ...]] = {
    "gpu-operator": GPU_OPERATOR_IMAGES, "cilium": CILIUM_IMAGES, "kueue": KUEUE_IMAGES,
    "nvidia-dra-driver-gpu": DRA_DRIVER_IMAGES, "dranet": DRANET_IMAGES}
RACK_CHARTS = frozenset({"nvidia-dra-driver-gpu", "dranet"})
"""Charts installed only on clusters with rack pools: their images are served only there."""
