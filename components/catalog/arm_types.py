"""The ARM resource id of every azure-native type the library declares, as a path template.

Each template is the resource's id as azure-native documents it for `pulumi import` (its resource docs, "Import"
section, generated from the Azure REST API specs' PUT paths): the provider namespace as Azure spells it
(`Microsoft.ManagedIdentity`, `Microsoft.KeyVault`), the resource provider's own plural (`publicIPPrefixes`,
`userAssignedIdentities`), child resources under their parents (a blob container is
`storageAccounts/{accountName}/blobServices/default/containers/{containerName}`), and extension resources under
their scope (`/{scope}/providers/Microsoft.Authorization/roleAssignments/...`). The placeholders are the type's
input names, so the offline engine fills them from a resource's inputs (components/offline/mock_values.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RG = "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}"
_DOCS = "pulumi-azure-native resource docs, Import section ({token})"
_LB_SPEC = ("Azure/azure-rest-api-specs specification/network/resource-manager/Microsoft.Network/stable/*/"
            "loadBalancer.json ({operation})")


@dataclass(frozen=True)
class ArmType:
    path: str
    source: str


def _row(token: str, path: str) -> tuple[str, ArmType]:
    return token, ArmType(path, _DOCS.format(token=token))


ARM_TYPES: dict[str, ArmType] = dict((
    _row("azure-native:resources:ResourceGroup", _RG),
    _row("azure-native:network:NetworkSecurityGroup",
         f"{_RG}/providers/Microsoft.Network/networkSecurityGroups/{{networkSecurityGroupName}}"),
    _row("azure-native:network:PublicIPPrefix", f"{_RG}/providers/Microsoft.Network/publicIPPrefixes/{{publicIpPrefixName}}"),
    _row("azure-native:network:NatGateway", f"{_RG}/providers/Microsoft.Network/natGateways/{{natGatewayName}}"),
    ("azure-native:compute:InterconnectBlock", ArmType(
        f"{_RG}/providers/Microsoft.Compute/interconnectBlocks/{{interconnectBlockName}}",
        "azure-mgmt-compute 39.0.0 operations/_operations.py build_interconnect_blocks_get_request; not an "
        "azure-native type yet, the dynamic resource components/azure/interconnect_block.py mirrors "
        "(azure-native:compute:InterconnectBlock)")),
    _row("azure-native:network:InterconnectGroup",
         f"{_RG}/providers/Microsoft.Network/interconnectGroups/{{interconnectGroupName}}"),
    _row("azure-native:network:VirtualNetwork", f"{_RG}/providers/Microsoft.Network/virtualNetworks/{{virtualNetworkName}}"),
    _row("azure-native:network:Subnet",
         f"{_RG}/providers/Microsoft.Network/virtualNetworks/{{virtualNetworkName}}/subnets/{{subnetName}}"),
    _row("azure-native:network:VirtualNetworkPeering",
         f"{_RG}/providers/Microsoft.Network/virtualNetworks/{{virtualNetworkName}}/virtualNetworkPeerings/"
         "{virtualNetworkPeeringName}"),
    _row("azure-native:network:LoadBalancer", f"{_RG}/providers/Microsoft.Network/loadBalancers/{{loadBalancerName}}"),
    _row("azure-native:network:NetworkInterface",
         f"{_RG}/providers/Microsoft.Network/networkInterfaces/{{networkInterfaceName}}"),
    _row("azure-native:storage:StorageAccount", f"{_RG}/providers/Microsoft.Storage/storageAccounts/{{accountName}}"),
    _row("azure-native:storage:BlobContainer",
         f"{_RG}/providers/Microsoft.Storage/storageAccounts/{{accountName}}/blobServices/default/containers/"
         "{containerName}"),
    _row("azure-native:compute:VirtualMachine", f"{_RG}/providers/Microsoft.Compute/virtualMachines/{{vmName}}"),
    _row("azure-native:compute:VirtualMachineScaleSet",
         f"{_RG}/providers/Microsoft.Compute/virtualMachineScaleSets/{{vmScaleSetName}}"),
    _row("azure-native:compute:DiskEncryptionSet",
         f"{_RG}/providers/Microsoft.Compute/diskEncryptionSets/{{diskEncryptionSetName}}"),
    _row("azure-native:keyvault:Vault", f"{_RG}/providers/Microsoft.KeyVault/vaults/{{vaultName}}"),
    _row("azure-native:keyvault:Key", f"{_RG}/providers/Microsoft.KeyVault/vaults/{{vaultName}}/keys/{{keyName}}"),
    _row("azure-native:managedidentity:UserAssignedIdentity",
         f"{_RG}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{{resourceName}}"),
    ("azure-native:monitor:AzureMonitorWorkspace", ArmType(
        f"{_RG}/providers/Microsoft.Monitor/accounts/{{azureMonitorWorkspaceName}}",
        "Azure/azure-rest-api-specs specification/monitor/resource-manager/Microsoft.Monitor/Accounts/stable/2023-04-03/"
        "monitoringAccounts_API.json, AzureMonitorWorkspaceResources_Create (azure-native:monitor:AzureMonitorWorkspace)")),
    _row("azure-native:monitor:ActionGroup", f"{_RG}/providers/Microsoft.Insights/actionGroups/{{actionGroupName}}"),
    ("azure-native:alertsmanagement:PrometheusRuleGroup", ArmType(
        f"{_RG}/providers/Microsoft.AlertsManagement/prometheusRuleGroups/{{ruleGroupName}}",
        "Azure/azure-rest-api-specs specification/alertsmanagement/resource-manager/Microsoft.AlertsManagement/"
        "PrometheusRuleGroups/stable/2023-03-01/PrometheusRuleGroups.json, PrometheusRuleGroups_CreateOrUpdate "
        "(azure-native:alertsmanagement:PrometheusRuleGroup)")),
    _row("azure-native:containerregistry:Registry",
         f"{_RG}/providers/Microsoft.ContainerRegistry/registries/{{registryName}}"),
    _row("azure-native:containerregistry:CacheRule",
         f"{_RG}/providers/Microsoft.ContainerRegistry/registries/{{registryName}}/cacheRules/{{cacheRuleName}}"),
    _row("azure-native:containerregistry:CredentialSet",
         f"{_RG}/providers/Microsoft.ContainerRegistry/registries/{{registryName}}/credentialSets/{{credentialSetName}}"),
    _row("azure-native:containerregistry:AgentPool",
         f"{_RG}/providers/Microsoft.ContainerRegistry/registries/{{registryName}}/agentPools/{{agentPoolName}}"),
    _row("azure-native:network:PrivateEndpoint",
         f"{_RG}/providers/Microsoft.Network/privateEndpoints/{{privateEndpointName}}"),
    _row("azure-native:network:PrivateDnsZoneGroup",
         f"{_RG}/providers/Microsoft.Network/privateEndpoints/{{privateEndpointName}}/privateDnsZoneGroups/"
         "{privateDnsZoneGroupName}"),
    _row("azure-native:privatedns:PrivateZone", f"{_RG}/providers/Microsoft.Network/privateDnsZones/{{privateZoneName}}"),
    _row("azure-native:privatedns:VirtualNetworkLink",
         f"{_RG}/providers/Microsoft.Network/privateDnsZones/{{privateZoneName}}/virtualNetworkLinks/"
         "{virtualNetworkLinkName}"),
    _row("azure-native:compute:Gallery", f"{_RG}/providers/Microsoft.Compute/galleries/{{galleryName}}"),
    _row("azure-native:compute:GalleryImage",
         f"{_RG}/providers/Microsoft.Compute/galleries/{{galleryName}}/images/{{galleryImageName}}"),
    _row("azure-native:virtualmachineimages:VirtualMachineImageTemplate",
         f"{_RG}/providers/Microsoft.VirtualMachineImages/imageTemplates/{{imageTemplateName}}"),
    _row("azure-native:authorization:RoleAssignment",
         "/{scope}/providers/Microsoft.Authorization/roleAssignments/{roleAssignmentName}"),
    _row("azure-native:authorization:RoleDefinition",
         "/{scope}/providers/Microsoft.Authorization/roleDefinitions/{roleDefinitionId}"),
))

SUB_RESOURCES: dict[str, ArmType] = {
    "subscription": ArmType("/subscriptions/{subscriptionId}", "ARM: a subscription's id, the scope of "
                            "subscription-wide role assignments"),
    "loadBalancerFrontendIPConfiguration": ArmType(
        f"{_RG}/providers/Microsoft.Network/loadBalancers/{{loadBalancerName}}/frontendIPConfigurations/"
        "{frontendIPConfigurationName}", _LB_SPEC.format(operation="LoadBalancerFrontendIPConfigurations_Get")),
    "loadBalancerBackendAddressPool": ArmType(
        f"{_RG}/providers/Microsoft.Network/loadBalancers/{{loadBalancerName}}/backendAddressPools/"
        "{backendAddressPoolName}", _LB_SPEC.format(operation="LoadBalancerBackendAddressPools_Get")),
    "galleryImageVersion": ArmType(
        f"{_RG}/providers/Microsoft.Compute/galleries/{{galleryName}}/images/{{galleryImageName}}/versions/"
        "{galleryImageVersionName}", "Azure/azure-rest-api-specs specification/compute/resource-manager/"
        "Microsoft.Compute/GalleryRP stable galleryImageVersion.json (GalleryImageVersions_Get): the version a "
        "machine's imageReference.id names, built by Image Builder rather than declared"),
    "dataCollectionRule": ArmType(
        f"{_RG}/providers/Microsoft.Insights/dataCollectionRules/{{dataCollectionRuleName}}",
        "pulumi-azure-native monitor get_data_collection_rule (Microsoft.Insights 2022-06-01): the metrics workspace's "
        "default rule (its defaultIngestionSettings), which Azure creates and the writer's role is scoped to"),
    "loadBalancerProbe": ArmType(f"{_RG}/providers/Microsoft.Network/loadBalancers/{{loadBalancerName}}/probes/{{probeName}}",
                                 _LB_SPEC.format(operation="LoadBalancerProbes_Get")),
}
"""Ids the program builds or references that are not resources of their own type: parts of a load balancer (which
azure-native declares inline), and a subscription as a role's scope."""


def id_pattern(path: str) -> re.Pattern[str]:
    """A template as a regex: `{scope}` spans segments, every other placeholder is one segment."""
    parts = re.split(r"(\{[^}]+\})", path)
    return re.compile("^" + "".join(
        ".+" if p == "{scope}" else "[^/]+" if p.startswith("{") else re.escape(p) for p in parts if p) + "$")
