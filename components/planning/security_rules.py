"""Network security rules per tier, as data. Deny by default between tiers; nothing from the internet."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network, ip_network
from typing import Any

from gpucluster.planning.ip_plan import API_SERVER_PORT, CONTROL_PLANE_BLOCK, ETCD_BLOCK, IpPlan

ETCD_CLIENT_PORT = "2379"
ETCD_PORTS = "2379-2380"
ETCD_METRICS_PORT = "2381"
"""etcd's `--listen-metrics-urls`: /metrics and /health over plain HTTP, no keyspace (components/bootstrap/etcd.py)."""
SSH_PORT = "22"
DENY_PRIORITY = 4000


@dataclass(frozen=True)
class SecurityRule:
    name: str
    priority: int
    access: str  # "Allow" | "Deny"
    protocol: str  # "Tcp" | "*"
    sources: tuple[str, ...]
    """CIDRs or an Azure service tag (VirtualNetwork, Internet, AzureLoadBalancer)."""
    ports: str

    @property
    def direction(self) -> str:
        return "Inbound"


def is_address_prefix(value: str) -> bool:
    """A CIDR or an IP address: what the plural `*AddressPrefixes` fields take. Anything else (`*`,
    `VirtualNetwork`, `Internet`, `AzureLoadBalancer`, any service tag) only the singular field accepts."""
    try:
        ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def source_prefix_fields(sources: tuple[str, ...]) -> dict[str, Any]:
    """The security rule's source as ARM accepts it: one tag or `*` in the singular `sourceAddressPrefix`,
    CIDRs in the plural `sourceAddressPrefixes`. ARM refuses a tag in the plural field
    (`SecurityRuleParameterContainsUnsupportedValue`, terraform-provider-azurerm#5617); the azure-native SDK
    documents tags on `source_address_prefix` only (pulumi_azure_native 3.29 network/_inputs.py)."""
    tags = [s for s in sources if not is_address_prefix(s)]
    if tags and len(sources) > 1:
        raise ValueError(f"a security rule takes one service tag alone, not {', '.join(sources)}: split the rule")
    if tags:
        return {"source_address_prefix": tags[0]}
    return {"source_address_prefixes": list(sources)}


def _cidrs(nets: list[IPv4Network] | tuple[IPv4Network, ...]) -> tuple[str, ...]:
    return tuple(str(n) for n in nets)


def _deny_rest() -> list[SecurityRule]:
    return [
        SecurityRule("deny-vnet-inbound", DENY_PRIORITY, "Deny", "*", ("VirtualNetwork",), "*"),
        SecurityRule("deny-internet-inbound", DENY_PRIORITY + 10, "Deny", "*", ("Internet",), "*"),
    ]


def plan_security_rules(ip: IpPlan, admin_cidrs: list[IPv4Network], system_pools: tuple[str, ...] = (),
                        break_glass_cidrs: list[IPv4Network] | None = None) -> dict[str, tuple[SecurityRule, ...]]:
    """Inbound rules for each tier (`nodes`, `controlplane`, `etcd`); outbound stays Azure's default.
    `system_pools`: where cluster add-ons run, a metrics scraper among them (etcd's metrics port)."""
    nodes = _cidrs([b.cidr for b in ip.blocks if b.name.startswith("pool-")])
    control_plane = _cidrs([ip.block(CONTROL_PLANE_BLOCK).cidr])
    etcd = _cidrs([ip.block(ETCD_BLOCK).cidr])
    admin = _cidrs(admin_cidrs)
    ssh = [SecurityRule("allow-ssh-from-admin", 300, "Allow", "Tcp", admin, SSH_PORT)] if admin else []

    node_rules = [
        SecurityRule("allow-nodes-from-nodes", 100, "Allow", "*", nodes, "*"),
        # API servers reach kubelets (10250) and webhook / aggregated-API pods on their own ports.
        SecurityRule("allow-nodes-from-controlplane", 110, "Allow", "*", control_plane, "*"),
    ]
    api_rules = [
        SecurityRule("allow-apiserver-from-nodes", 100, "Allow", "Tcp", nodes, str(API_SERVER_PORT)),
        SecurityRule("allow-apiserver-from-controlplane", 110, "Allow", "Tcp", control_plane, str(API_SERVER_PORT)),
        SecurityRule("allow-apiserver-probe", 120, "Allow", "Tcp", ("AzureLoadBalancer",), str(API_SERVER_PORT)),
    ]
    if admin:
        api_rules.append(SecurityRule("allow-apiserver-from-admin", 130, "Allow", "Tcp", admin, str(API_SERVER_PORT)))
    if break_glass_cidrs:
        # The break-glass frontend's callers, by their own rule: an incident never depends on the normal path's.
        api_rules.append(SecurityRule("allow-apiserver-breakglass", 140, "Allow", "Tcp", _cidrs(break_glass_cidrs),
                                      str(API_SERVER_PORT)))
    etcd_rules = [
        SecurityRule("allow-etcd-from-apiservers", 100, "Allow", "Tcp", control_plane, ETCD_CLIENT_PORT),
        SecurityRule("allow-etcd-peers", 110, "Allow", "Tcp", etcd, ETCD_PORTS),
    ]
    if system_pools:
        scrapers = _cidrs([ip.pool_block(p).cidr for p in system_pools])
        etcd_rules.append(SecurityRule("allow-etcd-metrics-from-system", 120, "Allow", "Tcp", scrapers,
                                       ETCD_METRICS_PORT))
    return {
        "nodes": tuple(node_rules + ssh + _deny_rest()),
        "controlplane": tuple(api_rules + ssh + _deny_rest()),
        "etcd": tuple(etcd_rules + ssh + _deny_rest()),
    }
