"""Placement: a logical pool -> scale sets (InfiniBand domains) balanced over its zones.

Each InfiniBand domain is one Uniform scale set with singlePlacementGroup: true in one zone, of at
most `vmsPerInfinibandDomain` VMs. Pools without InfiniBand use large scale sets (singlePlacementGroup:
false). Scale set j of a pool goes to zone j mod Z with index j div Z, zones taken in the order of their
names (`ordered_zones`), never in the order the stack lists them: its name (pool, zone, index) depends
only on j and the set of zones, so growing a pool appends scale sets and never renames one, reordering
`zones` changes nothing, and a zone holds at most its share of the pool's scale sets plus one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucluster.catalog.regions import REGION_ZONES
from gpucluster.catalog.vm_sizes import ARM64_SIZES, CATALOG, VmSize
from gpucluster.errors import Problem, SpecError, pool_path
from gpucluster.planning.confidential import ConfidentialPlan, check_confidential, plan_confidential
from gpucluster.planning.limits import Limit, Limits, limits_of
from gpucluster.planning.sizes import check_custom_sizes, size_table, unknown_size_message
from gpucluster.spec import ClusterSpec, PoolKind, PoolSpec
from gpucluster.spec.limits import LimitsSpec


@dataclass(frozen=True)
class RackPlacement:
    """Where a rack's scale set sits: its interconnect group, its subgroup (the NVLink rack) and the block that
    holds its capacity (docs/rack-scale.md)."""

    group: str
    """The interconnect group's name (Microsoft.Network/interconnectGroups) and its block's."""
    subgroup: int
    """The rack's index in its group."""
    subgroup_name: str
    """The subgroup (the platform-managed child of the group) the rack's scale set names: the stack's
    `racks.groups[].subgroups[subgroup]`."""


@dataclass(frozen=True)
class InterconnectGroupPlan:
    name: str
    zone: str
    racks: int
    subgroup_size: int
    vm_size: str

    @property
    def block_capacity(self) -> int:
        """VMs the group's interconnect block pre-allocates: every rack's, a multiple of the subgroup size."""
        return self.racks * self.subgroup_size


@dataclass(frozen=True)
class RackPoolPlan:
    subgroup_size: int
    groups: tuple[InterconnectGroupPlan, ...]
    spare_racks_per_zone: int

    @property
    def racks(self) -> int:
        return sum(g.racks for g in self.groups)

    def racks_in_zone(self, zone: str) -> int:
        return sum(g.racks for g in self.groups if g.zone == zone)


@dataclass(frozen=True)
class ScaleSetPlan:
    name: str
    """Azure name of the scale set and value of the InfiniBand-domain node label: `<pool>-z<zone>-<index>`."""
    pool: str
    zone: str
    index: int
    capacity: int
    single_placement_group: bool
    infiniband: bool
    rack: RackPlacement | None = None
    """Set on a rack pool's scale sets: one scale set is one NVLink rack."""

    @property
    def platform_fault_domain_count(self) -> int:
        """Max spreading (1) needs multiple placement groups ("If you use max spreading, you must use multiple
        placement groups", azure-compute-docs virtual-machine-scale-sets-use-availability-zones.md), and a zonal
        Uniform set takes 1 or 5 (virtual-machine-scale-sets-manage-fault-domains.md): a set that keeps a single
        placement group (InfiniBand) spreads over 5 fixed fault domains, every other set over as many as Azure can."""
        return 5 if self.single_placement_group else 1


