"""azure-native's autonaming, applied in the offline engine so the plan shows the names Azure will see.

The provider fills a resource's name property when the program leaves it out (pulumi-azure-native
`provider/pkg/provider/provider.go`, `getDefaultName`; strategies in `provider/pkg/resources`):
- `random`: the logical (URN) name + 8 random hex characters (`resource.NewUniqueName(randomSeed, name, 8, 0)`;
  `autonaming_test.go` expects `test614742c2` for `test`);
- `uuid`: a random UUID, for names the API documents as GUIDs (role assignments, role definitions);
- `copy`: the logical name as it is (none of the types here).
The provider seeds the randomness per resource; the offline engine derives it from the URN instead, so the
same program gives byte-identical output. Real suffixes differ, their length and alphabet do not, and that is
what Azure's naming rules judge.

`NAME_PROPERTIES` lists every azure-native type the library declares with the input that names it (the last
path parameter of its PUT; camelCase as the engine records it) and the provider's strategy for it. A type missing
here is a preflight failure (components/preflight), so a new resource type cannot slip past the naming rules.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Literal

Strategy = Literal["random", "uuid"]
RANDOM_HEX_CHARS = 8

NAME_PROPERTIES: dict[str, tuple[str, Strategy]] = {
    "azure-native:resources:ResourceGroup": ("resourceGroupName", "random"),
    "azure-native:network:NetworkSecurityGroup": ("networkSecurityGroupName", "random"),
    "azure-native:network:PublicIPPrefix": ("publicIpPrefixName", "random"),
    "azure-native:network:NatGateway": ("natGatewayName", "random"),
    "azure-native:network:VirtualNetwork": ("virtualNetworkName", "random"),
    "azure-native:network:Subnet": ("subnetName", "random"),
    "azure-native:network:VirtualNetworkPeering": ("virtualNetworkPeeringName", "random"),
    "azure-native:network:LoadBalancer": ("loadBalancerName", "random"),
    "azure-native:network:NetworkInterface": ("networkInterfaceName", "random"),
    "azure-native:network:InterconnectGroup": ("interconnectGroupName", "random"),
    # Not an azure-native type yet: the dynamic resource that mirrors it (components/azure/interconnect_block.py)
    # always names itself; the row only gives its name to the naming rules.
    "azure-native:compute:InterconnectBlock": ("interconnectBlockName", "random"),
    "azure-native:storage:StorageAccount": ("accountName", "random"),
    "azure-native:storage:BlobContainer": ("containerName", "random"),
    "azure-native:compute:VirtualMachine": ("vmName", "random"),
    "azure-native:compute:VirtualMachineScaleSet": ("vmScaleSetName", "random"),
    "azure-native:compute:DiskEncryptionSet": ("diskEncryptionSetName", "random"),
    "azure-native:compute:Gallery": ("galleryName", "random"),
    "azure-native:compute:GalleryImage": ("galleryImageName", "random"),
    "azure-native:virtualmachineimages:VirtualMachineImageTemplate": ("imageTemplateName", "random"),
    "azure-native:keyvault:Vault": ("vaultName", "random"),
    "azure-native:keyvault:Key": ("keyName", "random"),
    "azure-native:managedidentity:UserAssignedIdentity": ("resourceName", "random"),
    "azure-native:monitor:AzureMonitorWorkspace": ("azureMonitorWorkspaceName", "random"),
    "azure-native:alertsmanagement:PrometheusRuleGroup": ("ruleGroupName", "random"),
    "azure-native:monitor:ActionGroup": ("actionGroupName", "random"),
    "azure-native:containerregistry:Registry": ("registryName", "random"),
    "azure-native:containerregistry:CacheRule": ("cacheRuleName", "random"),
    "azure-native:containerregistry:CredentialSet": ("credentialSetName", "random"),
    "azure-native:containerregistry:AgentPool": ("agentPoolName", "random"),
    "azure-native:network:PrivateEndpoint": ("privateEndpointName", "random"),
    "azure-native:network:PrivateDnsZoneGroup": ("privateDnsZoneGroupName", "random"),
    "azure-native:privatedns:PrivateZone": ("privateZoneName", "random"),
    "azure-native:privatedns:VirtualNetworkLink": ("virtualNetworkLinkName", "random"),
    "azure-native:authorization:RoleAssignment": ("roleAssignmentName", "uuid"),
    "azure-native:authorization:RoleDefinition": ("roleDefinitionId", "uuid"),
}


def name_property(typ: str) -> str | None:
    entry = NAME_PROPERTIES.get(typ)
    return entry[0] if entry else None


def default_name(typ: str, urn: str, logical_name: str) -> str | None:
    """The name azure-native would give a resource of `typ` declared without one, with the randomness
    replaced by a digest of the URN."""
    entry = NAME_PROPERTIES.get(typ)
    if entry is None:
        return None
    digest = hashlib.sha256(urn.encode()).hexdigest()
    if entry[1] == "uuid":
        return str(uuid.UUID(digest[:32]))
    return logical_name + digest[:RANDOM_HEX_CHARS]


def autoname(typ: str, urn: str, logical_name: str, inputs: dict[str, Any]) -> tuple[str, str] | None:
    """(property, name) to add to `inputs`, or None when the program named the resource or the type is unknown."""
    prop = name_property(typ)
    if prop is None or inputs.get(prop) not in (None, ""):
        return None
    name = default_name(typ, urn, logical_name)
    return (prop, name) if name is not None else None
