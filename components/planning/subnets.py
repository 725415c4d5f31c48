"""Where each planned block's subnet is: in the stack's own VNet (`<cluster>` in the cluster's resource group, subnets
named as the blocks), or in `network.existingVnet` (subnets named `<cluster>-<block>`, beside other owners'), and
which blocks use an existing subnet as it is. The network component declares from it, and verify reads back from it."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.ip_plan import IpPlan
from gpucluster.planning.resource_ids import parse_vnet_id
from gpucluster.spec import ClusterSpec


@dataclass(frozen=True)
class PlannedSubnet:
    block: str
    cidr: IPv4Network
    name: str
    """The subnet's name in its VNet."""
    existing_id: str | None
    """The subnet's id when the block uses an existing subnet (`network.existingSubnets`): the stack declares none."""


@dataclass(frozen=True)
class PlannedVnet:
    resource_group: str
    name: str
    own: bool
    """The stack creates it (no `network.existingVnet`)."""
    subnets: tuple[PlannedSubnet, ...]
    """One per block, in the IP plan's order."""

    def id(self, subscription: str) -> str:
        return (f"/subscriptions/{subscription}/resourceGroups/{self.resource_group}/providers/Microsoft.Network/"
                f"virtualNetworks/{self.name}")

    @property
    def created(self) -> tuple[PlannedSubnet, ...]:
        """The subnets the stack declares."""
        return tuple(s for s in self.subnets if s.existing_id is None)


def subnet_name(cluster: str, block: str, own_vnet: bool) -> str:
    """A block's subnet: named as the block in the cluster's own VNet; in an existing VNet, which other clusters and
    their owner's subnets share, prefixed with the cluster's name (subnet names: 1-80 characters)."""
    return block if own_vnet else f"{cluster}-{block}"


def plan_vnet(spec: ClusterSpec, ip: IpPlan) -> PlannedVnet:
    net = spec.network
    own = net.existing_vnet is None
    if net.existing_vnet is None:
        group, name = resource_group_name(spec.name), spec.name
    else:
        where = parse_vnet_id(net.existing_vnet.id)
        group, name = where.resource_group, where.name
    subnets = tuple(PlannedSubnet(b.name, b.cidr, subnet_name(spec.name, b.name, own),
                                  net.existing_subnets[b.name].id if b.name in net.existing_subnets else None)
                    for b in ip.blocks)
    return PlannedVnet(group, name, own, subnets)