@dataclass(frozen=True)
class PoolPlan:
    spec: PoolSpec
    size: VmSize
    zones: tuple[str, ...]
    infiniband: bool
    max_per_scale_set: int
    scale_sets: tuple[ScaleSetPlan, ...]
    accelerated_networking: bool
    confidential: ConfidentialPlan | None = None
    racks: RackPoolPlan | None = None
    """The interconnect groups of a `kind: rack` pool."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> PoolKind:
        """What the pool is for: compare with `PoolKind` members, render with `.value` (the node role label)."""
        return self.spec.kind

    @property
    def nodes(self) -> int:
        return sum(s.capacity for s in self.scale_sets)

    @property
    def gpus(self) -> int:
        return self.nodes * self.size.gpus

    @property
    def ephemeral_os_disk(self) -> bool:
        """The OS disk goes on the resource disk when it fits: no remote OS-disk IO, fast reimage.
        Confidential pools keep a managed disk: its security profile carries the VM guest state."""
        return self.confidential is None and 0 < self.spec.os_disk_gib <= self.size.temp_disk_gib

    @property
    def vcpus(self) -> int:
        return self.nodes * self.size.vcpus

    def nodes_in_zone(self, zone: str) -> int:
        return sum(s.capacity for s in self.scale_sets if s.zone == zone)

    @property
    def arm64(self) -> bool:
        return self.size.name in ARM64_SIZES


def ordered_zones(zones: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Zones by name (numerically where they are numbers): placement is keyed by zone name, so the order a
    stack lists its zones in never moves a VM (Azure cannot move one between zones)."""
    return tuple(sorted(zones, key=lambda z: (not z.isdigit(), int(z) if z.isdigit() else 0, z)))


def zone_list(zones: list[str] | tuple[str, ...]) -> str:
    """The cluster's zones for a one-line message: a zone that is not a plain token is quoted (a stack's zone list
    may hold any text until the zone check refuses it)."""
    return ", ".join(zone if zone.isalnum() else repr(zone) for zone in zones)


def scale_set_name(pool: str, zone: str, index: int) -> str:
    return f"{pool}-z{zone}-{index:02d}"


GPU_ZONE_SHARE = 0.4
"""The most of a cluster's GPUs one zone may hold: the default of the policy pack's gpu-zone-share rule
(`maxGpuShare`, policies/rules/failure_domains.py; a test keeps the two equal)."""


def _spreads(sets: int, zones: int) -> bool:
    """Whether `sets` equal scale sets dealt round-robin over `zones` leave no zone more than GPU_ZONE_SHARE of them
    (strictly: a share at the bound goes over it as soon as the remainder VMs land on the first sets), or an
    equal number in each zone when no count of sets can (one or two zones)."""
    return sets % zones == 0 or math.ceil(sets / zones) / sets < GPU_ZONE_SHARE


def infiniband_domains(count: int, zones: int, max_per_set: int) -> int:
    """How many InfiniBand domains a pool of `count` VMs gets: the fewest (bigger domains fit bigger jobs) that
    spread over the zones as the gpu-zone-share rule asks, so 200 VMs in 3 zones are 3 domains of 67, not 2 of 100
    in zones 1 and 2 (50% of the GPUs in each). Never more than one per VM, and never fewer as the pool grows (the
    smallest count above a non-decreasing floor), so growing a pool only appends scale sets."""
    sets = math.ceil(count / max_per_set)
    while not _spreads(sets, zones):
        sets += 1
    return min(count, sets)


def split_pool(pool: str, count: int, zones: tuple[str, ...], max_per_set: int,
               infiniband: bool) -> tuple[ScaleSetPlan, ...]:
    """Split `count` VMs into scale sets of at most `max_per_set`, round-robin over zones.

    InfiniBand pools use the fewest domains that keep each zone within its share of the GPUs
    (`infiniband_domains`); other pools use a multiple of the zone count, so every zone holds the same share.
    """
    if infiniband:
        sets = infiniband_domains(count, len(zones), max_per_set)
    else:
        sets = min(count, math.ceil(math.ceil(count / max_per_set) / len(zones)) * len(zones))
    base, extra = divmod(count, sets)
    plans = []
    for j in range(sets):
        zone, index = zones[j % len(zones)], j // len(zones)
        plans.append(ScaleSetPlan(scale_set_name(pool, zone, index), pool, zone, index,
                                  base + (1 if j < extra else 0), single_placement_group=infiniband,
                                  infiniband=infiniband))
    return tuple(plans)


def rack_scale_set_name(pool: str, zone: str, group_index: int, rack: int) -> str:
    """`<pool>-z<zone>-g<group>r<rack>`: stable when a group grows (racks are appended) or a group is appended."""
    return f"{pool}-z{zone}-g{group_index:02d}r{rack:02d}"


