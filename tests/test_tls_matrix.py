"""Every TLS connection the cluster makes, as real handshakes (OpenSSL through Python's `ssl`, over a
socketpair) with real keys issued from the library's certificate plan, dialling the addresses the
rendered boot documents name.

Consumers and their rules:
- kubeadm: controller-manager and scheduler kubeconfigs dial localAPIEndpoint (the VM's own address),
  kubelet and admin kubeconfigs the controlPlaneEndpoint (`getKubeConfigSpecsBase`, kubernetes
  `cmd/kubeadm/app/phases/kubeconfig/kubeconfig.go`); the serving certificate kubeadm issues names the
  node, the Service IP, the advertise address, the endpoint host and certSANs (`GetAPIServerAltNames`,
  `cmd/kubeadm/app/util/pkiutil/pki_helpers.go`).
- Go `crypto/tls` (every Kubernetes component, etcd): a peer's certificate needs the extended key usage of
  its role (`x509: certificate specifies an incompatible key usage`); OpenSSL's purpose check applies the
  same rule here (`ssl_client` / `ssl_server`).
- etcd: `--client-cert-auth`, `--peer-client-cert-auth` with the etcd CA (etcd `Documentation/op-guide/security.md`).
- kube-apiserver: `--requestheader-client-ca-file` (front-proxy CA) for the aggregation layer,
  `--kubelet-client-certificate` checked by the kubelet's `--client-ca-file` (the cluster CA).
"""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from gpucluster.bootstrap.apiserver import kubeadm_config
from gpucluster.bootstrap.etcd import etcd_flags, snapshot_script
from gpucluster.bootstrap.from_plan import EtcdSecrets, apiserver_bootstrap, etcd_bootstrap, node_bootstrap
from gpucluster.bootstrap.kubeconfig import render_kubeconfig
from gpucluster.bootstrap.node import render_cloud_init
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK
from gpucluster.planning.pki import (
    CLIENT,
    CLUSTER_CA,
    ETCD_CA,
    ETCD_SNAPSHOT_CLIENT,
    FRONT_PROXY_CA,
    SERVER,
    CertPlan,
    etcd_member_certificates,
    kubeadm_apiserver_cert,
    plan_certificates,
)
from tests.support.real_pki import Issued, issue, make_ca, sans
from tests.support.stacks import stack_spec

NODE_NAME = "apiserver000000"


@dataclass(frozen=True)
class Pki:
    plan: ClusterPlan
    folder: Path
    cas: dict[str, Issued]
    leaves: dict[str, Issued]
    vm_address: str

    def path(self, name: str) -> tuple[Path, Path]:
        issued = self.cas.get(name) or self.leaves[name]
        return self.folder / f"{issued.name}.crt", self.folder / f"{issued.name}.key"


def _vm_address(plan: ClusterPlan) -> str:
    """An API-server VM's address: a host of the control-plane block other than the load balancer's."""
    hosts = list(plan.ip.block(CONTROL_PLANE_BLOCK).cidr.hosts())[4:]  # Azure keeps the first addresses
    return next(str(h) for h in hosts if h != plan.ip.api_server_ip)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    plan = plan_cluster(stack_spec("prod"))
    folder = tmp_path_factory.mktemp("pki")
    cas = {ca: make_ca(ca, ca) for ca in (CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA)}
    leaves = {p.name: issue(p, cas[p.signer]) for p in plan_certificates(plan.spec.name, plan.ip, plan.control_plane)}
    vm = _vm_address(plan)
    # What kubeadm issues on the VM (RSA 2048, its own names) and the kubeconfig identities it writes.
    leaves["apiserver"] = issue(kubeadm_apiserver_cert(plan.spec.name, plan.ip, NODE_NAME, vm), cas[CLUSTER_CA], 2048)
    for name, cn, org in (("controller-manager", "system:kube-controller-manager", None),
                          ("scheduler", "system:kube-scheduler", None),
                          ("kubelet", f"system:node:{NODE_NAME}", "system:nodes")):
        leaves[name] = issue(CertPlan(name, CLUSTER_CA, cn, org, (), (), CLIENT), cas[CLUSTER_CA], 2048)
    # The kubelet's serving certificate is self-signed by the kubelet (no serverTLSBootstrap).
    kubelet_ca = make_ca("kubelet-serving-ca", f"{NODE_NAME}-ca@1", 2048)
    leaves["kubelet-serving"] = issue(CertPlan("kubelet-serving", "kubelet", NODE_NAME, None, (NODE_NAME,), (), SERVER),
                                      kubelet_ca)
    for issued in (*cas.values(), *leaves.values()):
        issued.write(folder)
    return Pki(plan, folder, cas, leaves, vm)


