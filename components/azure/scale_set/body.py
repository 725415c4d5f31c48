"""One node scale set's body from its plan (`scale_set`): the boot document as customData, the NICs and their IP
configurations, the OS disk, security profile, identities and, in a rack pool, the interconnect placement. NodePool
(pool.py) declares one per planned scale set."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.node_images import ImageIds
from gpucluster.azure.scale_set.join import NodeJoin
from gpucluster.azure.scale_set.resource import NodeScaleSet
from gpucluster.azure.scope import AzureScope
from gpucluster.bootstrap.from_plan import join_bootstrap
from gpucluster.bootstrap.node import render_cloud_init
from gpucluster.bootstrap.registry import RegistryBoot
from gpucluster.planning.node_template import scale_set_tags
from gpucluster.planning.placement import PoolPlan, ScaleSetPlan
from gpucluster.planning.pod_addresses import PREFIX_LENGTH, node_addressing
from gpucluster.policies.rules.replacements import acknowledges


@dataclass(frozen=True)
class NodeAccess:
    admin_username: str
    ssh_public_keys: list[pulumi.Input[str]]


def gallery_image(version_id: pulumi.Input[str]) -> azure.compute.ImageReferenceArgs:
    """A version of one of the cluster's own gallery images (components/azure/node_images.py)."""
    return azure.compute.ImageReferenceArgs(id=version_id)


def linux_configuration(access: NodeAccess) -> azure.compute.LinuxConfigurationArgs:
    """SSH keys only, no passwords: the same for every machine of the cluster."""
    return azure.compute.LinuxConfigurationArgs(
        disable_password_authentication=True,
        ssh=azure.compute.SshConfigurationArgs(public_keys=[
            azure.compute.SshPublicKeyArgs(path=f"/home/{access.admin_username}/.ssh/authorized_keys", key_data=key)
            for key in access.ssh_public_keys]))


def _custom_data(scale_set: ScaleSetPlan, join: NodeJoin) -> pulumi.Output[str]:
    node, cluster, registry = join.nodes[scale_set.name], join.cluster, join.registry

    def render(args: list[str]) -> str:
        token, ca_hash, client_id, tenant = args
        text = render_cloud_init(join_bootstrap(cluster.facts, node, token, ca_hash,
                                                RegistryBoot(registry.login_server, registry.mirrors, client_id, tenant)))
        return base64.b64encode(text.encode()).decode()

    return pulumi.Output.secret(pulumi.Output.all(cluster.bootstrap_token, cluster.ca_cert_hash,
                                                  registry.pull_client_id, registry.tenant_id).apply(render))


# A node scale set's inputs are written as plain dicts under azure-native's wire names (the `pulumi.getter` names
# of its `*Args` classes, e.g. `diskSizeGB`, `privateIPAddressVersion`, `vTpmEnabled`), absent where the typed
# class would leave a field unset, enums as their values: the provider receives the same dict either way
# (tests/test_scale_set_inputs.py), and pulumi's serializer does not walk the classes' type annotations for
# each of them (docs/performance.md).


def _linux_configuration(access: NodeAccess) -> dict[str, Any]:
    """`linux_configuration` as the provider receives it."""
    return {"disablePasswordAuthentication": True, "ssh": {"publicKeys": [
        {"path": f"/home/{access.admin_username}/.ssh/authorized_keys", "keyData": key}
        for key in access.ssh_public_keys]}}


def _os_disk(pool: PoolPlan, disk_encryption_set_id: pulumi.Input[str] | None) -> dict[str, Any]:
    size = {"createOption": "FromImage", "diskSizeGB": pool.spec.os_disk_gib}
    if pool.confidential is not None:
        # The managed disk's security profile holds the VM guest state (vTPM, firmware), encrypted.
        security: dict[str, Any] = {"securityEncryptionType": pool.confidential.os_disk_encryption}
        if disk_encryption_set_id:
            security["diskEncryptionSet"] = {"id": disk_encryption_set_id}
        return {**size, "caching": "ReadWrite",
                "managedDisk": {"storageAccountType": "Premium_LRS", "securityProfile": security}}
    if pool.ephemeral_os_disk:
        # Ephemeral OS disk on the resource disk: no remote OS-disk IO, reimage is fast.
        return {**size, "caching": "ReadOnly", "diffDiskSettings": {"option": "Local", "placement": "ResourceDisk"}}
    return {**size, "caching": "ReadWrite", "managedDisk": {"storageAccountType": "Premium_LRS"}}


