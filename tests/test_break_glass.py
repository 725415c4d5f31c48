"""Break-glass access: a second API-server frontend only an admin network reaches, and a client certificate in
the group API Priority and Fairness exempts, kept apart from the admin kubeconfig.

Consumers: Azure Load Balancer (one backend pool behind several frontends, each with its own rule; a frontend's
static private address must be free in its subnet, Azure keeping a subnet's first four and last addresses:
azure-docs virtual-network-ip-addresses-overview-arm.md), the NSG in front of the API servers, and the API
server's x509 authenticator and serving certificate (Go crypto/tls, run here with `cryptography`-issued keys:
tests/support/real_pki.py), the group mapped by the break-glass FlowSchema (tests/test_flowcontrol.py).
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
from ipaddress import IPv4Address, ip_address
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpucluster.azure.control_plane import BREAK_GLASS_FRONTEND
from gpucluster.offline.engine import ProgramRun, Registration, run_program
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK
from gpucluster.planning.pki import BREAK_GLASS_CERT, CLUSTER_CA, kubeadm_apiserver_cert, plan_certificates
from tests.support.real_pki import issue, make_ca
from tests.support.stacks import ROOT, small_cluster, spec_of

ADMIN = "203.0.113.0/28"
INCIDENT = "198.51.100.16/29"


def _raw() -> dict[str, object]:
    raw = small_cluster(access={"breakGlass": {"adminCidrs": [INCIDENT]}})
    raw["network"] = {"addressSpace": ["10.10.0.0/16"], "adminCidrs": [ADMIN]}
    return raw


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": _raw()})


def _of(run: ProgramRun, typ: str) -> list[Registration]:
    return [r for r in run.registrations if r.type == typ]


def test_a_second_frontend_reaches_the_same_api_servers(run: ProgramRun) -> None:
    plan = plan_cluster(spec_of(_raw()))
    [lb] = _of(run, "azure-native:network:LoadBalancer")
    frontends = {f["name"]: f for f in lb.inputs["frontendIPConfigurations"]}
    assert set(frontends) == {"apiserver", BREAK_GLASS_FRONTEND}
    glass = IPv4Address(frontends[BREAK_GLASS_FRONTEND]["privateIPAddress"])
    block = plan.ip.block(CONTROL_PLANE_BLOCK).cidr
    hosts = list(block.hosts())
    # Usable in Azure (not the first four nor the last) and far from the addresses Azure hands out first.
    assert glass in hosts[3:] and glass != block.broadcast_address and glass == plan.ip.break_glass_ip
    assert glass != plan.ip.api_server_ip and frontends[BREAK_GLASS_FRONTEND].get("publicIPAddress") is None
    rules = {r["name"]: r for r in lb.inputs["loadBalancingRules"]}
    assert rules[BREAK_GLASS_FRONTEND]["backendAddressPool"] == rules["apiserver"]["backendAddressPool"]
    assert rules[BREAK_GLASS_FRONTEND]["frontendIPConfiguration"]["id"].endswith(
        f"/frontendIPConfigurations/{BREAK_GLASS_FRONTEND}")
    assert plan_cluster(spec_of(small_cluster())).ip.block(CONTROL_PLANE_BLOCK).ips_needed + 1 == \
        plan.ip.block(CONTROL_PLANE_BLOCK).ips_needed


def test_only_the_admin_network_is_let_in_by_its_own_rule(run: ProgramRun) -> None:
    nsgs = {r.inputs["networkSecurityGroupName"]: r.inputs["securityRules"]
            for r in _of(run, "azure-native:network:NetworkSecurityGroup")}
    rules = {r["name"]: r for r in nsgs["test-controlplane"]}
    glass = rules["allow-apiserver-breakglass"]
    assert glass["sourceAddressPrefixes"] == [INCIDENT] and glass["destinationPortRange"] == "6443"
    assert glass["access"] == "Allow" and glass["priority"] < rules["deny-vnet-inbound"]["priority"]
    assert rules["allow-apiserver-from-admin"]["sourceAddressPrefixes"] == [ADMIN]
    assert all(INCIDENT not in r.get("sourceAddressPrefixes", []) for n, r in rules.items() if n != glass["name"])
    # Without the stack key there is no second frontend and no rule.
    plain = run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": small_cluster()})
    [lb] = _of(plain, "azure-native:network:LoadBalancer")
    assert [f["name"] for f in lb.inputs["frontendIPConfigurations"]] == ["apiserver"]


def test_the_breakglass_kubeconfig_is_its_own_secret_output(run: ProgramRun) -> None:
    assert run.outputs["breakGlassKubeconfig"] == "[secret]"
    assert run.outputs["adminKubeconfig"] == "[secret]"


def test_the_certificate_authenticates_in_the_exempt_group_at_the_breakglass_address(tmp_path: Path) -> None:
    """Go's TLS (here Python's, same rules) at the break-glass frontend's address: the API server's serving
    certificate (kubeadm's, with the certSANs the plan gives) names it; the client certificate carries clientAuth
    and the break-glass group as its organization, which the API server takes as the user's group."""
    plan = plan_cluster(spec_of(_raw()))
    ca = make_ca(CLUSTER_CA, "kubernetes")
    planned = {c.name: c for c in plan_certificates(plan.spec.name, plan.ip, plan.control_plane)}
    client = issue(planned[BREAK_GLASS_CERT], ca)
    org = client.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [a.value for a in org] == ["gpucluster:breakglass"]
    eku = client.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in eku
    assert planned[BREAK_GLASS_CERT].organization != planned["admin"].organization
    server = issue(kubeadm_apiserver_cert(plan.spec.name, plan.ip, "apiserver000000", "10.10.0.5"), ca, 2048)
    sans = server.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ip_address(str(plan.ip.break_glass_ip)) in sans.get_values_for_type(x509.IPAddress)
    paths = {}
    for issued in (ca, client, server):
        paths[issued.name] = issued.write(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*paths["apiserver"])
    server_ctx.verify_mode = ssl.CERT_REQUIRED  # the x509 authenticator: --client-ca-file, clientAuth usage
    server_ctx.load_verify_locations(paths[CLUSTER_CA][0])
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(paths[CLUSTER_CA][0])
    client_ctx.load_cert_chain(*paths[BREAK_GLASS_CERT])
    left, right = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        with server_ctx.wrap_socket(right, server_side=True) as tls:
            seen["peer"] = tls.getpeercert()
            tls.sendall(tls.recv(4))

    thread = threading.Thread(target=serve)
    thread.start()
    with client_ctx.wrap_socket(left, server_hostname=str(plan.ip.break_glass_ip)) as tls:
        tls.sendall(b"ping")
        assert tls.recv(4) == b"ping"
    thread.join(15)
    peer = seen["peer"]
    assert isinstance(peer, dict) and (("organizationName", "gpucluster:breakglass"),) in peer["subject"]


def test_the_kubeconfig_names_the_breakglass_endpoint() -> None:
    from gpucluster.bootstrap.kubeconfig import render_kubeconfig

    plan = plan_cluster(spec_of(_raw()))
    text = render_kubeconfig("test", plan.ip.break_glass_endpoint, "CA", "CERT", "KEY", user="breakglass")
    document = yaml.safe_load(text)
    assert document["clusters"][0]["cluster"]["server"] == f"https://{plan.ip.break_glass_ip}:6443"
    assert document["users"][0]["name"] == "test-breakglass"
    assert base64.b64decode(document["users"][0]["user"]["client-certificate-data"]) == b"CERT"
