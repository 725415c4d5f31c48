"""The cluster's networking add-ons: Cilium with Azure IPAM, the prefix IPAM controller and CoreDNS."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.azure.addon_identities import AddonAzureRefs
from gpucluster.catalog.in_cluster import CILIUM_CHART, CILIUM_REPO, CILIUM_VERSION
from gpucluster.kubernetes.declare import declare_staged
from gpucluster.kubernetes.helm_release import release
from gpucluster.kubernetes.objects.charts import cilium_values
from gpucluster.kubernetes.objects.images import serve_chart_values
from gpucluster.kubernetes.objects.layer import networking_objects
from gpucluster.kubernetes.objects.prefix_ipam import APP as PREFIX_IPAM_APP
from gpucluster.kubernetes.objects.releases import CILIUM_RELEASE
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.ip_plan import API_SERVER_PORT
from gpucluster.planning.pki import api_server_host


@dataclass(frozen=True)
class NetworkingArgs:
    """The inputs of Networking."""

    plan: ClusterPlan
    """The cluster plan: the address space, the prefix mode, the Cilium agent's update width, the registry."""
    addon_refs: AddonAzureRefs
    """The add-ons' Azure identities: Cilium's Azure IPAM or the prefix IPAM controller signs in as one."""
    after: Sequence[pulumi.Resource] = ()
    """What the objects wait for (the priority classes they use)."""


class Networking(pulumi.ComponentResource):
    """Cilium, the prefix IPAM controller and DNS; their objects after `after` (the priority classes they use)."""

    cni: k8s.helm.v3.Release
    """Cilium's Helm release."""

    def __init__(self, name: str, args: NetworkingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:kubernetes:Networking", name, None, opts)
        plan, azure, after = args.plan, args.addon_refs, args.after
        child = pulumi.ResourceOptions(parent=self)
        prefix_mode = plan.prefix_mode
        host = api_server_host(plan.spec.name)
        cni_identity = azure.settings(azure.cni_client_id) if azure.cni_client_id is not None else {}
        values = cilium_values(host, API_SERVER_PORT, str(plan.ip.address_space[0]), cni_identity, prefix_mode,
                               plan.cni_update.max_unavailable)
        self.cni = release(f"{name}-cilium", CILIUM_RELEASE, CILIUM_CHART, CILIUM_VERSION, "kube-system",
                           serve_chart_values("cilium", values, plan.registry), child, CILIUM_REPO)
        # With `ipam: crd` Cilium takes the /28 blocks the prefix IPAM controller publishes (objects/prefix_ipam.py).
        ipam = azure.settings(azure.prefix_ipam_client_id) if azure.prefix_ipam_client_id is not None else None
        objects = networking_objects(plan, ipam)
        self.prefix_ipam = declare_staged([o for o in objects if o["metadata"]["name"] == PREFIX_IPAM_APP], child,
                                          after)
        self.dns = declare_staged([o for o in objects if o["metadata"]["name"] != PREFIX_IPAM_APP], child, after)
        self.register_outputs({"cilium": self.cni.name})
