"""The GPU health agent (agents/health_agent.py) driven against a fake Kubernetes API on
127.0.0.1 (tests/support/fake_kube.py): diagnostic reports that exit 0 but prove nothing, API faults (429 with Retry-After,
5xx, timeouts, bodies cut short or nested absurdly deep, 422 from a concurrent edit), and the recheck at 40,000 pods.

Consumer rules encoded: `dcgmi diag -j` writes its verdicts as `status` strings under `test_categories[].tests[]
.results[]` (NVIDIA DCGM `dcgmi/Diag.cpp` JSON output; "Pass"/"Fail"); a JSON patch whose `test` op fails is 422
(k8s.io/apiserver `pkg/endpoints/handlers/patch.go`); `fieldSelector=spec.nodeName=<node>` on pods is served by the
API server (kubernetes `pkg/registry/core/pod/strategy.go` `PodToSelectableFields`); a pod bound to a node but not yet
running has `spec.nodeName` set and `status.phase: Pending` (kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle).
"""

from __future__ import annotations

import json
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucluster.agents import health_agent as agent
from gpucluster.agents import kube_client as kc
from gpucluster.kubernetes.objects import health
from tests.support.fake_kube import HANG, FakeKube, Fault, deep_json
from tests.support.fake_rbac import service_account_user

NODES = "/api/v1/nodes"
NAMESPACE = "gpucluster-health"
APP = "gpu-health-h100"
PASSED = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
    {"name": "Memory", "results": [{"gpu_id": "0", "status": "Pass"}]}]}]}}
FAILED = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
    {"name": "Memory", "results": [{"gpu_id": "0", "status": "Fail", "info": "row remap"}]}]}]}}


def node(name: str, *taints: tuple[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"gpucluster.io/pool": "h100"}},
            "spec": {"taints": [{"key": k, "value": v, "effect": "NoSchedule"} for k, v in taints]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str, gpus: int = 0, phase: str = "Running", namespace: str = "research",
        labels: dict[str, str] | None = None, priority: str = "research") -> tuple[str, dict[str, Any]]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
    return f"/api/v1/namespaces/{namespace}/pods", {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node_name, "priorityClassName": priority,
                 "containers": [{"name": "main", "image": "example/train:1", "resources": resources}]},
        "status": {"phase": phase}}


def taints(kube: FakeKube, name: str) -> dict[str, str]:
    found = kube.get_object(NODES, name)
    assert found is not None
    return {t["key"]: t["value"] for t in found["spec"].get("taints") or []}


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    """Each account's token is authorized by the roles the plan renders for it (objects/health.py)."""
    fake = FakeKube()
    fake.enforce(health.health_access(), {account: service_account_user(health.NAMESPACE, account)
                                          for account in (health.AGENT_ACCOUNT, health.RECHECK_ACCOUNT)})
    with fake.running():
        yield fake
    assert not fake.denied, fake.denied  # a refused call the agent survived is still a missing grant


def client(fake: FakeKube, tmp_path: Path, timeout: float = 10.0, account: str = health.AGENT_ACCOUNT) -> kc.Kube:
    folder = tmp_path / account
    folder.mkdir(exist_ok=True)
    (folder / "token").write_text(account)
    return kc.Kube(fake.url, str(folder), timeout=timeout, budget=kc.Budget(100_000), retry_base=0.01,
                   retry_cap=0.05)


# The diagnostic's report.

REPORTS: dict[str, tuple[str | None, bytes | None, str]] = {
    "pass": ("0", json.dumps(PASSED).encode(), "pass"),
    "missing report": ("0", None, "diag-report-invalid"),
    "empty report": ("0", b"", "diag-report-invalid"),
    "truncated report": ("0", json.dumps(PASSED).encode()[:40], "diag-report-invalid"),
    "report without results": ("0", b"{}", "diag-report-invalid"),
    "deep report": ("0", deep_json(10_000), "diag-report-invalid"),
    "no exit code": (None, json.dumps(PASSED).encode(), "diag-report-invalid"),
    "exit 1": ("1", json.dumps(PASSED).encode(), "diag-failed"),
    "exit --1": ("--1", json.dumps(PASSED).encode(), "diag-report-invalid"),
    "exit in superscript digits": ("²", json.dumps(PASSED).encode(), "diag-report-invalid"),
    "a failed test": ("0", json.dumps(FAILED).encode(), "diag-failed"),
}


