"""GpuCluster: composes the network, node pools and control plane from one CheckedPlan."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_tls as tls

from components.azure.addon_identities import AddonIdentities
from components.azure.bootstrap_token import BootstrapTokens
from components.azure.control_plane import ControlPlane
from components.azure.deploy_runner import DeployRunner
from components.azure.metrics_workspace import MetricsWorkspace
from components.azure.network import Network
from components.azure.node_images import NodeImages
from components.azure.node_pool import NodeAccess, NodeJoin, NodePool
from components.azure.pki import ClusterPki
from components.azure.registry import ContainerRegistry
from components.azure.scale_sets_ready import ScaleSetsReady, ready_entry
from components.bootstrap.kubeconfig import render_kubeconfig
from components.kubernetes.in_cluster import InCluster, TelemetryRefs
from components.kubernetes.join_access import JoinAccess
from components.planning.cluster_plan import ClusterPlan
from components.planning.ip_plan import pool_block_name
from components.planning.pki import BREAK_GLASS_CERT, plan_certificates
from components.planning.tags import base_tags
from components.simulation.check import CheckedPlan
from components.spec import PoolKind


class GpuCluster(pulumi.ComponentResource):
    def __init__(self, name: str, plan: CheckedPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        # What the checks refuse, `pulumi up` refuses: only a plan from `plan_checked` is declared.
        if not isinstance(plan, CheckedPlan):
            raise TypeError(f"GpuCluster takes a CheckedPlan, not a {type(plan).__name__}: plan the spec with "
                            "plan_checked(spec) (components/simulation/check.py)")
        super().__init__("gpucluster:index:GpuCluster", name, None, opts)
        spec = plan.spec
        child = pulumi.ResourceOptions(parent=self)
        self.network = Network(name, plan, child)
        self.node_images = NodeImages(f"{name}-images", plan, self.network.refs.resource_group_name,
                                      self.network.refs.location, base_tags(spec.name, spec.tags), child)
        images = self.node_images.ids
        self.pki = ClusterPki(f"{name}-pki", spec.name, plan_certificates(spec.name, plan.ip, plan.control_plane), child)
        self.bootstrap_tokens = BootstrapTokens(f"{name}-bootstrap-token", plan.tokens, child)
        # Every image comes from the cluster's registry, through its private endpoint (docs/registry.md).
        self.registry = ContainerRegistry(f"{name}-registry", spec, plan.registry, self.network.refs,
                                          base_tags(spec.name, spec.tags), child)
        pull = self.registry.access
        join = NodeJoin(plan=plan, bootstrap_token=self.bootstrap_tokens.current, ca_cert_hash=self.pki.ca_cert_hash,
                        pull_client_id=pull.client_id, tenant_id=pull.tenant_id)
        keys: list[pulumi.Input[str]] = list(spec.access.ssh_public_keys)
        self.break_glass_key: tls.PrivateKey | None = None
        if not keys:
            self.break_glass_key = tls.PrivateKey(f"{name}-break-glass-ssh", algorithm="ED25519", opts=child)
            keys = [self.break_glass_key.public_key_openssh]
        access = NodeAccess(spec.access.admin_username, keys)
        # The machine inside the VNet that step 2 of the first `pulumi up` runs on: step 1 creates it, so nothing
        # here may depend on the join access (docs/operations.md, "First bootstrap").
        self.deploy_runner = (DeployRunner(f"{name}-deploy-runner", spec.name, plan.deploy_runner, self.network.refs,
                                           access, spec.tags, child)
                              if plan.deploy_runner is not None else None)
        self.control_plane = ControlPlane(f"{name}-cp", plan, self.network.refs, self.pki, access, pull, images, child)
        self.addon_identities = AddonIdentities(f"{name}-addons", self.network.refs.resource_group_name,
                                                self.network.refs.location, base_tags(spec.name, spec.tags), child,
                                                cluster=spec.name, gallery_id=self.node_images.gallery.id,
                                                prefix_mode=plan.prefix_mode)
        admin = self.pki.certificates["admin"]
        # Admins dial the load balancer's address (in the API server's certSANs); machines dial its name.
        endpoint = plan.ip.api_server_endpoint
        self.admin_kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            self.pki.ca_cert_pem, admin.cert.cert_pem, admin.key.private_key_pem).apply(
            lambda pems: render_kubeconfig(spec.name, endpoint, pems[0], pems[1], pems[2])))
        # Kept apart from the admin kubeconfig: the exempt group's certificate, at the break-glass frontend when the
        # stack has one (else the normal endpoint); docs/operations.md, "When the API servers are overloaded".
        glass = self.pki.certificates[BREAK_GLASS_CERT]
        glass_endpoint = plan.ip.break_glass_endpoint if spec.access.break_glass else endpoint
        self.break_glass_kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            self.pki.ca_cert_pem, glass.cert.cert_pem, glass.key.private_key_pem).apply(
            lambda pems: render_kubeconfig(spec.name, glass_endpoint, pems[0], pems[1], pems[2], user="breakglass")))
        # The tokens, cluster-info and kubeadm's join RBAC, once the API servers answer; nodes are created after.
        self.join_access = JoinAccess(f"{name}-join", plan, self.bootstrap_tokens, self.admin_kubeconfig,
                                      self.pki.ca_cert_pem, pulumi.ResourceOptions(
            parent=self, depends_on=[self.control_plane]))
        # The metrics pipeline's workspace and writer identity (docs/metrics.md): the shards run on the system pool.
        self.metrics: MetricsWorkspace | None = None
        if spec.in_cluster.enabled and plan.metrics is not None:
            api = plan.control_plane.api.flags
            self.metrics = MetricsWorkspace(f"{name}-metrics", spec.name, plan.metrics,
                                            api.max_requests_inflight + api.max_mutating_requests_inflight,
                                            self.network.refs.resource_group_name, self.network.refs.location,
                                            base_tags(spec.name, spec.tags), child)
        system_identities = [*self.addon_identities.identity_ids,
                             *([self.metrics.identity.id] if self.metrics is not None else [])]
        pools = pulumi.ResourceOptions(parent=self, depends_on=[self.join_access])
        # Add-ons that call Azure (autoscaler, CNI operator) run on the system pool and use these identities.
        self.node_pools = [
            NodePool(f"{name}-{pool.name}", spec.name, pool, self.network.refs,
                     self.network.refs.subnet_ids[pool_block_name(pool.name)], join, access, images, pools,
                     identity_ids=[pull.identity_id, *(system_identities
                                                       if pool.spec.kind is PoolKind.SYSTEM else [])],
                     acknowledged_domains=spec.acknowledge_deletions.infiniband_domains)
            for pool in plan.pools
        ]
        # The scale sets' creates return once ARM accepted them; this one resource waits for all their allocations
        # (one dynamic-provider worker, not one per scale set: docs/performance.md). What needs nodes waits on it.
        self.nodes_ready = ScaleSetsReady(f"{name}-nodes-ready", [
            ready_entry(scale_set, pool, scale_set_plan)
            for pool, node_pool in zip(plan.pools, self.node_pools, strict=True)
            for scale_set, scale_set_plan in zip(node_pool.scale_sets, pool.scale_sets, strict=True)], child)
        self.in_cluster: InCluster | None = None
        if spec.in_cluster.enabled:
            # Waits for the control plane and the nodes, so the API server exists before it is called.
            self.in_cluster = InCluster(f"{name}-in-cluster", plan, self.admin_kubeconfig, self.pki.ca_cert_pem,
                                        self.addon_identities.refs,
                                        pulumi.ResourceOptions(
                parent=self, depends_on=[self.control_plane, self.nodes_ready, self.registry.agents_image]),
                                        telemetry=TelemetryRefs(self.metrics.remote_write_url, self.metrics.client_id)
                                        if self.metrics is not None else None)
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
            "vnetAddressEntries": capacity.vnet_entries,
            "podIpsOnNodes": capacity.pod_ips_on_nodes,
        },
        "pools": {
            p.name: {"vmSize": p.size.name, "nodes": p.nodes, "gpus": p.gpus,
                     "scaleSets": {s.name: s.capacity for s in p.scale_sets}}
            for p in plan.pools
        },
        "egress": {"publicIps": plan.egress.public_ips, "snatPorts": plan.egress.snat_ports},
    }
