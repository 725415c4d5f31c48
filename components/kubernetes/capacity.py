"""The cluster's capacity add-ons: cluster-autoscaler, balloons, cloud-node-lifecycle and the rollout controller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from gpucluster.azure.addon_identities import AddonAzureRefs
from gpucluster.kubernetes.declare import declare_staged
from gpucluster.kubernetes.objects.layer import capacity_objects, lifecycle_objects, rollout_layer_objects
from gpucluster.planning.cluster_plan import ClusterPlan


@dataclass(frozen=True)
class CapacityArgs:
    """The inputs of Capacity."""

    plan: ClusterPlan
    """The cluster plan: pools and their scale sets, balloons, the rollout waves."""
    addon_refs: AddonAzureRefs
    """The add-ons' Azure identities: the autoscaler, cloud-node-lifecycle and the rollout controller sign in as them."""
    after: Sequence[pulumi.Resource] = ()
    """What the workloads wait for (pod networking, the ProvisioningRequest CRD)."""


class Capacity(pulumi.ComponentResource):
    """cluster-autoscaler, balloons, cloud-node-lifecycle: namespaces and service accounts at once, the rest after
    `after`."""

    autoscaler: list[pulumi.CustomResource]
    """cluster-autoscaler's objects."""
    balloons: list[pulumi.CustomResource]
    """The balloon deployments that hold warm capacity."""

    def __init__(self, name: str, args: CapacityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:Capacity", name, None, opts)
        plan, azure, after = args.plan, args.addon_refs, args.after
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
        self.register_outputs({"autoscalerObjects": len(self.autoscaler), "balloonObjects": len(self.balloons)})
