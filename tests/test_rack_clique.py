"""The planned rack label held against the hardware's NVLink partition: the rack clique check's decisions
(agents/rack_clique.py), its taint writes, its CronJob and admission policy on gb300, and
`gpucluster verify`'s rack check (components/verify/check_racks.py).

Sources: GPU feature discovery labels `nvidia.com/gpu.clique: <cluster UUID>.<clique id>` only when every GPU of the
node reports one fabric clique (NVIDIA/k8s-device-plugin v0.19.3 internal/lm/imex.go, internal/resource/
nvml-device.go GetFabricIDs; v0.19.3 is the GFD of gpu-operator v26.3.3's values.yaml `gfd.version`). Kueue v0.19.2's
TAS leaves out nodes whose taints a PodSet does not tolerate (pkg/cache/scheduler/simulator/types.go
`ExclusionTaints`). The policy's CEL runs in cel-python as in tests/test_health_admission.py."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import celpy
from celpy.adapter import json_to_cel

from gpucluster.agents import rack_clique
from gpucluster.kubernetes.objects.layer import gpu_health_objects
from gpucluster.kubernetes.objects.rack_clique import APP, rack_clique_policy
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.node_template import node_labels
from gpucluster.verify.check_racks import check_racks
from gpucluster.vocabulary import LABEL_GPU_CLIQUE, LABEL_INTERCONNECT_SUBGROUP_ID, LABEL_POOL, LABEL_RACK
from gpucluster.vocabulary import TAINT_RACK_UNPROVEN as VOCABULARY_TAINT
from tests.support.stacks import ROOT, stack_spec

UUID = "8b1f33a6-6c35-4f55-9d3e-1f1a3f0c2d11"


@cache
def _plan() -> ClusterPlan:
    return plan_cluster(stack_spec("gb300"))


def _node(name: str, rack: str, clique: str | None, subgroup: str = "sg") -> dict[str, Any]:
    labels = {LABEL_POOL: "gb300", LABEL_RACK: rack, LABEL_INTERCONNECT_SUBGROUP_ID: subgroup}
    if clique is not None:
        labels[LABEL_GPU_CLIQUE] = clique
    return {"metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "spec": {}}


def _world() -> list[dict[str, Any]]:
    """Every planned rack node as it registers, each rack its own clique and subgroup."""
    plan = _plan()
    nodes = []
    for pool in plan.pools:
        for r, scale_set in enumerate(pool.scale_sets if pool.racks else ()):
            labels = node_labels(pool, scale_set, plan.spec.location)
            for i in range(scale_set.capacity):
                node = _node(f"{scale_set.name}-{i:06d}", labels[LABEL_RACK], f"{UUID}.{r}", f"sg-{r}")
                node["metadata"]["labels"] = {**labels, **node["metadata"]["labels"]}
                nodes.append(node)
    return nodes


def test_the_scripts_names_are_the_vocabularys() -> None:
    assert (rack_clique.UNPROVEN, rack_clique.CLIQUE, rack_clique.RACK, rack_clique.POOL) == (
        VOCABULARY_TAINT, LABEL_GPU_CLIQUE, LABEL_RACK, LABEL_POOL)


def test_a_rack_in_one_clique_is_proven_and_a_stray_node_is_not() -> None:
    rack = [_node(f"a-{i}", "r0", f"{UUID}.0") for i in range(18)]
    assert rack_clique.unproven(rack) == {}
    rack[3]["metadata"]["labels"][LABEL_GPU_CLIQUE] = f"{UUID}.7"
    del rack[4]["metadata"]["labels"][LABEL_GPU_CLIQUE]
    found = rack_clique.unproven(rack)
    assert set(found) == {"a-3", "a-4"}
    assert "its rack r0's is" in found["a-3"] and "no nvidia.com/gpu.clique label" in found["a-4"]


def test_two_racks_claiming_one_clique_are_both_unproven() -> None:
    nodes = [_node(f"a-{i}", "r0", f"{UUID}.0") for i in range(3)] + [_node(f"b-{i}", "r1", f"{UUID}.0")
                                                                       for i in range(3)]
    assert len(rack_clique.unproven(nodes)) == 6
    tie = [_node("a-0", "r0", f"{UUID}.0"), _node("a-1", "r0", f"{UUID}.1")]
    assert set(rack_clique.unproven(tie)) == {"a-0", "a-1"}


class FakeKube:
    """Nodes by name; GET, list and the JSON patch (test + add) set_taints sends."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}

    def list_items(self, path: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
        assert path == "/api/v1/nodes" and query == {"labelSelector": "gpucluster.io/pool in (gb300)"}
        return list(self.nodes.values())

    def get(self, path: str) -> dict[str, Any]:
        return self.nodes[path.rsplit("/", 1)[1]]

    def write(self, method: str, path: str, body: list[dict[str, Any]], content_type: str) -> None:
        assert method == "PATCH" and content_type == "application/json-patch+json"
        node = self.nodes[path.rsplit("/", 1)[1]]
        test, add = body
        assert test["value"] == node["metadata"]["resourceVersion"] and add["path"] == "/spec/taints"
        node["spec"]["taints"] = add["value"]


def _taints(kube: FakeKube, name: str) -> list[str]:
    return [t["key"] for t in kube.nodes[name]["spec"].get("taints", [])]


def test_the_check_taints_the_stray_node_and_lifts_the_taint_once_it_agrees() -> None:
    nodes = _world()
    stray = nodes[5]["metadata"]["name"]
    nodes[5]["metadata"]["labels"][LABEL_GPU_CLIQUE] = f"{UUID}.9"
    kube = FakeKube(nodes)
    assert rack_clique.check(kube, ["gb300"]) == 0  # type: ignore[arg-type]
    assert [n for n in kube.nodes if VOCABULARY_TAINT in _taints(kube, n)] == [stray]
    kube.nodes[stray]["metadata"]["labels"][LABEL_GPU_CLIQUE] = f"{UUID}.0"
    assert rack_clique.check(kube, ["gb300"]) == 0  # type: ignore[arg-type]
    assert VOCABULARY_TAINT not in _taints(kube, stray)


def test_gb300_runs_the_check_from_the_agents_image_on_system_nodes() -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in gpu_health_objects(_plan())}
    job = objects[("CronJob", APP)]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [container] = job["containers"]
    assert container["command"] == ["python3", "/opt/gpucluster/rack_clique.py", "check", "gb300"]
    assert job["nodeSelector"] == {"gpucluster.io/role": "system"}
    assert ("ValidatingAdmissionPolicy", APP) in objects
    assert "rack_clique.py" in (ROOT / "agents/Dockerfile").read_text()
    assert not any(k == ("CronJob", APP) for k in
                   ((o["kind"], o["metadata"]["name"]) for o in gpu_health_objects(plan_cluster(stack_spec("dev")))))


