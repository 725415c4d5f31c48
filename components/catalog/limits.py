"""Azure's limits the plan checks, each adjustable or fixed, with its source.

An adjustable limit can be raised per stack under `cluster.limits` with the note of the request that raised
it. A fixed limit cannot: Microsoft's networking limits page says "If there's no maximum limit column, the
resource doesn't have adjustable limits" (MicrosoftDocs/azure-docs includes/azure-virtual-network-limits.md,
ms.date 12/05/2022, the "Networking limits - Azure Resource Manager" table has a single `Limit` column). The
only way past a fixed limit is an exception Azure grants in writing, which the stack declares with its
reference (`cluster.limits.<key>.azureException`).
"""

from __future__ import annotations

from dataclasses import dataclass

_NET_LIMITS = "azure-docs includes/azure-virtual-network-limits.md"
_PLACEMENT = "azure-compute-docs articles/virtual-machine-scale-sets/virtual-machine-scale-sets-placement-groups.md"
_SETUP_INFINIBAND = ("azure-compute-docs articles/virtual-machines/setup-infiniband.md (ms.date 09/25/2026): \"capped at "
                     "100 VMs by default ... The limit on the number of VMs in a single scale set can be increased to 300\"")


@dataclass(frozen=True)
class DefaultLimit:
    key: str
    """The camelCase key under `cluster.limits` that overrides it."""
    value: int
    description: str
    source: str
    fixed: bool = False
    """Azure documents the limit as not adjustable: a support note cannot raise it."""


DEFAULT_LIMITS: dict[str, DefaultLimit] = {
    limit.key: limit
    for limit in (
        # The four network rows sit in the table without a maximum column: fixed.
        DefaultLimit("privateIpsPerNic", 256, "private IP addresses per network interface", _NET_LIMITS, fixed=True),
        DefaultLimit("privateIpsPerVnet", 65_536,
                     "private address entries per virtual network (an IP configuration or a /28 block each)",
                     _NET_LIMITS, fixed=True),
        DefaultLimit("privateIpsPerPeeredGroup", 128_000,
                     "private address entries per group of peered virtual networks", _NET_LIMITS, fixed=True),
        DefaultLimit("subnetsPerVnet", 3_000, "subnets per virtual network", _NET_LIMITS, fixed=True),
        DefaultLimit("vmsPerInfinibandDomain", 100,
                     "VMs in a scale set with singlePlacementGroup: true (one InfiniBand domain); "
                     "a support request raises it to 300", f"{_PLACEMENT} (100); {_SETUP_INFINIBAND}"),
        DefaultLimit("vmsPerLargeScaleSet", 1_000,
                     "VMs in a scale set with singlePlacementGroup: false (marketplace image)", _PLACEMENT),
        DefaultLimit("natGatewayPublicIps", 16, "public IP addresses on one NAT gateway",
                     "azure-docs articles/nat-gateway/nat-gateway-resource.md", fixed=True),
    )
}

# Hard ceilings a stack override cannot pass: Azure does not raise these by ticket.
# Hard limits no support request raises (a NAT gateway takes at most 16 public IPs).
# A scale set holds at most 1,000 VMs however it is configured (_PLACEMENT: "up to 1,000 VMs"); an InfiniBand set
# (single placement group) at most 300 after a support request (_SETUP_INFINIBAND; the placement-groups page says 100).
OVERRIDE_CEILINGS: dict[str, int] = {"vmsPerInfinibandDomain": 300, "privateIpsPerNic": 256, "natGatewayPublicIps": 16,
                                     "vmsPerLargeScaleSet": 1_000}

RESERVED_IPS_PER_SUBNET = 5
"""Azure reserves the network address, the gateway, two DNS addresses and broadcast (azure-docs virtual-network FAQ)."""

SNAT_PORTS_PER_PUBLIC_IP = 64_512
"""SNAT ports one NAT gateway public IP provides (azure-docs articles/nat-gateway/nat-gateway-resource.md)."""

RDMA_NETWORK = "172.16.0.0/16"
"""Address range InfiniBand/RDMA uses on ND sizes; a VNet must not overlap it (azure-docs setup-infiniband.md)."""
