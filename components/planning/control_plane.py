"""Control-plane sizing and placement: API servers and etcd outside the cluster.

API-server memory grows about linearly with nodes: OpenAI saw up to 70 GB of heap per API server
at 7,500 nodes (../shared/reference/openai-practices.md). etcd members are placed so that no zone
holds a quorum: losing any one zone leaves etcd writable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from components.catalog.vm_sizes import VmSize
from components.errors import Problem, SpecError
from components.planning.placement import ordered_zones
from components.planning.sizes import size_table, unknown_size_message
from components.spec import ClusterSpec, EtcdSpec

HEAP_GB_AT_REFERENCE = 70.0
REFERENCE_NODES = 7_500
MIN_HEAP_GB = 4.0
MEMORY_HEADROOM = 1.5
"""VM memory per GB of heap: controller-manager, scheduler, OS and page cache share the VM."""
NODES_PER_API_VCPU = 500
GIB = 2**30
GB_PER_GIB = GIB / 1e9
ETCD_OS_GIB = 8
ETCD_PREMIUM_V2_IOPS = 3_000
"""Provisioned IOPS of the Premium SSD v2 data disk used when an etcd size has no local NVMe."""
ETCD_DISK_GIB = 64


def api_heap_gb(nodes: int) -> float:
    return max(MIN_HEAP_GB, HEAP_GB_AT_REFERENCE * nodes / REFERENCE_NODES)


def quota_backend_bytes(nodes: int) -> int:
    """etcd's backend quota: the 2 GiB default stops all writes on a large cluster; 8 GiB is the suggested max."""
    if nodes > 1_000:
        return 8 * GIB
    if nodes > 100:
        return 4 * GIB
    return 2 * GIB


@dataclass(frozen=True)
class ApiServerFlags:
    max_requests_inflight: int
    max_mutating_requests_inflight: int
    goaway_chance: float


