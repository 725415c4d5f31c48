"""InCluster: everything applied through the control plane's admin kubeconfig, as one layer.

The layer needs an API server that answers, which a first `pulumi up` does not have until the VMs
have booted; the stack turns the layer on (`cluster.inCluster.enabled`) for the second run
(docs/operations.md, first bootstrap).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.azure.addon_identities import AddonAzureRefs
from components.kubernetes.add_ons import Capacity, GpuHealth, Networking
from components.kubernetes.scheduling import Scheduling
from components.planning.cluster_plan import ClusterPlan


class InCluster(pulumi.ComponentResource):
    def __init__(self, name: str, plan: ClusterPlan, kubeconfig: pulumi.Input[str], azure: AddonAzureRefs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:InCluster", name, None, opts)
        # Every object goes through the provider, so the provider carries the wait for the control plane.
        self.provider = k8s.Provider(f"{name}-provider", kubeconfig=kubeconfig, enable_server_side_apply=True,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None))
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        self.networking = Networking(f"{name}-networking", plan, azure, child)
        self.scheduling = Scheduling(f"{name}-scheduling", plan.scheduling, plan.spec.in_cluster, child)
        self.capacity = Capacity(f"{name}-capacity", plan, azure, pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=self.scheduling.priority_classes)))
        self.gpu_health = GpuHealth(f"{name}-gpu-health", plan, pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=self.scheduling.priority_classes)))
        self.register_outputs({})
