"""Kueue v0.19.2's real controller on dev's queues: a gang admitted within quota, a gang over quota held, the
rollout's fence (no new placement on fenced nodes, a running gang untouched), `spec.active=false`, and what a
finished Workload keeps.

The nodes pass their health check here by the health agent's own step (the preflight taint removed), since no GPU
exists to check; everything else is the servers' own doing: Kueue's webhooks suspend the Jobs, Kueue admits, the
kube-scheduler binds, kwok runs and finishes the pods, the Job controller completes the Job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import control_plane as cp
from e2e.cluster import Stack, kubectl
from e2e.consumers import by_name
from e2e.kwok import complete_after
from e2e.report import E2EReport
from gpucluster.planning.fence import FENCE
from gpucluster.vocabulary import LABEL_POOL, TAINT_PREFLIGHT

NAMESPACE = "team-research"
QUEUE = "research"
POOL = "t4"


@pytest.fixture(scope="module")
def queues(dev_stack: Stack) -> Iterator[Stack]:
    for name in dev_stack.nodes:
        node = cp.json_get(dev_stack.plane, f"/api/v1/nodes/{name}")
        taints = [t for t in node["spec"].get("taints", []) if t["key"] != TAINT_PREFLIGHT]
        patched = kubectl(dev_stack.plane, "patch", "node", name, "--type=merge", "-p",
                          json.dumps({"spec": {"taints": taints}}))
        assert patched.returncode == 0, patched.stderr
    cp.wait_until(lambda: _cluster_queue(dev_stack)["status"].get("conditions", [{}])[0].get("status") == "True", 120,
                  "ClusterQueue research active", dev_stack.applied.kueue)
    yield dev_stack


def _cluster_queue(stack: Stack) -> dict[str, Any]:
    return cp.json_get(stack.plane, f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{QUEUE}")


def _job(name: str, pods: int, gpus: int, after: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                     "template": {"metadata": {"annotations": complete_after(after)},
                                  "spec": {"restartPolicy": "Never", "containers": [{
                                      "name": "train", "image": "registry.k8s.io/pause:3.10.1",
                                      "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                                                    "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


def _submit(stack: Stack, job: dict[str, Any]) -> None:
    made = kubectl(stack.plane, "create", "-f", "-", stdin=json.dumps(job))
    assert made.returncode == 0, made.stderr


def _workload(stack: Stack, job: str) -> dict[str, Any] | None:
    items = cp.json_get(stack.plane, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/workloads")["items"]
    return next((w for w in items if any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))), None)


def _condition(workload: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    return next((c for c in (workload or {}).get("status", {}).get("conditions", []) if c["type"] == kind), {})


def _pods(stack: Stack, job: str) -> list[dict[str, Any]]:
    return cp.json_get(stack.plane, f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=job-name%3D{job}")["items"]


def _wait_condition(stack: Stack, job: str, kind: str, status: str = "True", seconds: float = 180) -> dict[str, Any]:
    cp.wait_until(lambda: _condition(_workload(stack, job), kind).get("status") == status, seconds,
                  f"{job}'s Workload {kind}={status}", stack.applied.kueue)
    workload = _workload(stack, job)
    assert workload is not None
    return workload


def test_a_gang_within_quota_is_admitted_and_runs(queues: Stack, report: E2EReport) -> None:
    _submit(queues, _job("gang-a", 1, 1, "1h"))
    workload = _wait_condition(queues, "gang-a", "Admitted")
    cp.wait_until(lambda: sum(p["status"].get("phase") == "Running" for p in _pods(queues, "gang-a")) == 1, 180,
                  "gang-a's pods running")
    pods = _pods(queues, "gang-a")
    selectors = [p["spec"].get("nodeSelector", {}) for p in pods]
    report.scenario("Kueue admits a gang within quota; the kube-scheduler places it on the flavor's open nodes",
                    "passed", flavor=workload["status"]["admission"]["podSetAssignments"][0]["flavors"],
                    nodes=sorted(p["spec"]["nodeName"] for p in pods))
    assert all(s.get(FENCE.label) == FENCE.open and s.get(LABEL_POOL) == POOL for s in selectors)


def test_a_gang_over_quota_waits(queues: Stack, report: E2EReport) -> None:
    quota = next(r["nominalQuota"] for g in _cluster_queue(queues)["spec"]["resourceGroups"] for f in g["flavors"]
                 for r in f["resources"] if r["name"] == "nvidia.com/gpu")
    _submit(queues, _job("gang-over", int(quota) + 1, 1, "1s"))
    workload = _wait_condition(queues, "gang-over", "QuotaReserved", "False")
    message = _condition(workload, "QuotaReserved").get("message", "")
    report.scenario("a gang over its ClusterQueue's quota is not admitted", "passed", message=message)
    assert "insufficient" in message.lower() or "couldn't assign" in message.lower(), message
    assert not _pods(queues, "gang-over") or all(not p["spec"].get("nodeName") for p in _pods(queues, "gang-over"))
    kubectl(queues.plane, "delete", "job", "gang-over", "-n", NAMESPACE, "--wait=false")


def _fence(stack: Stack, value: str) -> None:
    for name in stack.nodes:
        node = cp.json_get(stack.plane, f"/api/v1/nodes/{name}")
        if node["metadata"]["labels"].get(LABEL_POOL) == POOL:
            done = kubectl(stack.plane, "label", "node", name, f"{FENCE.label}={value}", "--overwrite")
            assert done.returncode == 0, done.stderr


def test_the_fence_stops_new_placement_and_leaves_the_running_gang(queues: Stack, report: E2EReport) -> None:
    _fence(queues, FENCE.fenced)
    try:
        _submit(queues, _job("gang-b", 1, 1, "1s"))
        _wait_condition(queues, "gang-b", "Admitted")
        cp.wait_until(lambda: bool(_pods(queues, "gang-b")), 120, "gang-b's pod created")
        cp.wait_until(lambda: any(c.get("reason") == "Unschedulable" for p in _pods(queues, "gang-b")
                                  for c in p["status"].get("conditions", [])), 120, "gang-b unschedulable")
        running = _pods(queues, "gang-a")
        admitted = _condition(_workload(queues, "gang-a"), "Admitted").get("status")
        report.scenario("the fence: no new placement on fenced nodes, the running gang untouched", "passed",
                        new_pod_node=[p["spec"].get("nodeName") for p in _pods(queues, "gang-b")],
                        running_gang=[p["status"].get("phase") for p in running], running_admitted=admitted)
        assert all(not p["spec"].get("nodeName") for p in _pods(queues, "gang-b"))
        assert admitted == "True" and all(p["status"].get("phase") == "Running" for p in running), \
            [(p["metadata"]["name"], p["status"].get("phase"), p["metadata"].get("deletionTimestamp")) for p in running]
    finally:
        _fence(queues, FENCE.open)
    cp.wait_until(lambda: all(p["spec"].get("nodeName") for p in _pods(queues, "gang-b")), 180,
                  "gang-b placed once the fence opens")


def test_a_deactivated_workload_is_evicted(queues: Stack, report: E2EReport) -> None:
    workload = _workload(queues, "gang-a")
    assert workload is not None
    done = kubectl(queues.plane, "patch", "workloads.kueue.x-k8s.io", workload["metadata"]["name"], "-n", NAMESPACE,
                   "--type=merge", "-p", json.dumps({"spec": {"active": False}}))
    assert done.returncode == 0, done.stderr
    evicted = _wait_condition(queues, "gang-a", "Evicted")
    cp.wait_until(lambda: cp.json_get(queues.plane, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/gang-a")["spec"]
                  .get("suspend") is True, 120, "gang-a suspended")
    report.scenario("spec.active=false evicts an admitted Workload and suspends its Job", "passed",
                    evicted=_condition(evicted, "Evicted"))
    assert _condition(evicted, "Evicted")["reason"] in ("Deactivated", "InactiveWorkload")


def test_what_a_finished_workload_keeps(queues: Stack, report: E2EReport) -> None:
    """A gang that runs to completion (kwok finishes its pods): Kueue marks the Workload Finished; whether it keeps
    its admission and quota reservation is what the rollout controller must read (recorded, and held here)."""
    _submit(queues, _job("gang-done", 1, 1, "2s"))
    workload = _wait_condition(queues, "gang-done", "Finished", seconds=240)
    kept = {"admission": "admission" in workload["status"],
            "QuotaReserved": _condition(workload, "QuotaReserved").get("status"),
            "Admitted": _condition(workload, "Admitted").get("status")}
    report.scenario("a finished Workload: what it keeps", "passed", finished=_condition(workload, "Finished"), kept=kept)
    assert _condition(workload, "Finished")["status"] == "True"
    assert kept["admission"] and kept["QuotaReserved"] == "True", kept


def test_a_job_without_a_queue_name_is_the_teams_not_free(queues: Stack, report: E2EReport) -> None:
    """A Job that names no queue in a team namespace: Kueue's webhook gives it the namespace's `default` LocalQueue
    (on the team's ClusterQueue), and it is suspended until admitted against the team's quota, not started outside
    it. Over quota, it waits like any gang."""
    quota = next(r["nominalQuota"] for g in _cluster_queue(queues)["spec"]["resourceGroups"] for f in g["flavors"]
                 for r in f["resources"] if r["name"] == "nvidia.com/gpu")
    job = _job("no-queue", int(quota) + 1, 1, "1s")
    del job["metadata"]["labels"]
    _submit(queues, job)
    made = cp.json_get(queues.plane, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/no-queue")
    workload = _wait_condition(queues, "no-queue", "QuotaReserved", "False")
    report.scenario("a Job without a queue name goes to the team's default LocalQueue and waits for quota",
                    "passed", queue=made["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name"),
                    suspend=made["spec"].get("suspend"), workload_queue=workload["spec"].get("queueName"))
    assert made["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") == "default"
    assert workload["spec"]["queueName"] == "default" and made["spec"].get("suspend") is True
    assert not any(p["spec"].get("nodeName") for p in _pods(queues, "no-queue"))
    kubectl(queues.plane, "delete", "job", "no-queue", "-n", NAMESPACE, "--wait=false")


def _gated_pod(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "registry.k8s.io/pause:3.10.1",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                              "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _pod_workload(stack: Stack, pod: str) -> dict[str, Any] | None:
    items = cp.json_get(stack.plane, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/workloads")["items"]
    return next((w for w in items if any(o["kind"] == "Pod" and o["name"] == pod
                                         for o in w["metadata"].get("ownerReferences", []))), None)


def test_a_bare_pod_and_a_deployments_pod_wait_for_the_teams_quota(queues: Stack, report: E2EReport) -> None:
    """Kueue's `pod` integration: a pod without a Job, or one a Deployment makes, in a team namespace gets the
    `default` queue, Kueue's scheduling gate and a Workload of its own on the team's queue; over quota the gate stays
    (the bare pod's Workload says why): the quota is not bypassed by leaving out the Job, nor by naming a node."""
    quota = next(r["nominalQuota"] for g in _cluster_queue(queues)["spec"]["resourceGroups"] for f in g["flavors"]
                 for r in f["resources"] if r["name"] == "nvidia.com/gpu")
    bare = {"apiVersion": "v1", "kind": "Pod", **_gated_pod("bare-pod", int(quota) + 1)}
    template = _gated_pod("served", int(quota) + 1)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "served", "namespace": NAMESPACE},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "served"}},
                           "template": {"metadata": {"labels": {"app": "served"}},
                                        "spec": {**template["spec"], "restartPolicy": "Always"}}}}
    _submit(queues, bare)
    _submit(queues, deployment)
    pods: dict[str, dict[str, Any]] = {}

    def held() -> bool:
        listed = cp.json_get(queues.plane, f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
        pods.update({p["metadata"]["labels"]["app"]: p for p in listed
                     if p["metadata"].get("labels", {}).get("app") in ("bare-pod", "served")})
        if len(pods) < 2:
            return False
        workloads = {app: _pod_workload(queues, p["metadata"]["name"]) for app, p in pods.items()}
        return (all(w and w["spec"].get("queueName") == "default" for w in workloads.values())
                and _condition(workloads["bare-pod"], "QuotaReserved").get("status") == "False")

    try:
        cp.wait_until(held, 180, "the bare pod's and the Deployment pod's Workloads queued, the bare pod's held")
    except TimeoutError:
        seen = {app: {"labels": p["metadata"].get("labels"), "gates": p["spec"].get("schedulingGates"),
                      "workload": (_pod_workload(queues, p["metadata"]["name"]) or {}).get("status")}
                for app, p in pods.items()}
        raise AssertionError(f"not held over quota: {json.dumps(seen)}") from None
    seen = {app: {"queue": p["metadata"]["labels"].get("kueue.x-k8s.io/queue-name"),
                  "gates": [g["name"] for g in p["spec"].get("schedulingGates", [])],
                  "node": p["spec"].get("nodeName")} for app, p in pods.items()}
    report.scenario("a bare pod and a Deployment's pod go to the team's default LocalQueue and wait for quota",
                    "passed", pods=seen)
    for pod in seen.values():
        assert pod["queue"] == "default" and "kueue.x-k8s.io/admission" in pod["gates"] and not pod["node"], seen
    kubectl(queues.plane, "delete", "deployment", "served", "-n", NAMESPACE, "--wait=false")
    kubectl(queues.plane, "delete", "pod", "bare-pod", "-n", NAMESPACE, "--wait=false")
    # Naming a node does not skip the queue: the gate Kueue adds makes the API server refuse spec.nodeName.
    pinned = {"apiVersion": "v1", "kind": "Pod", **_gated_pod("pinned", 1)}
    pinned["spec"]["nodeName"] = queues.nodes[0]
    refused = kubectl(queues.plane, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(pinned))
    assert refused.returncode != 0 and "schedulingGates" in refused.stderr, refused.stderr


def test_kueue_reports_its_pinned_version(queues: Stack, report: E2EReport) -> None:
    """Kueue has no --version: it logs the version its build stamped when it starts (cmd/kueue/main.go)."""
    kueue = queues.applied.kueue
    assert kueue is not None
    started = next(json.loads(line) for line in kueue.log.read_text().splitlines()
                   if line.startswith("{") and json.loads(line).get("msg") == "Initializing")
    report.scenario("Kueue logs its stamped version", "passed", gitVersion=started["gitVersion"],
                    gitCommit=started["gitCommit"])
    assert started["gitVersion"] == by_name("kueue").version and started["gitCommit"] == by_name("kueue").commit
