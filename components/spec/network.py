"""`cluster.network`: address spaces, service range, admin access, egress, optional hub peering, and optionally an
existing VNet (and existing subnets) to place the cluster in."""

from __future__ import annotations

from ipaddress import IPv4Network

from pydantic import Field, field_validator, model_validator

from gpucluster.spec import consumer_rules as rules
from gpucluster.spec.base import Cidr, RealNumber, SpecModel, WholeNumber

SCALE_SET_SUBNET_SPARE = 0.20
"""Spare addresses to keep in a scale set's subnet (../shared/reference/azure.md, scale sets): `blockSpare`'s default."""


class EgressSpec(SpecModel):
    snat_ports_per_node: WholeNumber = Field(default=128, ge=64, le=64_512)
    """Concurrent outbound connections a node may hold; sizes the NAT gateway's public IPs."""
    idle_timeout_minutes: WholeNumber = Field(default=4, ge=4, le=120)


class ExistingVnetSpec(SpecModel):
    """A VNet the cluster's subnets go in instead of one of its own (docs/architecture.md, "A pool in your own
    network"). The stack then creates its subnets in that VNet's resource group and leaves the VNet itself, its
    address space and its peerings to their owner; `gpucluster verify` reads that the VNet holds addressSpace."""

    id: str = Field(min_length=1, max_length=500)
    """The VNet's resource id (`az network vnet show --query id`), in the stack's subscription and region."""
    address_entries: WholeNumber = Field(default=0, ge=0, le=65_536)
    """Address entries the VNet's other subnets already hold (IP configurations, prefixes, frontends): with the
    cluster's they count against the per-VNet 65,536 (Azure documents it as fixed)."""
    registry_dns_zone_id: str | None = Field(default=None, min_length=1, max_length=500)
    """A `privatelink.azurecr.io` private DNS zone already linked to this VNet (a hub's shared zone): the registry's
    records go there, where the VNet already resolves that name, and the stack creates no zone or link of its own."""

    @field_validator("id")
    @classmethod
    def _vnet(cls, value: str) -> str:
        return rules.check_vnet_id(value)

    @field_validator("registry_dns_zone_id")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return rules.check_registry_zone_id(value) if value is not None else None


class ExistingSubnetSpec(SpecModel):
    """A subnet of the existing VNet a planned block uses as it is: the stack neither creates nor changes it (its
    NSG, route table and NAT gateway stay its owner's), and the block is pinned to its prefix."""

    id: str = Field(min_length=1, max_length=600)
    """The subnet's resource id (`az network vnet subnet show --query id`), a subnet of `existingVnet.id`."""
    cidr: Cidr
    """The subnet's address prefix: the block's pin, checked against what the block holds (as a pinned block is)."""

    @field_validator("id")
    @classmethod
    def _subnet(cls, value: str) -> str:
        return rules.check_subnet_id(value)


class NetworkSpec(SpecModel):
    address_space: list[Cidr] = Field(min_length=1, max_length=64)
    """VNet address prefixes. Blocks are carved from them in order; never 172.16.0.0/16 (RDMA)."""
    service_cidr: Cidr = IPv4Network("192.168.0.0/16")
    """Kubernetes Service range: outside the VNet, /12 at the largest (kube-apiserver's limit)."""
    admin_cidrs: list[Cidr] = Field(default_factory=list, max_length=100)
    """Where operators reach the API server (6443) and SSH (22) from; empty means only from inside the VNet."""
    egress: EgressSpec = EgressSpec()
    hub_vnet_id: str | None = None
    """Resource id of a hub VNet to peer with (hub-and-spoke); its IPs then count toward the peered-group limit."""
    hub_address_entries: WholeNumber = Field(default=0, ge=0, le=1_000_000)
    """Address entries the hub and its other peered VNets hold (IP configurations, prefixes, frontends): with
    this VNet's they count against the peered group's 128,000 (Azure documents it as fixed)."""
    prefix_on_nic_onboarding: str | None = Field(default=None, min_length=3, max_length=500)
    """Where the subscription's onboarding to "Prefix on NIC" is recorded (Microsoft enables the preview per
    subscription). Pools with `podAddresses: prefixes` need it; the plan summary says whether it is recorded."""
    pinned_blocks: dict[str, Cidr] = Field(default_factory=dict, max_length=200)
    """Freeze a block where it is (block name from the plan output -> CIDR). A pinned block is kept as long as
    what it holds fits it (the spare is not required of a pin); a pool that outgrows its pin is a plan error."""
    existing_vnet: ExistingVnetSpec | None = None
    """Put the cluster's subnets in this VNet rather than create one: addressSpace then names the ranges of that
    VNet the cluster may carve its blocks from (ranges its other subnets do not use)."""
    existing_subnets: dict[str, ExistingSubnetSpec] = Field(default_factory=dict, max_length=200)
    """Pool blocks (`pool-<name>`, as the plan output names them) that use a subnet of existingVnet as it is, instead
    of one the stack creates. The control plane's and etcd's subnets are always the stack's: their NSG rules are
    what keeps etcd reachable from the API servers alone."""
    block_spare: RealNumber = Field(default=SCALE_SET_SUBNET_SPARE, ge=0.0, le=0.75)
    """Fraction of a newly placed block kept free for growth (Azure's scale-set subnet guidance). Changing it
    resizes, and so moves, unpinned blocks: pin the blocks first (docs/ip-plan.md)."""

    @field_validator("address_space")
    @classmethod
    def _azure_accepts_spaces(cls, spaces: list[Cidr]) -> list[Cidr]:
        for index, space in enumerate(spaces):
            problem = rules.reserved_range_problem(space)
            if problem:
                raise ValueError(f"[{index}] {problem}")
        return spaces

    @field_validator("service_cidr")
    @classmethod
    def _service_range(cls, service: IPv4Network) -> IPv4Network:
        problem = rules.service_range_problem(service)
        if problem:
            raise ValueError(problem)
        return service

    @field_validator("hub_vnet_id")
    @classmethod
    def _hub(cls, value: str | None) -> str | None:
        return rules.check_vnet_id(value) if value is not None else None

    @model_validator(mode="after")
    def _existing_network(self) -> NetworkSpec:
        if self.existing_subnets and self.existing_vnet is None:
            raise ValueError("existingSubnets needs existingVnet: name the VNet the subnets belong to")
        if self.existing_vnet is not None and self.hub_vnet_id is not None:
            raise ValueError("hubVnetId peers a VNet the stack creates; with existingVnet the VNet and its peerings "
                             "are its owner's: remove hubVnetId and peer the existing VNet where it is managed")
        vnet = self.existing_vnet.id.lower() if self.existing_vnet else ""
        for block, subnet in self.existing_subnets.items():
            if rules.subnet_vnet(subnet.id).lower() != vnet:
                raise ValueError(f"existingSubnets.{block}.id is a subnet of {rules.subnet_vnet(subnet.id)}, not of "
                                 "existingVnet.id: name a subnet of that VNet")
        return self


def existing_vnet_subscription_problem(network: NetworkSpec, subscription: str) -> str | None:
    """Why the existing VNet cannot hold the stack's scale sets when the stack deploys to `subscription` (a NIC
    joins a subnet of its own subscription), or None."""
    if network.existing_vnet is None or not subscription:
        return None
    vnet_subscription = network.existing_vnet.id.split("/")[2].lower()
    if vnet_subscription == subscription.lower():
        return None
    return (f"is in subscription {vnet_subscription} but the stack deploys to {subscription}: the scale sets' NICs "
            "join subnets of their own subscription; name a VNet of the stack's subscription")