def split_racks(pool: PoolSpec) -> tuple[RackPoolPlan, tuple[ScaleSetPlan, ...]]:
    """One scale set per rack, of `subgroupSize` VMs, in its group's zone. Interconnect scale sets keep no single
    placement group: Microsoft's example scale set with interconnect group and block profiles comes back with
    `singlePlacementGroup: false` (Azure/azure-rest-api-specs Microsoft.Compute stable 2026-03-01
    virtualMachineScaleSetExamples/VirtualMachineScaleSet_Create_WithInterconnectBlock.json)."""
    assert pool.racks is not None
    racks = pool.racks
    groups = tuple(InterconnectGroupPlan(g.name, g.zone, g.racks, racks.subgroup_size, pool.vm_size)
                   for g in racks.groups)
    sets = []
    for gi, group in enumerate(racks.groups):
        for r in range(group.racks):
            sets.append(ScaleSetPlan(rack_scale_set_name(pool.name, group.zone, gi, r), pool.name, group.zone,
                                     gi * 100 + r, racks.subgroup_size, single_placement_group=False, infiniband=True,
                                     rack=RackPlacement(group.name, r, group.subgroups[r])))
    return RackPoolPlan(racks.subgroup_size, groups, racks.spare_racks_per_zone), tuple(sets)


def _check_racks(index: int, pool: PoolSpec, size: VmSize) -> list[Problem]:
    if pool.kind is not PoolKind.RACK:
        return [Problem(pool_path(index, "racks"), "racks are declared only on a pool of kind: rack; remove the key")] \
            if pool.racks is not None else []
    if pool.racks is None:
        return [Problem(pool_path(index, "racks"), "a rack pool declares its interconnect groups: add racks.groups "
                        "with name, zone and racks for each")]
    problems = []
    if size.name not in ARM64_SIZES or size.gpus == 0:
        problems.append(Problem(pool_path(index, "vmSize"), f"{size.name} is not an NVLink rack size; kind: rack takes "
                                f"{' or '.join(sorted(ARM64_SIZES))}"))
    if pool.priority == "spot":
        problems.append(Problem(pool_path(index, "priority"), "a rack's VMs are capacity held in its interconnect "
                                "block, not spot capacity; set priority: regular"))
    want = pool.racks.racks * pool.racks.subgroup_size
    if pool.count != want:
        problems.append(Problem(pool_path(index, "count"), f"a rack pool holds racks x subgroupSize = "
                                f"{pool.racks.racks} x {pool.racks.subgroup_size} = {want} VMs, not {pool.count}; "
                                f"set count: {want} or change the racks"))
    zones = pool.zones or []
    for gi, group in enumerate(pool.racks.groups):
        if zones and group.zone not in zones:
            problems.append(Problem(pool_path(index, f"racks.groups[{gi}].zone"),
                                    f"zone {group.zone!r} is not one of the pool's zones ({zone_list(zones)})"))
    for zone in {g.zone for g in pool.racks.groups}:
        in_zone = sum(g.racks for g in pool.racks.groups if g.zone == zone)
        if pool.racks.spare_racks_per_zone >= in_zone:
            problems.append(Problem(pool_path(index, "racks.spareRacksPerZone"),
                                    f"{pool.racks.spare_racks_per_zone} spare racks leave none of zone {zone}'s "
                                    f"{in_zone} for work; lower it or add racks"))
    return problems


@dataclass(frozen=True)
class PoolSite:
    """What planning a pool reads besides the pool: the region, its zones, the VM sizes, the limits and the domains a
    stack acknowledges deleting. A ClusterSpec's (`site_of`), or a program's own for a pool alone (`plan_pool`)."""

    location: str
    zones: tuple[str, ...]
    """The zones the pools spread over (the cluster's `zones`)."""
    sizes: dict[str, VmSize]
    limits: Limits
    acknowledged: Callable[[str], bool] = lambda _domain: False
    """Whether a domain (scale set) name is acknowledged for deletion."""


def site_of(spec: ClusterSpec, limits: Limits) -> PoolSite:
    return PoolSite(spec.location, tuple(spec.zones), size_table(spec), limits,
                    spec.acknowledge_deletions.covers_domain)


