"""How interconnect blocks (NVLink racks, docs/rack-scale.md) reach ARM: the API version and what an update may not
change. They ride on the node scale sets' route (components/azure/scale_set/routes.py)."""

from __future__ import annotations

from typing import Any

from gpucluster.azure.scale_set.routes import PROVIDER_INPUT, SCALE_SET_API_VERSION, leaves, under

INTERCONNECT_BLOCK_ARM_TYPE = "Microsoft.Compute/interconnectBlocks"

INTERCONNECT_COMPUTE_API = "2026-03-01"
"""The earliest stable Microsoft.Compute API version with interconnect blocks and the scale-set profiles that name
them: `InterconnectBlock` is `@added(Versions.v2026_03_01)` (Azure/azure-rest-api-specs specification/compute/
resource-manager/Microsoft.Compute/Compute/Compute/InterconnectBlock.tsp), Microsoft's .NET reference gives
`VirtualMachineScaleSetNetworkProfile.InterconnectGroupProfile` "Minimum api-version: 2026-03-01", and the
example of a scale set with both profiles is stable 2026-03-01 (virtualMachineScaleSetExamples/
VirtualMachineScaleSet_Create_WithInterconnectBlock.json). Stable 2026-07-02, which the node scale sets already
send, carries the block too (its interconnectBlockExamples/InterconnectBlocks_CreateOrUpdate.json is at
api-version 2026-07-02), so rack scale sets and blocks are sent at SCALE_SET_API_VERSION."""

INTERCONNECT_BLOCK_API_VERSION = SCALE_SET_API_VERSION
"""The api-version every interconnect-block request is sent at. azure-mgmt-compute 39.0.0's
`interconnect_blocks` operations default to 2026-04-01 (operations/_operations.py
`build_interconnect_blocks_*_request`); the provider passes this one."""

INTERCONNECT_BLOCK_REPLACES: tuple[tuple[str, str], ...] = (
    ("armType", "the resource's ARM type"),
    ("subscriptionId", "the block's resource id (PUT path)"),
    ("resourceGroupName", "the block's resource id (PUT path)"),
    ("interconnectBlockName", "the block's resource id (PUT path)"),
    ("location", "a tracked resource's location is fixed"),
    ("zones", "the block's placement: \"This property cannot be changed once Interconnect Block is provisioned\" "
              "(InterconnectBlock.tsp, placement and zones)"),
    ("sku.name", "\"After create, only `sku.capacity` can be updated\" (InterconnectBlock.tsp, sku)"),
    ("properties.interconnectGroup", "\"Required at create and immutable thereafter\" (azure-mgmt-compute 39.0.0 "
                                     "InterconnectBlockProperties.interconnect_group, visibility read/create)"),
)
"""What an interconnect block cannot change in place: "When updating an Interconnect Block, only tags and
sku.capacity may be modified" (InterconnectBlock.tsp, createOrUpdate and update)."""


def interconnect_block_diff(olds: dict[str, Any], news: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(changed leaf paths, {path: why} for those that replace) of an interconnect block: only tags and
    sku.capacity update in place; the serialized provider is never a change."""
    before, after = leaves(olds), leaves(news)
    changed = sorted(p for p in set(before) | set(after) if before.get(p, ...) != after.get(p, ...)
                     and not under(p, PROVIDER_INPUT))
    replaces = {p: why for p in changed if p in before and p in after
                for key, why in INTERCONNECT_BLOCK_REPLACES if under(p, key)}
    return changed, replaces
