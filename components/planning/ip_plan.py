"""The IP plan: deterministic, non-overlapping address blocks and the pod-IP capacity they give.

Pods get VNet addresses on the scale-set NICs (no overlay), per pool (`podAddresses`): as secondary IP
configurations (a node uses 1 + podsPerNode addresses of its pool's subnet and as many VNet entries), or as
/28 blocks on the NIC (a node uses its primary address plus ceil(podsPerNode / 16) aligned /28s, and
1 + blocks VNet entries; components/planning/pod_addresses.py). A prefix-mode subnet is counted in /28
slots: its last /28 holds the broadcast address and is never a block; the primaries and Azure's first four
reserved addresses pack into the lowest slots.

Pinned blocks (`network.pinnedBlocks`) are the layout's lock: they are taken first and never move;
a pool that outgrows its pin is a plan error naming the pool, the room left and the fix, never a
silent relocation. The other blocks are placed first-fit in a fixed order (control plane, etcd, then
pools in list order) with `network.blockSpare` kept free. Pinning a block where the plan put it moves
nothing, and with every block pinned (as prod is) no growth, shrink, reorder or appended pool moves an
existing block: a new pool's block goes into free space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network

from gpucluster.catalog.acr_tasks import AGENT_POOL_COUNT
from gpucluster.catalog.limits import RDMA_NETWORK, RESERVED_IPS_PER_SUBNET
from gpucluster.errors import Problem, SpecError, pool_path
from gpucluster.planning.deploy_runner import RUNNER_IPS, runner_enabled
from gpucluster.planning.limits import Limits
from gpucluster.planning.pod_addresses import BLOCK_SIZE, PREFIX_LENGTH, api_server_pod_addresses, node_addressing
from gpucluster.planning.vnet_entries import VnetEntries, count_entries
from gpucluster.spec import ClusterSpec
from gpucluster.spec.network import SCALE_SET_SUBNET_SPARE, NetworkSpec

RDMA = IPv4Network(RDMA_NETWORK)
SMALLEST_SUBNET_PREFIX = 29
"""Azure's smallest subnet."""
INFRA_PREFIX = 26
"""Control-plane blocks: room for every member to be replaced side by side."""
LARGEST_SERVICE_PREFIX = 12
"""kube-apiserver refuses a Service range larger than /12 (20 bits)."""
API_SERVER_PORT = 6443
CONTROL_PLANE_BLOCK = "controlplane"
NODE_LOCAL_DNS_IP = "169.254.20.10"
"""Where NodeLocal DNSCache answers on every node (link-local: never in the VNet or the service range), the
address the Kubernetes docs use (tasks/administer-cluster/nodelocaldns.md); the kubelets' clusterDNS."""
REGISTRY_ENDPOINT_IPS = 2
"""The container registry's private endpoint in the control-plane subnet: the registry endpoint and the home
region's dedicated data endpoint (azure-management-docs container-registry-private-endpoints.md, "Plan IP
addresses": 2 for the initial private endpoint, +1 per geo-replica)."""
BUILD_AGENT_IPS = AGENT_POOL_COUNT
"""The registry's ACR Tasks agent pool in the control-plane subnet (components/azure/registry.py): one address per
agent, as a VM's NIC takes (tasks-agent-pools.md publishes no figure)."""
ETCD_BLOCK = "etcd"


def pool_block_name(pool: str) -> str:
    return f"pool-{pool}"