class HandshakeError(Exception):
    pass


def handshake(pki: Pki, *, server: str, client: str | None, dial: str, server_trusts: str | None,
              client_trusts: str | None, client_cert_optional: bool = False) -> None:
    """One TLS connection: `client` (a certificate name, or None) dials `dial` and checks the server's
    certificate against `client_trusts` (None: no check, as the API server does for kubelets); the server
    asks for a client certificate signed by `server_trusts` (None: none asked), optional where clients may
    authenticate otherwise (the API server accepts tokens; its x509 authenticator checks a certificate
    when one is given, against --client-ca-file with clientAuth usage: k8s.io/apiserver
    `pkg/authentication/request/x509/x509.go`, `DefaultVerifyOptions`)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*pki.path(server))
    if server_trusts:
        server_ctx.verify_mode = ssl.CERT_OPTIONAL if client_cert_optional else ssl.CERT_REQUIRED
        server_ctx.load_verify_locations(pki.path(server_trusts)[0])
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if client_trusts:
        client_ctx.load_verify_locations(pki.path(client_trusts)[0])
    else:
        client_ctx.check_hostname = False
        client_ctx.verify_mode = ssl.CERT_NONE
    if client:
        client_ctx.load_cert_chain(*pki.path(client))
    left, right = socket.socketpair()
    left.settimeout(10)
    right.settimeout(10)
    errors: dict[str, Exception] = {}

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(right, server_side=True) as tls:
                tls.sendall(tls.recv(4))
        except (ssl.SSLError, OSError) as error:
            errors["server"] = error

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(left, server_hostname=dial) as tls:
            tls.sendall(b"ping")
            if tls.recv(4) != b"ping":
                errors["client"] = HandshakeError("no echo")
    except (ssl.SSLError, OSError) as error:
        errors["client"] = error
    thread.join(15)
    if errors:
        raise HandshakeError("; ".join(f"{side}: {error}" for side, error in sorted(errors.items())))


def _host(url_or_endpoint: str) -> str:
    return urlsplit(url_or_endpoint if "://" in url_or_endpoint else f"https://{url_or_endpoint}").hostname or ""


def _api_documents(pki: Pki) -> tuple[dict, dict]:
    b = apiserver_bootstrap(pki.plan, {})
    init, cluster, _kubelet = kubeadm_config(b)
    return init, cluster


def _dialled_api_addresses(pki: Pki) -> dict[str, str]:
    """Who dials the API server at which address, read from the rendered documents."""
    _, cluster = _api_documents(pki)
    plan = pki.plan
    pool = plan.pools[0]
    node = yaml.safe_load(render_cloud_init(node_bootstrap(plan, pool, pool.scale_sets[0], "abcdef.0123456789abcdef",
                                                           "sha256:" + "0" * 64)))
    join = yaml.safe_load(next(f["content"] for f in node["write_files"]
                               if f["path"] == "/etc/kubernetes/kubeadm-join.yaml"))
    admin = yaml.safe_load(render_kubeconfig(plan.spec.name, plan.ip.api_server_endpoint, "C", "C", "K"))
    return {
        "controller-manager (localAPIEndpoint)": pki.vm_address,
        "scheduler (localAPIEndpoint)": pki.vm_address,
        "kubelet on API-server VMs (controlPlaneEndpoint)": _host(cluster["controlPlaneEndpoint"]),
        "kubelet on nodes (discovery and kubelet.conf)": _host(join["discovery"]["bootstrapToken"]["apiServerEndpoint"]),
        "admin kubeconfig": _host(admin["clusters"][0]["cluster"]["server"]),
        "Cilium k8sServiceHost (load balancer IP)": str(plan.ip.api_server_ip),
        "pods (kubernetes Service IP)": str(plan.ip.service_cidr.network_address + 1),
        "pods (kubernetes.default.svc)": "kubernetes.default.svc",
        "loopback": "127.0.0.1",
    }


CLIENTS = {"controller-manager (localAPIEndpoint)": "controller-manager", "scheduler (localAPIEndpoint)": "scheduler",
           "kubelet on API-server VMs (controlPlaneEndpoint)": "kubelet",
           "kubelet on nodes (discovery and kubelet.conf)": "kubelet", "admin kubeconfig": "admin"}


def test_every_client_reaches_the_api_server_at_the_address_it_dials(pki: Pki) -> None:
    for who, address in _dialled_api_addresses(pki).items():
        handshake(pki, server="apiserver", client=CLIENTS.get(who), dial=address, server_trusts=CLUSTER_CA,
                  client_trusts=CLUSTER_CA, client_cert_optional=True)


def test_a_shared_certificate_without_the_vm_address_fails_the_controller_manager(pki: Pki) -> None:
    """The failure this design removes: a certificate issued once for every VM cannot name each VM's
    address, and the controller-manager dials that address."""
    kubeadm_cert = kubeadm_apiserver_cert(pki.plan.spec.name, pki.plan.ip, NODE_NAME, pki.vm_address)
    shared = replace(kubeadm_cert, name="shared-apiserver", dns_names=kubeadm_cert.dns_names[1:],
                     ip_addresses=tuple(i for i in kubeadm_cert.ip_addresses if i != pki.vm_address))
    pki.leaves["shared-apiserver"] = issue(shared, pki.cas[CLUSTER_CA])
    pki.leaves["shared-apiserver"].write(pki.folder)
    with pytest.raises(HandshakeError, match="certificate verify failed"):
        handshake(pki, server="shared-apiserver", client="controller-manager", dial=pki.vm_address,
                  server_trusts=CLUSTER_CA, client_trusts=CLUSTER_CA)


def test_api_server_reaches_every_etcd_member_at_its_rendered_endpoint(pki: Pki) -> None:
    _, cluster = _api_documents(pki)
    endpoints = cluster["etcd"]["external"]["endpoints"]
    overrides = next(a["value"] for a in cluster["apiServer"]["extraArgs"] if a["name"] == "etcd-servers-overrides")
    endpoints += overrides.split("#", 1)[1].split(";")
    members = {m.name: m for e in (pki.plan.control_plane.etcd, pki.plan.control_plane.events) if e for m in e.members}
    by_address = {}
    for etcd in (pki.plan.control_plane.etcd, pki.plan.control_plane.events):
        for member in etcd.members if etcd else ():
            flags = etcd_flags(etcd_bootstrap(pki.plan, etcd, member, _markers()))
            by_address[_host(_flag(flags, "--advertise-client-urls"))] = member.name
    assert len(endpoints) == len(members) == len(by_address)
    for endpoint in endpoints:
        name = by_address[_host(endpoint)]
        handshake(pki, server=f"{name}-server", client="apiserver-etcd-client", dial=_host(endpoint),
                  server_trusts=ETCD_CA, client_trusts=ETCD_CA)


def _markers() -> EtcdSecrets:
    return EtcdSecrets(*(["x"] * 7), snapshot_url="https://account.blob.core.windows.net/etcd-snapshots")


def _flag(flags: list[str], name: str) -> str:
    return next(f.split("=", 1)[1] for f in flags if f.startswith(name + "="))


def test_etcd_peers_reach_each_other_and_etcdctl_snapshots_over_loopback(pki: Pki) -> None:
    for etcd in (pki.plan.control_plane.etcd, pki.plan.control_plane.events):
        for member in etcd.members if etcd else ():
            b = etcd_bootstrap(pki.plan, etcd, member, _markers())
            flags = etcd_flags(b)
            for other in etcd.members:
                handshake(pki, server=f"{member.name}-peer", client=f"{other.name}-peer",
                          dial=_host(_flag(flags, "--initial-advertise-peer-urls")), server_trusts=ETCD_CA,
                          client_trusts=ETCD_CA)
            snapshot = next(line for line in snapshot_script(b).splitlines() if "snapshot save" in line)
            endpoint = snapshot.split("--endpoints=", 1)[1].split()[0]
            # The identity the rendered command presents, from the file it names on the member.
            cert_file = snapshot.split("--cert=", 1)[1].split()[0].rsplit("/", 1)[1].removesuffix(".crt")
            identity = etcd_member_certificates(member.name)[cert_file]
            handshake(pki, server=f"{member.name}-server", client=identity, dial=_host(endpoint),
                      server_trusts=ETCD_CA, client_trusts=ETCD_CA)


def test_etcds_gateway_reaches_its_own_member_with_the_serving_certificate(pki: Pki) -> None:
    """etcd's gRPC gateway dials the member's own client URL with `--cert-file` as its client certificate (etcd
    `server/embed/serve.go`: the gateway's dial options clone the server TLS config, whose client certificate is
    `--client-cert-file` or else `--cert-file`, `client/pkg/transport/listener.go`), and the member asks for a client
    certificate (`--client-cert-auth`). kubeadm's etcd serving certificate carries serverAuth and clientAuth
    (`KubeadmCertEtcdServer`, kubernetes cmd/kubeadm/app/phases/certs/certlist.go); so does the plan's."""
    for etcd in (e for e in (pki.plan.control_plane.etcd, pki.plan.control_plane.events) if e):
        for member in etcd.members:
            flags = etcd_flags(etcd_bootstrap(pki.plan, etcd, member, _markers()))
            for url in _flag(flags, "--listen-client-urls").split(","):
                handshake(pki, server=f"{member.name}-server", client=f"{member.name}-server", dial=_host(url),
                          server_trusts=ETCD_CA, client_trusts=ETCD_CA)


