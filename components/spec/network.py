"""`cluster.network`: address spaces, service range, admin access, egress, optional hub peering."""

from __future__ import annotations

from ipaddress import IPv4Network

from pydantic import Field, field_validator

from gpucluster.spec import consumer_rules as rules
from gpucluster.spec.base import Cidr, RealNumber, SpecModel, WholeNumber

SCALE_SET_SUBNET_SPARE = 0.20
"""Spare addresses to keep in a scale set's subnet (../shared/reference/azure.md, scale sets): `blockSpare`'s default."""


class EgressSpec(SpecModel):
    snat_ports_per_node: WholeNumber = Field(default=128, ge=64, le=64_512)
    """Concurrent outbound connections a node may hold; sizes the NAT gateway's public IPs."""
    idle_timeout_minutes: WholeNumber = Field(default=4, ge=4, le=120)


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