@dataclass(frozen=True)
class Block:
    name: str
    cidr: IPv4Network
    purpose: str
    ips_needed: int
    """Private IPs expected in use: for a pool, nodes x (1 + pods per node)."""
    pinned: bool
    ips_per_member: int = 1
    """Private IPs one more member takes: 1 + pods per node for a pool, 1 for the control plane."""
    members: int = 0
    blocks_per_member: int = 0
    """/28 blocks per node of a prefix-mode pool; 0 where members take single addresses."""

    @property
    def usable(self) -> int:
        if self.blocks_per_member:
            return usable_in_prefix_mode(self.cidr)
        return self.cidr.num_addresses - RESERVED_IPS_PER_SUBNET

    @property
    def headroom_ips(self) -> int:
        return self.usable - self.ips_needed

    @property
    def headroom_members(self) -> int:
        """How many more VMs (or control-plane members) fit before the block is full."""
        if self.blocks_per_member:
            return max(0, members_fitting(self.cidr, self.blocks_per_member) - self.members)
        return max(0, self.headroom_ips) // self.ips_per_member


def slots_needed(nodes: int, blocks: int) -> int:
    """/28 slots a prefix-mode pool of `nodes` takes: its blocks, and the slots its primary addresses and
    Azure's four leading reserved addresses pack into."""
    return nodes * blocks + math.ceil((nodes + RESERVED_IPS_PER_SUBNET - 1) / BLOCK_SIZE)


def usable_in_prefix_mode(cidr: IPv4Network) -> int:
    """Addresses a prefix-mode subnet can hand out in whole /28 slots: all but the last slot (broadcast)."""
    return max(0, cidr.num_addresses - BLOCK_SIZE)


