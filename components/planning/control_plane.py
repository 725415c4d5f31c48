"""Control-plane sizing and placement: API servers and etcd outside the cluster.

API-server memory and etcd's size come from the sizing model (components/planning/api_sizing.py: objects per
kind and a serving cost per node, anchored on OpenAI's 70 GB of heap at 7,500 nodes). etcd members are placed
so that no zone holds a quorum: losing any one zone leaves etcd writable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpucluster.catalog.vm_sizes import VmSize
from gpucluster.errors import Problem, SpecError
from gpucluster.planning.api_sizing import (
    ANCHOR_SOURCE,
    ETCD_MAX_QUOTA,
    ETCD_QUOTA_SOURCE,
    ApiLoad,
    etcd_file_bytes,
    etcd_quota,
)
from gpucluster.planning.placement import ordered_zones
from gpucluster.planning.sizes import size_table, unknown_size_message
from gpucluster.spec import ClusterSpec, EtcdSpec

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
API_SERVER_OS_DISK_GIB = 128
"""The API servers' managed OS disk (Premium_LRS)."""
ETCD_OS_DISK_GIB = 64
"""An etcd member's managed OS disk (Premium_LRS); its data disk is ETCD_DISK_GIB of Premium SSD v2 unless on NVMe."""


def api_heap_gb(load: ApiLoad) -> float:
    return max(MIN_HEAP_GB, load.heap_gb)


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
    db_bytes: float = 0.0
    """The model's live data and kept history (components/planning/api_sizing.py); the quota holds it twice."""

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
        return (f"data ~{self.db_bytes / GIB:.2f} GiB, quota-backend-bytes {self.quota_backend_bytes // GIB} GiB; "
                f"{self.memory_needed_gib:.0f} GiB "
                f"memory needed; {self.size.name} ({self.size.memory_gib} GiB), data on {disk}"
                + (" (stack override)" if self.overridden else ""))


@dataclass(frozen=True)
class ControlPlanePlan:
    api: ApiServerPlan
    etcd: EtcdPlan
    events: EtcdPlan | None
    load: ApiLoad | None = None
    """What the sizing model counted: objects per kind and the serving cost per node."""

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


def _plan_api(spec: ClusterSpec, load: ApiLoad, table: dict[str, VmSize],
              problems: list[Problem]) -> ApiServerPlan | None:
    api = spec.control_plane.api_servers
    nodes = load.nodes
    heap = api_heap_gb(load)
    memory = heap / GB_PER_GIB * MEMORY_HEADROOM
    vcpus = max(4, math.ceil(nodes / NODES_PER_API_VCPU))
    general = [s for s in table.values() if not s.gpus and not s.confidential and not s.nvme_gb]
    size = _pick_size(table, api.vm_size, "cluster.controlPlane.apiServers.vmSize", general,
                      lambda s: s.memory_gib >= memory and s.vcpus >= vcpus,
                      f"API servers of {nodes:,} nodes need {memory:.0f} GiB (heap ~{heap:.0f} GB x {MEMORY_HEADROOM}: "
                      f"{load.cached_bytes / 1e9:.1f} GB of objects and "
                      f"{load.serving_bytes_per_node / 1e6:.1f} MB per node, from {ANCHOR_SOURCE}) "
                      f"and {vcpus} vCPUs", problems)
    if size is None:
        return None
    return ApiServerPlan(api.count, ordered_zones(spec.zones), size, heap, memory, vcpus, bool(api.vm_size), scale_flags(nodes))


def place_members(prefix: str, count: int, zones: tuple[str, ...]) -> tuple[Member, ...]:
    """Round-robin over zones: no zone holds more than ceil(count / zones) members."""
    return tuple(Member(f"{prefix}-{i}", zones[i % len(zones)], i) for i in range(count))


def _plan_etcd(role: str, etcd: EtcdSpec, path: str, spec: ClusterSpec, db_bytes: float, table: dict[str, VmSize],
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
    quota = etcd_quota(db_bytes)
    if etcd_file_bytes(db_bytes) > ETCD_MAX_QUOTA:
        problems.append(Problem(path, f"{role} would hold ~{db_bytes / GIB:.1f} GiB (objects and their kept history, "
                                      f"components/planning/api_sizing.py), a file of "
                                      f"~{etcd_file_bytes(db_bytes) / GIB:.1f} GiB between defragmentations, past the "
                                      f"{ETCD_MAX_QUOTA // GIB} GiB quota maximum ({ETCD_QUOTA_SOURCE}): "
                                      "lower the pools' podsPerNode or keep Events in their own etcd "
                                      "(cluster.controlPlane.eventsEtcd)"))
        return None
    memory = 2 * quota / GIB + ETCD_OS_GIB
    nvme = [s for s in table.values() if s.nvme_gb and not s.gpus and not s.confidential]
    size = _pick_size(table, etcd.vm_size, f"{path}.vmSize", nvme, lambda s: s.memory_gib >= memory,
                      f"etcd with a {quota // GIB} GiB backend quota needs {memory:.0f} GiB", problems)
    if size is None:
        return None
    return EtcdPlan(role, members, size, quota, memory, size.nvme_gb > 0, etcd.quorum_override_reason,
                    bool(etcd.vm_size), db_bytes)


def plan_control_plane(spec: ClusterSpec, load: ApiLoad) -> ControlPlanePlan:
    """Size and place the control plane for what the cluster holds at its largest (`load`)."""
    table = size_table(spec)
    cp = spec.control_plane
    problems: list[Problem] = []
    apart = cp.events_etcd is not None
    api = _plan_api(spec, load, table, problems)
    etcd = _plan_etcd("etcd", cp.etcd, "cluster.controlPlane.etcd", spec, load.etcd_bytes(apart, False), table,
                      problems)
    events = (_plan_etcd("etcd-events", cp.events_etcd, "cluster.controlPlane.eventsEtcd", spec,
                         load.etcd_bytes(apart, True), table, problems) if cp.events_etcd else None)
    if problems or api is None or etcd is None or (cp.events_etcd and events is None):
        raise SpecError(problems)
    return ControlPlanePlan(api, etcd, events, load)
