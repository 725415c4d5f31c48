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

import collections
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import control_plane as cp
from e2e.cluster import Applied, apply_files, install_kueue, kubectl
from e2e.kwok import complete_after, node_templates, register, send, set_taints, start_kwok
from e2e.processes import Program
from e2e.report import E2EReport
from e2e.tests.conftest import plan_stack, stop_running
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.vocabulary import (
    ANNOTATION_REQUIRED_TOPOLOGY,
    LABEL_HOSTNAME,
    LABEL_IB_DOMAIN,
    LABEL_POOL,
    TAINT_PREFLIGHT,
)
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


# The rollout (agents/rollout.py) of a new image for every pool, replayed against prod.

IDLE = "idle: every instance runs its scale set's model"


def _ready_again(node: str) -> tuple[str, str, dict[str, Any], str]:
    """A re-imaged machine's kubelet posting Ready again: a new transition (kwok keeps its nodes Ready throughout)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return ("PATCH", f"/api/v1/nodes/{node}/status", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, "application/strategic-merge-patch+json")


def _running_on(plane: cp.ControlPlane, node: str) -> list[str]:
    """The pods on a node that a re-image would kill: not a DaemonSet's, not finished."""
    pods = cp.json_get(plane, f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")["items"]
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods
            if p["status"].get("phase") not in ("Succeeded", "Failed")
            and not any(o["kind"] == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))]


