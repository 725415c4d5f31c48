"""Whether this subscription is offered each size in each zone the plan places it, and has the quota the plan needs.

Both are per subscription: zones are logical and mapped per subscription, restrictions (`NotAvailableForSubscription`)
are the subscription's, and so are quotas. The plan can only take them from the stack (cluster.sizeRegions,
cluster.vcpuQuota, cluster.resourceQuota); this reads them from ARM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.verify import expected
from gpucluster.verify.arm import Arm
from gpucluster.verify.results import Check, Result

SIZES = Check("azure.sizes", "Microsoft.Compute Resource Skus - List (`az vm list-skus`): locationInfo[].zones and "
                             "restrictions[] (type Location or Zone) for this subscription; the plan's placements "
                             "(components/planning/placement.py, control_plane.py)")
QUOTA = Check("azure.quota", "Microsoft.Compute Usage - List (`az vm list-usage`; azure-docs "
                             "articles/virtual-machines/quotas.md names the rows `cores`, `<family>Family`, "
                             "`virtualMachineScaleSets`); the plan's needs (components/planning/quota.py)")
SCALE_SET_USAGE = "virtualMachineScaleSets"


@dataclass
class Offer:
    zones: set[str] = field(default_factory=set)
    restricted_zones: dict[str, str] = field(default_factory=dict)
    """Zone -> reason code."""
    region_restriction: str | None = None


def offers(skus: list[Any], location: str) -> dict[str, Offer]:
    """Virtual-machine SKUs of the region by lowercased size name."""
    found: dict[str, Offer] = {}
    for sku in skus:
        if str(sku.resource_type or "").lower() != "virtualmachines" or not sku.name:
            continue
        offer = found.setdefault(sku.name.lower(), Offer())
        for info in sku.location_info or []:
            if str(info.location or "").lower() == location.lower():
                offer.zones.update(info.zones or [])
        for restriction in sku.restrictions or []:
            reason = str(getattr(restriction.reason_code, "value", restriction.reason_code) or "restricted")
            info = restriction.restriction_info
            if restriction.type == "Location" and (info is None or any(
                    str(loc).lower() == location.lower() for loc in info.locations or [])):
                offer.region_restriction = reason
            elif restriction.type == "Zone" and info is not None:
                for zone in info.zones or []:
                    offer.restricted_zones[zone] = reason
    return found


def check_sizes(arm: Arm, plan: ClusterPlan) -> list[Result]:
    location = plan.spec.location
    found = offers(list(arm.compute.resource_skus.list(filter=f"location eq '{location}'")), location)
    results = []
    for place in expected.placements(plan):
        subject = f"{place.size} in {location} zone {place.zone} ({place.used_by})"
        offer = found.get(place.size.lower())
        listing = f"az vm list-skus --location {location} --size {place.size} --zone --output table"
        if offer is None:
            results.append(SIZES.failed(subject, f"{location} offers no {place.size} to this subscription",
                                        f"pick a size the region offers, or another region ({listing})"))
        elif offer.region_restriction:
            results.append(SIZES.failed(subject, f"restricted for this subscription in {location} "
                                                 f"({offer.region_restriction})",
                                        f"ask for access to the size in the region (a quota request), {listing}"))
        elif place.zone not in offer.zones:
            zones = ", ".join(sorted(offer.zones)) or "none"
            results.append(SIZES.failed(subject, f"not offered in zone {place.zone} (offered in: {zones})",
                                        "move the pool to the zones offering the size (cluster.pools[].zones, "
                                        f"cluster.zones), {listing}"))
        elif place.zone in offer.restricted_zones:
            results.append(SIZES.failed(subject, f"restricted in zone {place.zone} for this subscription "
                                                 f"({offer.restricted_zones[place.zone]})",
                                        f"ask for zonal access (a quota request), or move the pool's zones; {listing}"))
        else:
            results.append(SIZES.passed(subject, "offered, no restriction"))
    return results


def check_quota(arm: Arm, plan: ClusterPlan) -> list[Result]:
    location = plan.spec.location
    usage = {str(u.name.value).lower(): u for u in arm.compute.usage.list(location) if u.name and u.name.value}
    needs = [(q.family, q.vcpus, q.declared, f"cluster.vcpuQuota.{q.family}", "vCPUs") for q in plan.quota]
    needs += [(SCALE_SET_USAGE, c.needed, None, c.where, "scale sets") for c in plan.counts if c.quota.key == "scaleSets"]
    results = []
    for name, needed, declared, where, unit in needs:
        subject = f"{name} in {location}"
        row = usage.get(name.lower())
        if row is None:
            results.append(QUOTA.failed(subject, f"the subscription has no usage row {name!r} in {location}",
                                        "check the family name of the pool's size (components/catalog/vm_sizes.py) "
                                        f"against az vm list-usage --location {location}"))
            continue
        limit, used = int(row.limit), int(row.current_value)
        if limit < needed:
            results.append(QUOTA.failed(subject, f"limit {limit:,} {unit}, the plan needs {needed:,} (in use {used:,})",
                                        f"request {needed:,} (Azure portal, Quotas), then declare it as {where}"))
        elif declared is not None and declared > limit:
            results.append(QUOTA.failed(subject, f"the stack declares {declared:,} but the subscription's limit is "
                                                 f"{limit:,}",
                                        f"set {where} to {limit:,}, or have the increase granted"))
        else:
            results.append(QUOTA.passed(subject, f"limit {limit:,} {unit} covers the plan's {needed:,} "
                                                 f"(in use {used:,})"))
    return results
