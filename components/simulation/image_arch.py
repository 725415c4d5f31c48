"""Each node's architecture against the platforms of every image that may run there: a pod the bring-up places
on a pool runs all its images on that pool's machines, and an image built for another architecture does not start
(`exec format error`). GB300/GB200 rack pools are arm64, every other pool and the API servers amd64
(components/catalog/image_platforms.py).

Pure. The placements are the bring-up's (components/simulation/bring_up_layer.py: nodeSelector, required affinity,
tolerations); a workload's images are read from its pod spec (the library's own objects) or, for a chart's pods,
from the chart's values as the library renders them (`CHART_POD_IMAGES`). An image whose platforms were not read is
not checked.
"""

from __future__ import annotations

from typing import Any

from gpucluster.catalog.chart_images import CHART_IMAGES, RACK_CHARTS
from gpucluster.catalog.image_platforms import UPSTREAM_PLATFORMS, node_platform
from gpucluster.catalog.registries import OWN_NAMESPACE, parse_image
from gpucluster.errors import Problem
from gpucluster.kubernetes.objects.common import Object
from gpucluster.kubernetes.objects.images import CONTAINER_LISTS, pod_spec
from gpucluster.planning import agents_image
from gpucluster.planning.bring_up import BringUp
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.simulation.bring_up_layer import CONTROL_PLANE_POOL

CHART_POD_IMAGES = {
    "cilium-agent": "quay.io/cilium/cilium",
    "kueue-controller-manager": "registry.k8s.io/kueue/kueue",
    "gpu-operator": "nvcr.io/nvidia/gpu-operator",
    "nfd-master": "registry.k8s.io/nfd/node-feature-discovery",
    "nfd-gc": "registry.k8s.io/nfd/node-feature-discovery",
    "nfd-worker": "registry.k8s.io/nfd/node-feature-discovery",
    "nvidia-container-toolkit": "nvcr.io/nvidia/k8s/container-toolkit",
    "nvidia-device-plugin": "nvcr.io/nvidia/k8s-device-plugin",
    "nvidia-dcgm": "nvcr.io/nvidia/cloud-native/dcgm",
    "nvidia-dcgm-exporter": "nvcr.io/nvidia/k8s/dcgm-exporter",
}
"""The image each chart pod runs: the values blocks components/catalog/chart_images.py overrides (the GPU operator's
`repository` + `image`: NVIDIA/gpu-operator v26.3.3 values.yaml toolkit, devicePlugin, dcgm, dcgmExporter, operator;
Cilium's `image`; Kueue's controllerManager.manager.image; NFD's `image`). cilium-operator's repository takes a
suffix from the chart, so it is left out."""
AGENTS = f"{OWN_NAMESPACE}/{agents_image.REPOSITORY.split('/', 1)[1]}"


def upstream_repository(reference: str, plan: ClusterPlan) -> str:
    """The repository a served reference caches (`<login server>/<prefix>/<path>` -> `<upstream host>/<path>`), or
    the project's own repository (`gpucluster/agents`)."""
    ref = parse_image(reference)
    if ref.host != plan.registry.login_server:
        return ref.repository
    prefix, _, path = ref.path.partition("/")
    if prefix == OWN_NAMESPACE:
        return ref.path
    upstream = next((u for u in plan.registry.upstreams if u.prefix == prefix), None)
    return f"{upstream.host}/{path}" if upstream else ref.repository


def workload_images(objects: list[Object], plan: ClusterPlan) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {name: (image,) for name, image in CHART_POD_IMAGES.items()}
    for o in objects:
        pod: dict[str, Any] | None = pod_spec(o) if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet") else None
        if pod is None:
            continue
        images = {upstream_repository(str(c["image"]), plan) for key in CONTAINER_LISTS for c in pod.get(key) or []
                  if c.get("image")}
        found[o["metadata"]["name"]] = tuple(sorted(images))
    return found


def platforms_of(repository: str, plan: ClusterPlan) -> frozenset[str] | None:
    if repository == AGENTS:
        return frozenset(plan.registry.agents_platforms)
    known = UPSTREAM_PLATFORMS.get(repository)
    return known.platforms if known else None


def pool_platforms(plan: ClusterPlan) -> dict[str, str]:
    found = {p.name: node_platform(p.spec.vm_size) for p in plan.pools}
    found[CONTROL_PLANE_POOL] = node_platform(plan.control_plane.api.size.name)
    return found


def rack_chart_problems(plan: ClusterPlan) -> list[Problem]:
    """The rack charts' pods (NVIDIA's DRA driver, DRANET) run only on rack nodes (their values' nodeSelector,
    components/kubernetes/objects/rack_dra.py) and are not in the bring-up: each image against the rack pools'
    architectures."""
    racks = {p.name: node_platform(p.spec.vm_size) for p in plan.pools if p.racks is not None}
    problems = []
    for chart in sorted(RACK_CHARTS) if racks else ():
        for image in CHART_IMAGES[chart]:
            platforms = platforms_of(image.upstream, plan)
            for pool, arch in sorted(racks.items()):
                if platforms is not None and arch not in platforms:
                    problems.append(Problem("cluster.inCluster", (
                        f"{chart} runs on pool {pool} ({arch} machines), but {image.upstream} is built for "
                        f"{', '.join(sorted(platforms))} only")))
    return problems


def architecture_problems(plan: ClusterPlan, boot: BringUp, objects: list[Object]) -> list[Problem]:
    """Each (workload, pool, image) where the image is not built for the pool's architecture."""
    pools = pool_platforms(plan)
    images = workload_images(objects, plan)
    problems = rack_chart_problems(plan)
    for workload, placed in sorted(boot.placements().items()):
        for pool in placed:
            arch = pools.get(pool)
            for repository in images.get(workload, ()):
                platforms = platforms_of(repository, plan)
                if arch and platforms is not None and arch not in platforms:
                    problems.append(Problem("cluster.inCluster", (
                        f"{workload} runs on pool {pool} ({arch} machines), but {repository} is built for "
                        f"{', '.join(sorted(platforms))} only")))
    return problems
