"""NodePool: one Uniform scale set per planned scale set (InfiniBand domain), each in one zone."""

from __future__ import annotations

from dataclasses import dataclass, replace
from ipaddress import IPv4Network

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.confidential_key import ConfidentialDiskKey, ConfidentialDiskKeyArgs
from gpucluster.azure.interconnect_block import InterconnectBlock
from gpucluster.azure.node_images import ImageIds
from gpucluster.azure.scale_set.body import NodeAccess, RackRefs, ScaleSetArgs, interconnect_name, scale_set
from gpucluster.azure.scale_set.join import NodeJoin
from gpucluster.azure.scale_set.resource import NodeScaleSet
from gpucluster.azure.scope import AzureScope
from gpucluster.errors import SpecError
from gpucluster.planning.node_template import split_min
from gpucluster.planning.placement import PoolPlan
from gpucluster.planning.subnet_fit import subnet_problems


@dataclass(frozen=True)
class NodePoolArgs:
    """The inputs of NodePool."""

    scope: AzureScope
    """Where its scale sets, interconnect groups and blocks and disk key go."""
    plan: PoolPlan
    """The pool's plan (`plan.pools[i]`): its scale sets, one per InfiniBand domain or rack, and their zones."""
    subnet_id: pulumi.Input[str]
    """The pool's subnet (`Network.refs.subnet_ids["pool-<name>"]`)."""
    join: NodeJoin
    """Where and how the nodes join: the cluster's metadata (endpoint, version, DNS, CA hash, bootstrap token), the
    registry and pull identity, each scale set's join facts and image (components/azure/scale_set/join.py)."""
    access: NodeAccess
    """The admin user and SSH keys of every machine."""
    images: ImageIds
    """The cluster's node image versions (NodeImages.ids)."""
    identity_ids: tuple[pulumi.Input[str], ...] = ()
    """User-assigned identities every VM of the pool carries; empty: a system-assigned identity only."""
    acknowledged_domains: tuple[str, ...] = ()
    """The stack's acknowledgeDeletions.infinibandDomains (names or patterns): scale sets they name may be replaced
    alongside other domains of the pool in one deployment (components/azure/scale_set/replacement_guard.py)."""
    subnet_cidr: IPv4Network | None = None
    """The subnet's address range, when it is one of the program's own network: the pool must fit it
    (components/planning/subnet_fit.py), or NodePool refuses it with the addresses it needs. GpuCluster passes its
    planned block."""

    def __post_init__(self) -> None:
        if self.subnet_cidr is not None and (problems := subnet_problems(self.plan, self.subnet_cidr,
                                                                         "NodePoolArgs.subnet_cidr")):
            raise SpecError(problems)


class NodePool(pulumi.ComponentResource):
    """One logical pool: a scale set per InfiniBand domain (or large scale set), spread over zones."""

    plan: PoolPlan
    """The pool's plan it was declared from."""
    scale_sets: list[NodeScaleSet]
    """The pool's scale sets, in the order of `plan.scale_sets`."""
    disk_key: ConfidentialDiskKey | None
    """A confidential pool's customer-managed disk key; None otherwise."""
    interconnect_groups: list[azure.network.InterconnectGroup]
    """A rack pool's interconnect groups, one per `racks.groups` entry; empty otherwise."""
    interconnect_blocks: list[InterconnectBlock]
    """The block holding each group's racks; empty for every pool but a rack pool."""

    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:NodePool", name, None, opts)
        scope, plan = args.scope, args.plan
        self.plan = plan
        # The scale sets wait for what the pool waits for (the bootstrap tokens in the cluster).
        child = pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None)
        self.disk_key = None
        des_id: pulumi.Input[str] | None = None
        key_plan = plan.confidential.customer_key if plan.confidential else None
        if key_plan is not None:
            # The key carries the cluster tag alone.
            self.disk_key = ConfidentialDiskKey(f"{name}-cmk", ConfidentialDiskKeyArgs(
                scope=replace(scope, tags=scope.cluster_tags), plan=key_plan, pool=plan.name), child)
            des_id = self.disk_key.disk_encryption_set.id
            # The encryption set must hold its role on the key before a VM's disk is created.
            child = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.disk_key]))
        racks = self._interconnect(scope, plan, child)
        self.scale_sets = [
            scale_set(ScaleSetArgs(scope=scope, pool=plan, plan=s, minimum=minimum, subnet_id=args.subnet_id,
                                   join=args.join, access=args.access, images=args.images,
                                   disk_encryption_set_id=des_id, identity_ids=args.identity_ids,
                                   rack=racks[s.rack.group] if s.rack else None,
                                   acknowledged_domains=args.acknowledged_domains), child)
            for s, minimum in zip(plan.scale_sets, split_min(plan), strict=True)
        ]
        self.register_outputs({"scaleSetIds": [s.id for s in self.scale_sets],
                               "interconnectBlockIds": [b.id for b in self.interconnect_blocks]})

    def _interconnect(self, scope: AzureScope, plan: PoolPlan, child: pulumi.ResourceOptions) -> dict[str, RackRefs]:
        """A rack pool's interconnect groups (azure-native's typed class) and one block per group holding every
        rack's VMs (the explicit-API route: azure-native has no typed interconnect block)."""
        refs: dict[str, RackRefs] = {}
        self.interconnect_groups = []
        self.interconnect_blocks = []
        if plan.racks is None:
            return refs
        tags = scope.cluster_tags
        for group in plan.racks.groups:
            name = interconnect_name(plan.name, group.name)
            icg = azure.network.InterconnectGroup(
                f"{plan.name}-{group.name}-icg", interconnect_group_name=name,
                resource_group_name=scope.resource_group_name, location=scope.location,
                scope=azure.network.InterconnectGroupScope.INFINI_BAND,
                subgroup_profile=azure.network.SubgroupProfileArgs(
                    vm_size=group.vm_size, scope=azure.network.SubgroupProfileScope.VERTICAL_CONNECT,
                    size=group.subgroup_size),
                tags=tags, opts=child)
            block = InterconnectBlock(f"{plan.name}-{group.name}-icb", scope.subscription_id, {
                "interconnectBlockName": name, "resourceGroupName": scope.resource_group_name,
                "location": scope.location, "zones": [group.zone],
                "sku": {"name": group.vm_size, "capacity": group.block_capacity},
                "properties": {"interconnectGroup": {"id": icg.id}}, "tags": tags,
            }, opts=child)
            self.interconnect_groups.append(icg)
            self.interconnect_blocks.append(block)
            refs[group.name] = RackRefs(icg.id, block.id)
        return refs
