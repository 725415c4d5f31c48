"""What Microsoft.Compute's scale-set update model carries at the api-version the node scale sets are sent at.

Read in Azure/azure-rest-api-specs at commit fd0a0943c19677fe1578a6382ca87c0fb927e40c,
`specification/compute/resource-manager/Microsoft.Compute/Compute/stable/2026-07-02/ComputeRP.json`, definitions
`VirtualMachineScaleSetUpdate` through `VirtualMachineScaleSetUpdateVMProfile` (TypeSpec-generated swagger; the
repository is too large to fetch here, so the definitions were read in the public code index and their property
names are copied below). Each definition maps a property to the update definition it nests, or None for a value or
a model the create and update bodies share (ImageReference, LinuxConfiguration, ...). Envelopes marked
`x-ms-client-flatten` (`properties`) are merged into their parent, as the declared inputs flatten them.
`tags` comes from `allOf: UpdateResource`.

components/azure/scale_set/routes.py derives CREATE_ONLY_PATHS from this table and the create model, so the replace
table follows the version we send, not azure-mgmt-compute 39.0.0's update model (its operations default to
2026-04-01).
"""

from __future__ import annotations

UPDATE_SCHEMA_API_VERSION = "2026-07-02"
UPDATE_SCHEMA_SOURCE = ("Azure/azure-rest-api-specs fd0a0943c19677fe1578a6382ca87c0fb927e40c specification/compute/"
                        "resource-manager/Microsoft.Compute/Compute/stable/2026-07-02/ComputeRP.json")

ROOT = "VirtualMachineScaleSetUpdate"

UPDATE_DEFINITIONS: dict[str, dict[str, str | None]] = {
    "VirtualMachineScaleSetUpdate": {
        "sku": None, "plan": None, "identity": None, "zones": None, "placement": None, "tags": None,
        # VirtualMachineScaleSetUpdateProperties, flattened
        "upgradePolicy": None, "automaticRepairsPolicy": None,
        "virtualMachineProfile": "VirtualMachineScaleSetUpdateVMProfile", "overprovision": None,
        "doNotRunExtensionsOnOverprovisionedVMs": None, "singlePlacementGroup": None, "additionalCapabilities": None,
        "scaleInPolicy": None, "proximityPlacementGroup": None, "priorityMixPolicy": None, "spotRestorePolicy": None,
        "resiliencyPolicy": None, "zonalPlatformFaultDomainAlignMode": None, "skuProfile": None,
        "lifecycleHooksProfile": None,
    },
    "VirtualMachineScaleSetUpdateVMProfile": {
        "osProfile": "VirtualMachineScaleSetUpdateOSProfile",
        "storageProfile": "VirtualMachineScaleSetUpdateStorageProfile",
        "networkProfile": "VirtualMachineScaleSetUpdateNetworkProfile",
        "securityPostureReference": None, "securityProfile": None, "diagnosticsProfile": None,
        "extensionProfile": None, "licenseType": None, "billingProfile": None, "scheduledEventsProfile": None,
        "userData": None, "hardwareProfile": None, "interconnectBlockProfile": None,
    },
    "VirtualMachineScaleSetUpdateOSProfile": {
        "customData": None, "windowsConfiguration": None, "linuxConfiguration": None, "secrets": None,
    },
    "VirtualMachineScaleSetUpdateStorageProfile": {
        "imageReference": None, "osDisk": "VirtualMachineScaleSetUpdateOSDisk", "dataDisks": None,
        "diskControllerType": None,
    },
    "VirtualMachineScaleSetUpdateOSDisk": {
        "caching": None, "writeAcceleratorEnabled": None, "diffDiskSettings": None, "diskSizeGB": None,
        "storageFaultDomainAlignment": None, "image": None, "vhdContainers": None, "managedDisk": None,
        "deleteOption": None,
    },
    "VirtualMachineScaleSetUpdateNetworkProfile": {
        "healthProbe": None, "networkInterfaceConfigurations": "VirtualMachineScaleSetUpdateNetworkConfiguration",
        "networkApiVersion": None, "interconnectGroupProfile": None,
    },
    "VirtualMachineScaleSetUpdateNetworkConfiguration": {
        "name": None, "tags": None,
        # VirtualMachineScaleSetUpdateNetworkConfigurationProperties, flattened
        "primary": None, "enableAcceleratedNetworking": None, "disableTcpStateTracking": None, "enableFpga": None,
        "networkSecurityGroup": None, "dnsSettings": None,
        "ipConfigurations": "VirtualMachineScaleSetUpdateIPConfiguration", "enableIPForwarding": None,
        "deleteOption": None, "auxiliaryMode": None, "auxiliarySku": None,
    },
    "VirtualMachineScaleSetUpdateIPConfiguration": {
        "name": None,
        # VirtualMachineScaleSetUpdateIPConfigurationProperties, flattened
        "subnet": None, "primary": None,
        "publicIPAddressConfiguration": "VirtualMachineScaleSetUpdatePublicIPAddressConfiguration",
        "privateIPAddressVersion": None, "privateIPAddressPrefixLength": None,
        "applicationGatewayBackendAddressPools": None, "applicationSecurityGroups": None,
        "loadBalancerBackendAddressPools": None, "loadBalancerInboundNatPools": None,
    },
    "VirtualMachineScaleSetUpdatePublicIPAddressConfiguration": {
        "name": None, "tags": None,
        # VirtualMachineScaleSetUpdatePublicIPAddressConfigurationProperties, flattened
        "idleTimeoutInMinutes": None, "dnsSettings": None, "publicIPPrefix": None, "deleteOption": None,
    },
}