def scale_flags(nodes: int) -> ApiServerFlags:
    """In-flight limits grow with the cluster (defaults 400/200 suit a few hundred nodes); APF divides them."""
    inflight = min(3_000, max(400, nodes // 5))
    return ApiServerFlags(inflight, inflight // 2, 0.001)


@dataclass(frozen=True)
class Member:
    name: str
    zone: str
    index: int


@dataclass(frozen=True)
class ApiServerPlan:
    count: int
    zones: tuple[str, ...]
    size: VmSize
    heap_gb: float
    memory_needed_gib: float
    vcpus_needed: int
    overridden: bool
    flags: ApiServerFlags

    def in_zone(self, zone: str) -> int:
        """A zone-spanning scale set with zoneBalance keeps zones within one VM of each other."""
        base, extra = divmod(self.count, len(self.zones))
        return base + (1 if self.zones.index(zone) < extra else 0)

    @property
    def reasoning(self) -> str:
        return (f"heap ~{self.heap_gb:.0f} GB x {MEMORY_HEADROOM} headroom = {self.memory_needed_gib:.0f} GiB "
                f"and {self.vcpus_needed} vCPUs needed; {self.size.name} has {self.size.memory_gib} GiB, "
                f"{self.size.vcpus} vCPUs" + (" (stack override)" if self.overridden else ""))


@dataclass(frozen=True)
class EtcdPlan:
    role: str
    """`etcd` or `etcd-events`: also the tag role and the name prefix of its members."""
    members: tuple[Member, ...]
    size: VmSize
    quota_backend_bytes: int
    memory_needed_gib: float
    data_on_nvme: bool
    quorum_override_reason: str | None
    overridden: bool

    @property
    def quorum(self) -> int:
        return len(self.members) // 2 + 1

    def in_zone(self, zone: str) -> int:
        return sum(1 for m in self.members if m.zone == zone)

    def survives_loss_of(self, zone: str) -> bool:
        return len(self.members) - self.in_zone(zone) >= self.quorum

    @property
    def reasoning(self) -> str:
        disk = "local NVMe" if self.data_on_nvme else f"Premium SSD v2 at {ETCD_PREMIUM_V2_IOPS} IOPS"
        return (f"quota-backend-bytes {self.quota_backend_bytes // GIB} GiB; {self.memory_needed_gib:.0f} GiB "
                f"memory needed; {self.size.name} ({self.size.memory_gib} GiB), data on {disk}"
                + (" (stack override)" if self.overridden else ""))


@dataclass(frozen=True)
class ControlPlanePlan:
    api: ApiServerPlan
    etcd: EtcdPlan
    events: EtcdPlan | None

    def vcpus_by_family(self) -> dict[str, int]:
        need: dict[str, int] = {}
        for family, vcpus in ((self.api.size.quota_family, self.api.size.vcpus * self.api.count),
                              *((e.size.quota_family, e.size.vcpus * len(e.members))
                                for e in (self.etcd, self.events) if e is not None)):
            need[family] = need.get(family, 0) + vcpus
        return need


def _pick_size(table: dict[str, VmSize], override: str | None, path: str, candidates: list[VmSize],
               fits: Callable[[VmSize], bool], need: str, problems: list[Problem]) -> VmSize | None:
    """The stack's override if it is big enough, else the smallest candidate that fits."""
    if override:
        size = table.get(override)
        if size is None:
            problems.append(Problem(path, unknown_size_message(override, table)))
        elif not fits(size):
            problems.append(Problem(path, f"{size.name} ({size.memory_gib} GiB, {size.vcpus} vCPUs) is too small: "
                                          f"{need}; pick a larger size or remove the override"))
            return None
        return size
    size = next((s for s in sorted(candidates, key=lambda s: (s.memory_gib, s.vcpus)) if fits(s)), None)
    if size is None:
        problems.append(Problem(path, f"no catalogue size fits ({need}); declare one under cluster.vmSizes and set it here"))
    return size


def _plan_api(spec: ClusterSpec, nodes: int, table: dict[str, VmSize], problems: list[Problem]) -> ApiServerPlan | None:
    api = spec.control_plane.api_servers
    heap = api_heap_gb(nodes)
    memory = heap / GB_PER_GIB * MEMORY_HEADROOM
    vcpus = max(4, math.ceil(nodes / NODES_PER_API_VCPU))
    general = [s for s in table.values() if not s.gpus and not s.confidential and not s.nvme_gb]
    size = _pick_size(table, api.vm_size, "cluster.controlPlane.apiServers.vmSize", general,
                      lambda s: s.memory_gib >= memory and s.vcpus >= vcpus,
                      f"API servers of {nodes:,} nodes need {memory:.0f} GiB (heap ~{heap:.0f} GB x {MEMORY_HEADROOM}) "
                      f"and {vcpus} vCPUs", problems)
    if size is None:
        return None
    return ApiServerPlan(api.count, ordered_zones(spec.zones), size, heap, memory, vcpus, bool(api.vm_size), scale_flags(nodes))


def place_members(prefix: str, count: int, zones: tuple[str, ...]) -> tuple[Member, ...]:
    """Round-robin over zones: no zone holds more than ceil(count / zones) members."""
    return tuple(Member(f"{prefix}-{i}", zones[i % len(zones)], i) for i in range(count))


def _plan_etcd(role: str, etcd: EtcdSpec, path: str, spec: ClusterSpec, nodes: int, table: dict[str, VmSize],
               problems: list[Problem]) -> EtcdPlan | None:
    count = etcd.members
    if count < 3 or count % 2 == 0:
        problems.append(Problem(f"{path}.members", f"{count} members: etcd needs an odd number, at least 3 "
                                                   "(3 or 5; 5 survives two failures)"))
        return None
    members = place_members(role, count, ordered_zones(spec.zones))
    quorum = count // 2 + 1
    worst_zone = max(spec.zones, key=lambda z: sum(1 for m in members if m.zone == z))
    worst = sum(1 for m in members if m.zone == worst_zone)
    if worst >= quorum and not etcd.quorum_override_reason:
        problems.append(Problem(f"{path}.members",
                                f"{count} members over {len(spec.zones)} zone(s) put {worst} in zone {worst_zone}, a "
                                f"quorum of {quorum}: losing that zone stops etcd. Use 3 zones, or accept it with "
                                f"{path}.quorumOverrideReason"))
        return None
    quota = quota_backend_bytes(nodes)
    memory = 2 * quota / GIB + ETCD_OS_GIB
    nvme = [s for s in table.values() if s.nvme_gb and not s.gpus and not s.confidential]
    size = _pick_size(table, etcd.vm_size, f"{path}.vmSize", nvme, lambda s: s.memory_gib >= memory,
                      f"etcd with a {quota // GIB} GiB backend quota needs {memory:.0f} GiB", problems)
    if size is None:
        return None
    return EtcdPlan(role, members, size, quota, memory, size.nvme_gb > 0, etcd.quorum_override_reason,
                    bool(etcd.vm_size))


def plan_control_plane(spec: ClusterSpec, nodes: int) -> ControlPlanePlan:
    """Size and place the control plane for a cluster of `nodes` worker nodes."""
    table = size_table(spec)
    cp = spec.control_plane
    problems: list[Problem] = []
    api = _plan_api(spec, nodes, table, problems)
    etcd = _plan_etcd("etcd", cp.etcd, "cluster.controlPlane.etcd", spec, nodes, table, problems)
    events = (_plan_etcd("etcd-events", cp.events_etcd, "cluster.controlPlane.eventsEtcd", spec, nodes, table,
                         problems) if cp.events_etcd else None)
    if problems or api is None or etcd is None or (cp.events_etcd and events is None):
        raise SpecError(problems)
    return ControlPlanePlan(api, etcd, events)
