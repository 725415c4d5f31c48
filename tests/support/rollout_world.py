"""The rollout controller's world: the fake API server with Kueue workloads, a fake ARM that reimages scale sets,
and a cluster of two InfiniBand domains with a running gang (the `cluster` fixture)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.azure.scale_set.routes import SCALE_SET_API_VERSION
from components.kubernetes.scripts import kube_client as kc
from components.kubernetes.scripts import rollout as ro
from components.kubernetes.scripts.prefix_ipam import Leader
from components.planning.fence import FENCE
from tests.support.fake_kube import FakeAzure, FakeKube

NS = ro.NAMESPACE


SETS = ("h100-z1-00", "h100-z1-01")


NODES_PER_SET = 2


WORKLOADS = f"{ro.WORKLOADS}/namespaces/team-a/workloads"


PROVIDER = "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{}"


class Kube(FakeKube):
    COLLECTIONS = re.compile(r"^(/api/v1/nodes|/api/v1/namespaces/[^/]+/(?:pods|configmaps)|"
                             r"/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases|"
                             r"/apis/kueue\.x-k8s\.io/v1beta2/namespaces/[^/]+/workloads)(?:/([^/]+))?$")

    def answer(self, method: str, path: str, query: dict[str, str], body: Any, who: str) -> tuple[int, Any, dict[str, str]]:
        if path == f"{ro.WORKLOADS}/workloads" and method == "GET":
            with self.lock:
                items = [o for c, objs in self.store.items() if c.endswith("/workloads") for o in objs.values()]
                return 200, self._page(items, query), {}
        return super().answer(method, path, query, body, who)


class Arm(FakeAzure):
    """IMDS's token (the parent) and a scale set's reimage and instance view."""

    def __init__(self) -> None:
        super().__init__()
        self.reimaged: list[str] = []
        self.failing: set[str] = set()
        self.upgraded: list[str] = []

    def answer(self, method: str, path: str, query: dict[str, str], body: Any, who: str) -> tuple[int, Any, dict[str, str]]:
        match = re.match(r"^/subscriptions/sub/resourceGroups/rg/providers/Microsoft\.Compute/"
                         r"virtualMachineScaleSets/([^/]+)/(manualupgrade|reimage|instanceView)$", path)
        if match is None:
            return super().answer(method, path, query, body, who)
        assert query.get("api-version") == SCALE_SET_API_VERSION
        name, op = match[1], match[2]
        if op == "manualupgrade" and method == "POST":
            assert body == {"instanceIds": ["*"]}, body  # VirtualMachineScaleSetVMInstanceRequiredIDs
            self.upgraded.append(name)
            return 202, {}, {}
        if op == "reimage" and method == "POST":
            assert name in self.upgraded, f"{name} re-imaged before it was brought to its latest model"
            self.reimaged.append(name)
            return 202, {}, {}
        code = "ProvisioningState/failed/InternalError" if name in self.failing else "ProvisioningState/succeeded"
        return 200, {"statuses": [{"code": code}]}, {}


class Cluster:
    def __init__(self, kube: Kube, arm: Arm, tmp: Path) -> None:
        self.kube, self.arm, self.tmp = kube, arm, tmp
        self.clock = [1_000_000.0]
        self.fenced_history: list[set[str]] = []
        (tmp / "token").write_text("t")

    def controller(self, me: str | None = None) -> ro.Controller:
        http = kc.Http(sleep=lambda s: None, retry_cap=0.01)
        arm = ro.Arm(http, "client", "sub", "rg")
        kube = kc.Kube(self.kube.url, str(self.tmp), sleep=lambda s: None, retry_cap=0.01)
        leader = Leader(kube, NS, "gpucluster-rollout", me) if me else None
        return ro.Controller(kube, arm, now=lambda: self.clock[0], leader=leader)

    def no_deadline(self) -> None:
        """The drain deadline at 0: a wave evicts what runs on it at once."""
        plan = self.kube.store[f"/api/v1/namespaces/{NS}/configmaps"][ro.PLAN_CONFIGMAP]
        self.kube.put_object(f"/api/v1/namespaces/{NS}/configmaps",
                             {**plan, "data": {"plan.json": json.dumps(rollout_plan(deadline_minutes=0))}})

    def fenced(self) -> set[str]:
        nodes = self.kube.store.get("/api/v1/nodes", {}).values()
        return {n["metadata"]["name"] for n in nodes if n["metadata"]["labels"][FENCE.label] == FENCE.fenced}

    def kueue(self) -> None:
        """Kueue: a deactivated workload is evicted (no quota, no admission); a reactivated one waits in its queue. A
        finished one keeps its admission and quota whatever `active` says (kueue v0.19.2, held by make e2e's
        e2e/tests/test_kueue_dev.py against the real controller)."""
        for w in list(self.kube.store.get(WORKLOADS, {}).values()):
            done = any(c["type"] == "Finished" and c["status"] == "True" for c in w["status"].get("conditions", []))
            if w["spec"].get("active") is False and w["status"].get("admission") and not done:
                self.kube.put_object(WORKLOADS, {**w, "status": {"conditions": [
                    {"type": "QuotaReserved", "status": "False"}, {"type": "Evicted", "status": "True"}]}})

    def health(self, sick: str | None = None) -> None:
        """The health agent: preflight taint off, or the unhealthy taint on `sick`."""
        for n in list(self.kube.store.get("/api/v1/nodes", {}).values()):
            taints = [t for t in n["spec"].get("taints", []) if t["key"] != ro.PREFLIGHT]
            if n["metadata"]["name"] == sick:
                taints = [*n["spec"].get("taints", []), {"key": ro.UNHEALTHY, "value": "dcgm", "effect": "NoSchedule"}]
            if taints != n["spec"].get("taints", []):
                self.kube.put_object("/api/v1/nodes", {**n, "spec": {**n["spec"], "taints": taints}})

    def steps(self, controller: ro.Controller, count: int, sick: str | None = None) -> list[str]:
        done = []
        for _ in range(count):
            done.append(controller.step())
            self.fenced_history.append(self.fenced())
            self.kueue()
            self.health(sick)
            if done[-1].startswith(("idle", "stopped")):
                break
        return done


def rollout_plan(deadline_minutes: int = 60) -> dict[str, Any]:
    waves = [{"index": 0, "kind": "etcd", "pool": "etcd", "scaleSets": ["etcd-0"]}] + [
        {"index": i + 1, "kind": "pool", "pool": "h100", "scaleSets": [s]} for i, s in enumerate(SETS)]
    return {"waves": waves, "fence": {"label": FENCE.label, "open": FENCE.open, "fenced": FENCE.fenced},
            "drainDeadlineMinutes": deadline_minutes}


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    kube, arm = Kube(), Arm()
    with kube.running(), arm.running():
        monkeypatch.setattr(ro, "ARM", arm.url)
        monkeypatch.setattr(ro, "IMDS_TOKEN", f"{arm.url}/metadata/identity/oauth2/token")
        for s in SETS:
            for i in range(NODES_PER_SET):
                labels = {FENCE.label: FENCE.open, "gpucluster.io/pool": "h100", "gpucluster.io/infiniband-domain": s}
                kube.put_object("/api/v1/nodes", {"metadata": {"name": f"{s}-{i}", "labels": labels},
                                                  "spec": {"providerID": PROVIDER.format(s, i), "taints": []}})
        kube.put_object(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": ro.PLAN_CONFIGMAP},
                                                                 "data": {"plan.json": json.dumps(rollout_plan())}})
        # the state of a cluster that rolled an earlier plan: this plan is a change to roll
        kube.put_object(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": ro.STATE_CONFIGMAP}, "data": {
            "state.json": json.dumps({"wave": len(rollout_plan()["waves"]), "phase": "fence", "plan": "earlier"})}})
        # a running gang on the first domain, one pod per node
        kube.put_object(WORKLOADS, {"metadata": {"name": "gang", "namespace": "team-a"}, "spec": {}, "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {"podSetAssignments": [{"topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [
                {"domainCount": 2, "podCounts": {"universal": 1},
                 "valuesPerLevel": [{"individual": {"prefix": f"{SETS[0]}-", "roots": ["0", "1"]}}]}]}}]}}})
        for i in range(NODES_PER_SET):
            kube.put_object("/api/v1/namespaces/team-a/pods", {"metadata": {"name": f"gang-{i}", "namespace": "team-a"},
                                                              "spec": {"nodeName": f"{SETS[0]}-{i}"}})
        yield Cluster(kube, arm, tmp_path)
