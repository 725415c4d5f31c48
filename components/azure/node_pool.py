"""NodePool: one Uniform scale set per planned scale set (InfiniBand domain), each in one zone."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_azure_native as azure

from components.azure.confidential_key import ConfidentialDiskKey
from components.azure.interconnect_block import InterconnectBlock
from components.azure.network import NetworkRefs
from components.azure.node_images import ImageIds
from components.azure.node_scale_set import NodeScaleSet
from components.azure.replacement_guard import acknowledged
from components.bootstrap.from_plan import PullIdentity, node_bootstrap
from components.bootstrap.node import render_cloud_init
from components.planning.cluster_plan import ClusterPlan
from components.planning.node_template import scale_set_tags, split_min
from components.planning.placement import PoolPlan, ScaleSetPlan
from components.planning.pod_addresses import PREFIX_LENGTH, node_addressing
from components.planning.tags import base_tags


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
        # 2026-07-02 (components/catalog/arm_routes.py); NodeScaleSet sends it at that version.
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


def scale_set(cluster: str, pool: PoolPlan, plan: ScaleSetPlan, minimum: int, network: NetworkRefs,
              subnet_id: pulumi.Input[str], join: NodeJoin, access: NodeAccess, images: ImageIds,
              opts: pulumi.ResourceOptions, subscription_id: pulumi.Input[str],
              disk_encryption_set_id: pulumi.Input[str] | None = None,
              identity_ids: list[pulumi.Input[str]] | None = None, rack: RackRefs | None = None,
              acknowledged_domains: Sequence[str] = ()) -> NodeScaleSet:
    """One zonal node scale set through the capacity-free route: its inputs are azure-native's
    VirtualMachineScaleSet inputs, sent by Microsoft's SDK at Microsoft.Compute SCALE_SET_API_VERSION."""
    spec = pool.spec
    tags = scale_set_tags(cluster, pool, plan, minimum, network.location)
    spot = spec.priority == "spot"
    nics = [{"name": "nic0", "primary": True, "enableAcceleratedNetworking": pool.accelerated_networking,
             "ipConfigurations": _ip_configurations(pool, subnet_id)}]
    os_profile = {"computerNamePrefix": plan.name, "adminUsername": access.admin_username,
                  "customData": _custom_data(pool, plan, join), "linuxConfiguration": _linux_configuration(access)}
    storage_profile = {"imageReference": {"id": images.of(join.plan.images.machines[plan.name])},
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
        "resourceGroupName": network.resource_group_name,
        "location": network.location,
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
        # Create-only (absent from the SDK's update model: catalog/arm_routes.py CREATE_ONLY_PATHS), so a change
        # replaces the rack's scale set; Trunk by default, as Microsoft's interconnect-block example sends.
        inputs["highSpeedInterconnectPlacement"] = spec.racks.high_speed_interconnect_placement
    # The provider never diffs or sends sku.capacity; ignoring it here also keeps a changed plan size out of
    # the engine's diff (the value in the state stays the create's).
    return NodeScaleSet(plan.name, subscription_id, inputs,
                        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=["sku.capacity"])),
                        replacement_acknowledged=acknowledged(plan.name, acknowledged_domains))


class NodePool(pulumi.ComponentResource):
    """One logical pool: a scale set per InfiniBand domain (or large scale set), spread over zones."""

    def __init__(self, name: str, cluster: str, plan: PoolPlan, network: NetworkRefs, subnet_id: pulumi.Input[str],
                 join: NodeJoin, access: NodeAccess, images: ImageIds, opts: pulumi.ResourceOptions | None = None,
                 identity_ids: list[pulumi.Input[str]] | None = None, acknowledged_domains: Sequence[str] = ()) -> None:
        """`acknowledged_domains`: the stack's acknowledgeDeletions.infinibandDomains (names or patterns)."""
        super().__init__("gpucluster:azure:NodePool", name, None, opts)
        # The scale sets wait for what the pool waits for (the bootstrap tokens in the cluster).
        child = pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None)
        self.disk_key: ConfidentialDiskKey | None = None
        des_id: pulumi.Input[str] | None = None
        key_plan = plan.confidential.customer_key if plan.confidential else None
        if key_plan is not None:
            self.disk_key = ConfidentialDiskKey(f"{name}-cmk", key_plan, network.resource_group_name, network.location,
                                                base_tags(cluster, {}), child, cluster=cluster, pool=plan.name)
            des_id = self.disk_key.disk_encryption_set.id
            # The encryption set must hold its role on the key before a VM's disk is created.
            child = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.disk_key]))
        subscription_id = azure.authorization.get_client_config_output().subscription_id
        racks = self._interconnect(cluster, plan, network, subscription_id, child)
        self.scale_sets = [
            scale_set(cluster, plan, s, minimum, network, subnet_id, join, access, images, child, subscription_id,
                      des_id, identity_ids, racks[s.rack.group] if s.rack else None, acknowledged_domains)
            for s, minimum in zip(plan.scale_sets, split_min(plan), strict=True)
        ]
        self.register_outputs({"scaleSetIds": [s.id for s in self.scale_sets]})

    def _interconnect(self, cluster: str, plan: PoolPlan, network: NetworkRefs, subscription_id: pulumi.Input[str],
                      child: pulumi.ResourceOptions) -> dict[str, RackRefs]:
        """A rack pool's interconnect groups (azure-native's typed class) and one block per group holding every
        rack's VMs (the explicit-API route: azure-native has no typed interconnect block)."""
        refs: dict[str, RackRefs] = {}
        self.interconnect_groups: list[azure.network.InterconnectGroup] = []
        self.interconnect_blocks: list[InterconnectBlock] = []
        if plan.racks is None:
            return refs
        tags = base_tags(cluster, {})
        for group in plan.racks.groups:
            name = interconnect_name(plan.name, group.name)
            icg = azure.network.InterconnectGroup(
                f"{plan.name}-{group.name}-icg", interconnect_group_name=name,
                resource_group_name=network.resource_group_name, location=network.location,
                scope=azure.network.InterconnectGroupScope.INFINI_BAND,
                subgroup_profile=azure.network.SubgroupProfileArgs(
                    vm_size=group.vm_size, scope=azure.network.SubgroupProfileScope.VERTICAL_CONNECT,
                    size=group.subgroup_size),
                tags=tags, opts=child)
            block = InterconnectBlock(f"{plan.name}-{group.name}-icb", subscription_id, {
                "interconnectBlockName": name, "resourceGroupName": network.resource_group_name,
                "location": network.location, "zones": [group.zone],
                "sku": {"name": group.vm_size, "capacity": group.block_capacity},
                "properties": {"interconnectGroup": {"id": icg.id}}, "tags": tags,
            }, opts=child)
            self.interconnect_groups.append(icg)
            self.interconnect_blocks.append(block)
            refs[group.name] = RackRefs(icg.id, block.id)
        return refs
