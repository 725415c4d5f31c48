"""Scheduling: priority classes and Kueue (chart + queues, flavors, topology), which places gangs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.catalog.in_cluster import KUEUE_CHART, KUEUE_NAMESPACE, KUEUE_VERSION, provisioning_request_crd
from gpucluster.kubernetes.declare import declare_all, declare_staged
from gpucluster.kubernetes.helm_release import release
from gpucluster.kubernetes.objects.images import serve_chart_values
from gpucluster.kubernetes.objects.kueue import has_racks, kueue_chart_values, kueue_objects
from gpucluster.kubernetes.objects.priority import priority_classes
from gpucluster.kubernetes.objects.releases import KUEUE_RELEASE
from gpucluster.planning.registry import RegistryPlan
from gpucluster.planning.scheduling import SchedulingPlan
from gpucluster.spec import InClusterSpec


@dataclass(frozen=True)
class SchedulingArgs:
    """The inputs of Scheduling."""

    plan: SchedulingPlan
    """Teams, queues, flavors and balloons (`plan.scheduling`)."""
    settings: InClusterSpec
    """The stack's in-cluster settings (`inCluster`): Kueue's pods-ready timeout."""
    registry: RegistryPlan
    """The cluster's registry: Kueue's chart pulls its images through it."""
    minor: str
    """The Kubernetes minor version (`1.36`): the ProvisioningRequest CRD's release follows it."""


class Scheduling(pulumi.ComponentResource):
    """Priority classes and the ProvisioningRequest CRD at once (nothing gates them: the layer's pods need the
    classes, components/simulation/pulumi_order.py); Kueue once `install_kueue` is given what it waits for."""

    priority_classes: list[pulumi.CustomResource]
    """The cluster's priority classes."""
    provisioning_crd: k8s.yaml.v2.ConfigFile
    """The ProvisioningRequest CRD (Kueue's admission check and the autoscaler watch it)."""

    def __init__(self, name: str, args: SchedulingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:Scheduling", name, None, opts)
        plan, settings, registry, minor = args.plan, args.settings, args.registry, args.minor
        self._name, self._plan, self._settings, self._registry, self._minor = name, plan, settings, registry, minor
        child = pulumi.ResourceOptions(parent=self)
        self.priority_classes = declare_all(priority_classes(), child)
        # Kueue starts its ProvisioningRequest admission check controller only if the API is served when it starts
        # (kueue v0.19.2 cmd/kueue/main.go), and the autoscaler watches it: the CRD comes first.
        self.provisioning_crd = k8s.yaml.v2.ConfigFile(f"{name}-provisioning-request-crd",
                                                       file=provisioning_request_crd(minor), opts=child)

    def install_kueue(self, after: Sequence[pulumi.Resource]) -> None:
        """Kueue's chart after `after` (its controller needs pod networking), then its objects."""
        name, child = self._name, pulumi.ResourceOptions(parent=self)
        self.kueue = release(
            f"{name}-kueue", KUEUE_RELEASE, KUEUE_CHART, KUEUE_VERSION, KUEUE_NAMESPACE,
            serve_chart_values("kueue", kueue_chart_values(self._settings.pods_ready_timeout_minutes,
                                                           provisioning_request_crd(self._minor),
                                                           has_racks(self._plan)), self._registry),
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[*after, *self.priority_classes, self.provisioning_crd])))
        # Kueue's CRDs and webhooks come with the chart: its objects wait for the release.
        self.queues = declare_staged(kueue_objects(self._plan), child, [self.kueue])
        self.register_outputs({"kueueRelease": self.kueue.name})
