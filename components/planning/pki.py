"""The cluster's certificates as data: which CA signs what, for whom, with which names.

Kept pure so SANs are tested without Pulumi; components/azure/pki.py turns this into pulumi-tls resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address

from components.planning.control_plane import ControlPlanePlan
from components.planning.ip_plan import ETCD_BLOCK, IpPlan

CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA = "ca", "etcd-ca", "front-proxy-ca"
SERVER = ("digital_signature", "key_encipherment", "server_auth")
CLIENT = ("digital_signature", "key_encipherment", "client_auth")
PEER = ("digital_signature", "key_encipherment", "server_auth", "client_auth")


@dataclass(frozen=True)
class CertPlan:
    name: str
    signer: str
    common_name: str
    organization: str | None
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]
    usages: tuple[str, ...]


def etcd_member_ips(ip: IpPlan, cp: ControlPlanePlan) -> dict[str, IPv4Address]:
    """Static addresses in the etcd block: members from .4 (Azure keeps .0-.3), events members after."""
    base = ip.block(ETCD_BLOCK).cidr.network_address + 4
    members = [*cp.etcd.members, *(cp.events.members if cp.events else ())]
    return {m.name: base + i for i, m in enumerate(members)}


def api_server_names(cluster: str, ip: IpPlan) -> tuple[tuple[str, ...], tuple[str, ...]]:
    dns = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
           f"api.{cluster}.internal", "localhost")
    ips = (str(ip.api_server_ip), str(ip.service_cidr.network_address + 1), "127.0.0.1")
    return dns, ips


def plan_certificates(cluster: str, ip: IpPlan, cp: ControlPlanePlan) -> tuple[CertPlan, ...]:
    dns, ips = api_server_names(cluster, ip)
    certs = [
        CertPlan("apiserver", CLUSTER_CA, "kube-apiserver", None, dns, ips, SERVER),
        CertPlan("apiserver-kubelet-client", CLUSTER_CA, "kube-apiserver-kubelet-client", "kubeadm:cluster-admins",
                 (), (), CLIENT),
        CertPlan("admin", CLUSTER_CA, "kubernetes-admin", "kubeadm:cluster-admins", (), (), CLIENT),
        CertPlan("front-proxy-client", FRONT_PROXY_CA, "front-proxy-client", None, (), (), CLIENT),
        CertPlan("apiserver-etcd-client", ETCD_CA, "kube-apiserver-etcd-client", None, (), (), CLIENT),
    ]
    for name, address in etcd_member_ips(ip, cp).items():
        certs.append(CertPlan(f"{name}-server", ETCD_CA, name, None, (name, "localhost"),
                              (str(address), "127.0.0.1"), SERVER))
        certs.append(CertPlan(f"{name}-peer", ETCD_CA, name, None, (name,), (str(address),), PEER))
    return tuple(certs)
