"""Networking (Cilium with Azure IPAM, CoreDNS), capacity (balloons, cluster-autoscaler) and GPU health
(NVIDIA GPU operator, health DaemonSets and re-check CronJobs)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.azure.addon_identities import AddonAzureRefs
from components.catalog.in_cluster import (
    CILIUM_CHART,
    CILIUM_REPO,
    CILIUM_VERSION,
    GPU_OPERATOR_CHART,
    GPU_OPERATOR_NAMESPACE,
    GPU_OPERATOR_REPO,
    GPU_OPERATOR_VERSION,
)
from components.kubernetes.declare import declare_staged
from components.kubernetes.objects.charts import cilium_values, gpu_operator_values
from components.kubernetes.objects.images import serve_chart_values
from components.kubernetes.objects.layer import (
    capacity_objects,
    device_objects,
    gpu_health_objects,
    lifecycle_objects,
    networking_objects,
    rollout_layer_objects,
)
from components.kubernetes.objects.prefix_ipam import APP as PREFIX_IPAM_APP
from components.kubernetes.objects.releases import CILIUM_RELEASE, GPU_OPERATOR_RELEASE, ReleaseOptions
from components.planning.cluster_plan import ClusterPlan
from components.planning.ip_plan import API_SERVER_PORT
from components.planning.pki import api_server_host


def release(name: str, options: ReleaseOptions, chart: str, version: str, namespace: str, values: dict[str, object],
            opts: pulumi.ResourceOptions, repo: str | None = None) -> k8s.helm.v3.Release:
    """A Helm release installed as `options` says (objects/releases.py): never atomic, waiting only where the
    chart's readiness rule can be met at the cluster's size."""
    return k8s.helm.v3.Release(
        name, name=options.chart, chart=chart, version=version, namespace=namespace, create_namespace=True,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo) if repo else None, values=values,
        atomic=options.atomic, skip_await=not options.wait, timeout=options.timeout_seconds, opts=opts)


class Networking(pulumi.ComponentResource):
    """Cilium, the prefix IPAM controller and DNS; their objects after `after` (the priority classes they use)."""

    def __init__(self, name: str, plan: ClusterPlan, azure: AddonAzureRefs,
                 opts: pulumi.ResourceOptions | None = None, after: Sequence[pulumi.Resource] = ()) -> None:
        super().__init__("gpucluster:kubernetes:Networking", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        prefix_mode = plan.prefix_mode
        host = api_server_host(plan.spec.name)
        cni_identity = azure.settings(azure.cni_client_id) if azure.cni_client_id is not None else {}
        values = cilium_values(host, API_SERVER_PORT, str(plan.ip.address_space[0]), cni_identity, prefix_mode,
                               plan.cni_rollout.max_unavailable)
        self.cni = release(f"{name}-cilium", CILIUM_RELEASE, CILIUM_CHART, CILIUM_VERSION, "kube-system",
                           serve_chart_values("cilium", values, plan.registry), child, CILIUM_REPO)
        # With `ipam: crd` Cilium takes the /28 blocks the prefix IPAM controller publishes (objects/prefix_ipam.py).
        ipam = azure.settings(azure.prefix_ipam_client_id) if azure.prefix_ipam_client_id is not None else None
        objects = networking_objects(plan, ipam)
        self.prefix_ipam = declare_staged([o for o in objects if o["metadata"]["name"] == PREFIX_IPAM_APP], child,
                                          after)
        self.dns = declare_staged([o for o in objects if o["metadata"]["name"] != PREFIX_IPAM_APP], child, after)
        self.register_outputs({})


class Capacity(pulumi.ComponentResource):
    """cluster-autoscaler, balloons, cloud-node-lifecycle: namespaces and service accounts at once, the rest after
    `after`."""

    def __init__(self, name: str, plan: ClusterPlan, azure: AddonAzureRefs,
                 opts: pulumi.ResourceOptions | None = None, after: Sequence[pulumi.Resource] = ()) -> None:
        super().__init__("gpucluster:kubernetes:Capacity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        scaler, balloons = capacity_objects(plan, azure.settings(azure.autoscaler_client_id))
        self.autoscaler = declare_staged(scaler, child, after)
        self.balloons = declare_staged(balloons, child, after)
        # Nodes whose VM is gone (scaled down, deleted) are deleted, so they neither count against --max-nodes-total
        # nor leave a stale CiliumNode for a reused address block.
        self.node_lifecycle = declare_staged(lifecycle_objects(
            plan, azure.settings(azure.node_lifecycle_client_id), pulumi.Output.json_dumps), child, after) \
            if azure.node_lifecycle_client_id is not None else []
        # The rollout controller re-images scale sets wave by wave when a change needs it (objects/rollout.py).
        self.rollout = declare_staged(rollout_layer_objects(plan, azure.settings(azure.rollout_client_id)), child,
                                      after) if azure.rollout_client_id is not None else []
        self.register_outputs({})


class GpuHealth(pulumi.ComponentResource):
    """The GPU operator after `after`; the health checks' namespace and service accounts at once, their pods after
    the operator."""

    def __init__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None,
                 after: Sequence[pulumi.Resource] = ()) -> None:
        super().__init__("gpucluster:kubernetes:GpuHealth", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        values = serve_chart_values("gpu-operator", gpu_operator_values(racks=any(p.racks for p in plan.pools)),
                                    plan.registry)
        self.operator = release(f"{name}-gpu-operator", GPU_OPERATOR_RELEASE, GPU_OPERATOR_CHART, GPU_OPERATOR_VERSION,
                                GPU_OPERATOR_NAMESPACE, values, pulumi.ResourceOptions.merge(
                                    child, pulumi.ResourceOptions(depends_on=list(after))), GPU_OPERATOR_REPO)
        # The checks talk to the operator's DCGM host engine (its `nvidia-dcgm` Service).
        self.checks = declare_staged(gpu_health_objects(plan), child, [*after, self.operator])
        # InfiniBand HCAs as the extended resource rdma/ib, for NCCL in pods (objects/rdma.py).
        self.rdma = declare_staged(device_objects(plan), child, after)
        self.register_outputs({})
