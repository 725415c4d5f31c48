"""What the plan expects to find deployed, read from the ClusterPlan alone (no Pulumi program run, no Azure)."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_images import API_SCALE_SET as API_SCALE_SET  # the API servers' scale set, re-exported
from gpucluster.planning.node_images import version_id
from gpucluster.planning.placement import PoolPlan, ScaleSetPlan

PROVIDERS = ("Microsoft.Compute", "Microsoft.Network", "Microsoft.Storage", "Microsoft.ManagedIdentity",
             "Microsoft.ContainerRegistry", "Microsoft.VirtualMachineImages")
"""Resource providers of what every stack declares (components/azure/: scale sets, VMs, disk encryption sets and the
node images' gallery; networks, load balancer, NAT gateway, private endpoint and DNS zone; the etcd snapshot account;
identities; the registry; the Image Builder templates). Microsoft.KeyVault is added for confidential pools with
customer-managed keys (confidential_key.py). An unregistered provider refuses every request of its namespace
(azure-docs articles/azure-resource-manager/troubleshooting/error-register-resource-provider.md)."""


@dataclass(frozen=True)
class Placement:
    """One size in one zone, and what puts it there."""

    size: str
    zone: str
    used_by: str


def machine_image_id(plan: ClusterPlan, subscription: str, machine: str) -> str:
    """The gallery image version id a scale set or VM boots: its NodeImage in the plan, named as
    components/azure/node_images.py distributes it and components/azure/scale_set/body.py `gallery_image` boots it."""
    return version_id(subscription, resource_group_name(plan.spec.name), plan.spec.name, plan.images.machines[machine])


def placements(plan: ClusterPlan) -> list[Placement]:
    """Every (size, zone) the plan places a VM in: pools' scale sets, API servers, etcd and events-etcd members, and
    the deployment runner (components/planning/deploy_runner.py), whose zone the plan cannot settle either."""
    found: dict[tuple[str, str], list[str]] = {}
    for pool in plan.pools:
        for scale_set in pool.scale_sets:
            found.setdefault((pool.size.name, scale_set.zone), []).append(f"pool {pool.name}")
    cp = plan.control_plane
    for zone in cp.api.zones:
        found.setdefault((cp.api.size.name, zone), []).append("API servers")
    for etcd in (e for e in (cp.etcd, cp.events) if e is not None):
        for member in etcd.members:
            found.setdefault((etcd.size.name, member.zone), []).append(etcd.role)
    if plan.deploy_runner is not None:
        found.setdefault((plan.deploy_runner.size.name, plan.deploy_runner.zone), []).append("deployment runner")
    return [Placement(size, zone, ", ".join(dict.fromkeys(users))) for (size, zone), users in sorted(found.items())]


METRICS_PROVIDERS = ("Microsoft.Monitor", "Microsoft.AlertsManagement", "Microsoft.Insights")
"""With the in-cluster layer, the metrics pipeline's workspace (Microsoft.Monitor accounts), its rule groups
(Microsoft.AlertsManagement prometheusRuleGroups) and the workspace's default data collection rule and endpoint the
program reads (Microsoft.Insights; components/azure/metrics_workspace.py)."""


def providers(plan: ClusterPlan) -> tuple[str, ...]:
    keys = any(p.confidential is not None and p.confidential.customer_key is not None for p in plan.pools)
    metrics = METRICS_PROVIDERS if plan.spec.in_cluster.enabled else ()
    return (*PROVIDERS, *(("Microsoft.KeyVault",) if keys else ()), *metrics)


def scale_sets(plan: ClusterPlan) -> list[tuple[PoolPlan, ScaleSetPlan]]:
    return [(pool, s) for pool in plan.pools for s in pool.scale_sets]
