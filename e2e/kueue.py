"""The real Kueue controller, run with the Configuration our chart values render, against the real API server.

What moves for a loopback run, and only that: the webhook server listens on 127.0.0.1 with a certificate for that
address (the chart's webhook configurations are pointed at it by URL, as the Service would route to the pod), the
metrics and health endpoints take free ports, and the controller reads its credentials from a kubeconfig holding
its own service account's token (so the chart's RBAC is what it gets).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from e2e.consumers import binary
from e2e.processes import Program, free_ports

NAMESPACE = "kueue-system"
SERVICE_ACCOUNT = "kueue-controller-manager"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def serving_certificate(folder: Path) -> bytes:
    """A self-signed certificate for 127.0.0.1 in controller-runtime's layout (tls.crt, tls.key); its PEM is the
    webhooks' caBundle."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-webhook-e2e")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (folder / "tls.crt").write_bytes(pem)
    (folder / "tls.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return pem


def chart_configuration(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller's Configuration as the chart renders it into its ConfigMap."""
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("manager-config"))
    return yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])


def localise_configuration(config: dict[str, Any], webhook_port: int, cert_dir: Path) -> dict[str, Any]:
    health, metrics = free_ports(2)
    return {**config, "namespace": NAMESPACE,
            "webhook": {**config.get("webhook", {}), "port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "internalCertManagement": {"enable": False},
            "health": {**config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {**config.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics}"}}


def point_webhooks(objects: list[dict[str, Any]], webhook_port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The chart's webhook configurations with each webhook's Service path reached at the loopback server."""
    bundle = base64.b64encode(ca_pem).decode()
    pointed = []
    for o in objects:
        if o["kind"] in WEBHOOK_KINDS:
            o = {**o, "webhooks": [{**w, "clientConfig": {
                "url": f"https://127.0.0.1:{webhook_port}{w['clientConfig']['service'].get('path', '/')}",
                "caBundle": bundle}} for w in o.get("webhooks", [])]}
        pointed.append(o)
    return pointed


def start_kueue(config: dict[str, Any], kubeconfig: Path, work: Path) -> Program:
    path = work / "kueue-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return Program("kueue", [str(binary("kueue")), f"--config={path}", f"--kubeconfig={kubeconfig}"],
                   work / "logs" / "kueue.log", {"KUBECONFIG": str(kubeconfig)}).start()
