"""Address entries counted against Azure's per-VNet (65,536) and per-peered-group (128,000) limits.

Azure counts what it maps, not the addresses a subnet spans: every IP configuration of a NIC is one entry,
a /28 prefix on an IP configuration is one entry, and so are a load balancer's private frontend and every
other private IP in the VNet (MicrosoftDocs/azure-docs includes/azure-virtual-network-limits.md; AKS names
the same wall "an Azure address mapping limit", learn.microsoft.com/azure/aks/azure-cni-overlay). Both
limits are fixed: no support request raises them (components/catalog/limits.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.planning.pod_addresses import api_server_pod_addresses, node_addressing
from gpucluster.spec import ClusterSpec


@dataclass(frozen=True)
class EntryLine:
    what: str
    members: int
    entries_each: int

    @property
    def entries(self) -> int:
        return self.members * self.entries_each


@dataclass(frozen=True)
class VnetEntries:
    lines: tuple[EntryLine, ...]
    hub_entries: int | None
    """Entries the peered hub and its other spokes hold (`network.hubAddressEntries`); None without a hub."""

    @property
    def vnet(self) -> int:
        return sum(line.entries for line in self.lines)

    @property
    def peered_group(self) -> int | None:
        return None if self.hub_entries is None else self.vnet + self.hub_entries


def _api_servers_line(pod_addresses: int) -> str:
    if not pod_addresses:
        return "API servers (one IP configuration each)"
    return f"API servers ({1 + pod_addresses} IP configurations each: the node's and {pod_addresses} pod addresses)"


def count_entries(spec: ClusterSpec) -> VnetEntries:
    cp = spec.control_plane
    lines = [EntryLine(f"pool {pool.name} ({pool.pod_addresses})", pool.count, node_addressing(pool).entries)
             for pool in spec.pools]
    lines += [
        EntryLine(_api_servers_line(api_server_pod_addresses(spec)), cp.api_servers.count,
                  1 + api_server_pod_addresses(spec)),
        EntryLine("API load balancer private frontend", 1, 1),
        EntryLine("etcd members", cp.etcd.members, 1),
    ]
    if cp.events_etcd:
        lines.append(EntryLine("events-etcd members", cp.events_etcd.members, 1))
    existing = spec.network.existing_vnet
    if existing is not None and existing.address_entries:
        lines.append(EntryLine("the existing VNet's other subnets (network.existingVnet.addressEntries)", 1,
                               existing.address_entries))
    hub = spec.network.hub_address_entries if spec.network.hub_vnet_id else None
    return VnetEntries(tuple(lines), hub)
