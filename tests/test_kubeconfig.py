from __future__ import annotations

import base64

import yaml

from gpucluster.bootstrap.kubeconfig import render_kubeconfig


def test_kubeconfig_points_at_the_load_balancer_with_embedded_credentials() -> None:
    config = yaml.safe_load(render_kubeconfig("prod", "10.0.0.4:6443", "CA", "CERT", "KEY"))
    assert config["clusters"][0]["cluster"]["server"] == "https://10.0.0.4:6443"
    assert base64.b64decode(config["users"][0]["user"]["client-key-data"]) == b"KEY"
    assert config["current-context"] == "prod"
