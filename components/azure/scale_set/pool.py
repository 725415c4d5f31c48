"""NodePool: one Uniform scale set per planned scale set (InfiniBand domain), each in one zone."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from components.azure.confidential_key import ConfidentialDiskKey
from components.azure.interconnect_block import InterconnectBlock
from components.azure.network import NetworkRefs
from components.azure.node_images import ImageIds
from components.azure.scale_set.body import NodeAccess, NodeJoin, RackRefs, interconnect_name, scale_set
from components.planning.node_template import split_min
from components.planning.placement import PoolPlan
from components.planning.tags import base_tags


class NodePool(pulumi.ComponentResource):
    """One logical pool: a scale set per InfiniBand domain (or large scale set), spread over zones."""

    def __init__(self, name: str, cluster: str, plan: PoolPlan, network: NetworkRefs, subnet_id: pulumi.Input[str],
                 join: NodeJoin, access: NodeAccess, images: ImageIds, opts: pulumi.ResourceOptions | None = None,
                 identity_ids: list[pulumi.Input[str]] | None = None) -> None:
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
                      des_id, identity_ids, racks[s.rack.group] if s.rack else None)
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
