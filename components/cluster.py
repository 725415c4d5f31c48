"""GpuCluster: composes the network, node pools and control plane from one CheckedPlan, and publishes the
cluster's outputs (docs/architecture.md, "Using GpuCluster from a program")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_tls as tls

from gpucluster.azure.addon_identities import AddonIdentities, AddonIdentitiesArgs
from gpucluster.azure.bootstrap_token import BootstrapTokens, BootstrapTokensArgs
from gpucluster.azure.control_plane import ControlPlane, ControlPlaneArgs
from gpucluster.azure.deploy_runner import DeployRunner, DeployRunnerArgs
from gpucluster.azure.metrics_workspace import MetricsWorkspace, MetricsWorkspaceArgs
from gpucluster.azure.network import Network, NetworkArgs
from gpucluster.azure.node_images import NodeImages, NodeImagesArgs
from gpucluster.azure.pki import ClusterPki, ClusterPkiArgs
from gpucluster.azure.registry import ContainerRegistry, ContainerRegistryArgs
from gpucluster.azure.scale_set.body import NodeAccess
from gpucluster.azure.scale_set.join import NodeJoin, cluster_join
from gpucluster.azure.scale_set.pool import NodePool, NodePoolArgs
from gpucluster.azure.scale_sets_ready import ScaleSetsReady, ready_entry
from gpucluster.azure.scope import AzureScope
from gpucluster.bootstrap.kubeconfig import render_kubeconfig
from gpucluster.kubernetes.in_cluster import InCluster, InClusterArgs, TelemetryRefs
from gpucluster.kubernetes.join_access import JoinAccess, JoinAccessArgs
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.ip_plan import pool_block_name
from gpucluster.planning.pki import BREAK_GLASS_CERT, plan_certificates
from gpucluster.simulation.check import CheckedPlan
from gpucluster.spec import PoolKind


@dataclass(frozen=True)
class GpuClusterArgs:
    """The inputs of GpuCluster."""

    plan: CheckedPlan
    """The cluster's plan, checked: `plan_checked(spec)` (components/simulation/check.py) over a ClusterSpec read
    from a stack file (`parse_cluster`) or built in Python. A plain ClusterPlan is refused: what the checks refuse,
    `pulumi up` refuses."""

    def __post_init__(self) -> None:
        if not isinstance(self.plan, CheckedPlan):
            raise TypeError(f"GpuCluster takes a CheckedPlan, not a {type(self.plan).__name__}: plan the spec with "
                            "plan_checked(spec) (components/simulation/check.py)")


class GpuCluster(pulumi.ComponentResource):
    """The whole cluster from one checked plan: network, node images, PKI, tokens, registry, control plane, node
    pools and the in-cluster layer. What a program needs from it is published below; its children are attributes
    too, for a program that adds to them."""

    api_server_endpoint: str
    """`host:port` admins dial: the API servers' internal load balancer address."""
    ca_cert_hash: pulumi.Output[str]
    """`sha256:<hex>` of the cluster CA's public key (`kubeadm join --discovery-token-ca-cert-hash`)."""
    admin_kubeconfig: pulumi.Output[str]
    """The admin kubeconfig at the API endpoint (secret)."""
    break_glass_kubeconfig: pulumi.Output[str]
    """The exempt group's kubeconfig, at the break-glass frontend when the stack has one (secret)."""
    break_glass_ssh_private_key: pulumi.Output[str] | None
    """The generated admin SSH key when the stack names none (secret); None when `access.sshPublicKeys` is set."""
    bootstrap_token_ids: dict[str, pulumi.Output[str]]
    """The bootstrap tokens' public ids: `current` and `previous`."""
    vnet_id: pulumi.Output[str]
    """The cluster's VNet."""
    scale_set_ids: dict[str, pulumi.Output[str]]
    """Every node scale set's resource id, by scale-set name."""
    registry_id: pulumi.Output[str]
    """The private registry's resource id."""
    registry_login_server: str
    """The private registry's login server (`<name>.azurecr.io`, named by the plan): every image is pulled from it."""
    plans: dict[str, Any]
    """The resolved layout a reviewer reads: the IP plan, pools and their scale sets, egress (`plan_outputs`)."""
    scope: AzureScope
    """Where the cluster's Azure resources go; a program adding its own resources to the cluster uses it."""
    deploy_runner_client_id: pulumi.Output[str] | None
    """The deployment runner's identity (step 2's Run Command signs in as it); None when the stack has no runner."""
    nodes_ready: ScaleSetsReady
    """Done once every node scale set's allocation succeeded: what needs nodes depends on it."""
    node_join: NodeJoin
    """How the cluster's pools join it: `node_join.cluster` (ClusterMetadata: endpoint, version, DNS, CA hash, the
    current bootstrap token) and `node_join.registry` (the registry and the pull identity's client id). A pool the
    program declares in a network of its own joins with them (`pool_join`, examples/own_pool/)."""
    pull_identity_id: pulumi.Output[str]
    """The registry pull identity every node carries (AcrPull on the registry); a pool of the program's own carries
    it too."""

    def __init__(self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:index:GpuCluster", name, None, opts)
        plan = args.plan
        spec = plan.spec
        child = pulumi.ResourceOptions(parent=self)
        self.network = Network(name, NetworkArgs(plan=plan), child)
        refs = self.network.refs
        scope = self.scope = AzureScope.of(spec.name, refs.resource_group_name, refs.location, spec.tags)
        self.node_images = NodeImages(f"{name}-images", NodeImagesArgs(scope=scope, plan=plan), child)
        images = self.node_images.ids
        self.pki = ClusterPki(f"{name}-pki", ClusterPkiArgs(
            cluster=spec.name, certificates=plan_certificates(spec.name, plan.ip, plan.control_plane)), child)
        self.bootstrap_tokens = BootstrapTokens(f"{name}-bootstrap-token", BootstrapTokensArgs(schedule=plan.tokens),
                                                child)
        # Every image comes from the cluster's registry, through its private endpoint (docs/registry.md).
        self.registry = ContainerRegistry(f"{name}-registry", ContainerRegistryArgs(
            scope=scope, plan=plan.registry, network=self.network.refs, docker_hub=spec.registry.docker_hub,
            dns_zone_id=spec.network.existing_vnet.registry_dns_zone_id if spec.network.existing_vnet else None), child)
        pull = self.registry.access
        join = self.node_join = cluster_join(plan, self.bootstrap_tokens.current, self.pki.ca_cert_hash, pull.client_id,
                                             pull.tenant_id)
        self.pull_identity_id = pull.identity_id
        keys: list[pulumi.Input[str]] = list(spec.access.ssh_public_keys)
        self.break_glass_key: tls.PrivateKey | None = None
        if not keys:
            self.break_glass_key = tls.PrivateKey(f"{name}-break-glass-ssh", algorithm="ED25519", opts=child)
            keys = [self.break_glass_key.public_key_openssh]
        access = NodeAccess(spec.access.admin_username, keys)
        # The machine inside the VNet that step 2 of the first `pulumi up` runs on: step 1 creates it, so nothing
        # here may depend on the join access (docs/operations.md, "First bootstrap").
        self.deploy_runner = (DeployRunner(f"{name}-deploy-runner", DeployRunnerArgs(
            scope=scope, plan=plan.deploy_runner, network=self.network.refs, access=access), child)
                              if plan.deploy_runner is not None else None)
        self.control_plane = ControlPlane(f"{name}-cp", ControlPlaneArgs(
            scope=scope, plan=plan, network=self.network.refs, pki=self.pki, access=access, registry=pull,
            images=images), child)
        self.addon_identities = AddonIdentities(f"{name}-addons", AddonIdentitiesArgs(
            scope=scope, gallery_id=self.node_images.gallery.id, prefix_mode=plan.prefix_mode,
            existing_vnet_id=spec.network.existing_vnet.id if spec.network.existing_vnet else None), child)
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
        self.join_access = JoinAccess(f"{name}-join", JoinAccessArgs(
            plan=plan, tokens=self.bootstrap_tokens, kubeconfig=self.admin_kubeconfig, ca_pem=self.pki.ca_cert_pem),
            pulumi.ResourceOptions(parent=self, depends_on=[self.control_plane]))
        # The metrics pipeline's workspace and writer identity (docs/metrics.md): the shards run on the system pool.
        self.metrics: MetricsWorkspace | None = None
        if spec.in_cluster.enabled:
            api = plan.control_plane.api.flags
            self.metrics = MetricsWorkspace(f"{name}-metrics", MetricsWorkspaceArgs(
                scope=scope, plan=plan.metrics,
                inflight_limit=api.max_requests_inflight + api.max_mutating_requests_inflight), child)
        if self.metrics is not None and self.deploy_runner is not None:
            # Every run reads the workspace's default rule and endpoint (its remote-write URL) in the group Azure made
            # for them: the runner, whose roles are on the cluster's group, reads there too (docs/operations.md).
            self.deploy_runner.grant_read(f"{name}-deploy-runner-metrics", self.metrics.managed_group_id,
                                          scope.subscription_id, "reads the metrics workspace's data collection rule "
                                          "and endpoint and their role assignment, on every run")
        system_identities = [*self.addon_identities.identity_ids,
                             *([self.metrics.identity.id] if self.metrics is not None else [])]
        pools = pulumi.ResourceOptions(parent=self, depends_on=[self.join_access])
        # Add-ons that call Azure (autoscaler, CNI operator) run on the system pool and use these identities.
        self.node_pools = [
            NodePool(f"{name}-{pool.name}", NodePoolArgs(
                scope=scope, plan=pool, subnet_id=self.network.refs.subnet_ids[pool_block_name(pool.name)], join=join,
                access=access, images=images,
                identity_ids=(pull.identity_id, *(system_identities if pool.spec.kind is PoolKind.SYSTEM else [])),
                acknowledged_domains=tuple(spec.acknowledge_deletions.infiniband_domains),
                subnet_cidr=plan.ip.pool_block(pool.name).cidr),
                pools)
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
            self.in_cluster = InCluster(f"{name}-in-cluster", InClusterArgs(
                plan=plan, kubeconfig=self.admin_kubeconfig, ca_pem=self.pki.ca_cert_pem,
                addon_refs=self.addon_identities.refs,
                telemetry=TelemetryRefs(self.metrics.remote_write_url, self.metrics.client_id)
                if self.metrics is not None else None),
                pulumi.ResourceOptions(
                    parent=self, depends_on=[self.control_plane, self.nodes_ready, self.registry.agents_image]))

        self.api_server_endpoint = endpoint
        self.ca_cert_hash = self.pki.ca_cert_hash
        self.break_glass_ssh_private_key = pulumi.Output.secret(self.break_glass_key.private_key_openssh) \
            if self.break_glass_key is not None else None
        self.bootstrap_token_ids = {"current": self.bootstrap_tokens.current_id,
                                    "previous": self.bootstrap_tokens.previous_id}
        self.vnet_id = self.network.refs.vnet_id
        self.deploy_runner_client_id = self.deploy_runner.client_id if self.deploy_runner is not None else None
        self.scale_set_ids = {s.name: ss.id for p in self.node_pools
                              for s, ss in zip(p.plan.scale_sets, p.scale_sets, strict=True)}
        self.registry_id = self.registry.registry.id
        self.registry_login_server = plan.registry.login_server
        self.plans = plan_outputs(plan)
        self.register_outputs({
            "apiServerEndpoint": self.api_server_endpoint, "caCertHash": self.ca_cert_hash,
            "adminKubeconfig": self.admin_kubeconfig, "breakGlassKubeconfig": self.break_glass_kubeconfig,
            "bootstrapTokenIds": self.bootstrap_token_ids, "vnetId": self.vnet_id,
            "deployRunnerClientId": self.deploy_runner_client_id,
            "scaleSetIds": self.scale_set_ids, "registryId": self.registry_id,
            "registryLoginServer": self.registry_login_server,
            "plans": self.plans})

    def stack_outputs(self) -> dict[str, Any]:
        """What `__main__.py` exports, from the published attributes above: the plans, then the cluster's
        endpoint, CA hash, tokens and kubeconfigs."""
        tokens = self.bootstrap_tokens.schedule
        outputs: dict[str, Any] = {
            **self.plans,
            "vnetId": self.vnet_id,
            "caCertHash": self.ca_cert_hash,
            "bootstrapTokenId": self.bootstrap_token_ids["current"],
            "bootstrapTokens": {
                "current": {"id": self.bootstrap_token_ids["current"], "expires": tokens.current.expiration},
                "previous": {"id": self.bootstrap_token_ids["previous"], "expires": tokens.previous.expiration},
                "rotates": tokens.rotates.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "apiServerEndpoint": self.api_server_endpoint,
            "adminKubeconfig": self.admin_kubeconfig,
            "breakGlassKubeconfig": self.break_glass_kubeconfig,
        }
        if self.break_glass_ssh_private_key is not None:
            outputs["breakGlassSshPrivateKey"] = self.break_glass_ssh_private_key
        if self.deploy_runner_client_id is not None:
            # Step 2's command reads it (docs/operations.md, "First bootstrap").
            outputs["deployRunnerClientId"] = self.deploy_runner_client_id
        return outputs


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
