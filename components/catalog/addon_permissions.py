"""What each in-cluster add-on calls on Azure, and so the least privilege its identity needs.

Each action below is what one of the add-on's ARM requests needs (components/catalog/arm_operations.py lists the
requests, read from each add-on's source at the version the cluster runs, and derives each action from the request's
method and path), or a linked access check one of its writes triggers. tests/test_addon_roles.py checks both ways
against Azure's operations list (MicrosoftDocs/azure-docs `articles/role-based-access-control/permissions/`, rows
vendored in tests/data/azure_rbac_operations.md): every request's action exists there and is granted, and every
granted action is some request's.
- cloud-provider-azure's cloud-controller-manager, cloud-node-lifecycle controller only, read at
  kubernetes-sigs/cloud-provider-azure v1.36.5 (`pkg/provider/`): with vmType vmss and
  `disableAvailabilitySetNodes` it lists the group's scale sets (`azure_vmss_cache.go`,
  VirtualMachineScaleSetClient.List) and a scale set's VMs with their instance view (`azure_vmss.go`,
  VirtualMachineScaleSetVMClient.List/ListVMInstanceView) to tell whether a node's VM exists and is running. Read
  only: the Node objects it deletes are Kubernetes', not Azure's.

- Cilium's Azure IPAM operator (secondary IPs; prod's /28 blocks run Cilium with `ipam: crd`, calling nothing):
  lists the group's scale sets, every scale set's NICs (`GET .../virtualMachineScaleSets/{vmss}/networkInterfaces`:
  `Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read`, not the per-VM action), one VM's NICs on a
  per-instance resync, the group's NICs and each subnet in use, and gets and updates (a full-body PUT) a scale-set
  VM to add IP configurations. Since cilium PR #41555 it no longer lists the subscription's virtual networks, so
  nothing is granted at subscription scope.
- cluster-autoscaler 1.36.1 with `ARM_VM_TYPE=vmss`: lists scale sets and VMs of the group, gets a scale set,
  writes its `sku.capacity` (a sparse PUT), lists its VMs with their instance view and deletes instances.
- the prefix IPAM controller: one NIC list per scale set.
- the rollout controller: reads each node scale set's model and instances, upgrades and re-images the behind ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["resourceGroup", "network", "subscription", "gallery"]
"""The cluster's resource group, the VNet its subnets are in (the cluster's own, in its resource group, or
`network.existingVnet`), the subscription, or the cluster's Compute Gallery."""

_CILIUM = "cilium pkg/azure/api/api.go"
_CA = "kubernetes/autoscaler cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/azure/"
_SUBNET_JOIN = "linked access check on the pool subnet (azure-docs virtual-network-manage-subnet.md, permissions)"
_VMSS_NICS = "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read"
_GALLERY_READ = ("linked access check of every write to a scale set or its VMs on the gallery image version it boots "
                 "(Azure/aad-pod-identity#752, Azure/azure-cli#15594)")


@dataclass(frozen=True)
class Permission:
    action: str
    scope: Scope
    call: str
    """The add-on's API call that needs the action, where its source makes it."""


CNI: tuple[Permission, ...] = (
    Permission("Microsoft.Compute/virtualMachineScaleSets/read", "resourceGroup",
               f"VirtualMachineScaleSets.List ({_CILIUM} listVirtualMachineScaleSets)"),
    Permission(_VMSS_NICS, "resourceGroup",
               f"Interfaces.ListVirtualMachineScaleSetNetworkInterfaces ({_CILIUM}), every full resync"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read", "resourceGroup",
               f"Interfaces.ListVirtualMachineScaleSetVMNetworkInterfaces ({_CILIUM}), each per-instance resync"),
    Permission("Microsoft.Network/networkInterfaces/read", "resourceGroup",
               f"Interfaces.List ({_CILIUM} vmNetworkInterfaces)"),
    Permission("Microsoft.Network/virtualNetworks/subnets/read", "network",
               f"Subnets.Get per subnet in use ({_CILIUM} GetSubnetsByIDs)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read", "resourceGroup",
               f"VirtualMachineScaleSetVMs.Get ({_CILIUM} AssignPrivateIpAddressesVMSS)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write", "resourceGroup",
               f"VirtualMachineScaleSetVMs.BeginUpdate ({_CILIUM} AssignPrivateIpAddressesVMSS)"),
    Permission("Microsoft.Network/virtualNetworks/subnets/join/action", "network",
               f"new IP configurations in the pool subnet: {_SUBNET_JOIN}"),
    Permission("Microsoft.ManagedIdentity/userAssignedIdentities/assign/action", "resourceGroup",
               "the VM update re-sends the user-assigned identities the system pool's VMs carry (linked check)"),
    Permission("Microsoft.Compute/galleries/images/versions/read", "gallery",
               f"VirtualMachineScaleSetVMs.BeginUpdate: {_GALLERY_READ}"),
)

