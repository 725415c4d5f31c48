"""Outbound internet through one NAT gateway: how many public IPs the SNAT ports need."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucluster.catalog.limits import SNAT_PORTS_PER_PUBLIC_IP
from gpucluster.errors import SpecError
from gpucluster.planning.limits import Limits
from gpucluster.spec import ClusterSpec

MIN_PREFIX_LENGTH = 28  # 16 addresses: the largest prefix a NAT gateway takes
MAX_PREFIX_LENGTH = 31  # 2 addresses: the smallest public IP prefix


@dataclass(frozen=True)
class EgressPlan:
    nodes: int
    snat_ports_per_node: int
    public_ips_needed: int
    prefix_length: int
    idle_timeout_minutes: int

    @property
    def public_ips(self) -> int:
        return 2 ** (32 - self.prefix_length)

    @property
    def snat_ports(self) -> int:
        return self.public_ips * SNAT_PORTS_PER_PUBLIC_IP


MIN_SNAT_PORTS_PER_NODE = 64
"""The floor cluster.network.egress.snatPortsPerNode accepts."""


def plan_egress(spec: ClusterSpec, limits: Limits) -> EgressPlan:
    nodes = sum(p.count for p in spec.pools) + spec.control_plane.api_servers.count
    ports = spec.network.egress.snat_ports_per_node
    needed = max(1, math.ceil(nodes * ports / SNAT_PORTS_PER_PUBLIC_IP))
    limit = limits["natGatewayPublicIps"]
    if needed > limit.value:
        fits = limit.value * SNAT_PORTS_PER_PUBLIC_IP // nodes
        if fits < MIN_SNAT_PORTS_PER_NODE:
            raise SpecError.at("cluster.network.egress",
                               f"{nodes:,} nodes need at least {nodes * MIN_SNAT_PORTS_PER_NODE:,} SNAT ports but one NAT "
                               f"gateway ({limit.value} public IPs) has {limit.value * SNAT_PORTS_PER_PUBLIC_IP:,}; the "
                               f"cluster's single NAT gateway serves at most "
                               f"{limit.value * SNAT_PORTS_PER_PUBLIC_IP // MIN_SNAT_PORTS_PER_NODE:,} nodes: split the "
                               f"cluster")
        raise SpecError.at("cluster.network.egress.snatPortsPerNode",
                           f"{nodes:,} nodes x {ports} ports need {needed} public IPs on the NAT gateway but it takes "
                           f"{limit.value}; lower snatPortsPerNode to {fits} or below")
    length = min(MAX_PREFIX_LENGTH, max(MIN_PREFIX_LENGTH, 32 - math.ceil(math.log2(needed))))
    return EgressPlan(nodes, ports, needed, length, spec.network.egress.idle_timeout_minutes)
