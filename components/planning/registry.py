"""The cluster's container registry, planned: its name and login server, one cache rule per upstream the
cluster's images come from (derived from the image references themselves), and how a reference is served.

Every image reference the library renders (manifests, chart values, boot documents, the agents' base image) is
rewritten to `<login server>/<prefix>/<path>` with the upstream's tag and digest; the cache rule for `<prefix>/*`
pulls it from the upstream on first use (docs/registry.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpucluster.catalog.acr_tasks import AGENT_POOL_REGIONS
from gpucluster.catalog.chart_images import CHART_IMAGES, RACK_CHARTS
from gpucluster.catalog.image_platforms import AMD64
from gpucluster.catalog.in_cluster import (
    CSR_APPROVER_IMAGE,
    DCGM_IMAGE,
    KUEUE_IMAGE,
    KUEUE_VERSION,
    NODE_CACHE_IMAGE,
    PAUSE_IMAGE,
    RDMA_DEVICE_PLUGIN_IMAGE,
    cloud_controller_manager_image,
    cluster_autoscaler_image,
    coredns_image,
)
from gpucluster.catalog.metrics import METRICS_IMAGES
from gpucluster.catalog.registries import MAX_CACHE_RULES, OWN_NAMESPACE, UPSTREAMS, Upstream, parse_image
from gpucluster.catalog.versions import MINOR_COUPLED
from gpucluster.errors import Problem, SpecError
from gpucluster.planning import agents_image
from gpucluster.planning.sizes import size_table
from gpucluster.spec import ClusterSpec, PoolKind

CONTROL_PLANE_IMAGES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
"""What kubeadm init runs as static pods from `imageRepository` with external etcd and its CoreDNS and kube-proxy
phases skipped (kubeadm `images.GetControlPlaneImages`; components/bootstrap/apiserver.py SKIP_PHASES)."""
K8S_REGISTRY = "registry.k8s.io"


@dataclass(frozen=True)
class CacheRule:
    name: str
    upstream: Upstream
    credential_set: str | None

    @property
    def source_repository(self) -> str:
        return f"{self.upstream.host}/*"

    @property
    def target_repository(self) -> str:
        return f"{self.upstream.prefix}/*"


DOCKER_HUB_CREDENTIALS = "docker-hub"


@dataclass(frozen=True)
class RegistryPlan:
    name: str
    upstreams: tuple[Upstream, ...]
    agents_tag: str
    agents_platforms: tuple[str, ...] = (AMD64,)
    """What the agents image is built for: the architecture of every node it may run on (agents_image.platforms)."""

    @property
    def login_server(self) -> str:
        return f"{self.name.lower()}.azurecr.io"

    @property
    def cache_rules(self) -> tuple[CacheRule, ...]:
        return tuple(CacheRule(f"cache-{u.prefix}", u, DOCKER_HUB_CREDENTIALS if u.needs_credentials else None)
                     for u in self.upstreams)

    @property
    def agents_image(self) -> str:
        return f"{self.login_server}/{agents_image.REPOSITORY}:{self.agents_tag}"

    @property
    def agents_base_image(self) -> str:
        return self.serve(agents_image.base_image())

    @property
    def control_plane_repository(self) -> str:
        """kubeadm's `imageRepository`: registry.k8s.io's root, served."""
        return f"{self.login_server}/{UPSTREAMS[K8S_REGISTRY].prefix}"

    def serve(self, reference: str) -> str:
        """The reference as this registry serves it; an upstream without a cache rule is a bug, not input."""
        ref = parse_image(reference)
        if ref.host == self.login_server:
            return reference
        upstream = next((u for u in self.upstreams if u.host == ref.host), None)
        if upstream is None:
            raise KeyError(f"{reference}: no cache rule for {ref.host} (derive it: cluster_upstream_images)")
        return ref.text(f"{self.login_server}/{upstream.prefix}")

    def serves(self, reference: str) -> bool:
        """Whether a rendered reference comes from this registry: a cached upstream's prefix or our own images."""
        ref = parse_image(reference)
        if ref.host != self.login_server:
            return False
        namespace = ref.path.split("/", 1)[0]
        return namespace == OWN_NAMESPACE or namespace in {u.prefix for u in self.upstreams}


