"""The placement settings Azure accepted on each scale set, against the plan.

Azure applies defaults and may accept a model other than the one sent (a fault-domain count, a placement-group
setting); what InfiniBand and zone spreading rely on is what the scale set reports back.
"""

from __future__ import annotations

from typing import Any

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.verify import expected
from gpucluster.verify.arm import Arm, not_found
from gpucluster.verify.results import Check, Result

PLACEMENT = Check("azure.scale-sets", "the plan (components/planning/placement.py ScaleSetPlan: one zone, "
                                      "singlePlacementGroup for InfiniBand, platformFaultDomainCount 5 or 1; "
                                      "components/azure/api_servers.py; the image version id of "
                                      "components/planning/node_images.py); azure-compute-docs "
                                      "virtual-machine-scale-sets-placement-groups.md, "
                                      "virtual-machine-scale-sets-manage-fault-domains.md")


def differences(live: dict[str, Any], size: str, zones: list[str], single_group: bool, fault_domains: int,
                image: str) -> list[str]:
    """What the scale set Azure reports (its REST JSON) has other than the plan."""
    props = live.get("properties") or {}
    found = []
    if str((live.get("sku") or {}).get("name", "")).lower() != size.lower():
        found.append(f"size {(live.get('sku') or {}).get('name')} (planned {size})")
    if sorted(live.get("zones") or []) != sorted(zones):
        found.append(f"zones {live.get('zones')} (planned {zones})")
    if props.get("singlePlacementGroup") is not single_group:
        found.append(f"singlePlacementGroup {props.get('singlePlacementGroup')} (planned {single_group})")
    if props.get("platformFaultDomainCount") != fault_domains:
        found.append(f"platformFaultDomainCount {props.get('platformFaultDomainCount')} (planned {fault_domains})")
    if props.get("orchestrationMode") not in (None, "Uniform"):
        found.append(f"orchestrationMode {props['orchestrationMode']} (planned Uniform)")
    if props.get("overprovision") is not False:
        found.append(f"overprovision {props.get('overprovision')} (planned false)")
    reference = ((props.get("virtualMachineProfile") or {}).get("storageProfile") or {}).get("imageReference") or {}
    # ARM resource ids compare without case (azure-docs articles/azure-resource-manager/management/
    # resource-name-rules.md: names are case-insensitive unless its valid-characters column says otherwise).
    live_image = str(reference.get("id") or ":".join(str(reference.get(k, "")) for k in ("publisher", "offer", "sku")))
    if live_image.lower() != image.lower():
        found.append(f"image {live_image} (planned {image})")
    return found


def _verdict(arm: Arm, name: str, subject: str, want: tuple[str, list[str], bool, int, str]) -> Result:
    try:
        live = arm.compute.virtual_machine_scale_sets.get(arm.resource_group, name).as_dict()
    except not_found():
        return PLACEMENT.failed(subject, f"no scale set {name} in resource group {arm.resource_group}",
                                "run pulumi up for this stack (or check --subscription)")
    found = differences(live, *want)
    if found and all(f.startswith("image ") for f in found):
        return PLACEMENT.failed(subject, "Azure reports " + "; ".join(found),
                                "pulumi up sets the planned version on the scale set's model; then reimage its "
                                "instances (docs/images.md, 'Rolling out a new version')")
    if found:
        return PLACEMENT.failed(subject, "Azure reports " + "; ".join(found),
                                "a zone, placement-group or fault-domain setting cannot change on a running scale set: "
                                "recreate it from the plan (drain its nodes, delete it, pulumi up)")
    size, zones, single, fault_domains, _ = want
    return PLACEMENT.passed(subject, f"{size} in zone(s) {', '.join(zones)}, singlePlacementGroup {single}, "
                                     f"platformFaultDomainCount {fault_domains}, the planned image")


def check_scale_sets(arm: Arm, plan: ClusterPlan) -> list[Result]:
    results = [_verdict(arm, s.name, f"{s.name} (pool {pool.name})",
                        (pool.size.name, [s.zone], s.single_placement_group, s.platform_fault_domain_count,
                         expected.machine_image_id(plan, arm.subscription, s.name)))
               for pool, s in expected.scale_sets(plan)]
    cp = plan.control_plane
    results.append(_verdict(arm, expected.API_SCALE_SET, f"{expected.API_SCALE_SET} (API servers)",
                            (cp.api.size.name, list(cp.api.zones), False, 1,
                             expected.machine_image_id(plan, arm.subscription, expected.API_SCALE_SET))))
    return results
