"""ControlPlane: the API servers' internal load balancer, the etcd clusters and their snapshot storage."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.api_servers import ApiServersArgs, api_server_scale_set
from gpucluster.azure.etcd_cluster import EtcdCluster, EtcdClusterArgs
from gpucluster.azure.network import NetworkRefs
from gpucluster.azure.node_images import ImageIds
from gpucluster.azure.pki import ClusterPki
from gpucluster.azure.registry import RegistryAccess
from gpucluster.azure.scale_set.body import NodeAccess
from gpucluster.azure.scope import AzureScope
from gpucluster.catalog.azure_roles import STORAGE_BLOB_DATA_CONTRIBUTOR, role_definition_id
from gpucluster.planning.azure_names import resource_group_name, storage_account_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.ip_plan import API_SERVER_PORT, CONTROL_PLANE_BLOCK, ETCD_BLOCK

SNAPSHOT_CONTAINER = "etcd-snapshots"
LB_NAME = "apiserver"
BREAK_GLASS_FRONTEND = "apiserver-breakglass"


def _lb_child_id(subscription: pulumi.Input[str], rg: pulumi.Input[str], kind: str, name: str) -> pulumi.Output[str]:
    return pulumi.Output.concat("/subscriptions/", subscription, "/resourceGroups/", rg,
                                f"/providers/Microsoft.Network/loadBalancers/{LB_NAME}/{kind}/{name}")


@dataclass(frozen=True)
class ControlPlaneArgs:
    """The inputs of ControlPlane."""

    scope: AzureScope
    """Where the load balancer, the snapshot account, the etcd members and the API-server scale set go."""
    plan: ClusterPlan
    """The cluster plan: the control plane's sizes and zones (`plan.control_plane`), its addresses (`plan.ip`)."""
    network: NetworkRefs
    """The control-plane and etcd subnets."""
    pki: ClusterPki
    """The cluster's certificates: the API servers' and etcd members' boot documents carry them."""
    access: NodeAccess
    """The admin user and SSH keys of every machine."""
    registry: RegistryAccess
    """The pull identity the API servers carry."""
    images: ImageIds
    """The cluster's node image versions (NodeImages.ids)."""