def members_fitting(cidr: IPv4Network, blocks: int) -> int:
    """The most nodes with `blocks` /28s each that a subnet holds."""
    slots = usable_in_prefix_mode(cidr) // BLOCK_SIZE
    nodes = max(0, slots * BLOCK_SIZE // (blocks * BLOCK_SIZE + 1))
    while nodes and slots_needed(nodes, blocks) > slots:
        nodes -= 1
    while slots_needed(nodes + 1, blocks) <= slots:
        nodes += 1
    return nodes


@dataclass(frozen=True)
class IpCapacity:
    nodes: int
    control_plane_ips: int
    pod_ips_needed: int
    private_ips_needed: int
    """Addresses in use: nodes' primaries, pod addresses on their NICs, control-plane addresses."""
    private_ip_limit: int
    """Azure's limit on address entries per VNet (fixed: 65,536)."""
    subnet_addresses: int
    pod_ip_capacity: int
    """Pod IPs the plan can hand out: the pools' free subnet addresses, capped by the VNet's entry limit."""
    pod_ips_on_nodes: int
    """Pod addresses the planned nodes' NICs carry: podsPerNode each, or 16 per /28 block."""
    entries: VnetEntries
    """Address entries Azure counts against the VNet and peered-group limits."""

    @property
    def vnet_entries(self) -> int:
        return self.entries.vnet

    @property
    def headroom(self) -> int:
        return self.pod_ip_capacity - self.pod_ips_needed

    @property
    def headroom_pct(self) -> float:
        return 100.0 * self.headroom / self.pod_ips_needed if self.pod_ips_needed else 100.0


@dataclass(frozen=True)
class IpPlan:
    address_space: tuple[IPv4Network, ...]
    blocks: tuple[Block, ...]
    service_cidr: IPv4Network
    dns_service_ip: IPv4Address
    capacity: IpCapacity

    @property
    def api_server_ip(self) -> IPv4Address:
        """The internal load balancer's frontend: the control-plane block's first usable address."""
        return self.block(CONTROL_PLANE_BLOCK).cidr.network_address + 4

    @property
    def api_server_endpoint(self) -> str:
        return f"{self.api_server_ip}:{API_SERVER_PORT}"

    @property
    def break_glass_ip(self) -> IPv4Address:
        """The break-glass frontend: the control-plane block's last usable address (Azure keeps the last one),
        away from the low addresses Azure hands the API servers and the private endpoint."""
        return self.block(CONTROL_PLANE_BLOCK).cidr.broadcast_address - 1

    @property
    def break_glass_endpoint(self) -> str:
        return f"{self.break_glass_ip}:{API_SERVER_PORT}"

    def block(self, name: str) -> Block:
        return next(b for b in self.blocks if b.name == name)

    def pool_block(self, pool: str) -> Block:
        return self.block(pool_block_name(pool))

    @property
    def pins(self) -> dict[str, str]:
        """Every block as `network.pinnedBlocks` takes it: pinning these freezes the layout."""
        return {b.name: str(b.cidr) for b in self.blocks}

    @property
    def unpinned(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if not b.pinned)


@dataclass(frozen=True)
class _Request:
    name: str
    purpose: str
    prefix: int
    ips_needed: int
    path: str
    ips_per_member: int
    unit: str
    """What one member is called in messages: `VMs` or `members`."""
    members: int = 0
    blocks_per_member: int = 0


def prefix_for_blocks(nodes: int, blocks: int, spare: float = SCALE_SET_SUBNET_SPARE) -> int:
    """The longest prefix whose /28 slots hold `nodes` with `blocks` each and keep `spare` free."""
    addresses = (slots_needed(nodes, blocks) + 1) * BLOCK_SIZE  # + the last slot, which holds the broadcast
    bits = max(0, math.ceil(math.log2(math.ceil(addresses / (1 - spare)))))
    return min(PREFIX_LENGTH - 1, 32 - bits)


def prefix_for(ips_needed: int, minimum: int = SMALLEST_SUBNET_PREFIX, spare: float = SCALE_SET_SUBNET_SPARE) -> int:
    """The longest prefix whose usable addresses keep `spare` of the block free."""
    usable_needed = math.ceil(ips_needed / (1 - spare))
    bits = max(0, math.ceil(math.log2(usable_needed + RESERVED_IPS_PER_SUBNET)))
    return min(minimum, 32 - bits)


def _requests(spec: ClusterSpec) -> list[_Request]:
    cp = spec.control_plane
    spare = spec.network.block_spare
    etcd_members = cp.etcd.members + (cp.events_etcd.members if cp.events_etcd else 0)
    frontends = 2 if spec.access.break_glass else 1
    api_ips = cp.api_servers.count * (1 + api_server_pod_addresses(spec))
    runner = RUNNER_IPS if runner_enabled(spec) else 0
    requests = [
        # API servers (replaced side by side in a rolling upgrade) with their pod addresses in prefix mode, plus
        # the load balancer's frontends (the break-glass one when the stack has it).
        _Request(CONTROL_PLANE_BLOCK, "API servers, their internal load balancer, the registry's private endpoint and "
                 "build agents" + (", the deployment runner" if runner else ""),
                 prefix_for(2 * api_ips + frontends + REGISTRY_ENDPOINT_IPS + BUILD_AGENT_IPS + runner, INFRA_PREFIX,
                            spare),
                 api_ips + frontends + REGISTRY_ENDPOINT_IPS + BUILD_AGENT_IPS + runner,
                 "cluster.controlPlane.apiServers.count", 1 + api_server_pod_addresses(spec), "members"),
        _Request(ETCD_BLOCK, "etcd and events-etcd members", prefix_for(2 * etcd_members, INFRA_PREFIX, spare),
                 etcd_members, "cluster.controlPlane.etcd.members", 1, "members"),
    ]
    for index, pool in enumerate(spec.pools):
        addressing = node_addressing(pool)
        name, purpose = pool_block_name(pool.name), f"{pool.kind.value} pool {pool.name}"
        if addressing.prefix_mode:
            blocks = addressing.blocks
            requests.append(_Request(name, purpose + f" (/28 blocks: {blocks} per node)",
                                     prefix_for_blocks(pool.count, blocks, spare),
                                     slots_needed(pool.count, blocks) * BLOCK_SIZE, pool_path(index),
                                     addressing.subnet_addresses, "VMs", pool.count, blocks))
            continue
        per_node = addressing.subnet_addresses
        ips = pool.count * per_node
        requests.append(_Request(name, purpose, prefix_for(ips, spare=spare), ips, pool_path(index), per_node, "VMs",
                                 pool.count))
    return requests


def _fits(request: _Request, cidr: IPv4Network) -> bool:
    if request.blocks_per_member:
        return (cidr.prefixlen <= PREFIX_LENGTH - 1
                and slots_needed(request.members, request.blocks_per_member) * BLOCK_SIZE <= usable_in_prefix_mode(cidr))
    return cidr.num_addresses - RESERVED_IPS_PER_SUBNET >= request.ips_needed


def _outgrown_pin(request: _Request, cidr: IPv4Network) -> Problem:
    """A pinned block too small for what it must hold: the room left and the fixes that move nothing."""
    if request.blocks_per_member:
        usable = usable_in_prefix_mode(cidr)
        fits = members_fitting(cidr, request.blocks_per_member)
    else:
        usable = cidr.num_addresses - RESERVED_IPS_PER_SUBNET
        fits = usable // request.ips_per_member
    if request.unit == "VMs":
        fix = (f"keep the pool at {fits:,} VMs or fewer and put the rest in a new pool (a new pool gets a new block; "
               "nothing moves), or lower podsPerNode")
    else:
        fix = f"keep {fits:,} {request.unit} or fewer, or pin a larger free block (replaces every member)"
    return Problem(f"{request.path}.count" if request.unit == "VMs" else request.path,
                   f"{request.purpose} needs {request.ips_needed:,} IPs but its pinned block {request.name} {cidr} "
                   f"holds {usable:,} ({fits:,} {request.unit}); {fix}. Unpinning the block relocates it, replacing "
                   "everything in it")


def _check_inputs(spec: ClusterSpec, limits: Limits) -> list[Problem]:
    net = spec.network
    problems: list[Problem] = []
    for i, space in enumerate(net.address_space):
        where = f"cluster.network.addressSpace[{i}]"
        if space.overlaps(RDMA):
            problems.append(Problem(where, f"{space} overlaps {RDMA}, the InfiniBand/RDMA network; choose another range"))
        for j, other in enumerate(net.address_space[:i]):
            if space.overlaps(other):
                problems.append(Problem(where, f"{space} overlaps addressSpace[{j}] ({other}); address spaces must be disjoint"))
    service = net.service_cidr
    if service.prefixlen < LARGEST_SERVICE_PREFIX:
        problems.append(Problem("cluster.network.serviceCidr",
                                f"{service} is larger than /{LARGEST_SERVICE_PREFIX}, the most kube-apiserver accepts"))
    for i, space in enumerate(net.address_space):
        if service.overlaps(space):
            problems.append(Problem("cluster.network.serviceCidr",
                                    f"{service} overlaps addressSpace[{i}] ({space}); Services need a range outside the VNet"))
    if service.overlaps(RDMA):
        problems.append(Problem("cluster.network.serviceCidr", f"{service} overlaps {RDMA}, the InfiniBand/RDMA network"))
    modes = {pool.pod_addresses for pool in spec.pools}
    if len(modes) > 1:
        first = spec.pools[0].pod_addresses
        index = next(i for i, pool in enumerate(spec.pools) if pool.pod_addresses != first)
        problems.append(Problem(pool_path(index, "podAddresses"),
                                f"is {spec.pools[index].pod_addresses} but pool {spec.pools[0].name} uses {first}: "
                                "Cilium's IPAM mode is cluster-wide (azure for secondary IPs, crd for /28 blocks), so "
                                "every pool uses the same podAddresses"))
    nic_limit = limits["privateIpsPerNic"].value
    for index, pool in enumerate(spec.pools):
        configurations = node_addressing(pool).ip_configurations
        if configurations > nic_limit:
            problems.append(Problem(pool_path(index, "podsPerNode"),
                                    f"{pool.pods_per_node} pods need {configurations} IP configurations on one NIC; "
                                    f"Azure allows {nic_limit} private IPs per NIC, so at most {nic_limit - 1} pods per "
                                    "node with secondary IPs"))
    return problems


class _Allocator:
    """First-fit placement of aligned blocks in the address spaces, avoiding the RDMA range."""

    def __init__(self, spaces: list[IPv4Network]) -> None:
        self.spaces = spaces
        self.taken: list[IPv4Network] = []

    def take(self, block: IPv4Network) -> None:
        self.taken.append(block)

    def place(self, prefix: int) -> IPv4Network | None:
        size = 2 ** (32 - prefix)
        avoid = sorted([*self.taken, RDMA], key=lambda n: int(n.network_address))
        for space in self.spaces:
            if space.prefixlen > prefix:
                continue
            start, end = int(space.network_address), int(space.broadcast_address) + 1
            candidate = start
            while candidate + size <= end:
                clash = next((n for n in avoid if int(n.network_address) < candidate + size
                              and int(n.broadcast_address) >= candidate), None)
                if clash is None:
                    return IPv4Network((candidate, prefix))
                after = int(clash.broadcast_address) + 1
                candidate = -(-after // size) * size  # align up
        return None


def _pins(net: NetworkSpec) -> list[tuple[str, str, IPv4Network]]:
    """(config key, block, CIDR) of every block held where it is: the pinned ones, and those using an existing
    subnet as it is (its prefix is the pin). A block both pins must name one CIDR."""
    pins = [(f"cluster.network.pinnedBlocks.{name}", name, cidr) for name, cidr in net.pinned_blocks.items()
            if name not in net.existing_subnets or net.existing_subnets[name].cidr == cidr]
    clashes = [(f"cluster.network.pinnedBlocks.{name}", name) for name, cidr in net.pinned_blocks.items()
               if name in net.existing_subnets and net.existing_subnets[name].cidr != cidr]
    if clashes:
        raise SpecError([Problem(where, f"pins {name} to {net.pinned_blocks[name]} but existingSubnets.{name}.cidr "
                                        f"is {net.existing_subnets[name].cidr}: the existing subnet's prefix is the "
                                        "block's; remove the pin") for where, name in clashes])
    return pins + [(f"cluster.network.existingSubnets.{name}.cidr", name, subnet.cidr)
                   for name, subnet in net.existing_subnets.items() if name not in net.pinned_blocks]


def plan_ip(spec: ClusterSpec, limits: Limits) -> IpPlan:
    problems = _check_inputs(spec, limits)
    if problems:
        raise SpecError(problems)
    net = spec.network
    requests = _requests(spec)
    known = {r.name for r in requests}
    allocator = _Allocator(list(net.address_space))
    placed: dict[str, IPv4Network] = {}

    pool_blocks = {pool_block_name(pool.name) for pool in spec.pools}
    for name in sorted(set(net.existing_subnets) & known - pool_blocks):
        problems.append(Problem(f"cluster.network.existingSubnets.{name}", (
            f"{name} carries the stack's own NSG rules (etcd reachable from the API servers and etcd alone, checked by "
            "the policy pack): only pool blocks (pool-<name>) may use an existing subnet; remove it")))
    for where, name, cidr in _pins(net):
        if name not in known:
            problems.append(Problem(where, f"no block named {name!r}; blocks are {', '.join(sorted(known))}"))
        elif not any(cidr.subnet_of(space) for space in net.address_space):
            problems.append(Problem(where, f"{cidr} is outside cluster.network.addressSpace"))
        elif cidr.overlaps(RDMA) or any(cidr.overlaps(other) for other in placed.values()):
            problems.append(Problem(where, f"{cidr} overlaps another pinned block or {RDMA}"))
        else:
            placed[name] = cidr
            allocator.take(cidr)

    blocks: list[Block] = []
    spare = net.block_spare
    for request in requests:
        cidr = placed.get(request.name)
        if cidr is not None and not _fits(request, cidr):
            problems.append(_outgrown_pin(request, cidr))
            continue
        if cidr is None:
            cidr = allocator.place(request.prefix)
            if cidr is None:
                problems.append(Problem(request.path,
                                        f"needs a /{request.prefix} ({request.ips_needed} IPs plus "
                                        f"{spare:.0%} spare) and none is free in "
                                        "cluster.network.addressSpace; add an address space or shrink the pool"))
                continue
            allocator.take(cidr)
        blocks.append(Block(request.name, cidr, request.purpose, request.ips_needed, request.name in placed,
                            request.ips_per_member, request.members, request.blocks_per_member))
    if problems:
        raise SpecError(problems)

    capacity = _capacity(spec, blocks, limits)
    problems.extend(_check_limits(spec, blocks, capacity, limits))
    if problems:
        raise SpecError(problems)
    return IpPlan(tuple(net.address_space), tuple(blocks), net.service_cidr,
                  net.service_cidr.network_address + 10, capacity)


def _pool_pod_room(spec: ClusterSpec, blocks: list[Block]) -> tuple[int, int]:
    """(pod addresses the pools' subnets can hand out, addresses per VNet entry at the margin)."""
    room, per_entry = 0, 16
    for pool in spec.pools:
        block = next(b for b in blocks if b.name == pool_block_name(pool.name))
        addressing = node_addressing(pool)
        if addressing.prefix_mode:
            slots = usable_in_prefix_mode(block.cidr) // BLOCK_SIZE
            room += (slots - slots_needed(pool.count, addressing.blocks)) * BLOCK_SIZE + pool.count * addressing.pod_addresses
        else:
            room += block.usable - pool.count
            per_entry = 1
    return room, per_entry


def _capacity(spec: ClusterSpec, blocks: list[Block], limits: Limits) -> IpCapacity:
    nodes = sum(p.count for p in spec.pools)
    pod_ips = sum(p.count * p.pods_per_node for p in spec.pools)
    on_nodes = sum(p.count * node_addressing(p).pod_addresses for p in spec.pools)
    control_plane_ips = sum(b.ips_needed for b in blocks if not b.name.startswith("pool-"))
    entries = count_entries(spec)
    limit = limits["privateIpsPerVnet"].value
    room, per_entry = _pool_pod_room(spec, blocks)
    # Every pod address past the planned ones costs an entry (secondary IPs) or 1/16 of one (/28 blocks);
    # with any secondary-IP pool the margin is one address per entry.
    by_entries = on_nodes + max(0, limit - entries.vnet) * per_entry
    return IpCapacity(
        nodes=nodes,
        control_plane_ips=control_plane_ips,
        pod_ips_needed=pod_ips,
        private_ips_needed=nodes + on_nodes + control_plane_ips,
        private_ip_limit=limit,
        subnet_addresses=sum(b.usable for b in blocks),
        pod_ip_capacity=max(0, min(room, by_entries)),
        pod_ips_on_nodes=on_nodes,
        entries=entries,
    )


def _check_limits(spec: ClusterSpec, blocks: list[Block], capacity: IpCapacity, limits: Limits) -> list[Problem]:
    problems: list[Problem] = []
    checks = [("privateIpsPerVnet", capacity.entries.vnet)]
    if capacity.entries.peered_group is not None:
        checks.append(("privateIpsPerPeeredGroup", capacity.entries.peered_group))
    checks.append(("subnetsPerVnet", len(blocks)))
    for key, need in checks:
        limit = limits[key]
        if need <= limit.value:
            continue
        if limit.fixed:
            fix = ("Azure documents it as fixed, so no support request raises it: put pod addresses in /28 blocks "
                   "(cluster.pools[].podAddresses: prefixes) or plan fewer addresses (docs/ip-plan.md)"
                   if key.startswith("privateIps") else "Azure documents it as fixed: plan fewer")
        else:
            fix = f"ask Azure to raise it and declare the raised value at {limit.override_path}"
        problems.append(Problem("cluster.network", f"needs {need:,} {limit.description} but the limit is "
                                                   f"{limit.value:,} ({limit.source}); {fix}"))
    return problems
