"""The cluster PKI with pulumi-tls: three CAs, the service-account key, and the planned certificates.

Private keys exist only as Pulumi secrets (tls.PrivateKey marks them secret in state and preview).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

import pulumi
import pulumi_tls as tls

from gpucluster.planning.pki import CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA, CertPlan
from gpucluster.planning.pki_lifetimes import expiry_warning

CA_HOURS = 10 * 365 * 24
LEAF_HOURS = 365 * 24
RENEW_HOURS = 30 * 24


def ca_public_key_hash(public_key_pem: str) -> str:
    """kubeadm's discovery hash: sha256 over the CA's DER SubjectPublicKeyInfo (the PEM body)."""
    body = "".join(line for line in public_key_pem.strip().splitlines() if not line.startswith("-----"))
    return "sha256:" + hashlib.sha256(base64.b64decode(body)).hexdigest()


def warn_before_expiry(name: str, is_ca: bool, cert: tls.SelfSignedCert | tls.LocallySignedCert) -> None:
    """`pulumi preview` and `pulumi up` print a warning when the certificate in state nears its end (its
    `validityEndTime` is known only for a certificate that exists)."""
    def check(end: str | None) -> None:
        if end and (text := expiry_warning(name, is_ca, datetime.fromisoformat(end), datetime.now(UTC))):
            pulumi.log.warn(text, resource=cert)

    cert.validity_end_time.apply(check)


class Certificate:
    def __init__(self, key: tls.PrivateKey, cert: tls.LocallySignedCert) -> None:
        self.key = key
        self.cert = cert


@dataclass(frozen=True)
class ClusterPkiArgs:
    """The inputs of ClusterPki."""

    cluster: str
    """The cluster's name: the CAs' organization."""
    certificates: tuple[CertPlan, ...]
    """The leaf certificates to issue (components/planning/pki.py `plan_certificates`)."""


class ClusterPki(pulumi.ComponentResource):
    """Three CAs (cluster, etcd, front proxy), the service-account key and the planned leaf certificates."""

    ca_cert_pem: pulumi.Output[str]
    """The cluster CA's certificate."""
    ca_cert_hash: pulumi.Output[str]
    """`sha256:<hex>` of the cluster CA's public key: what `kubeadm join --discovery-token-ca-cert-hash` takes."""
    certificates: dict[str, Certificate]
    """Leaf certificates and their keys by plan name (`admin`, `apiserver`, ...)."""

    def __init__(self, name: str, args: ClusterPkiArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:ClusterPki", name, None, opts)
        cluster, certificates = args.cluster, args.certificates
        child = pulumi.ResourceOptions(parent=self)
        self.cas: dict[str, tuple[tls.PrivateKey, tls.SelfSignedCert]] = {}
        for ca, common_name in ((CLUSTER_CA, "kubernetes"), (ETCD_CA, "etcd-ca"), (FRONT_PROXY_CA, "front-proxy-ca")):
            key = tls.PrivateKey(f"{name}-{ca}-key", algorithm="RSA", rsa_bits=4096, opts=child)
            cert = tls.SelfSignedCert(
                f"{name}-{ca}", private_key_pem=key.private_key_pem, is_ca_certificate=True,
                validity_period_hours=CA_HOURS, early_renewal_hours=365 * 24,
                allowed_uses=["cert_signing", "crl_signing", "digital_signature", "key_encipherment"],
                subject=tls.SelfSignedCertSubjectArgs(common_name=common_name, organization=cluster), opts=child)
            self.cas[ca] = (key, cert)
            warn_before_expiry(ca, True, cert)
        self.service_account_key = tls.PrivateKey(f"{name}-sa", algorithm="RSA", rsa_bits=4096, opts=child)
        self.certificates = {plan.name: self._leaf(name, plan, child) for plan in certificates}
        ca_key, ca_cert = self.cas[CLUSTER_CA]
        self.ca_cert_pem = ca_cert.cert_pem
        self.ca_cert_hash = ca_key.public_key_pem.apply(ca_public_key_hash)
        self.register_outputs({"caCertPem": self.ca_cert_pem, "caCertHash": self.ca_cert_hash})

    def _leaf(self, name: str, plan: CertPlan, opts: pulumi.ResourceOptions) -> Certificate:
        ca_key, ca_cert = self.cas[plan.signer]
        key = tls.PrivateKey(f"{name}-{plan.name}-key", algorithm="ECDSA", ecdsa_curve="P256", opts=opts)
        request = tls.CertRequest(
            f"{name}-{plan.name}-csr", private_key_pem=key.private_key_pem,
            subject=tls.CertRequestSubjectArgs(common_name=plan.common_name, organization=plan.organization),
            dns_names=list(plan.dns_names), ip_addresses=list(plan.ip_addresses), opts=opts)
        cert = tls.LocallySignedCert(
            f"{name}-{plan.name}", cert_request_pem=request.cert_request_pem, ca_private_key_pem=ca_key.private_key_pem,
            ca_cert_pem=ca_cert.cert_pem, validity_period_hours=LEAF_HOURS, early_renewal_hours=RENEW_HOURS,
            allowed_uses=list(plan.usages), opts=opts)
        warn_before_expiry(plan.name, False, cert)
        return Certificate(key, cert)