def _ip_configurations(pool: PoolPlan, subnet_id: pulumi.Input[str]) -> list[dict[str, Any]]:
    """Primary address for the node, then one secondary per pod ("alias-based" pod IPs, no overlay), or in
    prefix mode one IP configuration per /28 block (components/planning/pod_addresses.py)."""
    def config(name: str, primary: bool) -> dict[str, Any]:
        return {"name": name, "primary": primary, "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet_id}}

    configs = [config("node", True)]
    addressing = node_addressing(pool.spec)
    if addressing.prefix_mode:
        # Microsoft.Compute carries privateIPAddressPrefixLength on scale-set IP configurations from API
        # 2026-07-02 (components/azure/scale_set/routes.py); NodeScaleSet sends it at that version.
        return configs + [{**config(f"podblock{i:02d}", False), "privateIPAddressPrefixLength": PREFIX_LENGTH}
                          for i in range(1, addressing.blocks + 1)]
    return configs + [config(f"pod{i:03d}", False) for i in range(1, pool.spec.pods_per_node + 1)]


def _security_profile(pool: PoolPlan) -> dict[str, Any] | None:
    if pool.confidential is None:
        return None
    return {"securityType": pool.confidential.security_type,
            "uefiSettings": {"secureBootEnabled": pool.confidential.secure_boot, "vTpmEnabled": pool.confidential.vtpm}}


def _identity(identity_ids: list[pulumi.Input[str]] | None) -> dict[str, Any]:
    if identity_ids:
        return {"type": "SystemAssigned, UserAssigned", "userAssignedIdentities": identity_ids}
    return {"type": "SystemAssigned"}


@dataclass(frozen=True)
class RackRefs:
    """A rack scale set's interconnect group and block (Azure ids)."""

    group_id: pulumi.Input[str]
    block_id: pulumi.Input[str]


def interconnect_name(pool: str, group: str) -> str:
    """The interconnect group's and its block's Azure name."""
    return f"{pool}-{group}"


def _rack_profile(vm: dict[str, Any], nics: list[Any], plan: ScaleSetPlan, rack: RackRefs) -> dict[str, Any]:
    """The VM profile with the interconnect profiles, which azure-native's args lack: written in the declared
    (flattened) shape by their wire names, as azure-mgmt-compute 39.0.0's models carry them
    (`VirtualMachineScaleSetVMProfile.interconnect_block_profile`, `VirtualMachineScaleSetNetworkProfile.
    interconnect_group_profile`). The subgroup is the one the stack names for the rack (`racks.groups[].subgroups`)."""
    assert plan.rack is not None
    subgroup = pulumi.Output.concat(rack.group_id, f"/subgroups/{plan.rack.subgroup_name}")
    return {
        **vm,
        "networkProfile": {
            "networkInterfaceConfigurations": nics,
            "interconnectGroupProfile": {"interconnectGroup": {"id": rack.group_id}, "subgroups": [{"id": subgroup}]},
        },
        "interconnectBlockProfile": {"interconnectBlock": {"id": rack.block_id}},
    }


@dataclass(frozen=True)
class ScaleSetArgs:
    """What one node scale set is built from."""

    scope: AzureScope
    """Where it goes (resource group, region, subscription) and the cluster its tags name."""
    pool: PoolPlan
    """The pool it belongs to: size, priority, disks, NICs, confidential and rack settings."""
    plan: ScaleSetPlan
    """This scale set's name, zone, first capacity and placement (one InfiniBand domain or rack)."""
    minimum: int
    """Its share of the pool's minimum node count (the autoscaler's min-size tag)."""
    subnet_id: pulumi.Input[str]
    """The pool's subnet: the node address and every pod address or /28 block come from it."""
    join: NodeJoin
    """Where and how its nodes join the cluster (the boot document's inputs)."""
    access: NodeAccess
    """The admin user and SSH keys of its machines."""
    images: ImageIds
    """The cluster's gallery image versions; it boots the one the plan names for it."""
    disk_encryption_set_id: pulumi.Input[str] | None = None
    """A confidential pool's customer-key disk encryption set; None: platform-managed keys."""
    identity_ids: tuple[pulumi.Input[str], ...] = ()
    """User-assigned identities its VMs carry (the registry pull identity, add-on identities on the system pool);
    empty: a system-assigned identity only."""
    rack: RackRefs | None = None
    """A rack scale set's interconnect group and block; None for every other pool."""
    acknowledged_domains: tuple[str, ...] = ()
    """The stack's acknowledgeDeletions.infinibandDomains (names or patterns): a scale set they name may be replaced
    alongside other domains of its pool (components/azure/scale_set/replacement_guard.py)."""


def scale_set(args: ScaleSetArgs, opts: pulumi.ResourceOptions) -> NodeScaleSet:
    """One zonal node scale set through the capacity-free route: its inputs are azure-native's
    VirtualMachineScaleSet inputs, sent by Microsoft's SDK at Microsoft.Compute SCALE_SET_API_VERSION."""
    scope, pool, plan, minimum, subnet_id = args.scope, args.pool, args.plan, args.minimum, args.subnet_id
    join, access, images, rack = args.join, args.access, args.images, args.rack
    disk_encryption_set_id, identity_ids = args.disk_encryption_set_id, list(args.identity_ids)
    spec = pool.spec
    tags = scale_set_tags(scope.cluster, pool, plan, minimum, scope.location)
    spot = spec.priority == "spot"
    nics = [{"name": "nic0", "primary": True, "enableAcceleratedNetworking": pool.accelerated_networking,
             "ipConfigurations": _ip_configurations(pool, subnet_id)}]
    os_profile = {"computerNamePrefix": plan.name, "adminUsername": access.admin_username,
                  "customData": _custom_data(plan, join), "linuxConfiguration": _linux_configuration(access)}
    storage_profile = {"imageReference": {"id": images.of(join.images[plan.name])},
                       "osDisk": _os_disk(pool, disk_encryption_set_id)}
    vm_profile: dict[str, Any] = {"priority": "Spot" if spot else "Regular"}
    if spot:
        vm_profile |= {"evictionPolicy": "Delete", "billingProfile": {"maxPrice": -1}}
    if (security := _security_profile(pool)) is not None:
        vm_profile["securityProfile"] = security
    vm_profile |= {"osProfile": os_profile, "storageProfile": storage_profile,
                   "networkProfile": {"networkInterfaceConfigurations": nics}}
    inputs: dict[str, Any] = {
        "vmScaleSetName": plan.name,
        "resourceGroupName": scope.resource_group_name,
        "location": scope.location,
        "zones": [plan.zone],
        # The first size: the create sends it; an update never sends sku (capacity is the autoscaler's).
        "sku": {"name": pool.size.name, "tier": "Standard", "capacity": plan.capacity},
        "orchestrationMode": "Uniform",
        "singlePlacementGroup": plan.single_placement_group,
        "platformFaultDomainCount": plan.platform_fault_domain_count,
        "overprovision": False,
        "upgradePolicy": {"mode": "Manual"},
        "identity": _identity(identity_ids),
        "virtualMachineProfile": vm_profile,
        "tags": tags,
    }
    if rack is not None:
        # A rack is regular capacity held in its interconnect block, never spot or confidential (the planner
        # refuses both): the profile carries every node's OS and storage profiles plus the interconnect profiles.
        inputs["virtualMachineProfile"] = _rack_profile(
            {"priority": "Regular", "osProfile": os_profile, "storageProfile": storage_profile}, nics, plan, rack)
        assert spec.racks is not None
        # Create-only (absent from the SDK's update model: azure/scale_set/routes.py CREATE_ONLY_PATHS), so a change
        # replaces the rack's scale set; Trunk by default, as Microsoft's interconnect-block example sends.
        inputs["highSpeedInterconnectPlacement"] = spec.racks.high_speed_interconnect_placement
    # The provider never diffs or sends sku.capacity; ignoring it here also keeps a changed plan size out of
    # the engine's diff (the value in the state stays the create's).
    acknowledged = acknowledges(args.acknowledged_domains, plan.name)
    # An InfiniBand domain or a rack is deleted only when the stack says so: Pulumi's `protect` refuses the delete
    # under the engine (a domain the program no longer declares keeps the flag of its last `up`), lifted by naming it
    # in acknowledgeDeletions.infinibandDomains (docs/operations.md, "Acknowledging a deletion").
    protect = (plan.infiniband or plan.rack is not None) and not acknowledged
    return NodeScaleSet(plan.name, scope.subscription_id, inputs,
                        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                            ignore_changes=["sku.capacity"], protect=protect)),
                        replacement_acknowledged=acknowledged)
