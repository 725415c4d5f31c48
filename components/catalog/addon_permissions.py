"""What each in-cluster add-on calls on Azure, and so the least privilege its identity needs.

Derived from the add-ons' own source at the versions the cluster runs (components/catalog/in_cluster.py):
- Cilium's Azure IPAM operator (cilium `pkg/azure/api/api.go`, v1.18 line, read at commit 00ac069b): lists the
  resource group's scale sets, their VMs' NICs and the group's NICs, gets and updates a scale-set VM to add IP
  configurations, and lists every virtual network of the subscription (`VirtualNetworks.ListAll`, "lists all
  VPCs, not just those in c.resourcegroup"). It only touches standalone-VM NICs (`Interfaces.Get`,
  `Interfaces.CreateOrUpdate`) for nodes outside scale sets; every node here is in a scale set, so those
  writes are not granted.
- cluster-autoscaler with `ARM_VM_TYPE=vmss`, read at kubernetes/autoscaler tag cluster-autoscaler-1.34.0 and
  again at cluster-autoscaler-1.36.1, the version the cluster runs (`cluster-autoscaler/cloudprovider/azure/`):
  `azure_cache.go` lists scale sets and VMs of the group, `azure_scale_set.go` gets a scale set, writes its
  `sku.capacity`, lists its VMs and deletes instances. 1.36 makes the same ARM calls through the track-2 SDK
  (`BeginCreateOrUpdate`; `BeginDeleteInstances` in `azure_vmss_delete_client.go` and
  `azure_force_delete_scale_set.go`; `ListVMInstanceView`, the VM list with `$expand=instanceView`). SKU
  listing (`AZURE_ENABLE_DYNAMIC_INSTANCE_LIST`, off by default), deployments (vmType standard) and AKS agent
  pools are not used.
- cloud-provider-azure's cloud-controller-manager, cloud-node-lifecycle controller only, read at
  kubernetes-sigs/cloud-provider-azure v1.36.5 (`pkg/provider/`): with vmType vmss and
  `disableAvailabilitySetNodes` it lists the group's scale sets (`azure_vmss_cache.go`,
  VirtualMachineScaleSetClient.List) and a scale set's VMs with their instance view (`azure_vmss.go`,
  VirtualMachineScaleSetVMClient.List/ListVMInstanceView) to tell whether a node's VM exists and is running. Read
  only: the Node objects it deletes are Kubernetes', not Azure's.

Action names are Azure RBAC operations (Microsoft Learn "Azure resource provider operations"); the scale-set NIC
read is spelled as kubernetes-sigs/cloud-provider-azure `site/content/en/topics/azure-permissions.md` lists it.
A write that places NICs in a subnet (new scale-set VMs, new IP configurations) also passes ARM's linked access
check on the subnet (`Microsoft.Network/virtualNetworks/subnets/join/action`, azure-docs
`articles/virtual-network/virtual-network-manage-subnet.md`, permissions), and growing a scale set that carries
user-assigned identities assigns them to the new VMs
(`Microsoft.ManagedIdentity/userAssignedIdentities/assign/action`, the Managed Identity Operator role, azure-docs
`articles/active-directory/managed-identities-azure-resources/how-manage-user-assigned-managed-identities.md`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["resourceGroup", "subscription"]

_CILIUM = "cilium pkg/azure/api/api.go"
_CA = "kubernetes/autoscaler cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/azure/"
_SUBNET_JOIN = "linked access check on the subnet (azure-docs virtual-network-manage-subnet.md, permissions)"


@dataclass(frozen=True)
class Permission:
    action: str
    scope: Scope
    call: str
    """The add-on's API call that needs the action, where its source makes it."""


