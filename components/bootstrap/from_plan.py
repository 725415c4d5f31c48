"""Boot inputs from the cluster plan: one place decides what each machine boots with, so the resources'
customData and the offline plan's `boot/` documents are rendered from the same values.

Secrets (keys, the bootstrap token) and what only exists after deployment (certificates, the storage
account's URL) come in as strings: the components pass Pulumi's resolved values, the offline writer
passes visible markers.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.bootstrap.apiserver import ApiServerBootstrap
from components.bootstrap.etcd import EtcdBootstrap, EtcdMember
from components.bootstrap.node import NodeBootstrap
from components.bootstrap.registry import Mirror, RegistryBoot
from components.planning.cluster_plan import ClusterPlan
from components.planning.control_plane import EtcdPlan, Member
from components.planning.ip_plan import NODE_LOCAL_DNS_IP
from components.planning.node_template import node_labels, node_taints, registers_preflight
from components.planning.pki import (
    ETCD_SNAPSHOT_CLIENT,
    api_server_cert_sans,
    api_server_endpoint,
    etcd_member_ips,
)
from components.planning.placement import PoolPlan, ScaleSetPlan

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


def etcd_addresses(plan: ClusterPlan) -> dict[str, str]:
    return {k: str(v) for k, v in etcd_member_ips(plan.ip, plan.control_plane).items()}


def _etcd_endpoints(etcd: EtcdPlan | None, addresses: dict[str, str]) -> tuple[str, ...]:
    return tuple(EtcdMember(m.name, addresses[m.name]).client_url for m in etcd.members) if etcd else ()


@dataclass(frozen=True)
class PullIdentity:
    """The registry pull identity's client id and the tenant (Pulumi's values, or the offline plan's markers)."""

    client_id: str
    tenant_id: str


def registry_boot(plan: ClusterPlan, identity: PullIdentity) -> RegistryBoot:
    registry = plan.registry
    return RegistryBoot(registry.login_server,
                        tuple(Mirror(u.host, u.endpoint, u.prefix) for u in registry.upstreams),
                        identity.client_id, identity.tenant_id)


def apiserver_bootstrap(plan: ClusterPlan, pki_files: dict[str, str],
                        identity: PullIdentity | None = None) -> ApiServerBootstrap:
    spec, cp = plan.spec, plan.control_plane
    addresses = etcd_addresses(plan)
    return ApiServerBootstrap(
        cluster=spec.name, kubernetes_version=spec.kubernetes_version, endpoint=api_server_endpoint(spec.name),
        service_cidr=str(plan.ip.service_cidr), etcd_endpoints=_etcd_endpoints(cp.etcd, addresses),
        events_etcd_endpoints=_etcd_endpoints(cp.events, addresses), flags=cp.api.flags,
        pki_files=pki_files,
        cert_sans=api_server_cert_sans(spec.name, plan.ip),
        registry=registry_boot(plan, identity) if identity else None)


def node_bootstrap(plan: ClusterPlan, pool: PoolPlan, scale_set: ScaleSetPlan, token: str,
                   ca_cert_hash: str, identity: PullIdentity | None = None) -> NodeBootstrap:
    spec = plan.spec
    return NodeBootstrap(
        kubernetes_version=spec.kubernetes_version, api_server_endpoint=api_server_endpoint(spec.name),
        bootstrap_token=token, ca_cert_hash=ca_cert_hash, max_pods=pool.spec.pods_per_node,
        # NodeLocal DNSCache answers there on every node when the in-cluster layer runs it (objects/nodelocaldns.py).
        cluster_dns=NODE_LOCAL_DNS_IP if spec.in_cluster.enabled else str(plan.ip.dns_service_ip),
        labels=node_labels(pool, scale_set, spec.location),
        taints=node_taints(pool), confidential_gpu=pool.confidential is not None,
        api_server_address=str(plan.ip.api_server_ip), preflight=registers_preflight(pool),
        registry=registry_boot(plan, identity) if identity else None)


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


def etcd_member_certificates(member: str) -> dict[str, str]:
    """EtcdSecrets field -> planned certificate name (components/planning/pki.py)."""
    return {"server": f"{member}-server", "peer": f"{member}-peer", "client": ETCD_SNAPSHOT_CLIENT}


def etcd_bootstrap(plan: ClusterPlan, etcd: EtcdPlan, member: Member, secrets: EtcdSecrets) -> EtcdBootstrap:
    addresses = etcd_addresses(plan)
    peers = tuple(EtcdMember(m.name, addresses[m.name]) for m in etcd.members)
    this = next(p for p in peers if p.name == member.name)
    return EtcdBootstrap(
        member=this, cluster=peers, cluster_token=f"{plan.spec.name}-{etcd.role}",
        quota_backend_bytes=etcd.quota_backend_bytes, data_on_nvme=etcd.data_on_nvme, ca_cert=secrets.ca_cert,
        server_cert=secrets.server_cert, server_key=secrets.server_key, peer_cert=secrets.peer_cert,
        peer_key=secrets.peer_key, snapshot_url=secrets.snapshot_url, client_cert=secrets.client_cert,
        client_key=secrets.client_key, ca_key=secrets.ca_key)
