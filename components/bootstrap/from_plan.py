"""Boot inputs from the cluster plan: one place decides what each machine boots with, so the resources'
customData and the offline plan's `boot/` documents are rendered from the same values.

Secrets (keys, the bootstrap token) and what only exists after deployment (certificates, the storage
account's URL) come in as strings: the components pass Pulumi's resolved values, the offline writer
passes visible markers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.bootstrap.apiserver import ApiServerBootstrap
from gpucluster.bootstrap.etcd import EtcdBootstrap, EtcdMember
from gpucluster.bootstrap.node import NodeBootstrap
from gpucluster.bootstrap.registry import Mirror, RegistryBoot
from gpucluster.planning.boot_plan import NodeBoot
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.control_plane import EtcdPlan, Member
from gpucluster.planning.placement import PoolPlan, ScaleSetPlan

APISERVER_PKI_CAS = {"ca": ("ca.crt", "ca.key"), "front-proxy-ca": ("front-proxy-ca.crt", "front-proxy-ca.key"),
                     "etcd-ca": ("etcd/ca.crt", "etcd/ca.key")}
"""CA name -> (certificate path, key path or None) under /etc/kubernetes/pki on the API servers. The etcd CA's key
is there as on every kubeadm control-plane node of a stacked etcd: the machine renews its etcd client
certificate with it (components/bootstrap/cert_renewal.py, docs/pki.md "Where the CA keys are")."""
APISERVER_PKI_LEAVES = ("apiserver-kubelet-client", "apiserver-etcd-client", "front-proxy-client")
"""Pulumi-issued leaf certificates the API servers carry as <name>.crt/<name>.key. No `apiserver`:
kubeadm's certs phase issues that one on each VM, for the VM's own address."""
SERVICE_ACCOUNT_FILES = ("sa.key", "sa.pub")


def apiserver_pki_paths() -> tuple[str, ...]:
    paths = [p for cert, key in APISERVER_PKI_CAS.values() for p in (cert, key) if p]
    paths += [f"{leaf}.{ext}" for leaf in APISERVER_PKI_LEAVES for ext in ("crt", "key")]
    return tuple(sorted([*paths, *SERVICE_ACCOUNT_FILES]))


def _etcd_endpoints(etcd: EtcdPlan | None, addresses: dict[str, str]) -> tuple[str, ...]:
    return tuple(EtcdMember(m.name, addresses[m.name]).client_url for m in etcd.members) if etcd else ()


@dataclass(frozen=True)
class PullIdentity:
    """The registry pull identity's client id and the tenant (Pulumi's values, or the offline plan's markers)."""

    client_id: str
    tenant_id: str


def registry_mirrors(plan: ClusterPlan) -> tuple[Mirror, ...]:
    """The upstream registries the cluster's registry caches, as containerd's hosts.toml names them."""
    return tuple(Mirror(u.host, u.endpoint, u.prefix) for u in plan.registry.upstreams)


def registry_boot(plan: ClusterPlan, identity: PullIdentity) -> RegistryBoot:
    return RegistryBoot(plan.registry.login_server, registry_mirrors(plan), identity.client_id, identity.tenant_id)


def apiserver_bootstrap(plan: ClusterPlan, pki_files: dict[str, str],
                        identity: PullIdentity | None = None) -> ApiServerBootstrap:
    boot, cp = plan.boot, plan.control_plane
    return ApiServerBootstrap(
        cluster=plan.spec.name, kubernetes_version=boot.kubernetes_version, endpoint=boot.api_server_endpoint,
        service_cidr=boot.service_cidr, etcd_endpoints=_etcd_endpoints(cp.etcd, boot.etcd_addresses),
        events_etcd_endpoints=_etcd_endpoints(cp.events, boot.etcd_addresses), flags=cp.api.flags,
        pki_files=pki_files, cert_sans=boot.cert_sans, taints=boot.api_server_taints,
        registry=registry_boot(plan, identity) if identity else None)


@dataclass(frozen=True)
class ControlPlaneFacts:
    """What every node of a cluster joins with, the same for all of them: the cluster's, not a pool's."""

    endpoint: str
    """kubeadm's controlPlaneEndpoint, `<host>:<port>`."""
    api_server_address: str
    """The address the endpoint's host resolves to on the nodes (the API servers' load balancer frontend)."""
    kubernetes_version: str
    cluster_dns: str
    """The kubelets' clusterDNS."""


def control_plane_facts(plan: ClusterPlan) -> ControlPlaneFacts:
    boot = plan.boot
    return ControlPlaneFacts(boot.api_server_endpoint, boot.api_server_address, boot.kubernetes_version,
                             boot.cluster_dns)


def join_bootstrap(facts: ControlPlaneFacts, node: NodeBoot, token: str, ca_cert_hash: str,
                   registry: RegistryBoot | None) -> NodeBootstrap:
    """One node scale set's boot inputs from the cluster's facts and its own: what the program's customData and the
    offline plan's boot documents both render."""
    return NodeBootstrap(
        kubernetes_version=facts.kubernetes_version, api_server_endpoint=facts.endpoint, bootstrap_token=token,
        ca_cert_hash=ca_cert_hash, max_pods=node.max_pods, cluster_dns=facts.cluster_dns, labels=node.labels,
        taints=node.taints, confidential_gpu=node.confidential_gpu, rack=node.rack,
        api_server_address=facts.api_server_address, registry=registry)


def node_bootstrap(plan: ClusterPlan, pool: PoolPlan, scale_set: ScaleSetPlan, token: str,
                   ca_cert_hash: str, identity: PullIdentity | None = None) -> NodeBootstrap:
    return join_bootstrap(control_plane_facts(plan), plan.boot.node(scale_set.name), token, ca_cert_hash,
                          registry_boot(plan, identity) if identity else None)


@dataclass(frozen=True)
class EtcdSecrets:
    """PEM text (or markers) one member boots with, and where its snapshots go."""

    ca_cert: str
    server_cert: str
    server_key: str
    peer_cert: str
    peer_key: str
    client_cert: str
    client_key: str
    snapshot_url: str
    ca_key: str = ""
    """The etcd CA's key: the member renews its own certificates with it (components/bootstrap/cert_renewal.py)."""


def etcd_bootstrap(plan: ClusterPlan, etcd: EtcdPlan, member: Member, secrets: EtcdSecrets) -> EtcdBootstrap:
    addresses = plan.boot.etcd_addresses
    peers = tuple(EtcdMember(m.name, addresses[m.name]) for m in etcd.members)
    this = next(p for p in peers if p.name == member.name)
    return EtcdBootstrap(
        member=this, cluster=peers, cluster_token=plan.boot.etcd_tokens[etcd.role],
        quota_backend_bytes=etcd.quota_backend_bytes, data_on_nvme=etcd.data_on_nvme, ca_cert=secrets.ca_cert,
        server_cert=secrets.server_cert, server_key=secrets.server_key, peer_cert=secrets.peer_cert,
        peer_key=secrets.peer_key, snapshot_url=secrets.snapshot_url, client_cert=secrets.client_cert,
        client_key=secrets.client_key, ca_key=secrets.ca_key)
