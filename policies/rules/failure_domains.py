"""Failure-domain rules across the stack: what losing one availability zone costs."""

from __future__ import annotations

from collections import Counter, defaultdict

from pulumi_policy import ReportViolation, Severity, StackValidationArgs

from .declare import Config, stack_rule
from .props import (
    ETCD_ROLES,
    GPU_RESOURCE,
    GPU_ROLES,
    INFINIBAND_TAG,
    NO_ZONE,
    POOL_TAG,
    ROLE_TAG,
    SCALE_SET,
    gpus_per_machine,
    kind,
    machines_per_zone,
    of_roles,
    tags,
    zones,
)


def _first(resources: list) -> str:
    """The resource a stack-wide violation names: the smallest URN, not whichever came first."""
    return min(r.urn for r in resources)


def _by_zone(counts: Counter[str]) -> str:
    return ", ".join(f"zone {z}: {n}" for z, n in sorted(counts.items()))


@stack_rule(
    "azure-native-compute-virtualmachine-etcd-quorum-spread", severity=Severity.CRITICAL,
    description="etcd and events-etcd have an odd number of members, at least minMembers, and no zone holds a quorum, "
                "so losing any one zone leaves a quorum running.",
    remediation="Use 3 or 5 members over 3 zones (cluster.controlPlane.etcd.members); in a region with fewer zones, "
                "lower this rule to advisory for the stack and record why (quorumOverrideReason).",
    config={"minMembers": {"type": "integer", "default": 3, "minimum": 1}})
def etcd_quorum_spread(args: StackValidationArgs, report: ReportViolation, config: Config) -> None:
    api_servers = of_roles(args.resources, "apiserver")
    for etcd_role in ETCD_ROLES:
        members = of_roles(args.resources, etcd_role)
        if not members:
            if etcd_role == "etcd" and api_servers:
                report(f"API servers but no etcd members tagged {ROLE_TAG}=etcd", _first(api_servers))
            continue
        where: Counter[str] = Counter()
        for member in members:
            where.update(machines_per_zone(member))
        count, quorum = sum(where.values()), sum(where.values()) // 2 + 1
        first = _first(members)
        if count < int(config["minMembers"]):
            report(f"{etcd_role} has {count} members; at least {config['minMembers']} are required", first)
        if count % 2 == 0:
            report(f"{etcd_role} has an even number of members ({count}): it tolerates no more failures than "
                   f"{count - 1} and needs a larger quorum", first)
        for zone, n in where.items():
            if n >= quorum or (zone == NO_ZONE and n):
                report(f"{etcd_role}: {n} of {count} members in {'one unknown zone' if zone == NO_ZONE else 'zone ' + zone}"
                       f" (quorum {quorum}); losing it stops the cluster ({_by_zone(where)})", first)


@stack_rule(
    "azure-native-compute-virtualmachinescaleset-apiserver-zone-spread", severity=Severity.HIGH,
    description="At least minApiServers API servers over at least minZones zones, balanced by Azure (zoneBalance).",
    remediation="Set cluster.controlPlane.apiServers.count to 3 or more in a 3-zone region; dev stacks lower the "
                "thresholds in policies/config/<stack>.json.",
    config={"minApiServers": {"type": "integer", "default": 3, "minimum": 1},
            "minZones": {"type": "integer", "default": 3, "minimum": 1}})
def apiserver_zone_spread(args: StackValidationArgs, report: ReportViolation, config: Config) -> None:
    servers = of_roles(args.resources, "apiserver")
    if not servers:
        return
    where: Counter[str] = Counter()
    for server in servers:
        placed = machines_per_zone(server)
        where.update(placed)
        if kind(server) == SCALE_SET and len(zones(server.props)) > 1 and NO_ZONE in placed:
            report("the API-server scale set spans zones without zoneBalance: Azure may stack them in one zone",
                   server.urn)
    count = sum(where.values())
    occupied = len([z for z, n in where.items() if n and z != NO_ZONE])
    if count < int(config["minApiServers"]):
        report(f"{count} API servers; at least {config['minApiServers']} are required", _first(servers))
    if occupied < int(config["minZones"]):
        report(f"API servers occupy {occupied} zone(s) ({_by_zone(where)}); at least {config['minZones']} required",
               _first(servers))


