"""The GPU add-ons: NVIDIA's GPU operator, the health DaemonSets and re-check CronJobs, and the RDMA device plugin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.catalog.in_cluster import GPU_OPERATOR_CHART, GPU_OPERATOR_NAMESPACE, GPU_OPERATOR_REPO, GPU_OPERATOR_VERSION
from gpucluster.kubernetes.declare import declare_staged
from gpucluster.kubernetes.helm_release import release
from gpucluster.kubernetes.objects.charts import gpu_operator_values
from gpucluster.kubernetes.objects.images import serve_chart_values
from gpucluster.kubernetes.objects.layer import device_objects, gpu_health_objects
from gpucluster.kubernetes.objects.releases import GPU_OPERATOR_RELEASE
from gpucluster.planning.cluster_plan import ClusterPlan


@dataclass(frozen=True)
class GpuHealthArgs:
    """The inputs of GpuHealth."""

    plan: ClusterPlan
    """The cluster plan: GPU pools (rack pools change the operator's values), the registry."""
    after: Sequence[pulumi.Resource] = ()
    """What the operator and the checks wait for (pod networking)."""


class GpuHealth(pulumi.ComponentResource):
    """The GPU operator after `after`; the health checks' namespace and service accounts at once, their pods after
    the operator."""

    operator: k8s.helm.v3.Release
    """The GPU operator's Helm release."""

    def __init__(self, name: str, args: GpuHealthArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:GpuHealth", name, None, opts)
        plan, after = args.plan, args.after
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
        self.register_outputs({"gpuOperator": self.operator.name})
