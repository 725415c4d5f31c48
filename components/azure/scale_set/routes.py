"""How node scale sets reach ARM: the API version they are declared at, and what an update may not change.

Node scale sets are not azure-native's typed `VirtualMachineScaleSet` but a Pulumi dynamic resource
(components/azure/scale_set/provider.py) built on Microsoft's Python SDK. Its inputs keep azure-native's
camelCase shape (the `properties` envelopes flattened away), plus `armType` and `apiVersion`, so the
preflight, the policy pack and `gpucluster diff` read it as they read the typed class
(policies/rules/props.py `resource_kind`). docs/architecture.md, "Node scale sets", has the trade-offs.
"""

from __future__ import annotations

from typing import Any

SCALE_SET_ARM_TYPE = "Microsoft.Compute/virtualMachineScaleSets"

PREFIX_ON_NIC_COMPUTE_API = "2026-07-02"
"""The earliest stable Microsoft.Compute API version whose scale-set IP configurations carry
`privateIPAddressPrefixLength`. Read in Azure/azure-rest-api-specs (TypeSpec-generated swagger,
specification/compute/resource-manager/Microsoft.Compute/Compute/stable/<version>/ComputeRP.json):
2026-07-02 (commit fd0a0943) has it in both `VirtualMachineScaleSetIPConfigurationProperties` and
`VirtualMachineScaleSetUpdateIPConfigurationProperties`; 2026-04-01 (commits c6b9f819 and 030174c7) has it
in neither, 2026-03-01 (commit 592911f3) not in the update model; the index holds no stable folder between
2026-04-01 and 2026-07-02. azure-mgmt-compute 39.0.0 (PyPI) has the field in both models
(`private_ip_address_prefix_length`, "the service will allocate a CIDR block instead of a single IP
address") but sends api-version 2026-04-01 by default (operations/_operations.py), a version whose
schema lacks it: the provider passes the version below on every call."""

SCALE_SET_API_VERSION = PREFIX_ON_NIC_COMPUTE_API
"""The api-version every node scale-set request is sent at."""


CREATE_ONLY_PATHS: tuple[str, ...] = (
    "location",
    "extendedLocation",
    "scheduledEventsPolicy",
    "virtualMachineProfile.osProfile.computerNamePrefix",
    "virtualMachineProfile.osProfile.adminUsername",
    "virtualMachineProfile.osProfile.adminPassword",
    "virtualMachineProfile.osProfile.allowExtensionOperations",
    "virtualMachineProfile.osProfile.requireGuestProvisionSignal",
    "virtualMachineProfile.storageProfile.osDisk.name",
    "virtualMachineProfile.storageProfile.osDisk.createOption",
    "virtualMachineProfile.storageProfile.osDisk.osType",
    "virtualMachineProfile.storageProfile.diskApiVersion",
    "virtualMachineProfile.networkProfile.networkInterfaceConfigurations[].ipConfigurations[]"
    ".publicIPAddressConfiguration.sku",
    "virtualMachineProfile.networkProfile.networkInterfaceConfigurations[].ipConfigurations[]"
    ".publicIPAddressConfiguration.ipTags",
    "virtualMachineProfile.networkProfile.networkInterfaceConfigurations[].ipConfigurations[]"
    ".publicIPAddressConfiguration.publicIPAddressVersion",
    "virtualMachineProfile.priority",
    "virtualMachineProfile.evictionPolicy",
    "virtualMachineProfile.capacityReservation",
    "virtualMachineProfile.applicationProfile",
    "virtualMachineProfile.serviceArtifactReference",
    "zoneBalance",
    "platformFaultDomainCount",
    "hostGroup",
    "orchestrationMode",
    "constrainedMaximumCapacity",
    "highSpeedInterconnectPlacement",
    "externalHealthPolicy",
)
"""What a PUT may set and the PATCH body (`VirtualMachineScaleSetUpdate`) does not carry at the api-version we send,
so Azure cannot change it on an existing scale set: azure-mgmt-compute's `VirtualMachineScaleSet` model (the shape of
our bodies) walked field by field against the 2026-07-02 REST update definitions
(components/azure/scale_set/update_schema.py; `[]` marks list items), not against the SDK's own update model
(azure-mgmt-compute 39.0.0, whose operations default to 2026-04-01: it has `storageProfile.diskApiVersion`, which the
2026-07-02 update model does not). tests/test_arm_body.py derives it and fails when the table, the version we send
or the schema's version disagree."""