AUTOSCALER: tuple[Permission, ...] = (
    Permission("Microsoft.Compute/virtualMachineScaleSets/read", "resourceGroup",
               f"VirtualMachineScaleSets.List/Get ({_CA}azure_cache.go fetchScaleSets, azure_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/write", "resourceGroup",
               f"VirtualMachineScaleSets.BeginCreateOrUpdate of sku.capacity ({_CA}azure_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/delete/action", "resourceGroup",
               f"VirtualMachineScaleSets.BeginDeleteInstances ({_CA}azure_force_delete_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read", "resourceGroup",
               f"VirtualMachineScaleSetVMs.ListVMInstanceView ({_CA}azure_scale_set.go)"),
    Permission("Microsoft.Compute/virtualMachines/read", "resourceGroup",
               f"VirtualMachines.List ({_CA}azure_cache.go fetchVirtualMachines, always called)"),
    Permission("Microsoft.Network/virtualNetworks/subnets/join/action", "network",
               f"scale-out creates NICs in the pool subnet: {_SUBNET_JOIN}"),
    Permission("Microsoft.ManagedIdentity/userAssignedIdentities/assign/action", "resourceGroup",
               "scale-out of the system pool assigns the add-on identities it carries to the new VMs"),
    Permission("Microsoft.Compute/galleries/images/versions/read", "gallery",
               f"VirtualMachineScaleSets.BeginCreateOrUpdate of sku.capacity: {_GALLERY_READ}"),
)

_CCM = "kubernetes-sigs/cloud-provider-azure v1.36.5 pkg/provider/"

NODE_LIFECYCLE: tuple[Permission, ...] = (
    Permission("Microsoft.Compute/virtualMachineScaleSets/read", "resourceGroup",
               f"VirtualMachineScaleSetClient.List ({_CCM}azure_vmss_cache.go)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read", "resourceGroup",
               f"VirtualMachineScaleSetVMClient.List/ListVMInstanceView ({_CCM}azure_vmss.go): InstanceExists, "
               "InstanceShutdown"),
)

_PREFIX_IPAM = "agents/prefix_ipam.py"

PREFIX_IPAM: tuple[Permission, ...] = (
    # Microsoft.Network NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces: the scale-set-wide NIC list.
    Permission(_VMSS_NICS, "resourceGroup", f"ListVirtualMachineScaleSetNetworkInterfaces, one per scale set ({_PREFIX_IPAM})"),
)

_ROLLOUT = "agents/rollout_arm.py"

ROLLOUT: tuple[Permission, ...] = (
    # Read what each instance runs against its scale set's model, bring the behind ones to it and re-image them;
    # nothing that changes a model, capacity or network.
    Permission("Microsoft.Compute/virtualMachineScaleSets/read", "resourceGroup",
               f"VirtualMachineScaleSets.Get, the model's image, once per scale set of a wave ({_ROLLOUT} "
               "Arm.model_image)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read", "resourceGroup",
               f"VirtualMachineScaleSetVMs.List with $expand=instanceView: latestModelApplied, image and provisioning "
               f"state per instance ({_ROLLOUT} Arm.instances)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/manualUpgrade/action", "resourceGroup",
               f"VirtualMachineScaleSets.ManualUpgrade of the behind instances ({_ROLLOUT} Arm.upgrade)"),
    Permission("Microsoft.Compute/virtualMachineScaleSets/reimage/action", "resourceGroup",
               f"VirtualMachineScaleSets.Reimage of the instances whose image the model keeps ({_ROLLOUT} Arm.reimage)"),
)

ADDON_PERMISSIONS: dict[str, tuple[Permission, ...]] = {"autoscaler": AUTOSCALER, "cni": CNI,
                                                        "prefix-ipam": PREFIX_IPAM,
                                                        "node-lifecycle": NODE_LIFECYCLE, "rollout": ROLLOUT}


def addons_for(prefix_mode: bool) -> tuple[str, ...]:
    """The add-ons that call Azure in a cluster: Cilium's Azure IPAM with secondary IPs; with /28 blocks Cilium runs
    `ipam: crd` and calls nothing, and the prefix IPAM controller reads the NICs instead."""
    return (("autoscaler", "node-lifecycle", "prefix-ipam", "rollout") if prefix_mode
            else ("autoscaler", "node-lifecycle", "cni", "rollout"))


def actions(permissions: tuple[Permission, ...], scope: Scope) -> list[str]:
    return sorted({p.action for p in permissions if p.scope == scope})
