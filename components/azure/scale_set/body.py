"""NodePool: one Uniform scale set per planned scale set (InfiniBand domain), each in one zone."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_azure_native as azure

from components.azure.node_images import ImageIds
from components.azure.scale_set.replacement_guard import acknowledged
from components.azure.scale_set.resource import NodeScaleSet
from components.azure.scope import AzureScope
from components.bootstrap.from_plan import PullIdentity, node_bootstrap
from components.bootstrap.node import render_cloud_init
from components.planning.cluster_plan import ClusterPlan
from components.planning.node_template import scale_set_tags
from components.planning.placement import PoolPlan, ScaleSetPlan
from components.planning.pod_addresses import PREFIX_LENGTH, node_addressing


@dataclass(frozen=True)
class NodeJoin:
    """Where and how nodes join: the plan (endpoint, version, DNS) and the control plane's token and CA hash."""

    plan: ClusterPlan
    bootstrap_token: pulumi.Output[str]
    ca_cert_hash: pulumi.Output[str]
    pull_client_id: pulumi.Output[str]
    """The registry pull identity every node carries (kubelet's acr-credential-provider uses it)."""
    tenant_id: pulumi.Output[str]


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


def _custom_data(pool: PoolPlan, scale_set: ScaleSetPlan, join: NodeJoin) -> pulumi.Output[str]:
    def render(args: list[str]) -> str:
        token, ca_hash, client_id, tenant = args
        text = render_cloud_init(node_bootstrap(join.plan, pool, scale_set, token, ca_hash,
                                                PullIdentity(client_id, tenant)))
        return base64.b64encode(text.encode()).decode()

    return pulumi.Output.secret(pulumi.Output.all(join.bootstrap_token, join.ca_cert_hash, join.pull_client_id,
                                                  join.tenant_id).apply(render))


def _os_disk(pool: PoolPlan,
             disk_encryption_set_id: pulumi.Input[str] | None) -> azure.compute.VirtualMachineScaleSetOSDiskArgs:
    if pool.confidential is not None:
        # The managed disk's security profile holds the VM guest state (vTPM, firmware), encrypted.
        des = azure.compute.DiskEncryptionSetParametersArgs(id=disk_encryption_set_id) if disk_encryption_set_id else None
        return azure.compute.VirtualMachineScaleSetOSDiskArgs(
            create_option="FromImage", caching=azure.compute.CachingTypes.READ_WRITE, disk_size_gb=pool.spec.os_disk_gib,
            managed_disk=azure.compute.VirtualMachineScaleSetManagedDiskParametersArgs(
                storage_account_type="Premium_LRS",
                security_profile=azure.compute.VMDiskSecurityProfileArgs(
                    security_encryption_type=pool.confidential.os_disk_encryption, disk_encryption_set=des)))
    if pool.ephemeral_os_disk:
        # Ephemeral OS disk on the resource disk: no remote OS-disk IO, reimage is fast.
        return azure.compute.VirtualMachineScaleSetOSDiskArgs(
            create_option="FromImage", caching=azure.compute.CachingTypes.READ_ONLY, disk_size_gb=pool.spec.os_disk_gib,
            diff_disk_settings=azure.compute.DiffDiskSettingsArgs(option="Local", placement="ResourceDisk"))
    return azure.compute.VirtualMachineScaleSetOSDiskArgs(
        create_option="FromImage", caching=azure.compute.CachingTypes.READ_WRITE, disk_size_gb=pool.spec.os_disk_gib,
        managed_disk=azure.compute.VirtualMachineScaleSetManagedDiskParametersArgs(
            storage_account_type="Premium_LRS"))


def _ip_configurations(pool: PoolPlan, subnet_id: pulumi.Input[str]) -> list[Any]:
    """Primary address for the node, then one secondary per pod ("alias-based" pod IPs, no overlay), or in
    prefix mode one IP configuration per /28 block (components/planning/pod_addresses.py)."""
    subnet = azure.compute.ApiEntityReferenceArgs(id=subnet_id)
    configs: list[Any] = [azure.compute.VirtualMachineScaleSetIPConfigurationArgs(
        name="node", primary=True, private_ip_address_version="IPv4", subnet=subnet)]
    addressing = node_addressing(pool.spec)
    if addressing.prefix_mode:
        # Microsoft.Compute carries privateIPAddressPrefixLength on scale-set IP configurations from API
        # 2026-07-02 (components/azure/scale_set/routes.py); NodeScaleSet sends it at that version, so it is written
        # in the declared (flattened) shape by its wire name.
        configs += [{"name": f"podblock{i:02d}", "primary": False, "privateIPAddressVersion": "IPv4",
                     "privateIPAddressPrefixLength": PREFIX_LENGTH, "subnet": {"id": subnet_id}}
                    for i in range(1, addressing.blocks + 1)]
        return configs
    configs += [azure.compute.VirtualMachineScaleSetIPConfigurationArgs(
        name=f"pod{i:03d}", primary=False, private_ip_address_version="IPv4", subnet=subnet)
        for i in range(1, pool.spec.pods_per_node + 1)]
    return configs


def _security_profile(pool: PoolPlan) -> azure.compute.SecurityProfileArgs | None:
    if pool.confidential is None:
        return None
    return azure.compute.SecurityProfileArgs(
        security_type=pool.confidential.security_type,
        uefi_settings=azure.compute.UefiSettingsArgs(secure_boot_enabled=pool.confidential.secure_boot,
                                                     v_tpm_enabled=pool.confidential.vtpm))


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
    nics = [azure.compute.VirtualMachineScaleSetNetworkConfigurationArgs(
        name="nic0", primary=True, enable_accelerated_networking=pool.accelerated_networking,
        ip_configurations=_ip_configurations(pool, subnet_id))]
    os_profile = azure.compute.VirtualMachineScaleSetOSProfileArgs(
        computer_name_prefix=plan.name, admin_username=access.admin_username,
        custom_data=_custom_data(pool, plan, join), linux_configuration=linux_configuration(access))
    storage_profile = azure.compute.VirtualMachineScaleSetStorageProfileArgs(
        image_reference=gallery_image(images.of(join.plan.images.machines[plan.name])),
        os_disk=_os_disk(pool, disk_encryption_set_id))
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
        "upgradePolicy": azure.compute.UpgradePolicyArgs(mode=azure.compute.UpgradeMode.MANUAL),
        "identity": azure.compute.VirtualMachineScaleSetIdentityArgs(
            type=azure.compute.ResourceIdentityType.SYSTEM_ASSIGNED_USER_ASSIGNED,
            user_assigned_identities=identity_ids) if identity_ids else azure.compute.VirtualMachineScaleSetIdentityArgs(
            type=azure.compute.ResourceIdentityType.SYSTEM_ASSIGNED),
        "virtualMachineProfile": azure.compute.VirtualMachineScaleSetVMProfileArgs(
            priority="Spot" if spot else "Regular",
            eviction_policy="Delete" if spot else None,
            billing_profile=azure.compute.BillingProfileArgs(max_price=-1) if spot else None,
            security_profile=_security_profile(pool),
            os_profile=os_profile,
            storage_profile=storage_profile,
            network_profile=azure.compute.VirtualMachineScaleSetNetworkProfileArgs(
                network_interface_configurations=nics),
        ),
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
    return NodeScaleSet(plan.name, scope.subscription_id, inputs,
                        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=["sku.capacity"])),
                        replacement_acknowledged=acknowledged(plan.name, args.acknowledged_domains))