ROUTE_REPLACES: tuple[tuple[str, str], ...] = (
    ("armType", "the resource's ARM type"),
    ("subscriptionId", "the scale set's resource id (PUT path)"),
    ("resourceGroupName", "the scale set's resource id (PUT path)"),
    ("vmScaleSetName", "the scale set's resource id (PUT path)"),
    ("zones", "the 2026-07-02 update model carries `zones`, but a node scale set's zone is its InfiniBand domain's "
              "placement in the plan: the provider does not move a set's VMs to another zone, a new zone is a new "
              "scale set"),
    ("sku", "the 2026-07-02 update model carries `sku`, but an update never sends it, so capacity stays the "
            "autoscaler's: a new size or tier is a new scale set (sku.capacity alone is ignored)"),
)
"""Inputs whose change replaces a node scale set beyond CREATE_ONLY_PATHS, with the reason: route choices, not what
the update model lacks."""

SCALE_SET_WRITE_ONLY: tuple[str, ...] = ("virtualMachineProfile.osProfile.customData",)
"""Declared paths a GET never returns (customData is write-only: the model keeps it, the response leaves it out), so
a read keeps the declared value there; everywhere else a value Azure no longer has reads as absent."""

CAPACITY_PATH = "sku.capacity"
"""Owned by the cluster autoscaler once the scale set exists: never diffed, never sent by an update."""

PROVIDER_INPUT = "__provider"
"""The serialized dynamic provider (pulumi.dynamic PROVIDER_KEY): code, not state; diffs skip it."""

REPLACEMENT_ACK_INPUT = "replacementAcknowledged"
"""Set (true) on a node scale set the stack's `cluster.acknowledgeDeletions.infinibandDomains` covers, so the provider's
diff may replace it alongside other domains of its pool (components/azure/scale_set/replacement_guard.py). Declared only where
it is true; never sent to ARM, never a change."""


def path_pattern(path: str) -> str:
    """`a[3].b[0].c` -> `a[].b[].c`: list indices do not matter to the table."""
    out, skipping = [], False
    for char in path:
        if char == "[":
            skipping = True
            out.append("[]")
        elif char == "]":
            skipping = False
        elif not skipping:
            out.append(char)
    return "".join(out)


def under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def scale_set_replacement(path: str) -> str | None:
    """Why a change at `path` (dotted, `[i]` for list items) replaces a node scale set, or None when the
    provider updates it in place (or ignores it: sku.capacity, the serialized provider)."""
    if under(path, CAPACITY_PATH) or under(path, PROVIDER_INPUT) or under(path, REPLACEMENT_ACK_INPUT):
        return None
    for key, why in ROUTE_REPLACES:
        if under(path, key):
            return why
    pattern = path_pattern(path)
    for create_only in CREATE_ONLY_PATHS:
        if under(pattern, create_only):
            return (f"{create_only} is not in Microsoft.Compute's VirtualMachineScaleSetUpdate at "
                    f"{SCALE_SET_API_VERSION} (azure-rest-api-specs stable/{SCALE_SET_API_VERSION}/ComputeRP.json)")
    return None


def api_version_at_least(declared: str | None, needed: str) -> bool:
    """ARM api-versions are dates (`2026-07-02`, optionally `-preview`): compare the date part."""
    return isinstance(declared, str) and declared[:10] >= needed[:10]


def _leaves(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _leaves(item, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _leaves(item, f"{path}[{index}]", out)
    else:
        out[path] = value


def leaves(value: Any) -> dict[str, Any]:
    """Dotted leaf path (`[i]` for list items) -> value."""
    out: dict[str, Any] = {}
    _leaves(value, "", out)
    return out


def scale_set_diff(olds: dict[str, Any], news: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(changed leaf paths, {path: why} for those that replace) between a node scale set's old state and new
    inputs. Capacity, the serialized provider and the replacement acknowledgement are never changes. Only a value that
    exists on both sides and differs replaces: a key the old state lacks (a state written by another provider, after
    an `aliases` move) is set by the update, never a reason to delete the scale set."""
    before, after = leaves(olds), leaves(news)
    changed = sorted(p for p in set(before) | set(after) if before.get(p, ...) != after.get(p, ...)
                     and not under(p, CAPACITY_PATH) and not under(p, PROVIDER_INPUT)
                     and not under(p, REPLACEMENT_ACK_INPUT))
    replaces = {p: why for p in changed if p in before and p in after and (why := scale_set_replacement(p))}
    return changed, replaces