@stack_rule(
    "azure-native-compute-virtualmachinescaleset-infiniband-zone-loss", severity=Severity.HIGH,
    description="Each GPU pool's InfiniBand domains are spread so that losing one zone costs at most the zone's share "
                "of the domains plus one.",
    remediation="List every zone of the region in the pool's zones (the planner deals domains round-robin); set "
                "zoneCount to the number of zones the region has.",
    config={"zoneCount": {"type": "integer", "default": 3, "minimum": 1}})
def infiniband_zone_loss(args: StackValidationArgs, report: ReportViolation, config: Config) -> None:
    domains: dict[str, list] = defaultdict(list)
    for scale_set in of_roles(args.resources, *GPU_ROLES):
        if tags(scale_set.props).get(INFINIBAND_TAG) == "true":
            domains[str(tags(scale_set.props).get(POOL_TAG))].append(scale_set)
    zone_count = int(config["zoneCount"])
    for pool, members in sorted(domains.items()):
        zone_of = {m.urn: zones(m.props)[0] if len(zones(m.props)) == 1 else NO_ZONE for m in members}
        where = Counter(zone_of.values())
        allowed = len(members) / zone_count + 1
        for zone, n in sorted(where.items()):
            if n > allowed:
                # the first domain (by URN) in the overloaded zone: the same resource whatever the order
                report(f"pool {pool}: zone {zone} holds {n} of {len(members)} InfiniBand domains; losing it may cost "
                       f"at most {allowed:.1f} ({_by_zone(where)})", min(u for u, z in zone_of.items() if z == zone))


@stack_rule(
    "azure-native-compute-virtualmachinescaleset-gpu-zone-share", severity=Severity.HIGH,
    description="No zone holds more than maxGpuShare of the cluster's GPUs, unless the GPUs are too few to split "
                "that finely: a zone may always hold its even share (GPUs / zoneCount) plus part of one machine.",
    remediation="Spread GPU pools over all zones (pool zones) or move capacity; raise maxGpuShare only when the "
                "region lacks capacity in a zone, and say so in the stack's policy config.",
    config={"maxGpuShare": {"type": "number", "default": 0.4, "exclusiveMinimum": 0, "maximum": 1},
            "zoneCount": {"type": "integer", "default": 3, "minimum": 1}})
def gpu_zone_share(args: StackValidationArgs, report: ReportViolation, config: Config) -> None:
    """Whole machines cannot meet a share below 1 / zoneCount of a small count: 4 single-GPU machines over 3
    zones put 2 (50%) in some zone however they are placed. So a zone over the share fails only when it would
    still hold its even share without its largest machine: then some other placement does better (placing each
    machine in the emptiest zone never leaves a zone at or above its even share before its last machine)."""
    gpus: Counter[str] = Counter()
    largest: Counter[str] = Counter()
    holders: defaultdict[str, list[tuple[int, str]]] = defaultdict(list)
    for machine in of_roles(args.resources, *GPU_ROLES):
        per_machine = gpus_per_machine(machine.props)
        if per_machine is None:
            report(f"a GPU machine without the autoscaler's {GPU_RESOURCE} node-template tag: its GPUs cannot be "
                   "counted (and the autoscaler cannot scale it from zero)", machine.urn)
            continue
        for zone, n in machines_per_zone(machine).items():
            gpus[zone] += n * per_machine
            if n:
                largest[zone] = max(largest[zone], per_machine)
            holders[zone].append((-n * per_machine, machine.urn))
    total = sum(gpus.values())
    limit, even = float(config["maxGpuShare"]), total / int(config["zoneCount"])
    for zone, n in sorted(gpus.items()):
        if total and n / total > limit and n - largest[zone] >= even:
            report(f"zone {zone} holds {n:,} of {total:,} GPUs ({n / total:.0%}); at most {limit:.0%} allowed "
                   f"(capacity {_by_zone(gpus)})", min(holders[zone])[1])  # the zone's largest GPU holder, then by URN


RULES = [etcd_quorum_spread, apiserver_zone_spread, infiniband_zone_loss, gpu_zone_share]
