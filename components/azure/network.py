"""Network: resource group, VNet, one subnet per planned block, NSGs per tier, NAT gateway egress.

With `network.existingVnet` the subnets go in that VNet (in its own resource group) and the VNet is left alone; a
block listed in `network.existingSubnets` uses that subnet as it is (no NSG or NAT gateway is attached to it)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK, ETCD_BLOCK, Block
from gpucluster.planning.security_rules import SecurityRule, plan_security_rules, source_prefix_fields
from gpucluster.planning.subnets import plan_vnet
from gpucluster.planning.tags import base_tags
from gpucluster.spec import PoolKind


@dataclass(frozen=True)
class NetworkRefs:
    """What other components need from the network."""

    resource_group_name: pulumi.Output[str]
    location: str
    vnet_id: pulumi.Output[str]
    subnet_ids: dict[str, pulumi.Output[str]]
    """Block name (`controlplane`, `etcd`, `pool-<name>`) -> subnet id."""


def _tier(block: Block) -> str:
    return block.name if block.name in (CONTROL_PLANE_BLOCK, ETCD_BLOCK) else "nodes"


def _security_rule(rule: SecurityRule) -> azure.network.SecurityRuleArgs:
    return azure.network.SecurityRuleArgs(
        name=rule.name,
        priority=rule.priority,
        direction=rule.direction,
        access=rule.access,
        protocol=rule.protocol,
        **source_prefix_fields(rule.sources),
        source_port_range="*",
        destination_address_prefix="*",
        destination_port_range=rule.ports,
    )


@dataclass(frozen=True)
class NetworkArgs:
    """The inputs of Network."""

    plan: ClusterPlan
    """The cluster plan: the IP plan's blocks (`plan.ip`), the NSG rules, egress; the stack's name, region and
    tags (`plan.spec`), from which the resource group is created."""


class Network(pulumi.ComponentResource):
    """The cluster's resource group, VNet and everything attached to it. No public IP but the NAT gateway's
    prefix."""

    resource_group: azure.resources.ResourceGroup
    """The cluster's resource group (`<cluster>-rg`): every other resource of the cluster goes in it."""
    vnet: azure.network.VirtualNetwork | None
    """The VNet the stack creates; None when the subnets go in `network.existingVnet`."""
    refs: NetworkRefs
    """What other components need from it: resource group name, region, VNet and subnet ids."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:Network", name, None, opts)
        plan = args.plan
        spec = plan.spec
        tags = base_tags(spec.name, spec.tags)
        child = pulumi.ResourceOptions(parent=self)

        self.resource_group = azure.resources.ResourceGroup(
            f"{name}-rg", resource_group_name=resource_group_name(spec.name), location=spec.location, tags=tags,
            opts=child)
        rg = self.resource_group.name

        nsgs = {
            tier: azure.network.NetworkSecurityGroup(
                f"{name}-nsg-{tier}", resource_group_name=rg, location=spec.location, tags=tags,
                network_security_group_name=f"{spec.name}-{tier}",
                security_rules=[_security_rule(r) for r in rules], opts=child)
            for tier, rules in plan_security_rules(plan.ip, spec.network.admin_cidrs, tuple(
                p.name for p in plan.pools if p.kind is PoolKind.SYSTEM),
                spec.access.break_glass.admin_cidrs if spec.access.break_glass else None).items()
        }

        egress_prefix = azure.network.PublicIPPrefix(
            f"{name}-egress-ips", resource_group_name=rg, location=spec.location, tags=tags,
            public_ip_prefix_name=f"{spec.name}-egress", prefix_length=plan.egress.prefix_length,
            public_ip_address_version="IPv4", sku=azure.network.PublicIPPrefixSkuArgs(name="Standard"),
            opts=child)
        self.nat_gateway = azure.network.NatGateway(
            f"{name}-nat", resource_group_name=rg, location=spec.location, tags=tags,
            nat_gateway_name=f"{spec.name}-egress", sku=azure.network.NatGatewaySkuArgs(name="Standard"),
            idle_timeout_in_minutes=plan.egress.idle_timeout_minutes,
            public_ip_prefixes=[azure.network.SubResourceArgs(id=egress_prefix.id)], opts=child)

        place, existing = plan_vnet(spec, plan.ip), spec.network.existing_vnet
        if existing is None:
            self.vnet = azure.network.VirtualNetwork(
                f"{name}-vnet", resource_group_name=rg, location=spec.location, tags=tags,
                virtual_network_name=place.name,
                address_space=azure.network.AddressSpaceArgs(
                    address_prefixes=[str(s) for s in plan.ip.address_space]),
                # Subnets are their own resources below; never let the VNet manage them inline.
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=["subnets"]))
            # The VNet's outputs, not the planned names: the subnets wait for it.
            vnet_group, vnet_name, vnet_id = rg, self.vnet.name, self.vnet.id
        else:
            self.vnet = None
            vnet_group, vnet_name = pulumi.Output.from_input(place.resource_group), pulumi.Output.from_input(place.name)
            vnet_id = pulumi.Output.from_input(existing.id)

        subnet_ids: dict[str, pulumi.Output[str]] = {}
        created: list[azure.network.Subnet] = []
        for planned in place.subnets:
            if planned.existing_id is not None:
                subnet_ids[planned.block] = pulumi.Output.from_input(planned.existing_id)
                continue
            block = plan.ip.block(planned.block)
            subnet = azure.network.Subnet(
                f"{name}-{block.name}", resource_group_name=vnet_group, virtual_network_name=vnet_name,
                subnet_name=planned.name, address_prefix=str(block.cidr),
                network_security_group=azure.network.NetworkSecurityGroupArgs(id=nsgs[_tier(block)].id),
                nat_gateway=azure.network.SubResourceArgs(id=self.nat_gateway.id),
                # Azure serialises writes to one VNet's subnets: create them one after another.
                opts=pulumi.ResourceOptions(parent=self, depends_on=created[-1:]))
            created.append(subnet)
            subnet_ids[block.name] = subnet.id

        if spec.network.hub_vnet_id:
            azure.network.VirtualNetworkPeering(
                f"{name}-to-hub", resource_group_name=rg, virtual_network_name=vnet_name,
                virtual_network_peering_name="to-hub",
                remote_virtual_network=azure.network.SubResourceArgs(id=spec.network.hub_vnet_id),
                allow_virtual_network_access=True, allow_forwarded_traffic=False, opts=child)

        self.refs = NetworkRefs(rg, spec.location, vnet_id, subnet_ids)
        self.register_outputs({"vnetId": vnet_id, "subnetIds": self.refs.subnet_ids})