class ControlPlane(pulumi.ComponentResource):
    """The API servers behind their internal load balancer, the etcd clusters and their snapshot storage."""

    load_balancer: azure.network.LoadBalancer
    """The API servers' internal load balancer (and the break-glass frontend when the stack has one)."""
    etcd_clusters: list[EtcdCluster]
    """The main etcd cluster, and the events cluster when the plan splits one off."""
    api_servers: azure.compute.VirtualMachineScaleSet
    """The API servers' scale set (azure-native's typed class: no autoscaler)."""

    def __init__(self, name: str, args: ControlPlaneArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:ControlPlane", name, None, opts)
        plan, network, pki, access, registry, images = (args.plan, args.network, args.pki, args.access, args.registry,
                                                        args.images)
        spec, cp = plan.spec, plan.control_plane
        child = pulumi.ResourceOptions(parent=self)
        rg, location, tags = args.scope.resource_group_name, args.scope.location, dict(args.scope.tags)
        subscription = pulumi.Output.from_input(args.scope.subscription_id)

        def lb_id(kind: str, child_name: str) -> pulumi.Output[str]:
            return _lb_child_id(subscription, rg, kind, child_name)

        def frontend(frontend_name: str, address: str) -> azure.network.FrontendIPConfigurationArgs:
            return azure.network.FrontendIPConfigurationArgs(
                name=frontend_name, private_ip_address=address, private_ip_allocation_method="Static",
                zones=list(plan.control_plane.api.zones),
                subnet=azure.network.SubnetArgs(id=network.subnet_ids[CONTROL_PLANE_BLOCK]))

        def rule(frontend_name: str) -> azure.network.LoadBalancingRuleArgs:
            return azure.network.LoadBalancingRuleArgs(
                name=frontend_name, protocol="Tcp", frontend_port=API_SERVER_PORT, backend_port=API_SERVER_PORT,
                frontend_ip_configuration=azure.network.SubResourceArgs(id=lb_id("frontendIPConfigurations",
                                                                                 frontend_name)),
                backend_address_pool=azure.network.SubResourceArgs(id=lb_id("backendAddressPools", "apiservers")),
                probe=azure.network.SubResourceArgs(id=lb_id("probes", "readyz")),
                idle_timeout_in_minutes=30, enable_tcp_reset=True, disable_outbound_snat=True)

        # The break-glass frontend: the same API servers at an address only its own NSG rule's networks reach
        # (security_rules.py allow-apiserver-breakglass); docs/operations.md says when to use it.
        frontends = [("apiserver", str(plan.ip.api_server_ip)),
                     *([(BREAK_GLASS_FRONTEND, str(plan.ip.break_glass_ip))] if spec.access.break_glass else [])]
        self.load_balancer = azure.network.LoadBalancer(
            f"{name}-apiserver-lb", load_balancer_name=LB_NAME, resource_group_name=rg, location=location, tags=tags,
            sku=azure.network.LoadBalancerSkuArgs(name="Standard", tier="Regional"),
            frontend_ip_configurations=[frontend(n, a) for n, a in frontends],
            backend_address_pools=[azure.network.BackendAddressPoolArgs(name="apiservers")],
            probes=[azure.network.ProbeArgs(name="readyz", protocol="Https", port=API_SERVER_PORT, request_path="/readyz",
                                            interval_in_seconds=5, number_of_probes=2)],
            load_balancing_rules=[rule(n) for n, _ in frontends],
            opts=child)
        self.api_backend_pool_id = lb_id("backendAddressPools", "apiservers")

        # Storage account names are global, 3-24 lowercase letters and digits: named here, never autonamed.
        # The snapshots are the cluster's last copy of etcd: Pulumi never deletes the account or the container.
        kept = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True))
        account_name = subscription.apply(
            lambda sub: storage_account_name(sub, resource_group_name(spec.name), spec.name, "etcd"))
        storage = azure.storage.StorageAccount(
            f"{name}-snapshots", account_name=account_name, resource_group_name=rg, location=location, tags=tags,
            kind=azure.storage.Kind.STORAGE_V2, sku=azure.storage.SkuArgs(name=azure.storage.SkuName.STANDARD_ZRS),
            allow_blob_public_access=False, allow_shared_key_access=False,
            minimum_tls_version=azure.storage.MinimumTlsVersion.TLS1_2, opts=kept)
        container = azure.storage.BlobContainer(
            f"{name}-etcd-snapshots", account_name=storage.name, resource_group_name=rg,
            container_name=SNAPSHOT_CONTAINER, public_access=azure.storage.PublicAccess.NONE, opts=kept)
        snapshot_url = pulumi.Output.concat("https://", storage.name, f".blob.core.windows.net/{SNAPSHOT_CONTAINER}")

        self.etcd_clusters = [
            EtcdCluster(f"{name}-{etcd.role}", EtcdClusterArgs(
                scope=args.scope, cluster_plan=plan, plan=etcd, subnet_id=network.subnet_ids[ETCD_BLOCK], pki=pki,
                snapshot_url=snapshot_url, access=access, images=images), child)
            for etcd in (cp.etcd, cp.events) if etcd is not None
        ]
        role = subscription.apply(lambda sub: role_definition_id(sub, STORAGE_BLOB_DATA_CONTRIBUTOR))
        for etcd_cluster in self.etcd_clusters:
            for vm, principal in zip(etcd_cluster.vms, etcd_cluster.principal_ids, strict=True):
                azure.authorization.RoleAssignment(
                    f"{vm._name}-snapshot-writer", principal_id=principal, principal_type="ServicePrincipal",
                    role_definition_id=role, scope=container.id, opts=child)
        self.api_servers = api_server_scale_set(
            f"{name}-apiserver", ApiServersArgs(
                scope=args.scope, plan=plan, subnet_id=network.subnet_ids[CONTROL_PLANE_BLOCK],
                backend_pool_id=self.api_backend_pool_id, probe_id=lb_id("probes", "readyz"), pki=pki, access=access,
                registry=registry, images=images),
            # The scale set references the load balancer's pool and probe by id: create the load balancer first.
            pulumi.ResourceOptions(parent=self, depends_on=[self.load_balancer, *self.etcd_clusters]))
        self.register_outputs({"apiServerEndpoint": plan.ip.api_server_endpoint,
                               "loadBalancerId": self.load_balancer.id, "apiServersId": self.api_servers.id})
