"""Which node image version every scale set and VM boots, which versions this stack builds, and how many gallery
replicas each build keeps.

Rules, each with its source:
- A pool boots the image its kind needs (components/catalog/node_images.py `POOL_KIND_IMAGE`); a stack may name the
  definition, but not another one: a CPU image has no GPU driver, a GPU image is no confidential-VM image.
- The stack builds one version of each definition it uses (`cluster.images.<definition>.version`, default the
  catalogue's); a pool may name an older version, built earlier and kept in the gallery (deleting an Image Builder
  template leaves the versions it distributed).
- Replicas: Azure Compute Gallery advises one replica for every 50 VMs created at once and one per scale set created
  at once, and allows at most 100 per image version (azure-compute-docs articles/virtual-machines/
  azure-compute-gallery.md, "Scaling" and "Limits"). A first `pulumi up` creates every VM of a version at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucluster.catalog.node_images import NODE_IMAGES, POOL_KIND_IMAGE
from gpucluster.errors import Problem, SpecError, pool_path
from gpucluster.planning.control_plane import ControlPlanePlan
from gpucluster.planning.placement import PoolPlan
from gpucluster.spec import ClusterSpec, NodeImageSpec

API_SCALE_SET = "apiserver"
"""The API servers' one scale set (components/azure/api_servers.py)."""
VMS_PER_REPLICA = 50
MAX_REPLICAS = 100


@dataclass(frozen=True)
class NodeImage:
    definition: str
    version: str

    def __str__(self) -> str:
        return f"{self.definition} {self.version}"


@dataclass(frozen=True)
class ImageVersionPlan:
    image: NodeImage
    built_here: bool
    """This stack's Image Builder template builds it; otherwise it must already be in the gallery."""
    machines: tuple[str, ...]
    """Scale sets and VMs that boot it."""
    vms: int
    scale_sets: int

    @property
    def replicas(self) -> int:
        return min(MAX_REPLICAS, max(1, math.ceil(self.vms / VMS_PER_REPLICA) + self.scale_sets))


@dataclass(frozen=True)
class NodeImagesPlan:
    builds: dict[str, str]
    """Definition -> the version this stack builds, for every definition a machine boots."""
    machines: dict[str, NodeImage]
    """Scale set or VM name -> the image it boots."""
    pools: dict[str, NodeImage]
    versions: tuple[ImageVersionPlan, ...]

    def version(self, image: NodeImage) -> ImageVersionPlan:
        return next(v for v in self.versions if v.image == image)


def gallery_name(cluster: str) -> str:
    """Gallery names take letters, digits and periods (azure-docs articles/azure-resource-manager/management/
    resource-name-rules.md, Microsoft.Compute galleries)."""
    return f"{cluster.replace('-', '.')}.node.images"


def version_id(subscription: str, resource_group: str, cluster: str, image: NodeImage) -> str:
    """The image version id a machine boots (components/azure/scale_set/body.py `gallery_image`); `gpucluster verify`
    expects it on each scale set."""
    return (f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/galleries/"
            f"{gallery_name(cluster)}/images/{image.definition}/versions/{image.version}")


def build_version(spec: ClusterSpec, definition: str) -> str:
    chosen = getattr(spec.images, definition).version
    return chosen or NODE_IMAGES[definition].version


def _resolve(spec: ClusterSpec, chosen: NodeImageSpec, needed: str, path: str,
             problems: list[Problem]) -> NodeImage:
    if chosen.definition is not None and chosen.definition != needed:
        problems.append(Problem(f"{path}.definition", f"{chosen.definition!r} cannot boot these machines: they need "
                                                       f"the {needed!r} image; remove the key or set {needed!r}"))
    return NodeImage(needed, chosen.version or build_version(spec, needed))


def plan_node_images(spec: ClusterSpec, pools: tuple[PoolPlan, ...], cp: ControlPlanePlan) -> NodeImagesPlan:
    problems: list[Problem] = []
    machines: dict[str, NodeImage] = {}
    sizes: dict[str, int] = {}
    scale_sets: set[str] = set()
    pool_images: dict[str, NodeImage] = {}
    names = [p.name for p in spec.pools]
    for pool in pools:
        image = _resolve(spec, pool.spec.image, POOL_KIND_IMAGE[pool.kind],
                         pool_path(names.index(pool.name), "image"), problems)
        pool_images[pool.name] = image
        for s in pool.scale_sets:
            machines[s.name], sizes[s.name] = image, s.capacity
            scale_sets.add(s.name)
    api = _resolve(spec, spec.control_plane.api_servers.image, "apiserver", "cluster.controlPlane.apiServers.image",
                   problems)
    machines[API_SCALE_SET], sizes[API_SCALE_SET] = api, cp.api.count
    scale_sets.add(API_SCALE_SET)
    for etcd, key in ((cp.etcd, "etcd"), (cp.events, "eventsEtcd")):
        etcd_spec = spec.control_plane.etcd if key == "etcd" else spec.control_plane.events_etcd
        if etcd is None or etcd_spec is None:
            continue
        image = _resolve(spec, etcd_spec.image, "etcd", f"cluster.controlPlane.{key}.image", problems)
        for member in etcd.members:
            machines[member.name], sizes[member.name] = image, 1
    if problems:
        raise SpecError(problems)
    used = sorted({m.definition for m in machines.values()}, key=list(NODE_IMAGES).index)
    builds = {d: build_version(spec, d) for d in used}
    versions = []
    for image in sorted(set(machines.values()), key=lambda i: (list(NODE_IMAGES).index(i.definition), i.version)):
        names_ = tuple(sorted(n for n, m in machines.items() if m == image))
        versions.append(ImageVersionPlan(image, builds[image.definition] == image.version, names_,
                                         sum(sizes[n] for n in names_), sum(n in scale_sets for n in names_)))
    return NodeImagesPlan(builds, dict(sorted(machines.items())), pool_images, tuple(versions))
