"""prod at full size on a real control plane: every one of its Nodes registered through kwok as its machines
register, prod's Kueue objects applied with Kueue's chart, and the real Kueue admitting gangs over all of them with
topology-aware placement inside one InfiniBand domain. The API server's and Kueue's time and memory go to
out/e2e/report.json.

The control plane is started from prod's own API-server boot document (its scale flags). dev's control plane is
stopped first: two on two cores would measure each other.

Stepped in for, and said so: the health agent's last step (the preflight taint removed from the nodes) and the
cluster-autoscaler's answer to Kueue's ProvisioningRequests (Provisioned, as the autoscaler sets it when the capacity
is there: the autoscaler cannot be built here, e2e/consumers.py NOT_BUILT).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.planning.cluster_plan import plan_cluster
from components.vocabulary import (
    ANNOTATION_REQUIRED_TOPOLOGY,
    LABEL_HOSTNAME,
    LABEL_IB_DOMAIN,
    LABEL_POOL,
    TAINT_PREFLIGHT,
)
from e2e import control_plane as cp
from e2e.cluster import Applied, apply_files, install_kueue, kubectl
from e2e.kwok import complete_after, node_templates, register, set_taints, start_kwok
from e2e.processes import Program
from e2e.report import E2EReport
from e2e.tests.conftest import plan_stack, stop_running
from tests.support.stacks import stack_spec

PROVISIONING_CRD = Path(__file__).resolve().parents[1] / "data" / "provisioningrequests.yaml"
KUEUE_KINDS = ("Topology", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "AdmissionCheck",
               "ProvisioningRequestConfig")
TEAM = "pretraining"
NODE_LIFECYCLE_OFF = ("node-lifecycle-controller",)
"""kwok renews every node's Lease every 10 s (its default 40 s lease); for 7,500 nodes on 2 cores it falls behind
(seen here: 840 of 7,500 nodes NotReady within two minutes), and the node lifecycle controller would then taint them
unreachable, which Kueue's topology-aware placement avoids. What this scenario measures is registration and
admission, so that one controller is off here; dev's control plane runs it."""


@dataclass
class Prod:
    plane: cp.ControlPlane
    kwok: Program
    applied: Applied
    nodes: list[dict[str, Any]]
    out: Path


def _rss_mib(program: Program) -> float:
    assert program.process is not None
    for line in Path(f"/proc/{program.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _cpu_seconds(program: Program) -> float:
    assert program.process is not None
    fields = Path(f"/proc/{program.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / 100, 1)  # utime, stime in clock ticks (USER_HZ 100)


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory, report: E2EReport) -> Iterator[Prod]:
    stop_running()
    out = plan_stack("prod", tmp_path_factory.mktemp("plan") / "prod")
    work = tmp_path_factory.mktemp("prod")
    plane = cp.start(out / "boot" / "apiserver.yaml", work, disabled_controllers=NODE_LIFECYCLE_OFF)
    kwok = start_kwok(plane.admin_kubeconfig, work)
    try:
        plan = plan_cluster(stack_spec("prod"))
        nodes = [t.node(i) for t, count in node_templates(plan, out) for i in range(count)]
        seconds = register(plane, nodes)
        registered_at = time.monotonic()
        cp.wait_until(lambda: _ready(plane) >= len(nodes), 900, f"{len(nodes)} nodes Ready", kwok)
        ready_at = time.monotonic()
        untainted = set_taints(plane, nodes, TAINT_PREFLIGHT)
        applied = Applied()
        manifests = sorted((out / "manifests").glob("*.yaml"))
        apply_files(plane, [p for p in manifests if p.name.startswith(("00-", "01-", "02-"))], applied)
        crd = kubectl(plane, "apply", "--server-side", "-f", str(PROVISIONING_CRD))
        assert crd.returncode == 0, crd.stderr
        assert kubectl(plane, "wait", "--for", "condition=Established", "crd", "--all", "--timeout=180s").returncode == 0
        install_kueue(plane, out, work, applied)
        kueue_objects = [p for p in manifests if yaml.safe_load(p.read_text())["kind"] in KUEUE_KINDS]
        apply_files(plane, kueue_objects, applied)
        report.measured["prod"] = {
            "kube_controller_manager_disabled": list(NODE_LIFECYCLE_OFF),
            "nodes": len(nodes), "register_seconds": round(seconds, 1),
            "ready_seconds_after_register": round(ready_at - registered_at, 1),
            "preflight_untaint_seconds": round(untainted, 1)}
        yield Prod(plane, kwok, applied, nodes, out)
    finally:
        kwok.stop()
        plane.stop()


def _ready(plane: cp.ControlPlane) -> int:
    count = 0
    for page in _pages(plane, "/api/v1/nodes"):
        count += sum(1 for n in page for c in n.get("status", {}).get("conditions", [])
                     if c["type"] == "Ready" and c["status"] == "True")
    return count


def _pages(plane: cp.ControlPlane, path: str) -> Iterator[list[dict[str, Any]]]:
    token = ""
    while True:
        page = cp.json_get(plane, f"{path}?limit=2000" + (f"&continue={token}" if token else ""))
        yield page["items"]
        token = page["metadata"].get("continue", "")
        if not token:
            return


def _provision(plane: cp.ControlPlane) -> None:
    """The cluster-autoscaler's answer to each new ProvisioningRequest when the nodes exist: Provisioned=True."""
    for request in cp.json_get(plane, "/apis/autoscaling.x-k8s.io/v1/provisioningrequests")["items"]:
        if any(c["type"] == "Provisioned" for c in request.get("status", {}).get("conditions", [])):
            continue
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"status": {"conditions": [{"type": "Provisioned", "status": "True", "reason": "Provisioned",
                                             "message": "capacity is available", "lastTransitionTime": now,
                                             "observedGeneration": request["metadata"].get("generation", 1)}]}}
        kubectl(plane, "patch", "provisioningrequests.autoscaling.x-k8s.io", request["metadata"]["name"], "-n",
                request["metadata"]["namespace"], "--subresource=status", "--type=merge", "-p", json.dumps(status))


