"""The external etcd's test PKI (kubeadm issues everything else, as it does on an API-server VM): an etcd CA, the
member's serving certificate on loopback, and the API server's etcd client certificate."""

from __future__ import annotations

from pathlib import Path

from gpucluster.planning.pki import CertPlan
from tests.support.real_pki import Issued, issue, make_ca


def write(issued: Issued, cert: Path, key: Path) -> None:
    cert.parent.mkdir(parents=True, exist_ok=True)
    cert.write_text(issued.cert_pem())
    key.write_text(issued.key_pem())
    key.chmod(0o600)


def etcd_pki(pki: Path) -> dict[str, Path]:
    """Files under `pki` laid out as the rendered kubeadm configuration names them (etcd/ca.crt,
    apiserver-etcd-client.*), plus the member's own (etcd/server.*)."""
    ca = make_ca("etcd-ca", "etcd-ca", rsa_bits=2048)
    server = issue(CertPlan("etcd-server", "etcd-ca", "etcd-e2e", None, ("localhost",), ("127.0.0.1",),
                            ("digital_signature", "key_encipherment", "server_auth", "client_auth")), ca)
    client = issue(CertPlan("apiserver-etcd-client", "etcd-ca", "kube-apiserver-etcd-client", None, (), (),
                            ("digital_signature", "key_encipherment", "client_auth")), ca)
    files = {"ca": pki / "etcd" / "ca.crt", "server_cert": pki / "etcd" / "server.crt",
             "server_key": pki / "etcd" / "server.key", "client_cert": pki / "apiserver-etcd-client.crt",
             "client_key": pki / "apiserver-etcd-client.key"}
    write(ca, files["ca"], pki / "etcd" / "ca.key")
    write(server, files["server_cert"], files["server_key"])
    write(client, files["client_cert"], files["client_key"])
    return files