def region_zones(spec: ClusterSpec) -> tuple[str, ...] | None:
    if spec.limits.region_zones is not None:
        return tuple(spec.limits.region_zones.zones)
    return REGION_ZONES.get(spec.location)


def check_zones(spec: ClusterSpec) -> list[Problem]:
    return zone_problems(spec.location, spec.zones, region_zones(spec), "cluster.")


def zone_problems(location: str, zones: Sequence[str], available: Sequence[str] | None, prefix: str) -> list[Problem]:
    """`zones` against the region's (`available`, None when the catalogue has no zones for `location`), with paths
    under `prefix` (`cluster.` for a stack)."""
    if available is None:
        return [Problem(f"{prefix}location", f"{location!r} is not in the catalogue of regions with zones; "
                        "check the name, or declare its zones under cluster.limits.regionZones")]
    problems = [Problem(f"{prefix}zones[{i}]", f"zone {z!r} does not exist in {location} "
                        f"(zones: {', '.join(available)})")
                for i, z in enumerate(zones) if z not in available]
    if len(set(zones)) != len(zones):
        problems.append(Problem(f"{prefix}zones", "lists a zone twice"))
    return problems


def _check_pool(index: int, pool: PoolSpec, site: PoolSite) -> list[Problem]:
    problems: list[Problem] = []
    size = site.sizes.get(pool.vm_size)
    if size is None:
        return [Problem(pool_path(index, "vmSize"), unknown_size_message(pool.vm_size, site.sizes))]
    if pool.infiniband and not size.infiniband and not size.confidential:
        problems.append(Problem(pool_path(index, "infiniband"),
                                f"{size.name} has no InfiniBand; set infiniband: false or pick an ND size"))
    problems.extend(_check_racks(index, pool, size))
    if pool.kind is not PoolKind.RACK and size.name in ARM64_SIZES:
        problems.append(Problem(pool_path(index, "kind"), f"{size.name} comes in NVLink racks; use kind: rack and "
                                "declare its racks (docs/rack-scale.md)"))
    if pool.kind is PoolKind.GPU and size.gpus == 0:
        problems.append(Problem(pool_path(index, "vmSize"), f"{size.name} has no GPUs; a gpu pool needs a GPU size"))
    if pool.kind is not PoolKind.CONFIDENTIAL and size.confidential:
        problems.append(Problem(pool_path(index, "vmSize"),
                                f"{size.name} is a confidential size; use it only in a pool of kind: confidential"))
    if pool.kind is PoolKind.CONFIDENTIAL and not size.confidential:
        problems.append(Problem(pool_path(index, "vmSize"),
                                f"{size.name} is not a confidential size; kind: confidential needs an NCC size"))
    if pool.accelerated_networking and not size.accelerated_networking and not size.confidential:
        problems.append(Problem(pool_path(index, "acceleratedNetworking"),
                                f"{size.name} does not support accelerated networking; remove the key or set it false"))
    problems.extend(check_confidential(index, pool, size, site.location))
    if pool.min_count > pool.count:
        problems.append(Problem(pool_path(index, "minCount"),
                                f"{pool.min_count} is more than the pool's count ({pool.count})"))
    for gi, group in enumerate(pool.racks.groups if pool.racks else []):
        if group.zone not in site.zones:
            problems.append(Problem(pool_path(index, f"racks.groups[{gi}].zone"),
                                    f"zone {group.zone!r} is not one of the cluster's zones ({zone_list(site.zones)})"))
    for i, zone in enumerate(pool.zones or []):
        if zone not in site.zones:
            problems.append(Problem(pool_path(index, f"zones[{i}]"),
                                    f"zone {zone!r} is not one of the cluster's zones ({zone_list(site.zones)})"))
    return problems


def plan_pools(spec: ClusterSpec, limits: Limits) -> tuple[PoolPlan, ...]:
    problems = check_zones(spec) + check_custom_sizes(spec)
    try:
        pools = plan_site_pools(tuple(spec.pools), site_of(spec, limits))
    except SpecError as error:
        raise SpecError([*problems, *error.problems]) from None
    if problems:
        raise SpecError(problems)
    return pools