def test_the_prod_rollout_rolls_every_wave_and_moves_the_gang_whole(prod: Prod, report: E2EReport, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pool's model names a new image, so every instance of prod is behind. The controller, as its own
    service account with its rendered roles, against the real API server and Kueue with the gang of the test above
    running: all pool waves in the plan's order, each instance moved by one manual upgrade (one OS disk), nothing
    running on a machine when ARM is asked to move it, the gang deactivated whole when its domain's turn comes and
    admitted again into one open domain. Stepped in for: ARM (the fake of tests/support/rollout_world.py), each moved
    machine's kubelet posting Ready again, and the GPU health agent's last step (the preflight taint removed); the
    drain deadline is passed by the controller's clock, not waited for."""
    from e2e.tests.test_agents_real_server import account_dir
    from gpucluster.agents import kube_client as kc
    from gpucluster.agents import rollout as ro
    from gpucluster.agents import rollout_arm
    from gpucluster.agents.prefix_ipam import Leader
    from tests.support import rollout_world as world

    plane = prod.plane
    plan = plan_cluster(stack_spec("prod"))
    assert plan.rollout is not None
    pool_waves = [w for w in plan.rollout.waves if w.kind == "pool"]
    preflight = {s for w in pool_waves if w.preflight for s in w.scale_sets}
    files = [p for p in sorted((prod.out / "manifests").glob("*gpucluster-rollout*.yaml"))
             if yaml.safe_load(p.read_text())["kind"] not in ("Deployment", "PodDisruptionBudget")]
    apply_files(plane, files, prod.applied)
    account = account_dir(plane, "kube-system", "gpucluster-rollout", tmp_path / "account")

    by_node = {n["metadata"]["name"]: n for n in prod.nodes}
    arm = world.Arm()
    for t, count in node_templates(plan, prod.out):
        image = world.IMAGE.format(t.pool, "1.0.0")
        arm.sets[t.scale_set] = world.ScaleSet(image, {str(i): world.Vm(image) for i in range(count)})
        arm.bump(t.scale_set, "1.0.1")
    came_back: collections.deque[str] = collections.deque()  # appended from the fake ARM's thread
    killed: list[str] = []
    arm.done = lambda scale_set, instance: came_back.append(f"{scale_set}-{int(instance):06d}")

    def nothing_runs(scale_set: str, op: str, ids: tuple[str, ...]) -> None:
        for instance in ids:
            killed.extend(_running_on(plane, f"{scale_set}-{int(instance):06d}"))

    arm.moving = nothing_runs
    skew = [0.0]
    gang_nodes: list[set[str]] = []
    with arm.running():
        monkeypatch.setattr(rollout_arm, "ARM", arm.url)
        monkeypatch.setattr(rollout_arm, "IMDS_TOKEN", f"{arm.url}/metadata/identity/oauth2/token")
        unlimited = kc.Budget(10 ** 7)
        kube = kc.Kube(plane.server, str(account), budget=unlimited, timeout=120)
        leader = Leader(kube, "kube-system", ro.LEASE, "prod-replay")
        controller = ro.Controller(kube, ro.Arm(kc.Http(budget=unlimited), "client", "sub", "rg"),
                                   now=lambda: time.time() + skew[0], leader=leader, writes_per_round=2000)
        leader.start()
        started = time.monotonic()
        said, log = "", []
        try:
            last_moved: list[str] = []
            for _ in range(3000):
                said = ro.run(controller, iter(range(1)), sleep=lambda s: None)  # a round, errors logged
                log.append(said)
                if said == IDLE and arm.posts:
                    break
                if "waiting for" in said and "come back" not in said:
                    skew[0] += 241 * 60  # past the drain deadline (240 minutes)
                if came_back:
                    last_moved = [came_back.popleft() for _ in range(len(came_back))]
                    send(plane, [_ready_again(n) for n in last_moved])
                    set_taints(plane, [by_node[n] for n in last_moved if n.rsplit("-", 1)[0] in preflight],
                               TAINT_PREFLIGHT)
                elif "to come back" in said:  # kwok's heartbeat rewrote a transition back to the node's creation
                    send(plane, [_ready_again(n) for n in last_moved])
                _provision(plane)
                workload = _workload(plane, "scale-gang")
                if workload and workload["status"].get("admission"):
                    assignment = workload["status"]["admission"]["podSetAssignments"][0].get("topologyAssignment")
                    if assignment:
                        gang_nodes.append(_assigned_values(assignment, assignment["levels"].index(LABEL_HOSTNAME)))
        finally:
            leader.stop()
        seconds = time.monotonic() - started
    cp.wait_until(lambda: _admitted(plane, "scale-gang"), 600, "the gang admitted again", prod.applied.kueue)
    workload = _workload(plane, "scale-gang")
    assert workload is not None
    assignment = workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    final_domains = {by_node[h]["metadata"]["labels"][LABEL_IB_DOMAIN]
                     for h in _assigned_values(assignment, assignment["levels"].index(LABEL_HOSTNAME))}
    order = list(dict.fromkeys(s for s, op, _ in arm.posts if op == "manualupgrade"))
    planned = [s for w in pool_waves for s in w.scale_sets if arm.sets[s].vms]
    disks = {vm.disks for found in arm.sets.values() for vm in found.vms.values()}
    domains_held = [{by_node[h]["metadata"]["labels"][LABEL_IB_DOMAIN] for h in nodes} for nodes in gang_nodes]
    report.measured["prod_rollout"] = {"seconds": round(seconds, 1), "rounds": len(log),
                                       "waves": len(pool_waves), "instances": sum(len(s.vms) for s in arm.sets.values()),
                                       "arm_posts": len(arm.posts)}
    report.scenario("prod: a new image for every pool rolled wave by wave against the real Kueue", "passed"
                    if said == IDLE and not killed else "failed", rounds=len(log), last=log[-5:], killed=killed[:20],
                    gang_domains_after=sorted(final_domains), reimages=len(arm.asked("reimage")))
    assert said == IDLE, log[-20:]
    assert not killed, killed[:20]
    assert order == planned, "the plan's wave order"
    assert len(arm.posts) == len(planned), "each scale set asked once (no POST again while ARM has not shown it)"
    assert all(vm.latest for found in arm.sets.values() for vm in found.vms.values())
    assert disks == {2} and arm.asked("reimage") == [], "one OS disk per instance: the upgrade alone"
    assert any("deactivated 1 of 1 workloads" in s for s in log), "the gang moved whole, by deactivation"
    assert all(len(d) == 1 for d in domains_held) and len(final_domains) == 1, domains_held