_ENV = celpy.Environment()


def _admitted(user: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    spec = rack_clique_policy()[0]["spec"]
    activation = {"object": json_to_cel(new), "oldObject": json_to_cel(old),
                  "request": json_to_cel({"userInfo": {"username": user}})}

    def holds(expression: str) -> bool:
        return bool(_ENV.program(_ENV.compile(expression)).evaluate(activation))

    return not all(holds(c["expression"]) for c in spec["matchConditions"]) or \
        all(holds(v["expression"]) for v in spec["validations"])


def test_the_checks_account_changes_only_its_taint() -> None:
    account = "system:serviceaccount:gpucluster-health:rack-clique"
    old = _node("n", "r0", f"{UUID}.0")
    tainted = copy.deepcopy(old)
    tainted["spec"]["taints"] = [{"key": VOCABULARY_TAINT, "value": "clique", "effect": "NoSchedule"}]
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"][LABEL_RACK] = "r9"
    other_taint = copy.deepcopy(old)
    other_taint["spec"]["taints"] = [{"key": "gpucluster.io/preflight", "value": "x", "effect": "NoSchedule"}]
    assert _admitted(account, old, tainted) and _admitted(account, tainted, old)
    assert not _admitted(account, old, relabelled) and not _admitted(account, old, other_taint)
    assert _admitted("someone-else", old, relabelled)  # not this policy's business


def test_verify_passes_a_proven_rack_and_fails_a_stray_or_short_one() -> None:
    class Listing:
        def __init__(self, nodes: list[dict[str, Any]]) -> None:
            self.nodes = nodes

        def list(self, path: str) -> list[dict[str, Any]]:
            return self.nodes

    nodes = _world()
    results = check_racks(Listing(nodes), _plan())  # type: ignore[arg-type]
    assert len(results) == 6 and all(r.status == "pass" for r in results)
    nodes[0]["metadata"]["labels"][LABEL_GPU_CLIQUE] = f"{UUID}.1"  # a node of rack 0 in rack 1's clique
    del nodes[20]  # rack 1 one node short
    failed = {r.path: r.message for r in check_racks(Listing(nodes), _plan()) if r.status == "fail"}  # type: ignore[arg-type]
    assert set(failed) == {"rack gb300-z1-g00r00", "rack gb300-z1-g00r01"}
    assert "2 cliques" in failed["rack gb300-z1-g00r00"]
    assert "17 node(s), the rack holds 18" in failed["rack gb300-z1-g00r01"]



def test_verify_reads_each_groups_subgroups_and_names_a_declared_one_azure_lacks() -> None:
    from gpucluster.verify.check_racks import NETWORK_API, check_subgroups

    class Groups:
        subscription, resource_group = "sub", "gb300-rg"

        def __init__(self, names: dict[str, list[str]]) -> None:
            self.names = names
            self.urls: list[str] = []

        def get_json(self, url: str) -> dict[str, Any]:
            self.urls.append(url)
            name = url.split("/interconnectGroups/")[1].split("?")[0]
            return {"properties": {"subgroups": [{"name": n} for n in self.names[name]]}}

    listed = {f"gb300-ig{i}": ["subgroup0", "subgroup1"] for i in (1, 2, 3)}
    arm = Groups(listed)
    assert all(r.status == "pass" for r in check_subgroups(arm, _plan()))  # type: ignore[arg-type]
    assert arm.urls[0] == ("/subscriptions/sub/resourceGroups/gb300-rg/providers/Microsoft.Network/interconnectGroups/"
                           f"gb300-ig1?api-version={NETWORK_API}")
    listed["gb300-ig2"] = ["sg-a", "sg-b"]
    [failed] = [r for r in check_subgroups(Groups(listed), _plan()) if r.status == "fail"]  # type: ignore[arg-type]
    assert failed.path == "interconnect group gb300-ig2" and "subgroup0, subgroup1 not in" in failed.message
    assert "cluster.pools[1].racks.groups[1].subgroups" in failed.fix


def test_server_data_that_breaks_the_check_ends_in_one_line_and_exit_1(monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setattr(rack_clique.ha, "kube_from_env", lambda: object())
    monkeypatch.setattr(rack_clique, "check", lambda kube, pools: 1 / 0)  # anything a server's answer can raise
    assert rack_clique.main(["rack_clique.py", "check", "gb300"]) == 1
    err = capsys.readouterr().err
    assert "rack-clique: ZeroDivisionError" in err and len(err.strip().splitlines()) == 1