def plan_pool(pool: PoolSpec, location: str, zones: Sequence[str]) -> PoolPlan:
    """One pool planned on its own, for a program that adds it to a cluster in a network of the program's own
    (examples/own_pool/): the catalogue's VM sizes, Azure's default limits, the region's `zones` it may use. The same
    planner as a stack's pools, so its scale sets are named and split as the cluster's are. SpecError with the
    problems, their paths under `pool.` (`pool.vmSize`) and `zones`."""
    if problems := zone_problems(location, zones, REGION_ZONES.get(location), ""):
        raise SpecError(problems)
    site = PoolSite(location, tuple(zones), dict(CATALOG), limits_of(LimitsSpec()))
    try:
        return plan_site_pools((pool,), site)[0]
    except SpecError as error:
        raise SpecError([Problem(p.path.replace(pool_path(0), "pool", 1), p.message, source=p.source, fix=p.fix)
                         for p in error.problems]) from None


def plan_site_pools(pools: tuple[PoolSpec, ...], site: PoolSite) -> tuple[PoolPlan, ...]:
    """The pools planned at `site` (their zones among the site's, their sizes in its table): SpecError with every
    problem found, paths as a stack names them (`cluster.pools[i]...`)."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for index, pool in enumerate(pools):
        if pool.name in seen:
            problems.append(Problem(pool_path(index, "name"),
                                    f"duplicate pool name {pool.name!r} (also cluster.pools[{seen[pool.name]}])"))
        seen.setdefault(pool.name, index)
        problems.extend(_check_pool(index, pool, site))
    if problems:
        raise SpecError(problems)

    plans = []
    for pool in pools:
        size = site.sizes[pool.vm_size]
        infiniband = size.infiniband if pool.infiniband is None else pool.infiniband
        max_per_set = site.limits["vmsPerInfinibandDomain" if infiniband else "vmsPerLargeScaleSet"].value
        zones = ordered_zones(pool.zones or site.zones)
        accelerated = size.accelerated_networking if pool.accelerated_networking is None else pool.accelerated_networking
        if pool.kind is PoolKind.RACK:
            racks, sets = split_racks(pool)
            rack_zones = ordered_zones(sorted({g.zone for g in racks.groups}))
            plans.append(PoolPlan(pool, size, rack_zones, True, racks.subgroup_size, sets,
                                  accelerated_networking=accelerated, racks=racks))
            continue
        sets = split_pool(pool.name, pool.count, zones, max_per_set, infiniband)
        if infiniband:
            problems.extend(_repacked(site, pool, zones, site.limits["vmsPerInfinibandDomain"], sets))
        plans.append(PoolPlan(pool, size, zones, infiniband, max_per_set, sets,
                              accelerated_networking=accelerated, confidential=plan_confidential(pool, site.location)))
    if problems:
        raise SpecError(problems)
    return tuple(plans)


def _repacked(site: PoolSite, pool: PoolSpec, zones: tuple[str, ...], limit: Limit,
              sets: tuple[ScaleSetPlan, ...]) -> list[Problem]:
    """A raised domain limit packs the pool into fewer, bigger domains: on a deployed stack the domains the default
    limit gives and the raised one does not are deleted with the jobs on them. Refused unless the stack
    acknowledges each of them (a new stack acknowledges them too: nothing is there to delete)."""
    if limit.value <= limit.default:
        return []
    kept = {s.name for s in sets}
    lost = [s.name for s in split_pool(pool.name, pool.count, zones, limit.default, True) if s.name not in kept]
    unacknowledged = [n for n in lost if not site.acknowledged(n)]
    if not unacknowledged:
        return []
    return [Problem(limit.override_path, f"raising it to {limit.value} packs {pool.name} into {len(sets)} InfiniBand "
                    f"domains instead of the {len(sets) + len(lost)} the default {limit.default} gives: on a deployed "
                    f"stack that deletes {len(lost)} domains with their jobs ({_names(lost)}); drain them and name "
                    "them in cluster.acknowledgeDeletions.infinibandDomains (on a new stack too, where nothing is "
                    "deleted), or keep the default limit")]


def _names(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]}, ... {names[-1]}"
