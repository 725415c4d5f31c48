"""An admin kubeconfig from the cluster CA and the admin client certificate (pure text; keep it secret)."""

from __future__ import annotations

import base64

import yaml


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def render_kubeconfig(cluster: str, endpoint: str, ca_pem: str, cert_pem: str, key_pem: str,
                      user: str = "admin") -> str:
    user = f"{cluster}-{user}"
    return yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": f"https://{endpoint}",
                                                   "certificate-authority-data": _b64(ca_pem)}}],
        "users": [{"name": user, "user": {"client-certificate-data": _b64(cert_pem),
                                          "client-key-data": _b64(key_pem)}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }, sort_keys=False)
