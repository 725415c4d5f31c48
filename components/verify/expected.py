"""What the plan expects to find deployed, read from the ClusterPlan alone (no Pulumi program run, no Azure)."""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.images import UBUNTU_2204, UBUNTU_HPC_2204
from components.planning.cluster_plan import ClusterPlan
from components.planning.placement import PoolPlan, ScaleSetPlan
from components.spec import ImageRef

API_SCALE_SET = "apiserver"
"""components/azure/api_servers.py `API_SCALE_SET` (that module imports the Pulumi SDK, which verify does not need)."""

PROVIDERS = ("Microsoft.Compute", "Microsoft.Network", "Microsoft.Storage", "Microsoft.ManagedIdentity",
             "Microsoft.ContainerRegistry")
"""Resource providers of what every stack declares (components/azure/: scale sets, VMs and disk encryption sets;
networks, load balancer, NAT gateway, private endpoint and DNS zone; the etcd snapshot account; identities; the
registry). Microsoft.KeyVault is added for confidential pools with customer-managed keys (confidential_key.py).
An unregistered provider refuses every request of its namespace (azure-docs
articles/azure-resource-manager/troubleshooting/error-register-resource-provider.md)."""


@dataclass(frozen=True)
class Placement:
    """One size in one zone, and what puts it there."""

    size: str
    zone: str
    used_by: str


def pool_image(pool: PoolPlan) -> ImageRef:
    """The image a pool's scale sets boot, as components/azure/node_pool.py `_image` chooses it (a test keeps the
    two equal)."""
    if pool.confidential is not None:
        return pool.confidential.image
    return pool.spec.image or UBUNTU_HPC_2204


def images(plan: ClusterPlan) -> dict[str, tuple[ImageRef, tuple[str, ...]]]:
    """Each distinct marketplace image (publisher:offer:sku:version) -> the image and what boots it."""
    found: dict[str, tuple[ImageRef, list[str]]] = {}
    users = [(pool_image(p), f"pool {p.name}") for p in plan.pools]
    users += [(UBUNTU_2204, "API servers"), (UBUNTU_2204, "etcd members")]
    for image, user in users:
        urn = image_urn(image)
        found.setdefault(urn, (image, []))[1].append(user)
    return {urn: (image, tuple(who)) for urn, (image, who) in found.items()}


def image_urn(image: ImageRef) -> str:
    return f"{image.publisher}:{image.offer}:{image.sku}:{image.version}"


def placements(plan: ClusterPlan) -> list[Placement]:
    """Every (size, zone) the plan places a VM in: pools' scale sets, API servers, etcd and events-etcd members."""
    found: dict[tuple[str, str], list[str]] = {}
    for pool in plan.pools:
        for scale_set in pool.scale_sets:
            found.setdefault((pool.size.name, scale_set.zone), []).append(f"pool {pool.name}")
    cp = plan.control_plane
    for zone in cp.api.zones:
        found.setdefault((cp.api.size.name, zone), []).append("API servers")
    for etcd in (e for e in (cp.etcd, cp.events) if e is not None):
        for member in etcd.members:
            found.setdefault((etcd.size.name, member.zone), []).append(etcd.role)
    return [Placement(size, zone, ", ".join(dict.fromkeys(users))) for (size, zone), users in sorted(found.items())]


def providers(plan: ClusterPlan) -> tuple[str, ...]:
    keys = any(p.confidential is not None and p.confidential.customer_key is not None for p in plan.pools)
    return (*PROVIDERS, "Microsoft.KeyVault") if keys else PROVIDERS


def scale_sets(plan: ClusterPlan) -> list[tuple[PoolPlan, ScaleSetPlan]]:
    return [(pool, s) for pool in plan.pools for s in pool.scale_sets]
