"""Rules on NVLink rack scale sets and their interconnect groups and blocks (docs/rack-scale.md).

Sources:
- Microsoft's example scale set with `interconnectGroupProfile` and `interconnectBlockProfile` (Azure/azure-rest-api-
  specs, Microsoft.Compute stable 2026-03-01 virtualMachineScaleSetExamples/VirtualMachineScaleSet_Create_With
  InterconnectBlock.json, as azure-sdk-for-go armcompute v8 generates it) sends no placement-group or fault-domain
  setting, and Azure's answer carries `singlePlacementGroup: false`: the platform places the VMs in the subgroup;
- interconnect blocks pre-allocate VMs "in multiples of 18" (Azure/azure-cli#33707, the feature request for
  `az interconnect-block`), the subgroup size of an NVL72 rack; a block names one size and one zone
  (InterconnectBlocks_CreateOrUpdate.json, stable 2026-07-02), and VMs take their capacity from it ("allocating the
  Virtual Machine or Scale Set VM instances provided enough capacity has been reserved", azure-mgmt-compute 39.0.0
  `InterconnectBlockProfile`).
"""

from __future__ import annotations

from gpucluster.preflight.model import Finding, Resource, dig

VMSS = "azure-native:compute:VirtualMachineScaleSet"
GROUP = "azure-native:network:InterconnectGroup"
BLOCK = "azure-native:compute:InterconnectBlock"
EXAMPLE = "VirtualMachineScaleSet_Create_WithInterconnectBlock.json (Microsoft.Compute 2026-03-01)"


def _leaf(value: object) -> str:
    return value.rsplit("/", 1)[-1].lower() if isinstance(value, str) else ""


def _group_id(scale_set: Resource) -> object:
    return dig(scale_set.inputs, "virtualMachineProfile", "networkProfile", "interconnectGroupProfile",
               "interconnectGroup", "id")


def _block_id(scale_set: Resource) -> object:
    return dig(scale_set.inputs, "virtualMachineProfile", "interconnectBlockProfile", "interconnectBlock", "id")


def _scale_set_rules(scale_set: Resource, groups: dict[str, Resource], warnings: list[Finding]) -> list[Finding]:
    findings = []
    if scale_set.inputs.get("singlePlacementGroup") is True:
        findings.append(Finding(
            "interconnect-single-placement-group", scale_set.name, "singlePlacementGroup",
            "an interconnect scale set is placed by its interconnect group, not by a placement group: Azure answers "
            f"Microsoft's own example with singlePlacementGroup false ({EXAMPLE}); set it false"))
    fds = scale_set.inputs.get("platformFaultDomainCount")
    if isinstance(fds, int) and fds != 1:
        warnings.append(Finding.warning(
            "interconnect-fault-domains", scale_set.name, "platformFaultDomainCount",
            f"{fds} fault domains on an interconnect scale set: no public source says Azure spreads an NVLink rack "
            f"over fault domains, and Microsoft's example leaves the zonal default, 1 ({EXAMPLE}); send 1"))
    group = groups.get(_leaf(_group_id(scale_set)))
    capacity = dig(scale_set.inputs, "sku", "capacity")
    size = dig(group.inputs, "subgroupProfile", "size") if group else None
    subgroups = dig(scale_set.inputs, "virtualMachineProfile", "networkProfile", "interconnectGroupProfile",
                    "subgroups") or []
    if isinstance(size, int) and isinstance(capacity, int) and len(subgroups) == 1 and capacity > size:
        findings.append(Finding(
            "interconnect-subgroup-capacity", scale_set.name, "sku.capacity",
            f"{capacity} VMs in one subgroup of {size}: a subgroup is one NVLink rack of subgroupProfile.size VMs; "
            "keep one rack per scale set"))
    return findings


def _block_rules(block: Resource, groups: dict[str, Resource], sets: list[Resource]) -> list[Finding]:
    findings = []
    capacity = dig(block.inputs, "sku", "capacity")
    group = groups.get(_leaf(dig(block.inputs, "properties", "interconnectGroup", "id")))
    size = dig(group.inputs, "subgroupProfile", "size") if group else None
    if isinstance(capacity, int) and isinstance(size, int) and capacity % size:
        findings.append(Finding(
            "interconnect-block-racks", block.name, "sku.capacity",
            f"{capacity} VMs is not a whole number of racks of {size} (interconnect blocks pre-allocate VMs in "
            "multiples of the subgroup size, Azure/azure-cli#33707); declare whole racks"))
    mine = [s for s in sets if _leaf(_block_id(s)) == _leaf(block.inputs.get("interconnectBlockName"))]
    wanted = sum(c for s in mine if isinstance(c := dig(s.inputs, "sku", "capacity"), int))
    if isinstance(capacity, int) and wanted > capacity:
        findings.append(Finding(
            "interconnect-block-capacity", block.name, "sku.capacity",
            f"its scale sets ask for {wanted} VMs and the block holds {capacity}: VMs are allocated from the block "
            "only while it has capacity reserved; raise the block or move racks to another group"))
    for s in mine:
        if dig(s.inputs, "sku", "name") != dig(block.inputs, "sku", "name"):
            findings.append(Finding("interconnect-block-size", s.name, "sku.name",
                                    f"{dig(s.inputs, 'sku', 'name')} in a block of {dig(block.inputs, 'sku', 'name')}: "
                                    "a block pre-allocates one size; use the block's size"))
        if (s.inputs.get("zones") or []) != (block.inputs.get("zones") or []):
            findings.append(Finding("interconnect-block-zone", s.name, "zones",
                                    f"zones {s.inputs.get('zones')} but its block is in {block.inputs.get('zones')}: "
                                    "a block's capacity is in its zone; put the rack in the block's zone"))
    return findings


def check_interconnect(resources: list[Resource], warnings: list[Finding]) -> list[Finding]:
    groups = {str(r.inputs.get("interconnectGroupName", "")).lower(): r for r in resources if r.type == GROUP}
    sets = [r for r in resources if r.type == VMSS and (_group_id(r) or _block_id(r))]
    findings: list[Finding] = []
    for scale_set in sets:
        findings += _scale_set_rules(scale_set, groups, warnings)
    for block in (r for r in resources if r.type == BLOCK):
        findings += _block_rules(block, groups, sets)
    return findings


def is_interconnect_scale_set(resource: Resource) -> bool:
    return bool(_group_id(resource) or _block_id(resource))