@pytest.mark.parametrize("case", list(REPORTS))
def test_only_a_complete_passing_report_removes_the_taint(kube: FakeKube, tmp_path: Path, case: str) -> None:
    exit_code, report, verdict = REPORTS[case]
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "run-diag").write_text("yes")
    if exit_code is not None:
        (shared / "diag.exit").write_text(exit_code)
    if report is not None:
        (shared / "diag.json").write_bytes(report)
    kube.put_object(NODES, node("gpu-0", (agent.PREFLIGHT, "pending")))
    assert agent.settle_diagnostics(client(kube, tmp_path), "gpu-0", str(shared)) == verdict
    found = taints(kube, "gpu-0")
    if verdict == "pass":
        assert found == {}
    else:
        assert found == {agent.PREFLIGHT: "pending", agent.UNHEALTHY: verdict}


# API faults.

@pytest.mark.parametrize("fault", [Fault(429, {"Retry-After": "1"}), Fault(503), Fault(truncate=True),
                                   Fault(200, body=deep_json(100_000)), Fault(delay=HANG)],
                         ids=["429", "503", "truncated", "deep", "timeout"])
def test_a_failed_read_is_retried(kube: FakeKube, tmp_path: Path, fault: Fault) -> None:
    kube.put_object(NODES, node("gpu-0", (agent.PREFLIGHT, "pending")))
    kube.inject("GET", "/api/v1/nodes/gpu-0", fault)
    shared = tmp_path / "shared"
    shared.mkdir()
    assert agent.gate(client(kube, tmp_path, timeout=2.0), "gpu-0", str(shared)) == 0  # a held answer times out
    assert (shared / "run-diag").read_text() == "yes"


def test_a_concurrent_edit_is_read_again_not_overwritten(kube: FakeKube, tmp_path: Path) -> None:
    kube.put_object(NODES, node("gpu-0", (agent.PREFLIGHT, "pending")))
    edits = [0]

    def someone_else_taints(method: str, path: str, fake: FakeKube) -> None:
        if method == "PATCH" and not edits[0]:
            edits[0] += 1
            current = fake.get_object(NODES, "gpu-0")
            assert current is not None
            current["spec"]["taints"].append({"key": "example.io/maintenance", "value": "x", "effect": "NoSchedule"})
            fake.put_object(NODES, current)

    kube.before_write = someone_else_taints
    agent.set_taints(client(kube, tmp_path), "gpu-0", lambda t: agent.without_taint(t, agent.PREFLIGHT))
    assert taints(kube, "gpu-0") == {"example.io/maintenance": "x"}  # their taint kept, ours removed
    assert [s.method for s in kube.requests(pattern="gpu-0")] == ["GET", "PATCH", "GET", "PATCH"]


def test_the_agent_loop_survives_an_unavailable_api(kube: FakeKube, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "run-diag").write_text("yes")
    (shared / "diag.exit").write_text("0")
    (shared / "diag.json").write_text(json.dumps(PASSED))
    (shared / "health.json").write_text(json.dumps({"body": {"Overall Health": {"value": "Failure"}}}))
    kube.put_object(NODES, node("gpu-0", (agent.PREFLIGHT, "pending")))
    kube.inject("GET", "/api/v1/nodes/gpu-0", Fault(500, times=6))
    assert agent.agent(client(kube, tmp_path), "gpu-0", str(shared), rounds=4, interval=0) == 0
    assert taints(kube, "gpu-0") == {agent.UNHEALTHY: "failure"}


# The recheck.

def _pool(kube: FakeKube, nodes: int, idle: int, pending: int) -> tuple[set[str], set[str]]:
    """`nodes` GPU nodes with 16 pods each (40,000 pods at 2,500 nodes) and an agent pod each; the first `idle` run
    only CPU pods and a balloon, the next `pending` have a GPU pod bound but still Pending, the rest run GPU pods."""
    idle_nodes, pending_nodes = set(), set()
    for n in range(nodes):
        name = f"h100-{n:05d}"
        kube.put_object(NODES, node(name))
        kind = "idle" if n < idle else "pending" if n < idle + pending else "busy"
        for p in range(16):
            if p == 0 and kind == "idle":
                kube.put_object(*pod(f"balloon-{n}", name, gpus=8, priority="balloon", namespace="capacity"))
            elif p == 0:
                kube.put_object(*pod(f"train-{n}", name, gpus=8, phase="Pending" if kind == "pending" else "Running"))
            else:
                kube.put_object(*pod(f"side-{n}-{p}", name))
        kube.put_object(*pod(f"{APP}-{n}", name, namespace=NAMESPACE, labels={"app.kubernetes.io/name": APP}))
        (idle_nodes if kind == "idle" else pending_nodes if kind == "pending" else set()).add(name)
    return idle_nodes, pending_nodes