def _gang(name: str, pods: int, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": f"team-{TEAM}", "labels": {"kueue.x-k8s.io/queue-name": TEAM}},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                     "template": {"metadata": {"annotations": {ANNOTATION_REQUIRED_TOPOLOGY: LABEL_IB_DOMAIN,
                                                               **complete_after("1h")}},
                                  "spec": {"restartPolicy": "Never", "containers": [{
                                      "name": "train", "image": "registry.k8s.io/pause:3.10.1",
                                      "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
                                                    "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


def _workload(plane: cp.ControlPlane, job: str) -> dict[str, Any] | None:
    items = cp.json_get(plane, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/team-{TEAM}/workloads")["items"]
    return next((w for w in items if any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))), None)


def _admitted(plane: cp.ControlPlane, job: str) -> bool:
    _provision(plane)
    workload = _workload(plane, job)
    return any(c["type"] == "Admitted" and c["status"] == "True"
               for c in (workload or {}).get("status", {}).get("conditions", []))


def test_every_prod_node_registers_and_kueue_admits_a_gang_inside_one_domain(prod: Prod, report: E2EReport) -> None:
    per_domain = min(sum(1 for n in prod.nodes if n["metadata"]["labels"].get(LABEL_IB_DOMAIN) == domain)
                     for domain in {n["metadata"]["labels"][LABEL_IB_DOMAIN] for n in prod.nodes
                                    if n["metadata"]["labels"].get(LABEL_POOL) == "h100"})
    pods = per_domain // 2
    kueue = prod.applied.kueue
    assert kueue is not None
    cpu_before = _cpu_seconds(kueue)
    made = kubectl(prod.plane, "create", "-f", "-", stdin=json.dumps(_gang("scale-gang", pods, 8)))
    assert made.returncode == 0, made.stderr
    started = time.monotonic()
    cp.wait_until(lambda: _admitted(prod.plane, "scale-gang"), 600, "the gang admitted", kueue)
    admitted_in = time.monotonic() - started
    workload = _workload(prod.plane, "scale-gang")
    assert workload is not None
    assignment = workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    # Kueue records the lowest level it placed at (the hostname); each node's own label names its domain.
    levels = assignment["levels"]
    hosts = _assigned_values(assignment, levels.index(LABEL_HOSTNAME))
    domain_of = {n["metadata"]["name"]: n["metadata"]["labels"][LABEL_IB_DOMAIN] for n in prod.nodes}
    domains = {domain_of[h] for h in hosts}
    report.measured["prod_kueue"] = {
        "gang_pods": pods, "admitted_seconds": round(admitted_in, 1),
        "kueue_cpu_seconds_for_the_admission": round(_cpu_seconds(kueue) - cpu_before, 1),
        "kueue_peak_rss_mib": _rss_mib(kueue),
        "apiserver_peak_rss_mib": _rss_mib(prod.plane.program("kube-apiserver")),
        "apiserver_cpu_seconds": _cpu_seconds(prod.plane.program("kube-apiserver")),
        "etcd_peak_rss_mib": _rss_mib(prod.plane.program("etcd"))}
    report.scenario("prod: every node registered, a gang admitted by Kueue inside one InfiniBand domain",
                    "passed" if len(domains) == 1 else "failed", nodes=len(prod.nodes), domains=sorted(domains),
                    gang_nodes=len(hosts), levels=levels,
                    refused=sorted(prod.applied.refused))
    assert len(domains) == 1, domains
    assert not prod.applied.refused, prod.applied.refused


def _assigned_values(assignment: dict[str, Any], level: int) -> set[str]:
    """The values at one topology level of a Workload's topologyAssignment (kueue v0.19.2 apis/kueue/v1beta2
    workload_types.go: slices, each with a universal value or individual prefix + root + suffix per domain)."""
    found: set[str] = set()
    for piece in assignment.get("slices", []):
        values = piece["valuesPerLevel"][level]
        if "universal" in values:
            found.add(values["universal"])
        else:
            individual = values["individual"]
            found.update(individual.get("prefix", "") + root + individual.get("suffix", "") for root in individual["roots"])
    return found