CNI: tuple[Permission, ...] = (
    Permission("Microsoft.Compute/virtualMachineScaleSets/read", "resourceGroup",
               f"VirtualMachineScaleSets.List ({_CILIUM}, listVirtualMachineScaleSets)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read", "resourceGroup",
               f"Interfaces.ListVirtualMachineScaleSetNetworkInterfaces ({_CILIUM})"),
    Permission("Microsoft.Network/networkInterfaces/read", "resourceGroup",
               f"Interfaces.List ({_CILIUM}, vmNetworkInterfaces)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read", "resourceGroup",
               f"VirtualMachineScaleSetVMs.Get ({_CILIUM}, AssignPrivateIpAddressesVMSS)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write", "resourceGroup",
               f"VirtualMachineScaleSetVMs.BeginUpdate ({_CILIUM}, AssignPrivateIpAddressesVMSS)"),
    Permission("Microsoft.Network/virtualNetworks/subnets/join/action", "resourceGroup",
               f"new IP configurations in the pool subnet: {_SUBNET_JOIN}"),
    Permission("Microsoft.Network/virtualNetworks/read", "subscription",
               f"VirtualNetworks.ListAll at subscription scope ({_CILIUM}, listAllVPCs)"),
)

AUTOSCALER: tuple[Permission, ...] = (
    Permission("Microsoft.Compute/virtualMachineScaleSets/read", "resourceGroup",
               f"VirtualMachineScaleSets.List/Get ({_CA}azure_cache.go fetchScaleSets, azure_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/write", "resourceGroup",
               f"VirtualMachineScaleSets.BeginCreateOrUpdate of sku.capacity ({_CA}azure_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/delete/action", "resourceGroup",
               f"VirtualMachineScaleSets.BeginDeleteInstances ({_CA}azure_force_delete_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read", "resourceGroup",
               f"VirtualMachineScaleSetVMs.List/ListVMInstanceView ({_CA}azure_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachines/read", "resourceGroup",
               f"VirtualMachines.List ({_CA}azure_cache.go fetchVirtualMachines, always called)"),
    Permission("Microsoft.Network/virtualNetworks/subnets/join/action", "resourceGroup",
               f"scale-out creates NICs in the pool subnet: {_SUBNET_JOIN}"),
    Permission("Microsoft.ManagedIdentity/userAssignedIdentities/assign/action", "resourceGroup",
               "scale-out of the system pool assigns the add-on identities it carries to the new VMs"),
)

_CCM = "kubernetes-sigs/cloud-provider-azure v1.36.5 pkg/provider/"

NODE_LIFECYCLE: tuple[Permission, ...] = (
    Permission("Microsoft.Compute/virtualMachineScaleSets/read", "resourceGroup",
               f"VirtualMachineScaleSetClient.List ({_CCM}azure_vmss_cache.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read", "resourceGroup",
               f"VirtualMachineScaleSetVMClient.List/ListVMInstanceView ({_CCM}azure_vmss.go): InstanceExists, "
               "InstanceShutdown"),
)

_PREFIX_IPAM = "components/kubernetes/scripts/prefix_ipam.py"

PREFIX_IPAM: tuple[Permission, ...] = (
    # The one ARM call the controller makes: Microsoft.Network NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces,
    # spelled as cloud-provider-azure's permission list spells the scale-set NIC read (as for Cilium above).
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read", "resourceGroup",
               f"ListVirtualMachineScaleSetNetworkInterfaces, one per scale set ({_PREFIX_IPAM})"),
)

ADDON_PERMISSIONS: dict[str, tuple[Permission, ...]] = {"autoscaler": AUTOSCALER, "cni": CNI,
                                                        "prefix-ipam": PREFIX_IPAM,
                                                        "node-lifecycle": NODE_LIFECYCLE}


def addons_for(prefix_mode: bool) -> tuple[str, ...]:
    """The add-ons that call Azure in a cluster: Cilium's Azure IPAM with secondary IPs; with /28 blocks Cilium runs
    `ipam: crd` and calls nothing, and the prefix IPAM controller reads the NICs instead."""
    return (("autoscaler", "node-lifecycle", "prefix-ipam") if prefix_mode
            else ("autoscaler", "node-lifecycle", "cni"))


def actions(permissions: tuple[Permission, ...], scope: Scope) -> list[str]:
    return sorted({p.action for p in permissions if p.scope == scope})
