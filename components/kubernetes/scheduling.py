"""Scheduling: priority classes and Kueue (chart + queues, flavors, topology), which places gangs."""

from __future__ import annotations

import pulumi

from components.catalog.in_cluster import KUEUE_CHART, KUEUE_NAMESPACE, KUEUE_VERSION
from components.kubernetes.add_ons import release
from components.kubernetes.declare import declare_all
from components.kubernetes.objects.images import serve_chart_values
from components.kubernetes.objects.kueue import kueue_chart_values, kueue_objects
from components.kubernetes.objects.priority import priority_classes
from components.kubernetes.objects.releases import KUEUE_RELEASE
from components.planning.registry import RegistryPlan
from components.planning.scheduling import SchedulingPlan
from components.spec import InClusterSpec


class Scheduling(pulumi.ComponentResource):
    def __init__(self, name: str, plan: SchedulingPlan, settings: InClusterSpec, registry: RegistryPlan,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:Scheduling", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.priority_classes = declare_all(priority_classes(), child)
        self.kueue = release(
            f"{name}-kueue", KUEUE_RELEASE, KUEUE_CHART, KUEUE_VERSION, KUEUE_NAMESPACE,
            serve_chart_values("kueue", kueue_chart_values(settings.pods_ready_timeout_minutes), registry),
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=self.priority_classes)))
        # Kueue's CRDs and webhooks come with the chart: its objects wait for the release.
        self.queues = declare_all(kueue_objects(plan), pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[self.kueue])))
        self.register_outputs({})
