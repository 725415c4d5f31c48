"""GpuCluster: composes the network, node pools and control plane from one ClusterPlan."""

from __future__ import annotations

from typing import Any

import pulumi

from components.azure.network import Network
from components.planning.cluster_plan import ClusterPlan


class GpuCluster(pulumi.ComponentResource):
    def __init__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:index:GpuCluster", name, None, opts)
        self.network = Network(name, plan, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"vnetId": self.network.refs.vnet_id})


def plan_outputs(plan: ClusterPlan) -> dict[str, Any]:
    """The resolved layout as stack outputs, so a reviewer sees blocks and domains, not only config."""
    capacity = plan.ip.capacity
    return {
        "ipPlan": {
            "addressSpace": [str(s) for s in plan.ip.address_space],
            "serviceCidr": str(plan.ip.service_cidr),
            "dnsServiceIp": str(plan.ip.dns_service_ip),
            "blocks": {b.name: str(b.cidr) for b in plan.ip.blocks},
            "podIpsNeeded": capacity.pod_ips_needed,
            "podIpCapacity": capacity.pod_ip_capacity,
            "privateIpsNeeded": capacity.private_ips_needed,
            "privateIpLimit": capacity.private_ip_limit,
        },
        "pools": {
            p.name: {"vmSize": p.size.name, "nodes": p.nodes, "gpus": p.gpus,
                     "scaleSets": {s.name: s.capacity for s in p.scale_sets}}
            for p in plan.pools
        },
        "egress": {"publicIps": plan.egress.public_ips, "snatPorts": plan.egress.snat_ports},
    }
