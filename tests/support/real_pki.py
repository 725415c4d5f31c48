"""Real keys and certificates (the `cryptography` package) from the library's certificate plans, as
ClusterPki would have pulumi-tls issue them: RSA-4096 CAs, ECDSA P-256 leaves, the planned usages.
kubeadm-issued certificates (the API server's serving certificate, the kubeconfig client certificates)
use kubeadm's RSA-2048 keys."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpucluster.planning.pki import CertPlan

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
_NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
_EKU = {"server_auth": ExtendedKeyUsageOID.SERVER_AUTH, "client_auth": ExtendedKeyUsageOID.CLIENT_AUTH}


@dataclass(frozen=True)
class Issued:
    name: str
    cert: x509.Certificate
    key: PrivateKey

    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def key_pem(self) -> str:
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()).decode()

    def write(self, folder: Path) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        cert, key = folder / f"{self.name}.crt", folder / f"{self.name}.key"
        cert.write_text(self.cert_pem())
        key.write_text(self.key_pem())
        key.chmod(0o600)
        return cert, key


def _name(common_name: str, organization: str | None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def make_ca(name: str, common_name: str, rsa_bits: int = 4096) -> Issued:
    key = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
    subject = _name(common_name, None)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(_NOW)
            .not_valid_after(_NOW + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(name, cert, key)


def issue(plan: CertPlan, ca: Issued, rsa_bits: int | None = None) -> Issued:
    """A leaf exactly as planned: subject, SANs, key usages and extended key usages."""
    key: PrivateKey = (rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits) if rsa_bits
                       else ec.generate_private_key(ec.SECP256R1()))
    builder = (x509.CertificateBuilder().subject_name(_name(plan.common_name, plan.organization))
               .issuer_name(ca.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(_NOW).not_valid_after(_NOW + datetime.timedelta(days=365))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(
                   digital_signature="digital_signature" in plan.usages, content_commitment=False,
                   key_encipherment="key_encipherment" in plan.usages, data_encipherment=False, key_agreement=False,
                   key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.cert.public_key()),  # type: ignore[arg-type]
                              critical=False))
    ekus = [_EKU[u] for u in plan.usages if u in _EKU]
    if ekus:
        builder = builder.add_extension(x509.ExtendedKeyUsage(ekus), critical=False)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in plan.dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in plan.ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(plan.name, builder.sign(ca.key, hashes.SHA256()), key)


def sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return set(ext.get_values_for_type(x509.DNSName)), {str(i) for i in ext.get_values_for_type(x509.IPAddress)}


def issue_cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None,
               issuer_key: ec.EllipticCurvePrivateKey, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer.subject if issuer else x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())
