"""What a pool's nodes need to join their cluster, without the cluster's plan: `ClusterMetadata` (the control plane's
address, version and DNS, the CA hash and a bootstrap token: what pulumi-eks' ClusterMetadata carries for a node
group), the registry the images come through, and each scale set's own join facts and image.

GpuCluster builds it from its plan (`cluster_join`) and publishes it (`GpuCluster.node_join`); a program adding a pool
of its own (a CPU pool in a network of its own, examples/own_pool/) joins it with that and the pool's plan
(`pool_join`)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from gpucluster.bootstrap.from_plan import ControlPlaneFacts, control_plane_facts, registry_mirrors
from gpucluster.bootstrap.registry import Mirror
from gpucluster.errors import Problem, SpecError
from gpucluster.planning.boot_plan import NodeBoot, pool_nodes
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_images import NodeImage
from gpucluster.planning.node_template import registers_preflight
from gpucluster.planning.placement import PoolPlan


@dataclass(frozen=True)
class ClusterMetadata:
    """The cluster a node joins. The Service range is not here: a kubelet does not read it (the API servers do)."""

    endpoint: str
    """kubeadm's controlPlaneEndpoint, `<host>:<port>` (GpuCluster.api_server_endpoint)."""
    api_server_address: str
    """The address the endpoint's host resolves to on the nodes (GpuCluster.api_server_address): the boot writes it
    to /etc/hosts."""
    kubernetes_version: str
    """The cluster's Kubernetes version: the kubelet and kubeadm the node image carries."""
    cluster_dns: str
    """The kubelets' clusterDNS (GpuCluster.cluster_dns)."""
    ca_cert_hash: pulumi.Input[str]
    """`sha256:<hex>` of the cluster CA's public key (GpuCluster.ca_cert_hash)."""
    bootstrap_token: pulumi.Input[str]
    """A bootstrap token the cluster accepts (`<id>.<secret>`, secret)."""

    @property
    def facts(self) -> ControlPlaneFacts:
        return ControlPlaneFacts(self.endpoint, self.api_server_address, self.kubernetes_version, self.cluster_dns)


@dataclass(frozen=True)
class NodeRegistry:
    """The registry every image is pulled through, and the identity the kubelet pulls with."""

    login_server: str
    mirrors: tuple[Mirror, ...]
    """The upstream registries it caches (containerd's hosts.toml per upstream)."""
    pull_client_id: pulumi.Input[str]
    """The client id of a user-assigned identity with AcrPull on the registry, which every VM of the pool carries."""
    tenant_id: pulumi.Input[str]


@dataclass(frozen=True)
class NodeJoin:
    """Where and how a pool's nodes join: the cluster, the registry, and per scale set its join facts and image."""

    cluster: ClusterMetadata
    registry: NodeRegistry
    nodes: dict[str, NodeBoot]
    """Scale set name -> its labels, taints, max pods and boot gates."""
    images: dict[str, NodeImage]
    """Scale set name -> the node image version it boots (a key of ImageIds)."""


def cluster_join(plan: ClusterPlan, bootstrap_token: pulumi.Input[str], ca_cert_hash: pulumi.Input[str],
                 pull_client_id: pulumi.Input[str], tenant_id: pulumi.Input[str]) -> NodeJoin:
    """Every pool's join from the cluster's own plan (GpuCluster)."""
    facts = control_plane_facts(plan)
    cluster = ClusterMetadata(facts.endpoint, facts.api_server_address, facts.kubernetes_version, facts.cluster_dns,
                              ca_cert_hash, bootstrap_token)
    registry = NodeRegistry(plan.registry.login_server, registry_mirrors(plan), pull_client_id, tenant_id)
    return NodeJoin(cluster, registry, dict(plan.boot.nodes), dict(plan.images.machines))


def pool_join(cluster: ClusterMetadata, registry: NodeRegistry, pool: PoolPlan, location: str,
              image: NodeImage) -> NodeJoin:
    """One pool's join to a cluster whose plan does not hold it: its scale sets' labels and taints as the cluster's
    own planner gives them (components/planning/boot_plan.py), each booting `image`.

    The cluster's in-cluster layer is rendered from its plan, so it knows nothing of this pool: no Kueue flavor or
    quota names it, no health DaemonSet runs on it, no rollout wave re-images it. A GPU pool registers with the
    preflight taint that only its health DaemonSet removes, so it would never take work: refused (SpecError); a GPU
    pool belongs in the cluster's spec."""
    if registers_preflight(pool):
        raise SpecError([Problem(f"pool {pool.name}", "a GPU pool registers with the preflight taint, which only the "
                                 "health DaemonSet the cluster renders for its own pools removes: declare it in the "
                                 "cluster's spec (ClusterSpec.pools) instead of joining it on its own")])
    return NodeJoin(cluster, registry, pool_nodes(pool, location), {s.name: image for s in pool.scale_sets})