def cluster_upstream_images(spec: ClusterSpec) -> tuple[str, ...]:
    """Every upstream image reference the library renders for this cluster, from the same sources the renderers
    read: the in-cluster catalogue, the charts' image blocks, kubeadm's control-plane images and the agents' base."""
    minor = ".".join(spec.kubernetes_version.split(".")[:2])
    refs = [f"{K8S_REGISTRY}/{name}:v{spec.kubernetes_version}" for name in CONTROL_PLANE_IMAGES]
    refs.append(agents_image.base_image())
    if spec.in_cluster.enabled:
        refs += [PAUSE_IMAGE, DCGM_IMAGE, f"{KUEUE_IMAGE}:v{KUEUE_VERSION}", CSR_APPROVER_IMAGE, NODE_CACHE_IMAGE,
                 *METRICS_IMAGES]
        # A minor without coupled versions is the version planner's error to report (exit 2), not a KeyError here.
        refs += ([cluster_autoscaler_image(minor), coredns_image(minor), cloud_controller_manager_image(minor)]
                 if minor in MINOR_COUPLED else [])
        racks = any(p.racks is not None for p in spec.pools)
        refs += [image.upstream for chart, images in CHART_IMAGES.items() for image in images
                 if racks or chart not in RACK_CHARTS]
        table = size_table(spec)
        if any(table[p.vm_size].infiniband if p.infiniband is None else p.infiniband
               for p in spec.pools if p.vm_size in table and p.kind is not PoolKind.RACK):
            refs.append(RDMA_DEVICE_PLUGIN_IMAGE)  # the RDMA device plugin on InfiniBand pools
    return tuple(refs)


def plan_registry(spec: ClusterSpec, images: Iterable[str]) -> RegistryPlan:
    """Upstreams in the order the images first name them, then the stack's extra ones."""
    problems: list[Problem] = []
    hosts: list[str] = []
    for reference in images:
        host = parse_image(reference).host
        if host not in hosts:
            hosts.append(host)
    hosts += [h for h in spec.registry.extra_upstreams if h not in hosts]
    for host in hosts:
        if host not in UPSTREAMS:
            where = (f"cluster.registry.extraUpstreams[{spec.registry.extra_upstreams.index(host)}]"
                     if host in spec.registry.extra_upstreams else "cluster.registry")
            problems.append(Problem(where, f"ACR's artifact cache does not cache {host}; supported: "
                                           f"{', '.join(sorted(UPSTREAMS))}"))
    upstreams = tuple(UPSTREAMS[h] for h in hosts if h in UPSTREAMS)
    if any(u.needs_credentials for u in upstreams) and spec.registry.docker_hub is None:
        problems.append(Problem("cluster.registry.dockerHub",
                                "docker.io is an upstream and ACR caches Docker Hub only with credentials: set "
                                "keyVaultId, usernameSecret and passwordSecret (a Docker Hub access token)"))
    if len(upstreams) > MAX_CACHE_RULES:
        problems.append(Problem("cluster.registry.extraUpstreams", f"at most {MAX_CACHE_RULES} cache rules"))
    if spec.location not in AGENT_POOL_REGIONS:
        problems.append(Problem("cluster.location", f"{spec.location!r} has no ACR Tasks agent pools, which build the "
                                f"agents image inside the VNet (docs/registry.md); use one of "
                                f"{', '.join(sorted(AGENT_POOL_REGIONS))}"))
    name = spec.registry.name
    if not name:  # the loaders name it (components/spec/registry_name.py); a bare spec must too
        problems.append(Problem("cluster.registry.name", "not set: registry names are global across Azure; load the "
                                "stack with load_stack_file or with_registry_name(spec, <subscription id>), or set "
                                "one"))
    if problems or not name:
        raise SpecError(problems)
    return RegistryPlan(name, upstreams,
                        agents_image.content_tag(), agents_image.platforms(p.vm_size for p in spec.pools))
