"""Each boot document's size as the VM's customData, measured with values of their real size.

Azure caps customData at 65,535 bytes (azure-rest-api-specs Microsoft.Compute OSProfile.customData: "The maximum
length of the binary array is 65535 bytes"). The plan's documents hold markers where certificates, keys and tokens go,
so their size says little: the API servers' carries four CA and service-account keys. Here the documents are rendered
again with real values of each kind, generated with `cryptography` as pulumi-tls makes them (components/azure/pki.py:
RSA 4096 CA and service-account keys, ECDSA P-256 leaf keys, leaf certificates signed by an RSA 4096 CA), and a
document over the cap is a plan error.
"""

from __future__ import annotations

import datetime
from functools import cache

from gpucluster.errors import Problem
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.planning.cluster_plan import ClusterPlan

CUSTOM_DATA_MAX = 65_535
CA_FILES = ("ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "etcd/ca.crt", "etcd/ca.key")
SERVICE_ACCOUNT_KEYS = ("sa.key", "sa.pub")
SAN_COUNT = 6
"""Names a leaf certificate carries (an API server's: its address, the load balancer's, kubernetes.default...)."""


@cache
def _material() -> dict[str, str]:
    """One PEM of each kind, at the algorithms and sizes the stack's PKI uses."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    def pem_key(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode()

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=4096)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes-ca")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    sans = x509.SubjectAlternativeName([x509.DNSName(f"kube-apiserver-{i}.cluster.internal") for i in range(SAN_COUNT)])
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-etcd-client")]))
            .issuer_name(name).public_key(leaf_key.public_key()).serial_number(2).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=365)).add_extension(sans, critical=False)
            .sign(ca_key, hashes.SHA256()))
    return {
        "ca_key": pem_key(ca_key), "leaf_key": pem_key(leaf_key),
        "ca_cert": ca.public_bytes(serialization.Encoding.PEM).decode(),
        "leaf_cert": leaf.public_bytes(serialization.Encoding.PEM).decode(),
        "public_key": ca_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
    }


def real_size_value(is_secret: bool, what: str) -> str:
    """A value of the real size for what a document's marker stands for (boot_docs.Filler)."""
    material = _material()
    path = what.removeprefix("/etc/kubernetes/pki/")
    if path == "sa.pub":
        return material["public_key"]
    if path in CA_FILES or path in SERVICE_ACCOUNT_KEYS or what.startswith("etcd CA"):
        return material["ca_key"] if path.endswith(".key") or what.endswith(" key") else material["ca_cert"]
    if path.endswith(".key") or what.endswith(" key"):
        return material["leaf_key"]
    if path.endswith(".crt") or what.endswith(" certificate"):
        return material["leaf_cert"]
    if what.startswith("bootstrap token"):
        return "abcdef.0123456789abcdef"
    if what.startswith("sha256 of"):
        return "sha256:" + "0" * 64
    if what.endswith(" id") or " id of " in what:
        return "00000000-0000-0000-0000-000000000000"
    if what.startswith("https://<snapshot storage account>"):
        return what.replace("<snapshot storage account>", "x" * 24)
    return what


def custom_data_sizes(plan: ClusterPlan) -> dict[str, int]:
    """Each boot document's bytes with real-size values: what Azure receives as the VM's customData."""
    return {name: len(text.encode()) for name, text in boot_documents(plan, real_size_value).items()}


def custom_data_problems(sizes: dict[str, int]) -> list[Problem]:
    return [Problem(f"boot/{name}", f"is {size:,} bytes with real certificates and keys; Azure takes at most "
                                    f"{CUSTOM_DATA_MAX:,} bytes of customData: move files into the node image "
                                    "(docs/images.md) or shorten the document")
            for name, size in sizes.items() if size > CUSTOM_DATA_MAX]
