"""Lifetimes that stop the cluster when they run out: the bootstrap tokens nodes join with, the API server's serving
certificate (read from a TLS handshake, as every client sees it) and the kubeconfig's own CA and client
certificates."""

from __future__ import annotations

import base64
import socket
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509

from gpucluster.verify.kube import Kube
from gpucluster.verify.results import Check, Result
from gpucluster.vocabulary import SECRET_TYPE_BOOTSTRAP_TOKEN

TOKENS = Check("cluster.bootstrap-token", "kubernetes/website content/en/docs/reference/access-authn-authz/"
                                          f"bootstrap-tokens.md (Secret type {SECRET_TYPE_BOOTSTRAP_TOKEN}, "
                                          "`expiration`, `usage-bootstrap-authentication`; the token cleaner deletes "
                                          "expired tokens); docs/operations.md 'Rotating the bootstrap token'")
CERTIFICATES = Check("cluster.certificates", "docs/operations.md 'Certificate rotation' (kubeadm-issued serving "
                                             "certificates last one year from the API server's boot)")
TOKEN_TYPE = SECRET_TYPE_BOOTSTRAP_TOKEN


def _decoded(secret: dict[str, Any], key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value).decode() if value else ""


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def check_tokens(kube: Kube, now: datetime, window: timedelta) -> list[Result]:
    secrets = kube.list("/api/v1/namespaces/kube-system/secrets", [("fieldSelector", f"type={TOKEN_TYPE}")])
    usable: list[tuple[datetime | None, str]] = []
    for secret in secrets:
        if _decoded(secret, "usage-bootstrap-authentication") != "true":
            continue
        expiration = _decoded(secret, "expiration")
        expires = _time(expiration) if expiration else None
        if expires is None or expires > now:
            usable.append((expires, _decoded(secret, "token-id") or secret.get("metadata", {}).get("name", "?")))
    fix = ("rotate the token now (docs/operations.md, 'Rotating the bootstrap token'); until a valid token is "
           "registered no new or autoscaled node can join")
    if not usable:
        return [TOKENS.failed("kube-system", f"no unexpired bootstrap token for authentication among {len(secrets)} "
                                             "token Secret(s)", fix)]
    expires, token = max(usable, key=lambda u: u[0] or datetime.max.replace(tzinfo=UTC))
    if expires is None:
        return [TOKENS.passed(f"token {token}", "never expires")]
    left = expires - now
    if left < window:
        return [TOKENS.failed(f"token {token}", f"the last valid token expires {expires:%Y-%m-%d %H:%M} UTC, in "
                                                f"{left.days} day(s) (window {window.days})", fix)]
    return [TOKENS.passed(f"token {token}", f"valid until {expires:%Y-%m-%d} ({left.days} days)")]


def _verdict(subject: str, cert: x509.Certificate, now: datetime, window: timedelta, fix: str) -> Result:
    expires = cert.not_valid_after_utc
    left = expires - now
    if left < window:
        state = "expired" if left.total_seconds() <= 0 else f"expires in {left.days} day(s)"
        return CERTIFICATES.failed(subject, f"{state}: notAfter {expires:%Y-%m-%d %H:%M} UTC "
                                            f"({cert.subject.rfc4514_string()})", fix)
    return CERTIFICATES.passed(subject, f"valid until {expires:%Y-%m-%d} ({left.days} days)")


def serving_certificate(host: str, port: int, ca_file: str | None, server_name: str | None) -> x509.Certificate:
    """The API server's certificate from a real handshake, verified against the kubeconfig's CA."""
    context = ssl.create_default_context(cafile=ca_file)
    with socket.create_connection((host, port), timeout=15) as raw, \
            context.wrap_socket(raw, server_hostname=server_name or host) as tls:
        der = tls.getpeercert(binary_form=True)
    if der is None:
        raise ssl.SSLError("the server sent no certificate")
    return x509.load_der_x509_certificate(der)


def check_certificates(kube: Kube, now: datetime, window: timedelta) -> list[Result]:
    config = kube.api_client.configuration
    url = urlsplit(kube.host)
    host, port = url.hostname or "", url.port or 443
    results = []
    subject = f"API server serving certificate ({host}:{port})"
    renew = ("reimage the API servers one at a time (docs/operations.md, 'Certificate rotation'): kubeadm issues a "
             "fresh serving certificate at boot")
    if kube.proxy:
        results.append(CERTIFICATES.skipped(subject, f"the kubeconfig reaches the API through {kube.proxy}; the "
                                                     "handshake is made directly only"))
    else:
        try:
            results.append(_verdict(subject, serving_certificate(host, port, kube.ca_file, config.tls_server_name),
                                    now, window, renew))
        except (OSError, ssl.SSLError) as error:
            results.append(CERTIFICATES.failed(subject, f"no verified handshake: {error}",
                                               "the certificate must chain to the kubeconfig's CA and name the "
                                               "address dialled (docs/operations.md, 'Verifying a first boot')"))
    for label, path, fix in (
            ("kubeconfig CA", kube.ca_file, "rotating the cluster CA is a maintenance window (docs/operations.md)"),
            ("kubeconfig client certificate", config.cert_file,
             "pulumi up renews the admin certificate within 30 days of expiry; export the kubeconfig again")):
        if path and Path(path).is_file():
            results.append(_verdict(label, x509.load_pem_x509_certificate(Path(path).read_bytes()), now, window, fix))
    return results
