"""Rack pools' DRA drivers as Helm releases: NVIDIA's DRA driver (ComputeDomains) and DRANET (InfiniBand NICs), with
DRANET's DeviceClass (objects/rack_dra.py). Declared only on clusters with rack pools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.catalog.in_cluster import (
    DRA_DRIVER_CHART,
    DRA_DRIVER_NAMESPACE,
    DRA_DRIVER_REPO,
    DRA_DRIVER_VERSION,
    DRANET_CHART,
    DRANET_NAMESPACE,
    DRANET_VERSION,
)
from gpucluster.kubernetes.declare import declare_all
from gpucluster.kubernetes.helm_release import release
from gpucluster.kubernetes.objects.images import serve_chart_values
from gpucluster.kubernetes.objects.rack_dra import (
    dra_driver_values,
    dranet_db_mount,
    dranet_device_class,
    dranet_values,
)
from gpucluster.kubernetes.objects.releases import DRA_DRIVER_RELEASE, DRANET_RELEASE
from gpucluster.planning.cluster_plan import ClusterPlan


@dataclass(frozen=True)
class RackDevicesArgs:
    """The inputs of RackDevices."""

    plan: ClusterPlan
    """The cluster plan: its rack pools (the drivers' values) and registry."""
    after: Sequence[pulumi.Resource] = ()
    """What the drivers wait for (pod networking: Cilium's gate)."""


class RackDevices(pulumi.ComponentResource):
    """NVLink racks' devices through DRA: NVIDIA's DRA driver (ComputeDomains) and DRANET (InfiniBand NICs)."""

    dra_driver: k8s.helm.v3.Release
    """NVIDIA's DRA driver release."""
    dranet: k8s.helm.v3.Release
    """DRANET's release."""

    def __init__(self, name: str, args: RackDevicesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:RackDevices", name, None, opts)
        plan, after = args.plan, args.after
        child = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=self),
                                             pulumi.ResourceOptions(depends_on=list(after)))
        self.dra_driver = release(
            f"{name}-dra-driver", DRA_DRIVER_RELEASE, DRA_DRIVER_CHART, DRA_DRIVER_VERSION, DRA_DRIVER_NAMESPACE,
            serve_chart_values(DRA_DRIVER_RELEASE.chart, dra_driver_values(plan.pools), plan.registry), child,
            DRA_DRIVER_REPO)
        self.dranet = release(
            f"{name}-dranet", DRANET_RELEASE, DRANET_CHART, DRANET_VERSION, DRANET_NAMESPACE,
            serve_chart_values(DRANET_RELEASE.chart, dranet_values(plan.pools), plan.registry), child)
        patch = dranet_db_mount(DRANET_NAMESPACE)
        self.dranet_db = k8s.apps.v1.DaemonSetPatch(
            f"{name}-dranet-db", metadata=patch["metadata"], spec=patch["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.dranet]))
        self.device_class = declare_all([dranet_device_class()], child)
        self.register_outputs({"draDriverRelease": self.dra_driver.name, "dranetRelease": self.dranet.name})
