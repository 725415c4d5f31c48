"""The VNet a stack puts its subnets in holds what the plan assumed of it.

With `network.existingVnet` the plan carves its blocks from `network.addressSpace` without seeing the VNet: only the
VNet itself can say that it is in the stack's region, that those ranges are its own, that the subnets named in
`network.existingSubnets` have the prefixes the plan pinned and a way out (a NAT gateway or a route table: the stack
attaches neither to a subnet it does not create), and that a shared registry zone (`existingVnet.registryDnsZoneId`)
is linked to it. The subnets the stack creates, there or in its own VNet, are read back with their planned prefixes
(a block that moved replaces everything in it). Read at the API versions the stack's provider writes with
(azure-native 3.29: network.VirtualNetwork and network.Subnet "Uses Azure REST API version 2024-05-01",
privatedns.VirtualNetworkLink 2024-06-01).
"""

from __future__ import annotations

from ipaddress import IPv4Network, ip_network
from typing import Any

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.subnets import plan_vnet
from gpucluster.verify.arm import Arm
from gpucluster.verify.results import Check, Result

EXISTING = Check("azure.existing-network", "components/spec/network.py (existingVnet, existingSubnets); Network "
                                          "2024-05-01 VirtualNetworks_Get, Subnets_Get; PrivateDns 2024-06-01 "
                                          "VirtualNetworkLinks_List")
CREATED = Check("azure.subnets", "components/azure/network.py (the subnets it creates, in its own VNet or "
                                 "existingVnet); Network 2024-05-01 Subnets_Get")
VNET_API = "2024-05-01"
DNS_API = "2024-06-01"
"""azure-native 3.29's privatedns.VirtualNetworkLink: "Uses Azure REST API version 2024-06-01"."""


def _get(arm: Arm, resource_id: str) -> dict[str, Any] | None:
    """The resource's REST JSON, or None when ARM answers 404."""
    from azure.core.exceptions import HttpResponseError

    try:
        return arm.get_json(f"{resource_id}?api-version={VNET_API}")
    except HttpResponseError as error:
        if error.status_code == 404:
            return None
        raise


def _prefixes(properties: dict[str, Any]) -> list[IPv4Network]:
    """A subnet's prefixes: `addressPrefix`, or `addressPrefixes` when Azure returns the list form."""
    found = [properties.get("addressPrefix")] if properties.get("addressPrefix") else []
    found += properties.get("addressPrefixes") or []
    return [n for n in (ip_network(str(p), strict=False) for p in found) if isinstance(n, IPv4Network)]


def check_existing_network(arm: Arm, plan: ClusterPlan) -> list[Result]:
    """The VNet and the existing subnets: readable before the first `pulumi up` (`verify --azure-only`). Nothing for
    a stack that creates its own VNet."""
    net = plan.spec.network
    if net.existing_vnet is None:
        return []
    vnet_id = net.existing_vnet.id
    vnet = _get(arm, vnet_id)
    if vnet is None:
        return [EXISTING.failed(vnet_id, "no such VNet in the stack's subscription",
                                "set cluster.network.existingVnet.id to the VNet's id (az network vnet show --query "
                                "id)")]
    location = str(vnet.get("location", ""))
    if location.replace(" ", "").lower() != plan.spec.location.lower():
        return [EXISTING.failed(vnet_id, f"the VNet is in {location or 'no region'}, the stack in "
                                         f"{plan.spec.location}: a scale set's NICs join subnets of its own region",
                                "name a VNet in the stack's region (cluster.network.existingVnet.id)")]
    results = [_address_space(vnet_id, vnet, net.address_space),
               *(_existing_subnet(arm, block, subnet.id, subnet.cidr) for block, subnet in net.existing_subnets.items())]
    if net.existing_vnet.registry_dns_zone_id:
        results.append(_registry_zone(arm, net.existing_vnet.registry_dns_zone_id, vnet_id))
    return results


