"""Certificate planning: SANs carry the load balancer address, members get their own addresses."""

from __future__ import annotations

from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.pki import ETCD_CA, etcd_member_ips, kubeadm_apiserver_cert, plan_certificates


def test_api_server_sans_include_the_load_balancer(prod_spec) -> None:
    plan = plan_cluster(prod_spec)
    api = kubeadm_apiserver_cert("prod", plan.ip, "apiserver000000", "10.0.0.9")
    assert str(plan.ip.api_server_ip) == "10.0.0.4" and "10.0.0.4" in api.ip_addresses
    assert "192.168.0.1" in api.ip_addresses  # the `kubernetes` Service
    assert "kubernetes.default.svc.cluster.local" in api.dns_names
    assert "server_auth" in api.usages


def test_every_etcd_member_has_server_and_peer_certs_at_its_address(prod_spec) -> None:
    plan = plan_cluster(prod_spec)
    ips = etcd_member_ips(plan.ip, plan.control_plane)
    assert len(ips) == 8 and len(set(ips.values())) == 8
    assert all(ip in plan.ip.block("etcd").cidr for ip in ips.values())
    certs = {c.name: c for c in plan_certificates("prod", plan.ip, plan.control_plane)}
    for member, address in ips.items():
        assert certs[f"{member}-peer"].ip_addresses == (str(address),)
        assert certs[f"{member}-server"].signer == ETCD_CA
