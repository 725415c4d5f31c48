"""Per-subscription, per-region counts a cluster consumes beside vCPUs, with Azure's default or fixed limit.

An adjustable row is the subscription's quota: Azure's default applies until a support request raises it, and the
default varies by offer, so the stack declares what its subscription has (`cluster.resourceQuota.<key>`, the value
`az network list-usages -l <region>` shows as the limit) and a need past it is a plan error, as for vCPUs. A fixed row
is a limit Azure documents without a maximum column (not adjustable): a need past it is a plan error whatever the
stack declares.
"""

from __future__ import annotations

from dataclasses import dataclass

_NET = "azure-docs includes/azure-virtual-network-limits.md (commit 04cb4ea0, ms.date 12/05/2022)"


@dataclass(frozen=True)
class CountQuota:
    key: str
    """The camelCase key under `cluster.resourceQuota` (adjustable rows) and in the report."""
    description: str
    default: int | None
    """Azure's default (adjustable) or its limit (fixed); None where Azure sets no count of its own."""
    fixed: bool
    source: str


COUNT_QUOTAS: dict[str, CountQuota] = {q.key: q for q in (
    CountQuota("standardPublicIps", "Standard public IP addresses (a public IP prefix counts in full)", 10, False,
               f"{_NET}, Public IP address limits: \"Standard Public IP addresses | 10 | Contact support\", defaults "
               "vary by offer (\"the default for Enterprise Agreement subscriptions is 1000\"); azure-docs "
               "articles/virtual-network/ip-services/public-ip-address-prefix.md: \"each public IP prefix counts "
               "against regional quota for the full count of IPs you can create from that prefix\""),
    CountQuota("publicIpPrefixes", "public IP prefixes", None, False,
               "azure-docs articles/virtual-network/ip-services/public-ip-address-prefix.md: \"there's no limit on "
               "the number of Public IP Prefixes per region\" (their addresses count as Standard public IPs)"),
    CountQuota("natGateways", "NAT gateways", 1_000, True,
               "azure-docs includes/azure-nat-gateway-limits.md (ms.date 09/24/2020): \"NAT gateways | 1,000 per "
               "subscription per region\" (a Limit column only: not adjustable)"),
    CountQuota("scaleSets", "virtual machine scale sets", 2_500, True,
               "azure-docs includes/azure-virtual-machine-scale-sets-limits.md: \"Maximum number of scale sets per "
               "subscription per region | 2,500\" (a Limit column only)"),
    CountQuota("networkInterfaces", "network interfaces", 65_536, True,
               f"{_NET}, Networking limits: \"Network interface cards | 65,536\" (no maximum column: not adjustable)"),
)}
