"""The cluster's certificates as data: which CA signs what, for whom, with which names.

Kept pure so SANs are tested without Pulumi; components/azure/pki.py turns this into pulumi-tls resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address

from gpucluster.planning.control_plane import ControlPlanePlan
from gpucluster.planning.ip_plan import API_SERVER_PORT, ETCD_BLOCK, IpPlan

CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA = "ca", "etcd-ca", "front-proxy-ca"
SERVER = ("digital_signature", "key_encipherment", "server_auth")
CLIENT = ("digital_signature", "key_encipherment", "client_auth")
PEER = ("digital_signature", "key_encipherment", "server_auth", "client_auth")
ETCD_SERVER = PEER
"""etcd's serving certificate is a client certificate too: its gRPC gateway dials the member's own client URL with
the `--cert-file` certificate (etcd `server/embed/serve.go`: the gateway's dial options clone the server's TLS config,
whose client certificate is `--client-cert-file` or else `--cert-file`, `client/pkg/transport/listener.go`), and
`--client-cert-auth` refuses a certificate without clientAuth. kubeadm issues its etcd serving certificate with both
usages (kubernetes `cmd/kubeadm/app/phases/certs/certlist.go`, `KubeadmCertEtcdServer`)."""


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


def api_server_host(cluster: str) -> str:
    """The API endpoint's DNS name (kubeadm's controlPlaneEndpoint). API-server VMs resolve it to 127.0.0.1,
    every other machine to the internal load balancer: a backend that dials its own load balancer's frontend
    is not answered when the flow maps back to itself (Azure Load Balancer, "Limitations"), so API servers
    never go through it. Cluster API Azure's private clusters do the same."""
    return f"api.{cluster}.internal"


def api_server_endpoint(cluster: str) -> str:
    return f"{api_server_host(cluster)}:{API_SERVER_PORT}"


def api_server_cert_sans(cluster: str, ip: IpPlan) -> tuple[str, ...]:
    """`apiServer.certSANs`: addresses clients dial beyond what kubeadm adds by itself. The load balancer's IPs
    (the admin kubeconfig, Cilium's k8sServiceHost; the break-glass frontend's, whether or not the stack has it
    yet, so adding it needs no new serving certificate), loopback, and the endpoint's name."""
    return (api_server_host(cluster), str(ip.api_server_ip), str(ip.break_glass_ip), "127.0.0.1", "localhost")


def kubeadm_apiserver_cert(cluster: str, ip: IpPlan, node_name: str, advertise_address: str,
                           dns_domain: str = "cluster.local") -> CertPlan:
    """The serving certificate kubeadm's certs phase issues on each API-server VM, with the names kubeadm
    gives it (`GetAPIServerAltNames`, kubernetes `cmd/kubeadm/app/util/pkiutil/pki_helpers.go`): the node
    name, the `kubernetes` Service names and first Service IP, the VM's own address (localAPIEndpoint, which
    the controller-manager's and scheduler's kubeconfigs dial), the controlPlaneEndpoint host and certSANs.
    It is not issued by Pulumi: a shared certificate cannot name each VM's own address."""
    dns = [node_name, "kubernetes", "kubernetes.default", "kubernetes.default.svc", f"kubernetes.default.svc.{dns_domain}"]
    ips = [str(ip.service_cidr.network_address + 1), advertise_address]
    for san in (api_server_host(cluster), *api_server_cert_sans(cluster, ip)):
        target = ips if _is_ip(san) else dns
        if san not in target:
            target.append(san)
    return CertPlan("apiserver", CLUSTER_CA, "kube-apiserver", None, tuple(dns), tuple(ips), SERVER)


def _is_ip(text: str) -> bool:
    try:
        IPv4Address(text)
    except ValueError:
        return False
    return True


BREAK_GLASS_CERT = "breakglass"
BREAK_GLASS_GROUP = "gpucluster:breakglass"
"""The client certificate's organization: the group the break-glass FlowSchema maps to the exempt level."""
ETCD_SNAPSHOT_CLIENT = "etcd-snapshot-client"
"""The client identity of `etcdctl snapshot save` on each member: etcd requires clientAuth usage
(`--client-cert-auth`); a serving certificate is refused by Go's TLS (`incompatible key usage`)."""


def etcd_member_certificates(member: str) -> dict[str, str]:
    """An etcd member's secrets (components/bootstrap/from_plan.py `EtcdSecrets` field) -> planned certificate name."""
    return {"server": f"{member}-server", "peer": f"{member}-peer", "client": ETCD_SNAPSHOT_CLIENT}


def plan_certificates(cluster: str, ip: IpPlan, cp: ControlPlanePlan) -> tuple[CertPlan, ...]:
    """Certificates Pulumi issues. The API server's serving certificate is issued by kubeadm on each VM
    (`kubeadm_apiserver_cert`), with the cluster CA that the VMs carry."""
    certs = [
        CertPlan("apiserver-kubelet-client", CLUSTER_CA, "kube-apiserver-kubelet-client", "kubeadm:cluster-admins",
                 (), (), CLIENT),
        CertPlan("admin", CLUSTER_CA, "kubernetes-admin", "kubeadm:cluster-admins", (), (), CLIENT),
        # Kept apart from `admin`: its group is exempt from API Priority and Fairness and bound to cluster-admin by a
        # ClusterRoleBinding (components/kubernetes/objects/flowcontrol.py); its kubeconfig is its own output.
        CertPlan(BREAK_GLASS_CERT, CLUSTER_CA, "gpucluster-breakglass", BREAK_GLASS_GROUP, (), (), CLIENT),
        CertPlan("front-proxy-client", FRONT_PROXY_CA, "front-proxy-client", None, (), (), CLIENT),
        CertPlan("apiserver-etcd-client", ETCD_CA, "kube-apiserver-etcd-client", None, (), (), CLIENT),
        CertPlan(ETCD_SNAPSHOT_CLIENT, ETCD_CA, ETCD_SNAPSHOT_CLIENT, None, (), (), CLIENT),
    ]
    for name, address in etcd_member_ips(ip, cp).items():
        certs.append(CertPlan(f"{name}-server", ETCD_CA, name, None, (name, "localhost"),
                              (str(address), "127.0.0.1"), ETCD_SERVER))
        certs.append(CertPlan(f"{name}-peer", ETCD_CA, name, None, (name,), (str(address),), PEER))
    return tuple(certs)
