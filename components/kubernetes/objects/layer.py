"""The in-cluster layer's own objects, per component, exactly as the components declare them (images served by the
cluster's registry). The bring-up simulation reads these same objects (components/simulation/bring_up_layer.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpucluster.kubernetes.objects.autoscaler import autoscaler_objects
from gpucluster.kubernetes.objects.balloons import COMPONENT as BALLOON
from gpucluster.kubernetes.objects.balloons import balloon_objects
from gpucluster.kubernetes.objects.common import Object
from gpucluster.kubernetes.objects.csr_approver import csr_approver_from_plan
from gpucluster.kubernetes.objects.dns import coredns_objects
from gpucluster.kubernetes.objects.health import health_objects
from gpucluster.kubernetes.objects.images import serve_objects
from gpucluster.kubernetes.objects.imds_guard import imds_policy
from gpucluster.kubernetes.objects.kueue import kueue_objects
from gpucluster.kubernetes.objects.metrics import metrics_objects
from gpucluster.kubernetes.objects.node_lifecycle import node_lifecycle_objects
from gpucluster.kubernetes.objects.nodelocaldns import node_local_dns_objects
from gpucluster.kubernetes.objects.prefix_ipam import prefix_ipam_objects
from gpucluster.kubernetes.objects.priority import priority_classes
from gpucluster.kubernetes.objects.rack_clique import rack_clique_objects
from gpucluster.kubernetes.objects.rdma import rdma_objects
from gpucluster.kubernetes.objects.rollout import rollout_objects
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.ip_plan import API_SERVER_PORT
from gpucluster.planning.pki import api_server_host
from gpucluster.planning.security_rules import ETCD_METRICS_PORT
from gpucluster.vocabulary import ANNOTATION_SKIP_AWAIT, LABEL_COMPONENT

AzureSettings = dict[str, Any]
"""subscription_id, tenant_id, resource_group, client_id of one add-on identity (Pulumi outputs when declared)."""


def at_deploy(identity: str) -> AzureSettings:
    """An identity's settings before deployment: what exists only once Azure created it, marked as such."""
    return {"subscription_id": "[at deploy: subscription id]", "tenant_id": "[at deploy: tenant id]",
            "resource_group": "[at deploy: resource group]", "client_id": f"[at deploy: {identity} client id]"}


def without_await(objects: list[Object]) -> list[Object]:
    """DaemonSets and the balloons marked not to be awaited. pulumi-kubernetes waits for a DaemonSet until kstatus
    calls it Current (provider/pkg/await/daemonset.go, 10 minutes by default): every desired pod available
    (sigs.k8s.io/cli-utils kstatus/status core.go), on every node of a pool of thousands, GPU diagnostics
    included. Balloons are ready only once their nodes have passed those checks. Neither is something the rest of
    the layer waits on; the bring-up simulation orders them."""
    for o in objects:
        component = (o["metadata"].get("labels") or {}).get(LABEL_COMPONENT)
        if o["kind"] == "DaemonSet" or (o["kind"] == "Deployment" and component == BALLOON):
            o["metadata"].setdefault("annotations", {})[ANNOTATION_SKIP_AWAIT] = "true"
    return objects


def networking_objects(plan: ClusterPlan, prefix_ipam: AzureSettings | None) -> list[Object]:
    """The prefix IPAM controller (prefix mode, with its identity), CoreDNS and NodeLocal DNSCache; Cilium is a
    chart."""
    host = api_server_host(plan.spec.name)
    ipam = (prefix_ipam_objects(prefix_ipam, host, API_SERVER_PORT, plan.registry.agents_image)
            if plan.prefix_mode and prefix_ipam is not None else [])
    dns = coredns_objects(plan.nodes, plan.system_nodes, str(plan.ip.dns_service_ip), plan.versions.minor)
    cache = without_await(node_local_dns_objects(str(plan.ip.dns_service_ip)))
    return serve_objects([*ipam, *dns, *cache], plan.registry)


