"""Every preflight rule: its id, what it stops, what Azure itself does with that request, and where that is written.
docs/azure-preflight.md lists them.

Every rule is a plan error either way; the label says why. "refuses": ARM answers the request with an error, so the
plan fails before `pulumi up` does, half-way through. "accepts, deploys wrong": ARM takes the request and builds
something other than the plan says (VMs without InfiniBand to each other, one resource where two were declared), which
no later step reports. "library": a check of the library's own (nothing is sent to Azure that way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AzureDoes = Literal["refuses", "accepts, deploys wrong", "library"]

NAME_RULES_PAGE = ("Microsoft Learn \"Naming rules and restrictions for Azure resources\" "
                   "(azure-docs articles/azure-resource-manager/management/resource-name-rules.md)")
SDK = "pulumi_azure_native 3.29 docstrings (generated from the Azure REST API specs)"
PLACEMENT = "azure-compute-docs articles/virtual-machine-scale-sets/virtual-machine-scale-sets-placement-groups.md"
ZONES_PAGE = "azure-compute-docs articles/virtual-machine-scale-sets/virtual-machine-scale-sets-use-availability-zones.md"


_RACK_EXAMPLE = ("Azure/azure-rest-api-specs Microsoft.Compute stable 2026-03-01 virtualMachineScaleSetExamples/"
                 "VirtualMachineScaleSet_Create_WithInterconnectBlock.json (azure-sdk-for-go armcompute v8 example)")


@dataclass(frozen=True)
class Rule:
    id: str
    what: str
    source: str
    azure: AzureDoes = "refuses"
    """What Azure does with a request that breaks the rule (see the module docstring)."""


RULES: dict[str, Rule] = {r.id: r for r in (
    Rule("name-format", "a resource name outside its type's length and characters (per-type table in "
         "components/preflight/naming.py)", f"{NAME_RULES_PAGE}; {SDK} for storage accounts, blob containers, "
         "disk encryption sets, resource groups; Key Vault REST spec `vaultName` pattern `^[a-zA-Z0-9-]{3,24}$`"),
    Rule("name-type-catalogued", "an azure-native type with no naming rule here (so nothing judges its names)",
         "this library: every declared type must have a row in NAMING and in the offline engine's autonaming table",
         "library"),
    Rule("name-unique", "two resources of a type with the same name in the same scope (resource group, parent, "
         "or all of Azure for storage accounts and key vaults)", NAME_RULES_PAGE + " (Scope column); ARM's PUT "
         "creates or updates the resource at its id (Azure REST API specs: every resource's CreateOrUpdate), so the "
         "second declaration rewrites the first", "accepts, deploys wrong"),
    Rule("name-global-explicit", "a globally unique name (storage account, key vault) left to azure-native's "
         "autoname: logical name + 8 random hex, too long for both types and different on every replacement",
         "pulumi-azure-native provider/pkg/provider/provider.go getDefaultName; " + NAME_RULES_PAGE + "; a name "
         "short enough passes, and a replacement then gets a new account or vault beside the old one's data",
         "accepts, deploys wrong"),
    Rule("computer-name", "a VM host name over 64 characters or a scale-set computer-name prefix over 58 "
         "(Linux: Uniform scale sets append a 6-character instance suffix to the prefix)",
         f"{SDK}: osProfile.computerName \"Max-length (Linux): 64 characters\"; Uniform instance names "
         "<prefix><6 base-36 characters> (AKS node names such as aks-nodepool1-12345678-vmss000000)"),
    Rule("nsg-tag-in-plural-field", "a service tag or `*` in `sourceAddressPrefixes`/`destinationAddressPrefixes`",
         "ARM SecurityRuleParameterContainsUnsupportedValue (terraform-provider-azurerm#5617); "
         f"{SDK}: only `source_address_prefix` documents tags"),
    Rule("infiniband-single-placement-group", "an InfiniBand scale set with singlePlacementGroup false: its VMs "
         "get no InfiniBand to each other", f"{PLACEMENT} (\"Large scale (SPG=false) does not support InfiniBand "
         "networking\": the set is built, without it); azure-compute-docs articles/virtual-machines/setup-infiniband.md",
         "accepts, deploys wrong"),
    Rule("fault-domains-placement-group", "a Uniform scale set with platformFaultDomainCount 1 (max spreading, the "
         "zonal default) and a single placement group", f"{ZONES_PAGE} (\"If you use max spreading, you must use "
         "multiple placement groups\"); Azure/azure-cli#5920 (Compute's rule as the CLI team quotes it: with 1 fault "
         "domain a single placement group \"will cause an error\"); supported counts: azure-compute-docs "
         "articles/virtual-machine-scale-sets/virtual-machine-scale-sets-manage-fault-domains.md"),
    Rule("placement-group-capacity", "more VMs in a scale set than its placement mode allows (100 with "
         "singlePlacementGroup true, 1,000 without, unless the stack's limits raise them)", PLACEMENT),
    Rule("ephemeral-os-disk", "an ephemeral OS disk on a size without a resource disk large enough for it, "
         "or with a caching other than ReadOnly", "azure-docs articles/virtual-machines/ephemeral-os-disks.md; "
         "the size pages for the resource-disk sizes (components/catalog/vm_sizes.py)"),
    Rule("accelerated-networking", "enableAcceleratedNetworking on a size that does not support it "
         "(VMSizeIsNotPermittedToEnableAcceleratedNetworking)", "the size pages (components/catalog/vm_sizes.py)"),
    Rule("ip-configurations-per-nic", "more than 256 IP configurations on one NIC",
         "azure-docs includes/azure-virtual-network-limits.md (private IP addresses per network interface: 256)"),
    Rule("nics-per-size", "more NICs than the size allows", "the size pages (max NICs, components/catalog/vm_sizes.py)"),
    Rule("confidential-size", "securityType ConfidentialVM on a size that is not confidential, or a "
         "confidential (NCC) size without it", "azure-compute-docs nccadsh100v5-series.md; Azure/az-cgpu-onboarding "
         "docs/template.json"),
    Rule("confidential-encryption", "a confidential OS-disk securityEncryptionType on a VM that is not a "
         "ConfidentialVM with vTPM on", f"{SDK}: securityEncryptionType \"It can be set for only Confidential VMs\"; "
         "azure-docs articles/confidential-computing/confidential-vm-overview.md"),
    Rule("confidential-customer-key", "a confidential disk encryption set (customer-managed key) with any "
         "securityEncryptionType but DiskWithVMGuestState", "confidential VM FAQ; Azure/az-cgpu-onboarding "
         "src/cgpu-h100-auto-onboarding.sh (\"CMK only supports encryption type DiskWithVMGuestState\"); "
         "Azure quickstart demos/vmss-cvm-fde"),
    Rule("key-vault-hsm-premium", "an HSM-protected key (RSA-HSM, EC-HSM) in a Standard vault",
         "azure-docs articles/key-vault/keys/about-keys.md (HSM-protected keys need the Premium tier)"),
    Rule("tags", "more than 50 tags on a resource, a tag name over 512 or a value over 256 characters, or a name "
         "with < > % & \\ ? /", "azure-docs articles/azure-resource-manager/management/tag-resources.md (limitations)"),
    Rule("zones", "a zone the region does not have", "azure-docs articles/reliability/availability-zones-region-support.md "
         "(components/catalog/regions.py; a stack declares others under cluster.limits.regionZones)"),
    Rule("prefix-on-nic-api-version", "scale-set IP configurations asking for /28 blocks "
         "(privateIPAddressPrefixLength) on a scale set declared through a route that cannot send the field: "
         "azure-native's typed class (its schema lacks it and the body drops it) or a dynamic resource below "
         "api-version 2026-07-02. Azure accepts the scale set and allocates single addresses: the plan's pod "
         "capacity is not what deploys",
         "azure-rest-api-specs Microsoft.Compute/Compute/stable/2026-07-02/ComputeRP.json (first version with the "
         "field; components/catalog/arm_routes.py); pulumi-azure-native provider/pkg/convert/sdkInputsToRequestBody.go",
         "accepts, deploys wrong"),
    Rule("interconnect-single-placement-group", "an interconnect (NVLink rack) scale set with "
         "singlePlacementGroup true: its interconnect group places the VMs",
         f"{_RACK_EXAMPLE}: Azure answers a scale set with interconnect group and block profiles with "
         "singlePlacementGroup false (what Azure does with true is unpublished: docs/rack-scale.md)",
         "accepts, deploys wrong"),
    Rule("interconnect-subgroup-capacity", "more VMs in a scale set than the one subgroup (NVLink rack) it names holds",
         "the interconnect group's subgroupProfile.size (azure-native network:InterconnectGroup, Network API "
         "2025-07-01); an NVL72 rack is 18 VMs (azure-compute-docs nd-gb300-v6-series.md, 72 GPUs per NVLink domain)"),
    Rule("interconnect-block-racks", "an interconnect block whose capacity is not a whole number of racks",
         "Azure/azure-cli#33707: interconnect blocks reserve VMs \"in multiples of 18\" (the subgroup size)"),
    Rule("interconnect-block-capacity", "scale sets asking a block for more VMs than it pre-allocates",
         "azure-mgmt-compute 39.0.0 InterconnectBlockProfile: VMs are allocated from the block \"provided enough "
         "capacity has been reserved\""),
    Rule("interconnect-block-size", "a rack scale set of another size than its block's",
         "Azure/azure-rest-api-specs Microsoft.Compute stable 2026-07-02 interconnectBlockExamples/"
         "InterconnectBlocks_CreateOrUpdate.json: a block's sku names one size"),
    Rule("interconnect-block-zone", "a rack scale set in another zone than its block",
         "InterconnectBlocks_CreateOrUpdate.json (stable 2026-07-02): a block's capacity is in its zones"),
    Rule("size-region", "a VM size placed in a region its availability row, from Microsoft's own word, does not list",
         "components/catalog/availability.py (each row's source and date) or the stack's cluster.sizeRegions"),
)}

WARNINGS: dict[str, Rule] = {r.id: r for r in (
    Rule("size-region-uncatalogued", "a size with no availability row, or in a region its price-answer row does not "
         "cover: the plan cannot tell whether the region offers it",
         "components/catalog/availability.py (priced_availability: the price catalogue's saved answers)"),
    Rule("size-region-secondary", "a size whose availability row no Microsoft source confirms: the plan neither "
         "refuses a region nor vouches for one on it", "components/catalog/availability.py"),
    Rule("size-zones-unknown", "zones offering the size in the region not established by a public source "
         "(logical zones differ per subscription)", "az vm list-skus --zone, per subscription"),
    Rule("interconnect-fault-domains", "platformFaultDomainCount other than 1 on an interconnect scale set: no "
         "public source says how Azure spreads an NVLink rack", f"{_RACK_EXAMPLE} (leaves the zonal default, 1)"),
    Rule("ephemeral-os-disk-placement", "an ephemeral OS disk placement other than ResourceDisk, which the "
         "catalogue cannot check (no cache or NVMe-placement sizes catalogued)", "azure-docs ephemeral-os-disks.md"),
)}
