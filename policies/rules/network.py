"""Network safety: no public exposure, etcd reachable only from the control plane, API servers behind an internal LB."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, Severity, StackValidationArgs

from .declare import Config, resource_rule, stack_rule
from .props import ETCD_ROLES, SCALE_SET, Resource, get, items, kind, last_segment, nic_configs, of_roles

NSG = "azure-native:network:NetworkSecurityGroup"
NIC = "azure-native:network:NetworkInterface"
SUBNET = "azure-native:network:Subnet"
LOAD_BALANCER = "azure-native:network:LoadBalancer"
PUBLIC_IP = "azure-native:network:PublicIPAddress"
INTERNET_SOURCES = ("*", "Internet", "0.0.0.0/0", "Any", "any")
ETCD_PORTS = (2379, 2380)


@resource_rule(
    "azure-native-network-machines-no-public-ip", types=(SCALE_SET, NIC, PUBLIC_IP), severity=Severity.HIGH,
    description="No public IP on nodes or the control plane; egress goes through the NAT gateway.",
    remediation="Remove publicIPAddressConfiguration / the PublicIPAddress; reach machines through the hub network.")
def no_public_ips(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    if kind(args) == SCALE_SET:
        for nic in nic_configs(args.props):
            for ip in items(get(nic, "ipConfigurations")):
                if get(ip, "publicIPAddressConfiguration") is not None:
                    report(f"NIC {get(nic, 'name')} ip configuration {get(ip, 'name')} has a public IP", None)
    elif args.resource_type == NIC:
        for ip in items(get(args.props, "ipConfigurations")):
            if get(ip, "publicIPAddress") is not None:
                report(f"ip configuration {get(ip, 'name')} has a public IP", None)
    else:
        report("a standalone public IP address; nodes and the control plane reach out through the NAT gateway", None)


@resource_rule(
    "azure-native-network-networksecuritygroup-no-internet-inbound", types=(NSG,), severity=Severity.CRITICAL,
    description="No NSG rule lets the internet in.",
    remediation="Restrict the rule's source to cluster.network.adminCidrs or a VNet range.")
def no_internet_inbound(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    for rule in items(get(args.props, "securityRules")):
        if get(rule, "access") != "Allow" or get(rule, "direction") != "Inbound":
            continue
        if any(s in INTERNET_SOURCES for s in _sources(rule)):
            report(f"rule {get(rule, 'name')} allows inbound traffic from the internet", None)


def _sources(rule: Any) -> list[str]:
    return [str(s) for s in [get(rule, "sourceAddressPrefix"), *items(get(rule, "sourceAddressPrefixes"))] if s]


def _covers_port(rule: Any, port: int) -> bool:
    ranges = [get(rule, "destinationPortRange"), *items(get(rule, "destinationPortRanges"))]
    for spec in (str(r) for r in ranges if r):
        if spec == "*":
            return True
        low, _, high = spec.partition("-")
        try:
            if int(low) <= port <= int(high or low):
                return True
        except ValueError:
            return True  # unreadable range: assume it covers the port, so the rule judges it rather than skip it
    return False


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _within(prefix: str, allowed: Iterable[Network]) -> bool:
    try:
        network = ipaddress.ip_network(prefix, strict=False)
    except ValueError:
        return False  # a service tag (VirtualNetwork, AzureLoadBalancer, ...) is wider than the control plane
    return any(network.version == a.version and network.subnet_of(a) for a in allowed)  # type: ignore[arg-type]


def _subnet_key(subnet_id: Any) -> tuple[str | None, str | None]:
    return last_segment(subnet_id, "virtualNetworks"), last_segment(subnet_id, "subnets")


def _machine_subnets(resource: Resource) -> list[Any]:
    if kind(resource) == SCALE_SET:
        return [get(ip, "subnet", "id") for nic in nic_configs(resource.props) for ip in items(get(nic, "ipConfigurations"))]
    return []


@stack_rule(
    "azure-native-network-networksecuritygroup-etcd-ports-restricted", severity=Severity.CRITICAL,
    description="etcd's client and peer ports (2379, 2380) admit only the API-server and etcd subnets, and the etcd "
                "subnet's NSG denies the rest of the VNet (Azure's default rules let the whole VNet in).",
    remediation="Source etcd allow rules from the control-plane and etcd subnets only and keep the deny-vnet-inbound rule.")
def etcd_ports_restricted(args: StackValidationArgs, report: ReportViolation, _: Config) -> None:
    resources = args.resources
    subnets = {(get(r.props, "virtualNetworkName"), get(r.props, "subnetName")): r
               for r in resources if r.resource_type == SUBNET}
    nsgs = {get(r.props, "networkSecurityGroupName"): r for r in resources if r.resource_type == NSG}
    nic_subnets = {get(r.props, "networkInterfaceName"):
                   [get(ip, "subnet", "id") for ip in items(get(r.props, "ipConfigurations"))]
                   for r in resources if r.resource_type == NIC}
    etcd_subnet_ids = [sid for vm in of_roles(resources, *ETCD_ROLES)
                       for nic in items(get(vm.props, "networkProfile", "networkInterfaces"))
                       for sid in nic_subnets.get(last_segment(get(nic, "id"), "networkInterfaces"), [])]
    if not etcd_subnet_ids:
        return
    api_subnet_ids = [sid for ss in of_roles(resources, "apiserver") for sid in _machine_subnets(ss)]
    allowed = [ipaddress.ip_network(str(get(subnets[_subnet_key(sid)].props, "addressPrefix")))
               for sid in {*etcd_subnet_ids, *api_subnet_ids} if _subnet_key(sid) in subnets]
    for key in {_subnet_key(sid) for sid in etcd_subnet_ids}:
        subnet = subnets.get(key)
        if subnet is None:
            continue
        nsg_name = last_segment(get(subnet.props, "networkSecurityGroup", "id"), "networkSecurityGroups")
        nsg = nsgs.get(nsg_name)
        if nsg is None:
            report(f"etcd subnet {key[1]} has no network security group: the whole VNet reaches etcd", subnet.urn)
            continue
        _check_etcd_nsg(nsg, allowed, report)


def _check_etcd_nsg(nsg: Resource, allowed: list[Network], report: ReportViolation) -> None:
    inbound = sorted((r for r in items(get(nsg.props, "securityRules")) if get(r, "direction") == "Inbound"),
                     key=lambda r: int(get(r, "priority", default=65000)))
    for port in ETCD_PORTS:
        denied = False
        for rule in (r for r in inbound if _covers_port(r, port)):
            if get(rule, "access") == "Deny" and {"*", "VirtualNetwork"} & set(_sources(rule)):
                denied = True
                break
            if get(rule, "access") == "Allow":
                wide = [s for s in _sources(rule) if not _within(s, allowed)]
                if wide:
                    report(f"rule {get(rule, 'name')} admits {', '.join(wide)} to port {port}; only the API-server "
                           "and etcd subnets may reach etcd", nsg.urn)
        if not denied:
            report(f"no Deny rule for the VNet covers port {port}: Azure's default AllowVnetInBound admits every node",
                   nsg.urn)


@stack_rule(
    "azure-native-network-loadbalancer-apiserver-internal", severity=Severity.HIGH,
    description="API servers sit behind an internal Standard load balancer: a private frontend in the VNet, nothing "
                "public, zone-redundant.",
    remediation="Put the API-server scale set's NICs in the control plane's internal LB backend pool; never give the "
                "LB a public frontend (reach the API through the hub or a private endpoint).")
def apiserver_internal_lb(args: StackValidationArgs, report: ReportViolation, _: Config) -> None:
    balancers = {get(r.props, "loadBalancerName"): r for r in args.resources if r.resource_type == LOAD_BALANCER}
    for scale_set in of_roles(args.resources, "apiserver"):
        pools = [get(pool, "id") for nic in nic_configs(scale_set.props) for ip in items(get(nic, "ipConfigurations"))
                 for pool in items(get(ip, "loadBalancerBackendAddressPools"))]
        if not pools:
            report("API servers are in no load balancer backend pool", scale_set.urn)
        for name in {last_segment(p, "loadBalancers") for p in pools}:
            balancer = balancers.get(name)
            if balancer is None:
                report(f"API servers use load balancer {name!r}, which this stack does not declare", scale_set.urn)
                continue
            if get(balancer.props, "sku", "name") != "Standard":
                report("the API-server load balancer is not Standard (Basic has no zones and is retired)", balancer.urn)
            for frontend in items(get(balancer.props, "frontendIPConfigurations")):
                if get(frontend, "publicIPAddress") is not None or get(frontend, "publicIPPrefix") is not None:
                    report(f"frontend {get(frontend, 'name')} is public", balancer.urn)
                elif get(frontend, "subnet") is None:
                    report(f"frontend {get(frontend, 'name')} has no subnet: not an internal frontend", balancer.urn)


RULES = [no_public_ips, no_internet_inbound, etcd_ports_restricted, apiserver_internal_lb]
