"""What a node needs to join: the cluster CA (pulumi-tls), a bootstrap token (pulumi-random), the CA hash."""

from __future__ import annotations

import base64
import hashlib

import pulumi
import pulumi_random as random
import pulumi_tls as tls

CA_VALIDITY_HOURS = 10 * 365 * 24


def ca_public_key_hash(public_key_pem: str) -> str:
    """kubeadm's discovery hash: sha256 over the CA's DER SubjectPublicKeyInfo (the PEM body)."""
    body = "".join(line for line in public_key_pem.strip().splitlines() if not line.startswith("-----"))
    return "sha256:" + hashlib.sha256(base64.b64decode(body)).hexdigest()


class JoinCredentials(pulumi.ComponentResource):
    """The cluster CA and a bootstrap token. Private key and token are Pulumi secrets."""

    def __init__(self, name: str, cluster: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:JoinCredentials", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.ca_key = tls.PrivateKey(f"{name}-ca-key", algorithm="RSA", rsa_bits=4096, opts=child)
        self.ca_cert = tls.SelfSignedCert(
            f"{name}-ca", private_key_pem=self.ca_key.private_key_pem, is_ca_certificate=True,
            validity_period_hours=CA_VALIDITY_HOURS, early_renewal_hours=365 * 24,
            allowed_uses=["cert_signing", "crl_signing", "digital_signature", "key_encipherment"],
            subject=tls.SelfSignedCertSubjectArgs(common_name="kubernetes", organization=cluster), opts=child)
        # Bootstrap tokens are `[a-z0-9]{6}.[a-z0-9]{16}` (kubeadm token format).
        token_id = random.RandomString(f"{name}-token-id", length=6, upper=False, special=False, opts=child)
        token_secret = random.RandomPassword(f"{name}-token-secret", length=16, upper=False, special=False,
                                             opts=child)
        self.bootstrap_token = pulumi.Output.secret(
            pulumi.Output.concat(token_id.result, ".", token_secret.result))
        self.ca_cert_hash = self.ca_key.public_key_pem.apply(ca_public_key_hash)
        self.register_outputs({"caCertPem": self.ca_cert.cert_pem, "caCertHash": self.ca_cert_hash})