def scheduling_objects(plan: ClusterPlan) -> tuple[list[Object], list[Object]]:
    """Priority classes, and Kueue's objects (applied after its chart)."""
    return priority_classes(), kueue_objects(plan.scheduling)


def capacity_objects(plan: ClusterPlan, autoscaler: AzureSettings) -> tuple[list[Object], list[Object]]:
    """cluster-autoscaler, and the balloons."""
    scaler = autoscaler_objects(plan.spec.name, plan.nodes, plan.spec.in_cluster.autoscaler_max_scale_down_share,
                                autoscaler, plan.versions.minor, plan.control_plane.api.count)
    return (serve_objects(scaler, plan.registry),
            without_await(serve_objects(balloon_objects(plan.balloons), plan.registry)))


def lifecycle_objects(plan: ClusterPlan, identity: AzureSettings,
                      render_json: Callable[[dict[str, Any]], Any] = json.dumps) -> list[Object]:
    """cloud-node-lifecycle: Node objects of VMs that are gone are deleted."""
    return serve_objects(node_lifecycle_objects(identity, plan.spec.location, plan.versions.minor, render_json),
                         plan.registry)


def gpu_health_objects(plan: ClusterPlan) -> list[Object]:
    image = plan.registry.agents_image
    return without_await(serve_objects([*health_objects(plan.pools, image), *rack_clique_objects(plan.pools, image)],
                                       plan.registry))


def rollout_layer_objects(plan: ClusterPlan, identity: AzureSettings) -> list[Object]:
    """The rollout controller with the plan's waves (objects/rollout.py)."""
    objects = rollout_objects(plan.rollout, identity, plan.registry.agents_image, api_server_host(plan.spec.name),
                              API_SERVER_PORT)
    return serve_objects(objects, plan.registry)


def csr_objects(plan: ClusterPlan) -> list[Object]:
    return serve_objects(csr_approver_from_plan(plan), plan.registry)


def device_objects(plan: ClusterPlan) -> list[Object]:
    """The RDMA shared device plugin on InfiniBand pools."""
    return without_await(serve_objects(rdma_objects(plan.pools), plan.registry))


def telemetry_objects(plan: ClusterPlan, remote_write_url: Any, client_id: Any,
                      render_yaml: Callable[[Any], Any] | None = None) -> list[Object]:
    """node_exporter, kube-state-metrics and the edge Prometheus shards (docs/metrics.md); etcd's metrics listener
    on each member's address."""
    etcd = [f"{address}:{ETCD_METRICS_PORT}" for address in plan.boot.etcd_addresses.values()]
    return without_await(serve_objects(metrics_objects(plan.metrics, plan.spec.name, etcd, remote_write_url, client_id,
                                                       render_yaml), plan.registry))


def _workload_objects(plan: ClusterPlan) -> list[Object]:
    priority, kueue = scheduling_objects(plan)
    scaler, balloons = capacity_objects(plan, at_deploy("cluster-autoscaler"))
    return [*networking_objects(plan, at_deploy("prefix-ipam")), *priority, *kueue, *scaler, *balloons,
            *lifecycle_objects(plan, at_deploy("node-lifecycle")), *gpu_health_objects(plan), *device_objects(plan),
            *csr_objects(plan), *rollout_layer_objects(plan, at_deploy("rollout")),
            *telemetry_objects(plan, "[at deploy: remote write URL]", "[at deploy: metrics client id]")]


def imds_objects(plan: ClusterPlan) -> list[Object]:
    """The IMDS guard, from the layer's own pods (which of them sign in with a managed identity is in their specs,
    not in the identities' values, so the objects with values known only at deploy decide the same)."""
    return imds_policy(_workload_objects(plan))


def layer_objects(plan: ClusterPlan) -> list[Object]:
    """Every object of the layer but the charts', as declared, with identities marked as known only at deploy."""
    objects = _workload_objects(plan)
    return [*objects, *imds_policy(objects)]
