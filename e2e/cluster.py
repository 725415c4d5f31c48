"""A stack's in-cluster layer on the real control plane, in Pulumi's order: priority classes, namespaces and CRDs
first (settled), then Kueue's release as helm renders it with our values and Kueue's real controller, then every
other object of out/<stack>/manifests/ with kubectl, each file on its own so one refusal names its object.

What is not applied here, and why, is recorded beside what was (`Applied.skipped`): nothing is left out silently.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e import helm
from e2e.consumers import binary, by_name, install_dir
from e2e.control_plane import ControlPlane, json_get, service_account_kubeconfig, wait_until
from e2e.kueue import NAMESPACE, SecretVolume, chart_configuration, localise_configuration, routes, start_kueue
from e2e.processes import Program

FIRST = ("00-", "01-", "02-")
"""Rank prefixes applied and settled before anything else (README: priority classes, namespaces, CRDs)."""


@dataclass
class Applied:
    applied: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    kueue: Program | None = None


@dataclass
class Stack:
    """A stack's in-cluster layer on the real control plane, its machines registered through kwok."""

    plane: ControlPlane
    out: Path
    applied: Applied
    kwok: Program
    nodes: list[str]


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary("kubernetes", "kubectl")), "--kubeconfig", str(plane.admin_kubeconfig), *args],
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def _object_name(o: dict[str, Any]) -> str:
    namespace = o["metadata"].get("namespace")
    return f"{o['kind']}/{namespace + '/' if namespace else ''}{o['metadata']['name']}"


def apply_objects(plane: ControlPlane, objects: list[dict[str, Any]], result: Applied, source: str) -> None:
    for o in objects:
        name = _object_name(o)
        done = kubectl(plane, "apply", "--server-side", "--field-manager=gpucluster-e2e", "-f", "-",
                       stdin=json.dumps(o))
        if done.returncode == 0:
            result.applied.append(f"{source}: {name}")
        else:
            result.refused[f"{source}: {name}"] = done.stderr.strip()


def apply_files(plane: ControlPlane, files: list[Path], result: Applied) -> None:
    for path in files:
        for o in yaml.safe_load_all(path.read_text()):
            if o:
                apply_objects(plane, [o], result, f"manifests/{path.name}")


def _chart(charts: Path, chart_name: str) -> dict[str, Any]:
    return next(d for p in sorted(charts.glob("*.yaml")) if (d := yaml.safe_load(p.read_text()))["name"] == chart_name)


def services_in(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    return json_get(plane, f"/api/v1/namespaces/{namespace}/services")["items"]


def install_kueue(plane: ControlPlane, out: Path, work: Path, result: Applied) -> None:
    release = _chart(out / "charts", "kueue")
    chart_version = yaml.safe_load((install_dir(by_name("kueue")) / "assets" / "chart" / "Chart.yaml").read_text())
    if str(chart_version["version"]).lstrip("v") != str(release["version"]).lstrip("v"):
        raise AssertionError(f"the chart in the module is {chart_version['version']}, the stack installs "
                             f"{release['version']}")
    objects = helm.template(release["name"], release["namespace"], install_dir(by_name("kueue")) / "assets" / "chart",
                            release["values"], work / "helm")
    config, ports = localise_configuration(chart_configuration(objects), work)
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    if not namespaces:
        kubectl(plane, "create", "namespace", release["namespace"])
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    apply_objects(plane, [*namespaces, *crds], result, "kueue chart")
    wait = kubectl(plane, "wait", "--for", "condition=Established", "crd", "--all", "--timeout=180s")
    if wait.returncode != 0:
        raise RuntimeError(f"CRDs not established: {wait.stderr}")
    rest = [o for o in objects if o["kind"] not in ("Namespace", "CustomResourceDefinition")]
    apply_objects(plane, rest, result, "kueue chart")
    services = services_in(plane, release["namespace"])
    plane.egress.routes.update(routes(services, ports))
    account = next(o["metadata"]["name"] for o in rest if o["kind"] == "ServiceAccount")  # the chart's one account
    kubeconfig = service_account_kubeconfig(plane, NAMESPACE, account, work / "kubeconfigs")
    secret = next(o["metadata"]["name"] for o in rest if o["kind"] == "Secret" and "webhook" in o["metadata"]["name"])
    volume = SecretVolume(lambda: json_get(plane, f"/api/v1/namespaces/{NAMESPACE}/secrets/{secret}").get("data"),
                          Path(config["webhook"]["certDir"])).start()
    plane.stoppers.append(volume.stop)
    result.kueue = start_kueue(config, kubeconfig, work)
    plane.programs.append(result.kueue)  # stopped with the control plane
    # Kueue answers its webhooks once its controllers are set up: a server-side dry run of a ResourceFlavor passes
    # through the validating webhook (failurePolicy Fail).
    probe = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "e2e-probe"}}
    wait_until(lambda: kubectl(plane, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe)).returncode == 0,
               300, "Kueue's webhooks answer", result.kueue)


def apply_stack(plane: ControlPlane, out: Path, work: Path) -> Applied:
    result = Applied()
    manifests = sorted((out / "manifests").glob("*.yaml"))
    apply_files(plane, [p for p in manifests if p.name.startswith(FIRST)], result)
    wait = kubectl(plane, "wait", "--for", "condition=Established", "crd", "--all", "--timeout=180s")
    if wait.returncode != 0:
        raise RuntimeError(f"CRDs not established: {wait.stderr}")
    install_kueue(plane, out, work, result)
    for release in sorted((out / "charts").glob("*.yaml")):
        name = yaml.safe_load(release.read_text())["name"]
        if name != "kueue":
            result.skipped[f"charts/{release.name}"] = (
                f"{name}'s chart source is not taken from the module proxy here: its values are checked against the "
                "chart's keys read from source (tests/test_chart_values_keys.py)")
    apply_files(plane, [p for p in manifests if not p.name.startswith(FIRST)], result)
    return result
