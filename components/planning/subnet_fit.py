"""Whether a subnet holds a pool: the pool's addresses (its VMs' primary addresses and pod addresses, or their /28
blocks in prefix mode) against the subnet's, with Azure's reserved addresses and the RDMA range. The IP plan sizes
the cluster's own blocks with the same arithmetic (planning/ip_plan.py); this answers it for a subnet the user's
network already has (NodePool `subnet_cidr`)."""

from __future__ import annotations

from ipaddress import IPv4Network

from gpucluster.catalog.limits import RESERVED_IPS_PER_SUBNET
from gpucluster.errors import Problem
from gpucluster.planning.ip_plan import RDMA, members_fitting, slots_needed, usable_in_prefix_mode
from gpucluster.planning.placement import PoolPlan
from gpucluster.planning.pod_addresses import BLOCK_SIZE, PREFIX_LENGTH, node_addressing


def subnet_problems(pool: PoolPlan, cidr: IPv4Network, where: str) -> list[Problem]:
    """What keeps `pool` (all its VMs, at its maximum count) from living in the subnet `cidr`, named at `where`
    (the key or argument that gave the subnet)."""
    if cidr.overlaps(RDMA):
        return [Problem(where, f"{cidr} overlaps {RDMA}, the InfiniBand/RDMA network: the pool's VMs cannot use it")]
    addressing = node_addressing(pool.spec)
    nodes = pool.nodes
    if addressing.prefix_mode:
        blocks = addressing.blocks
        if cidr.prefixlen > PREFIX_LENGTH - 1:
            return [Problem(where, f"{cidr} is smaller than a /{PREFIX_LENGTH - 1}: a prefix-mode pool needs room for "
                                   f"its /{PREFIX_LENGTH} blocks beside its VMs' own addresses")]
        needed = slots_needed(nodes, blocks) * BLOCK_SIZE
        usable = usable_in_prefix_mode(cidr)
        fits = members_fitting(cidr, blocks)
        what = f"{nodes:,} VMs with {blocks} /{PREFIX_LENGTH} blocks each"
    else:
        per_node = addressing.subnet_addresses
        needed = nodes * per_node
        usable = max(0, cidr.num_addresses - RESERVED_IPS_PER_SUBNET)
        fits = usable // per_node
        what = f"{nodes:,} VMs with {per_node} addresses each"
    if needed <= usable:
        return []
    return [Problem(where, f"pool {pool.name} needs {needed:,} addresses ({what}) but {cidr} holds {usable:,} "
                           f"({fits:,} VMs): give the pool a larger subnet, or keep it at {fits:,} VMs or fewer")]