def _registry_zone(arm: Arm, zone_id: str, vnet_id: str) -> Result:
    """The shared registry zone is linked to the VNet: else the nodes resolve the registry's public name."""
    from azure.core.exceptions import HttpResponseError

    subject = "registry DNS zone"
    fix = ("link the zone to the VNet (az network private-dns link vnet create), or set "
           "cluster.network.existingVnet.registryDnsZoneId to the zone the VNet is linked to")
    try:
        links = arm.get_pages(f"{zone_id}/virtualNetworkLinks?api-version={DNS_API}")
    except HttpResponseError as error:
        if error.status_code != 404:
            raise
        return EXISTING.failed(subject, f"no zone {zone_id}", fix)
    linked = [link for link in links
              if str(((link.get("properties") or {}).get("virtualNetwork") or {}).get("id", "")).lower() ==
              vnet_id.lower()]
    if not linked:
        return EXISTING.failed(subject, f"{len(links)} link(s), none to the VNet: the registry's records would not "
                                        "resolve there", fix)
    return EXISTING.passed(subject, f"linked to the VNet ({linked[0].get('name')})")


def check_created_subnets(arm: Arm, plan: ClusterPlan) -> list[Result]:
    """The subnets the stack made, in its own VNet or the existing one, at their planned prefixes."""
    place = plan_vnet(plan.spec, plan.ip)
    vnet_id = place.id(arm.subscription)
    return [_created_subnet(arm, f"{vnet_id}/subnets/{s.name}", s.block, s.cidr) for s in place.created]


def _address_space(vnet_id: str, vnet: dict[str, Any], wanted: list[IPv4Network]) -> Result:
    listed = [n for n in (ip_network(str(p), strict=False) for p in
                          ((vnet.get("properties") or {}).get("addressSpace") or {}).get("addressPrefixes") or [])
              if isinstance(n, IPv4Network)]
    outside = [str(w) for w in wanted if not any(w.subnet_of(space) for space in listed)]
    if outside:
        return EXISTING.failed(vnet_id, f"cluster.network.addressSpace {', '.join(outside)} is not in the VNet's "
                                       f"address space ({', '.join(map(str, listed)) or 'none'})",
                              "add the range to the VNet's address space where the VNet is managed, or set "
                              "cluster.network.addressSpace to ranges the VNet holds")
    return EXISTING.passed(vnet_id, f"holds {', '.join(map(str, wanted))}")


def _existing_subnet(arm: Arm, block: str, subnet_id: str, cidr: IPv4Network) -> Result:
    subject = f"existing subnet for {block}"
    key = f"cluster.network.existingSubnets.{block}"
    found = _get(arm, subnet_id)
    if found is None:
        return EXISTING.failed(subject, f"no subnet {subnet_id}", f"set {key}.id to the subnet's id "
                                                                 "(az network vnet subnet show --query id)")
    properties = found.get("properties") or {}
    prefixes = _prefixes(properties)
    if cidr not in prefixes:
        return EXISTING.failed(subject, f"its prefix is {', '.join(map(str, prefixes)) or 'none'}, the plan pinned "
                                       f"{cidr}", f"set {key}.cidr to the subnet's prefix")
    if not properties.get("natGateway") and not properties.get("routeTable"):
        return EXISTING.failed(subject, "no NAT gateway and no route table: its nodes have no planned way out (the "
                                       "stack attaches neither to a subnet it does not create)",
                              "attach a NAT gateway or a route table with a 0.0.0.0/0 route to the subnet where it "
                              f"is managed, or drop {key} so the stack creates the subnet")
    way_out = "NAT gateway" if properties.get("natGateway") else "route table"
    return EXISTING.passed(subject, f"{cidr}, egress by its {way_out}")


def _created_subnet(arm: Arm, subnet_id: str, block: str, cidr: IPv4Network) -> Result:
    subject = f"subnet for {block}"
    found = _get(arm, subnet_id)
    if found is None:
        return CREATED.failed(subject, f"no subnet {subnet_id}", "run pulumi up for this stack")
    prefixes = _prefixes(found.get("properties") or {})
    if cidr not in prefixes:
        return CREATED.failed(subject, f"its prefix is {', '.join(map(str, prefixes)) or 'none'}, the plan says "
                                       f"{cidr}", "run pulumi up for this stack; pin the block "
                                                  "(cluster.network.pinnedBlocks) if it moved")
    return CREATED.passed(subject, str(cidr))