def test_recheck_at_40000_pods_reads_per_node_and_skips_pending_gpu_pods(kube: FakeKube, tmp_path: Path) -> None:
    idle, pending = _pool(kube, 2500, idle=1000, pending=300)
    assert sum(len(v) for c, v in kube.store.items() if c.endswith("/pods")) == 2500 * 17
    kube_client = client(kube, tmp_path, account=health.RECHECK_ACCOUNT)
    tracemalloc.start()
    try:
        code = agent.recheck(kube_client, "h100", 10, NAMESPACE, APP, random.Random(7))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 0
    taken = {n for n in (f"h100-{i:05d}" for i in range(2500)) if taints(kube, n).get(agent.PREFLIGHT) == "recheck"}
    assert len(taken) == 10 and taken <= idle and not taken & pending
    deleted = {s.path.rsplit("-", 1)[-1] for s in kube.requests("DELETE")}
    assert {str(int(n.rsplit("-", 1)[1])) for n in taken} == deleted
    pods = kube.requests("GET", "/pods$")
    assert all(s.query.get("fieldSelector", "").startswith("spec.nodeName=") for s in pods)  # never every pod
    assert len(kube.seen) <= 2500 // 500 + 10 * agent.PROBES_PER_PICK + 10 * 6  # bounded requests
    assert peak < 32 << 20, f"peak {peak >> 20} MiB"  # every pod at once would be hundreds of MiB


def test_a_node_whose_agent_pod_cannot_be_deleted_is_untainted_again(kube: FakeKube, tmp_path: Path) -> None:
    _pool(kube, 3, idle=3, pending=0)
    kube.inject("DELETE", "/pods/", Fault(500, times=100))
    assert agent.recheck(client(kube, tmp_path, account=health.RECHECK_ACCOUNT), "h100", 2, NAMESPACE, APP, random.Random(1)) == 1
    assert all(taints(kube, f"h100-{i:05d}") == {} for i in range(3))  # nothing left out of service


def test_a_gpu_pod_bound_during_the_recheck_gives_the_node_back(kube: FakeKube, tmp_path: Path) -> None:
    _pool(kube, 1, idle=1, pending=0)

    def a_job_lands(method: str, path: str, fake: FakeKube) -> None:
        if method == "PATCH" and path.startswith(NODES) and fake.before_write is not None:
            fake.before_write = None
            fake.put_object(*pod("late-train", "h100-00000", gpus=8, phase="Pending"))

    kube.before_write = a_job_lands
    assert agent.recheck(client(kube, tmp_path, account=health.RECHECK_ACCOUNT), "h100", 1, NAMESPACE, APP) == 0
    assert taints(kube, "h100-00000") == {} and not kube.requests("DELETE")


def test_the_agent_loop_survives_any_exception(kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a round raises, the agent logs it, waits longer, and goes on to taint on the next health report."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "health.json").write_text(json.dumps({"body": {"Overall Health": {"value": "Failure"}}}))
    kube.put_object(NODES, node("gpu-0"))
    real, faults, waits = agent.watch_once, [OverflowError("1e999"), ValueError("--1")], []

    def flaky(*args: Any) -> str | None:
        if faults:
            raise faults.pop(0)
        return real(*args)

    monkeypatch.setattr(agent, "watch_once", flaky)
    assert agent.agent(client(kube, tmp_path), "gpu-0", str(shared), rounds=3, interval=1.0, sleep=waits.append) == 0
    assert taints(kube, "gpu-0") == {agent.UNHEALTHY: "failure"}
    assert waits[0] >= 1.0 and waits[1] >= 1.0


def test_a_gpu_request_in_superscript_digits_is_not_a_crash() -> None:
    _, weird = pod("odd", "h100-00000", gpus=1)
    weird["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "²"
    assert agent.holds_gpu(weird) is False
    assert agent.main(["health_agent.py", "recheck", "h100", "²", NAMESPACE, APP]) == 2
