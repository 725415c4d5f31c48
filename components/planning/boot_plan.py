"""What every machine boots with, decided here: the boot text (components/bootstrap/) renders these values and
computes none of them. Secrets and what exists only after deployment (keys, certificates, tokens, URLs) are not
plan data: the components pass Pulumi's values, the offline plan its markers."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.planning.control_plane import ControlPlanePlan
from gpucluster.planning.ip_plan import NODE_LOCAL_DNS_IP, IpPlan
from gpucluster.planning.node_template import CONTROL_PLANE_TAINT, node_labels, registered_taints
from gpucluster.planning.pki import api_server_cert_sans, api_server_endpoint, etcd_member_ips
from gpucluster.planning.placement import PoolPlan
from gpucluster.planning.taints import NodeTaint
from gpucluster.spec import ClusterSpec


@dataclass(frozen=True)
class NodeBoot:
    """The join facts of one node scale set."""

    labels: dict[str, str]
    """kubelet `--node-labels`."""
    taints: tuple[NodeTaint, ...]
    """kubelet `registerWithTaints`: the preflight taint first where the pool's health checks remove it."""
    max_pods: int
    confidential_gpu: bool
    """Join only after the image's gate finds the GPU in confidential-computing mode and attested."""
    rack: bool = False
    """An NVLink rack VM: its boot reads the interconnect ids from IMDS and checks IMEX and memlock
    (components/bootstrap/rack.py)."""


@dataclass(frozen=True)
class BootPlan:
    kubernetes_version: str
    api_server_endpoint: str
    """kubeadm's controlPlaneEndpoint, `<name>:<port>` (components/planning/pki.py `api_server_host`)."""
    api_server_address: str
    """The internal load balancer's frontend IP: nodes resolve the endpoint's name to it."""
    cert_sans: tuple[str, ...]
    """`apiServer.certSANs` of kubeadm's serving certificate."""
    api_server_taints: tuple[NodeTaint, ...]
    """What the API servers register with (kubeadm's InitConfiguration)."""
    service_cidr: str
    cluster_dns: str
    """The kubelets' clusterDNS: NodeLocal DNSCache's link-local address when the in-cluster layer runs it
    (components/kubernetes/objects/nodelocaldns.py), the cluster DNS Service otherwise."""
    etcd_addresses: dict[str, str]
    """etcd member name -> its static address."""
    etcd_tokens: dict[str, str]
    """etcd role -> `--initial-cluster-token`."""
    nodes: dict[str, NodeBoot]
    """Node scale set name -> its join facts."""

    def node(self, scale_set: str) -> NodeBoot:
        return self.nodes[scale_set]


def plan_boot(spec: ClusterSpec, ip: IpPlan, pools: tuple[PoolPlan, ...], control_plane: ControlPlanePlan) -> BootPlan:
    etcds = [control_plane.etcd, *((control_plane.events,) if control_plane.events else ())]
    return BootPlan(
        kubernetes_version=spec.kubernetes_version, api_server_endpoint=api_server_endpoint(spec.name),
        api_server_address=str(ip.api_server_ip), cert_sans=api_server_cert_sans(spec.name, ip),
        api_server_taints=(CONTROL_PLANE_TAINT,), service_cidr=str(ip.service_cidr),
        cluster_dns=NODE_LOCAL_DNS_IP if spec.in_cluster.enabled else str(ip.dns_service_ip),
        etcd_addresses={k: str(v) for k, v in etcd_member_ips(ip, control_plane).items()},
        etcd_tokens={e.role: f"{spec.name}-{e.role}" for e in etcds},
        nodes={name: node for p in pools for name, node in pool_nodes(p, spec.location).items()})


def pool_nodes(pool: PoolPlan, location: str) -> dict[str, NodeBoot]:
    """Each of the pool's scale sets -> its join facts."""
    return {s.name: NodeBoot(node_labels(pool, s, location), registered_taints(pool), pool.spec.pods_per_node,
                             pool.confidential is not None, pool.racks is not None) for s in pool.scale_sets}
