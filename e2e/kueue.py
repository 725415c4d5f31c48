"""The real Kueue controller, run with the Configuration our chart values render, against the real API server.

What moves for a loopback run, and only that: the webhook, visibility, metrics and health listeners take free
loopback ports (the API server reaches the first two through their Services by its egress selector, e2e/egress.py),
the certificates Kueue's own rotation issues go under a work folder, and the controller reads its credentials from
a kubeconfig holding its own service account's token (so the chart's RBAC is what it gets). The chart's webhook
configurations, Services and APIServices are applied as rendered.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.consumers import binary
from e2e.processes import Program, free_ports

NAMESPACE = "kueue-system"


def chart_configuration(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller's Configuration as the chart renders it into its ConfigMap."""
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("manager-config"))
    return yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])


def localise_configuration(config: dict[str, Any], work: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The chart's Configuration with its listeners on loopback at free ports and its certificates under `work`;
    the ports by Service-name suffix, for the egress routes."""
    webhook, visibility, health, metrics = free_ports(4)
    local = {**config, "namespace": NAMESPACE,
             "webhook": {**config.get("webhook", {}), "port": webhook, "host": "127.0.0.1",
                         "certDir": str(work / "kueue-certs")},
             "visibilityServer": {**config.get("visibilityServer", {}), "bindPort": visibility},
             # In a pod the lease's namespace is the pod's own (its service-account mount); out of one it is named.
             "leaderElection": {**config.get("leaderElection", {}), "resourceNamespace": NAMESPACE},
             "health": {**config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{health}"},
             "metrics": {**config.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics}"}}
    return local, {"-webhook-service": webhook, "-visibility-server": visibility}


def routes(services: list[dict[str, Any]], ports: dict[str, int]) -> dict[tuple[str, int], int]:
    """Each chart Service's ClusterIP and port to the loopback port of the listener it fronts."""
    found = {}
    for service in services:
        for suffix, local in ports.items():
            if service["metadata"]["name"].endswith(suffix):
                for port in service["spec"]["ports"]:
                    found[(service["spec"]["clusterIP"], port["port"])] = local
    return found


@dataclass
class SecretVolume:
    """What the kubelet does for the chart's webhook-certificate volume: the Secret's keys as files in the folder the
    pod mounts it at, kept in step (Kueue's certificate rotation writes the Secret, then waits to see the files)."""

    read: Callable[[], dict[str, str] | None]
    folder: Path
    stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> SecretVolume:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        while not self.stopped.wait(1.0):
            try:
                data = self.read() or {}
            except Exception:
                continue
            for key, value in data.items():
                target = self.folder / key
                content = base64.b64decode(value)
                if not target.exists() or target.read_bytes() != content:
                    partial = target.with_name(f".{key}.partial")
                    partial.write_bytes(content)
                    partial.replace(target)


def start_kueue(config: dict[str, Any], kubeconfig: Path, work: Path) -> Program:
    path = work / "kueue-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return Program("kueue", [str(binary("kueue")), f"--config={path}", f"--kubeconfig={kubeconfig}"],
                   work / "logs" / "kueue.log", {"KUBECONFIG": str(kubeconfig)}).start()
