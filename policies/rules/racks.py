"""Rack-level failure domains: an NVLink rack (one scale set of a `kind: rack` pool) is the unit a gang lives and
dies with. Read from what is rendered: the rack scale sets' node labels (the autoscaler's node-template tags) and
the Kueue ResourceFlavors, Topologies, ClusterQueues and Cohorts (kueue.x-k8s.io/v1beta2)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import ReportViolation, Severity, StackValidationArgs

from .declare import Config, stack_rule
from .props import (
    ANNOTATION_SPARE_RACKS,
    GPU_RESOURCE,
    LABEL_RACK,
    LABEL_TAG_PREFIX,
    POOL_TAG,
    Resource,
    capacity,
    get,
    gpus_per_machine,
    items,
    of_roles,
    tags,
    zones,
)

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
RACK_LABEL, SPARE_RACKS_ANNOTATION, GPU = LABEL_RACK, ANNOTATION_SPARE_RACKS, GPU_RESOURCE


@dataclass(frozen=True)
class Rack:
    urn: str
    pool: str
    zone: str
    gpus: int
    labels: Mapping[str, str]
    """Node labels as the tags carry them (`/` written `_`)."""


def _tag_key(label: str) -> str:
    return label.replace("/", "_")


def _racks(resources: list[Any]) -> list[Rack]:
    found = []
    for rack in of_roles(resources, "rack"):
        where = zones(rack.props)
        labels = {k.removeprefix(LABEL_TAG_PREFIX): str(v) for k, v in tags(rack.props).items()
                  if k.startswith(LABEL_TAG_PREFIX)}
        found.append(Rack(rack.urn, str(tags(rack.props).get(POOL_TAG)), where[0] if len(where) == 1 else "(no zone)",
                          capacity(rack) * (gpus_per_machine(rack.props) or 0), labels))
    return found


def _of_kind(resources: list[Any], kind: str) -> list[Resource]:
    return [r for r in resources if r.resource_type == KUEUE + kind]


def _name(resource: Resource) -> str:
    return str(get(resource.props, "metadata", "name", default=""))


def _selected(flavor: Resource, racks: list[Rack]) -> list[Rack]:
    """The racks whose nodes carry every one of the flavor's nodeLabels (Kueue injects them as the pods' node
    selector: kueue v0.19.2 apis/kueue/v1beta2 resourceflavor_types.go `nodeLabels`)."""
    wanted = {_tag_key(k): str(v) for k, v in dict(get(flavor.props, "spec", "nodeLabels", default={})).items()}
    if not wanted:
        return []
    return [r for r in racks if all(r.labels.get(k) == v for k, v in wanted.items())]


def _rack_flavors(resources: list[Any]) -> list[tuple[Resource, list[Rack]]]:
    racks = _racks(resources)
    return [(f, chosen) for f in _of_kind(resources, "ResourceFlavor") if (chosen := _selected(f, racks))]


@stack_rule(
    "kubernetes-kueue-resourceflavor-rack-gang", severity=Severity.HIGH,
    description="A Kueue flavor over NVLink rack nodes can hold a gang to one rack: its nodeLabels pin one rack, or "
                f"its Topology has the rack level ({LABEL_RACK}) that podset-required-topology asks for. "
                "Otherwise Kueue places a rack-sized gang over several racks, whose GPUs share no NVLink domain.",
    remediation=f"Name the `nvlink` Topology (interconnect group -> {LABEL_RACK} -> host) on the rack pool's "
                "flavor (components/planning/scheduling.py does), or, when gangs are meant to span racks, record why "
                "under rackSpanReasons.<flavor> in the stack's policy config.",
    config={"rackSpanReasons": {"type": "object", "default": {}, "additionalProperties": {"type": "string"}}})
def rack_gang(args: StackValidationArgs, report: ReportViolation, config: Config) -> None:
    levels = {_name(t): [get(level, "nodeLabel") for level in items(get(t.props, "spec", "levels"))]
              for t in _of_kind(args.resources, "Topology")}
    reasons = dict(config["rackSpanReasons"])
    for flavor, racks in _rack_flavors(args.resources):
        name = _name(flavor)
        if RACK_LABEL in dict(get(flavor.props, "spec", "nodeLabels", default={})) or str(reasons.get(name, "")).strip():
            continue
        topology = get(flavor.props, "spec", "topologyName")
        pools = ", ".join(sorted({r.pool for r in racks}))
        if topology is None:
            why = "names no Topology"
        elif topology not in levels:
            why = f"names Topology {topology}, which the stack does not declare"
        elif RACK_LABEL not in levels[topology]:
            why = f"names Topology {topology} without a {RACK_LABEL} level ({' -> '.join(map(str, levels[topology]))})"
        else:
            continue
        report(f"flavor {name} selects {len(racks)} NVLink racks of pool {pools} and {why}: a gang cannot require one "
               "rack, so Kueue may split a rack-sized gang over racks", flavor.urn)


def _quantity(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _gpu_quotas(holder: Resource, flavors: set[str]) -> dict[str, int]:
    """flavor -> nominal nvidia.com/gpu quota a ClusterQueue or Cohort holds on it."""
    found: dict[str, int] = {}
    for group in items(get(holder.props, "spec", "resourceGroups")):
        for flavor in items(get(group, "flavors")):
            if get(flavor, "name") not in flavors:
                continue
            for resource in items(get(flavor, "resources")):
                if get(resource, "name") == GPU:
                    found[str(get(flavor, "name"))] = _quantity(get(resource, "nominalQuota", default=0)) or 0
    return found


@stack_rule(
    "kubernetes-kueue-clusterqueue-spare-racks", severity=Severity.HIGH,
    description="The nominal GPU quota on a rack pool's flavors leaves the pool's spare racks free in every zone "
                f"(spareRacksPerZone, on the flavor as {ANNOTATION_SPARE_RACKS}), so a gang whose rack "
                "fails has a whole rack to restart on.",
    remediation="Lower the teams' quota.gpus (or add racks) until the quota on the rack flavors is at most the racks' "
                "GPUs less spareRacksPerZone racks in each zone they cover; lower spareRacksPerZone only knowingly.")
def spare_racks(args: StackValidationArgs, report: ReportViolation, _: Config) -> None:
    # Flavors are judged together by the zones they cover: one flavor over every zone is judged on its own; one
    # flavor per rack adds up per zone.
    by_zones: defaultdict[frozenset[str], list[tuple[Resource, list[Rack]]]] = defaultdict(list)
    for flavor, racks in _rack_flavors(args.resources):
        by_zones[frozenset(r.zone for r in racks)].append((flavor, racks))
    holders = _of_kind(args.resources, "ClusterQueue") + _of_kind(args.resources, "Cohort")
    for covered, members in sorted(by_zones.items(), key=lambda kv: sorted(kv[0])):
        spare = 0
        for flavor, _racks_of in members:
            declared = _quantity(get(flavor.props, "metadata", "annotations", SPARE_RACKS_ANNOTATION))
            if declared is None:
                report(f"flavor {_name(flavor)} selects NVLink racks but carries no {SPARE_RACKS_ANNOTATION} "
                       "annotation: the spare racks cannot be checked", flavor.urn)
                declared = 0
            spare = max(spare, declared)
        racks = {r.urn: r for _flavor, chosen in members for r in chosen}
        held = sum(r.gpus for r in racks.values())
        rack_gpus = max(r.gpus for r in racks.values())
        free = spare * rack_gpus * len(covered)
        names = {_name(f) for f, _racks_of in members}
        shares = sorted(((sum(_gpu_quotas(h, names).values()), h.urn, _name(h)) for h in holders), reverse=True)
        quota = sum(n for n, _, _ in shares)
        if quota > held - free:
            parts = ", ".join(f"{name} {n:,}" for n, _, name in shares if n)
            zones_text = ", ".join(sorted(covered))
            report(f"nominal {GPU} quota on {', '.join(sorted(names))} adds up to {quota:,} ({parts}) of the "
                   f"{held:,} GPUs in zone(s) {zones_text}; {spare} spare rack(s) of {rack_gpus} GPUs per zone leave "
                   f"{held - free:,} for quota", shares[0][1])


RULES = [rack_gang, spare_racks]
