"""How a pool's pods get VNet addresses, and what that costs against Azure's address-entry limit.

Azure counts private addresses per VNet (65,536) and per peered group (128,000) by entry: every IP
configuration of a NIC is one, and an IP configuration carrying a /28 prefix ("Prefix on NIC",
`privateIPAddressPrefixLength: 28`) is one too - "the block, rather than a single IP, counts against the
Azure Vnet Private IP limit of 65K" (Azure/azure-rest-api-specs PR #27661; AKS static block allocation,
learn.microsoft.com/azure/aks/configure-azure-cni-static-block-allocation). Microsoft documents /28 only.

- `secondaryIps`: the primary address plus one secondary IP configuration per pod: 1 + podsPerNode entries.
- `prefixes`: the primary address plus ceil(podsPerNode / 16) /28 blocks: 1 + blocks entries, 16 pod
  addresses per block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucluster.spec import ClusterSpec, PoolSpec

PREFIX_LENGTH = 28
"""The only prefix length Microsoft documents for IP configurations on NICs."""
BLOCK_SIZE = 2 ** (32 - PREFIX_LENGTH)
SECONDARY_IPS = "secondaryIps"
PREFIXES = "prefixes"


@dataclass(frozen=True)
class NodeAddressing:
    mode: str
    pods_per_node: int
    blocks: int
    """/28 blocks per NIC (0 in secondary-IP mode)."""

    @property
    def prefix_mode(self) -> bool:
        return self.mode == PREFIXES

    @property
    def ip_configurations(self) -> int:
        """IP configurations on the node's NIC: the primary plus one per pod or per block."""
        return 1 + (self.blocks if self.prefix_mode else self.pods_per_node)

    @property
    def entries(self) -> int:
        """Entries one node takes against the VNet's private-address limit: one per IP configuration."""
        return self.ip_configurations

    @property
    def pod_addresses(self) -> int:
        """Pod addresses the node's NIC carries."""
        return self.blocks * BLOCK_SIZE if self.prefix_mode else self.pods_per_node

    @property
    def subnet_addresses(self) -> int:
        """Addresses of the pool's subnet one node takes."""
        return 1 + self.pod_addresses


API_SERVER_POD_ADDRESSES = 4
"""Secondary addresses on each API server's NIC in prefix mode, which the prefix IPAM controller publishes into its
CiliumNode: Cilium's router address (cilium_host) and its health endpoint, NFD's worker (the one pod-network
DaemonSet that tolerates the control-plane taint) and one spare. Single addresses, not a /28: the control-plane
subnet has room for twenty, not for five aligned blocks (docs/ip-plan.md)."""


def prefix_mode(spec: ClusterSpec) -> bool:
    """Pods take /28 blocks on the NICs: the one place the cluster's mode is read from the pools (every pool alike:
    the IP plan refuses a mix). `ClusterPlan.prefix_mode` and `NodeAddressing.prefix_mode` say the same."""
    return any(p.pod_addresses == PREFIXES for p in spec.pools)


def api_server_pod_addresses(spec: ClusterSpec) -> int:
    """Pod addresses declared on each API server's NIC: in prefix mode Cilium's `ipam: crd` takes only what the
    controller publishes, and the API servers' agents need some; with secondary IPs Cilium's Azure IPAM adds its
    own."""
    return API_SERVER_POD_ADDRESSES if prefix_mode(spec) else 0


def node_addressing(pool: PoolSpec) -> NodeAddressing:
    blocks = math.ceil(pool.pods_per_node / BLOCK_SIZE) if pool.pod_addresses == PREFIXES else 0
    return NodeAddressing(pool.pod_addresses, pool.pods_per_node, blocks)