def test_a_serverauth_only_certificate_is_refused_as_a_client(pki: Pki) -> None:
    """What the plan issued before, and what the gateway then met: a serving certificate without clientAuth."""
    member = pki.plan.control_plane.etcd.members[0].name
    planned = next(c for c in plan_certificates(pki.plan.spec.name, pki.plan.ip, pki.plan.control_plane)
                   if c.name == f"{member}-server")
    pki.leaves["serverauth-only"] = issue(replace(planned, name="serverauth-only", usages=SERVER), pki.cas[ETCD_CA])
    pki.leaves["serverauth-only"].write(pki.folder)
    with pytest.raises(HandshakeError, match=r"unsuitable certificate purpose"):
        handshake(pki, server=f"{member}-server", client="serverauth-only", dial="127.0.0.1", server_trusts=ETCD_CA,
                  client_trusts=ETCD_CA)


def test_front_proxy_and_kubelet_client_certificates(pki: Pki) -> None:
    # Aggregated API servers check the front-proxy client against --requestheader-client-ca-file.
    handshake(pki, server="kubelet-serving", client="front-proxy-client", dial=NODE_NAME, server_trusts=FRONT_PROXY_CA,
              client_trusts=None)
    # kubelets check the API server's client certificate against their --client-ca-file (the cluster CA);
    # the API server does not verify kubelets' self-signed serving certificates (no --kubelet-certificate-authority).
    handshake(pki, server="kubelet-serving", client="apiserver-kubelet-client", dial=NODE_NAME,
              server_trusts=CLUSTER_CA, client_trusts=None)
    with pytest.raises(HandshakeError):
        handshake(pki, server="kubelet-serving", client="front-proxy-client", dial=NODE_NAME, server_trusts=CLUSTER_CA,
                  client_trusts=None)


def test_certificates_carry_the_usages_and_names_their_consumers_check(pki: Pki) -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    def ekus(name: str) -> set[x509.ObjectIdentifier]:
        return set(pki.leaves[name].cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)

    assert ekus("apiserver") == {ExtendedKeyUsageOID.SERVER_AUTH}
    assert ekus(ETCD_SNAPSHOT_CLIENT) == {ExtendedKeyUsageOID.CLIENT_AUTH}
    for member in pki.plan.control_plane.etcd.members:
        assert ekus(f"{member.name}-server") == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    for name in ("apiserver-etcd-client", "apiserver-kubelet-client", "front-proxy-client", "admin"):
        assert ExtendedKeyUsageOID.CLIENT_AUTH in ekus(name)
    dns, ips = sans(pki.leaves["apiserver"].cert)
    _, cluster = _api_documents(pki)
    assert _host(cluster["controlPlaneEndpoint"]) in dns and pki.vm_address in ips and NODE_NAME in dns
    assert set(cluster["apiServer"]["certSANs"]) <= dns | ips
