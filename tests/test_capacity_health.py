"""Capacity and health: balloon sizing, autoscaler guards, health agent decisions, schema-valid objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucluster.agents import health_agent as agent
from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.autoscaler import autoscaler_args, max_scale_down_parallelism
from gpucluster.kubernetes.objects.balloons import balloon_deployment
from gpucluster.kubernetes.objects.dns import coredns_replicas
from gpucluster.kubernetes.objects.health import recheck_limit
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.manifests import helm_releases, kubernetes_objects
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.scheduling import AUTOSCALER_EXPENDABLE_CUTOFF, BALLOON_CLASS, WORKLOAD_CLASSES
from gpucluster.project import project_root
from gpucluster.spec import ClusterSpec, load_stack_file
from tests.support.manifest_validation import validate_object
from tests.support.stacks import small_spec

ROOT = project_root(Path(__file__).parent)


def _problem(**overrides: Any) -> str:
    with pytest.raises(SpecError) as error:
        plan_cluster(small_spec(**overrides))
    return str(error.value)


def test_balloon_pods_are_one_node_each(prod_spec: ClusterSpec) -> None:
    balloons = {b.pool.name: b for b in plan_cluster(prod_spec).balloons}
    cpu = balloons["cpu"]
    assert cpu.replicas == 86  # ceil(0.02 x 4,261)
    assert (cpu.gpus, cpu.cpu_millis, cpu.memory_mib) == (0, 54_400, int(256 * 1024 * 0.85))
    assert cpu.cpu_millis > cpu.pool.size.vcpus * 1000 / 2  # two never fit one node
    confidential = balloons["confidential"]
    assert confidential.replicas == 2 and confidential.gpus == 1
    assert {t.key for t in confidential.tolerations} == {"nvidia.com/gpu", "gpucluster.io/confidential"}
    deployment = balloon_deployment(confidential)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "balloon" and pod["terminationGracePeriodSeconds"] == 0
    assert pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert pod["containers"][0]["image"].startswith("registry.k8s.io/pause:")
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == \
        "kubernetes.io/hostname"
    assert deployment["kind"] == "Deployment"


@pytest.mark.parametrize(
    ("balloons", "expected"),
    [
        ([{"pool": "gpu", "nodes": 2}], "cluster.balloons[0].pool: gpu is an InfiniBand pool"),
        ([{"pool": "nope", "nodes": 1}], "cluster.balloons[0].pool: 'nope' is not a pool"),
        ([{"pool": "system", "nodes": 9}], "cluster.balloons[0].nodes: 9 balloons for 3 nodes in system"),
        ([{"pool": "system", "nodes": 1}, {"pool": "system", "fraction": 0.5}],
         "cluster.balloons[1].pool: pool 'system' already has balloons"),
        ([{"pool": "system", "nodes": 1, "fraction": 0.5}], "cluster.balloons[0]: set exactly one of `nodes` or `fraction`"),
    ],
)
def test_balloon_input_errors(balloons: list[dict[str, Any]], expected: str) -> None:
    assert expected in _problem(balloons=balloons)


def test_balloons_on_an_infiniband_pool_when_the_stack_accepts_it() -> None:
    plan = plan_cluster(small_spec(balloons=[{"pool": "gpu", "fraction": 0.1, "onTopologyPool": True}]))
    assert plan.balloons[0].replicas == 15 and plan.balloons[0].gpus == 8


def test_balloon_priority_fits_the_autoscaler() -> None:
    args = autoscaler_args("prod", 7500, 0.01)
    cutoff = int(next(a for a in args if a.startswith("--expendable-pods-priority-cutoff=")).split("=")[1])
    assert cutoff == AUTOSCALER_EXPENDABLE_CUTOFF
    assert cutoff <= BALLOON_CLASS.value < min(p.value for p in WORKLOAD_CLASSES)


def test_autoscaler_discovers_by_tags_and_is_bounded() -> None:
    args = autoscaler_args("prod", 7500, 0.01)
    assert "--node-group-auto-discovery=label:cluster-autoscaler-enabled=true,cluster-autoscaler-name=prod" in args
    assert "--max-scale-down-parallelism=75" in args and "--max-drain-parallelism=75" in args
    assert "--max-total-unready-percentage=10" in args and "--max-nodes-total=7500" in args
    assert "--scale-down-gpu-utilization-threshold=0.5" in args
    assert max_scale_down_parallelism(40, 0.01) == 1


def test_health_agent_decisions() -> None:
    taints = [{"key": agent.PREFLIGHT, "value": "pending", "effect": "NoSchedule"},
              {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert agent.without_taint(taints, agent.PREFLIGHT) == taints[1:]
    tainted = agent.with_taint(taints, agent.UNHEALTHY, "xid-79")
    assert tainted[-1] == {"key": agent.UNHEALTHY, "value": "xid-79", "effect": "NoSchedule"}
    passed = {"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"results": [{"status": "Pass"}]}]}]}}
    failed = {"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"results": [{"status": "Fail"}]}]}]}}
    assert agent.diag_passed(0, passed) and not agent.diag_passed(0, failed) and not agent.diag_passed(1, passed)
    assert agent.health_problem({"body": {"Overall Health": {"value": "Healthy"}}}) is None
    assert agent.health_problem({"body": {"Overall Health": {"value": "Failure"}}}) == "failure"
    node = lambda name, *keys: {"metadata": {"name": name}, "spec": {"taints": [{"key": k} for k in keys]}}  # noqa: E731
    nodes = [node("a"), node("b"), node("c", agent.PREFLIGHT), node("d", agent.UNHEALTHY), node("e")]
    gpu_pod = lambda n, cls="research": {"spec": {"nodeName": n, "priorityClassName": cls, "containers": [  # noqa: E731
        {"resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    pods = [gpu_pod("a"), gpu_pod("b", "balloon")]
    assert agent.idle_gpu_nodes(nodes, pods, 10) == ["b", "e"]
    assert len(agent.idle_gpu_nodes(nodes, pods, 1)) == 1


def test_prod_manifests_hold_capacity_health_and_networking(prod_run: ProgramRun) -> None:
    objects = kubernetes_objects(prod_run.registrations)
    by_kind = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("Deployment", "balloon-cpu"), ("Deployment", "balloon-confidential"),
            ("Deployment", "cluster-autoscaler"), ("DaemonSet", "gpu-health-h100"), ("CronJob", "gpu-recheck-h100"),
            ("Deployment", "coredns"), ("Service", "kube-dns")} <= by_kind
    for obj in objects:
        validate_object(obj)
    dns = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "kube-dns")
    assert dns["spec"]["clusterIP"] == "192.168.0.10"
    coredns = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "coredns")
    prod = plan_cluster(load_stack_file(ROOT / "stacks" / "Pulumi.prod.yaml", "prod").spec)
    assert coredns["spec"]["replicas"] == coredns_replicas(prod.nodes, prod.system_nodes)
    assert coredns_replicas(7500, 50) == 30  # one per 256 nodes
    # required hostname anti-affinity: never more replicas than system nodes (dev has 2)
    assert coredns_replicas(12, 2) == 2 and coredns_replicas(12, 40) == 3
    releases = {r["chart"]: r for r in helm_releases(prod_run.registrations)}
    # prod puts pods in /28 blocks: Cilium's CRD-backed IPAM, fed by the prefix IPAM controller (docs/ip-plan.md)
    assert releases["cilium"]["values"]["ipam"]["mode"] == "crd" and "azure" not in releases["cilium"]["values"]
    assert ("Deployment", "gpucluster-prefix-ipam") in by_kind
    assert releases["cilium"]["values"]["kubeProxyReplacement"] is True
    assert releases["gpu-operator"]["values"]["driver"]["enabled"] is False
    h100 = next(p for p in prod.pools if p.name == "h100")
    assert recheck_limit(h100) == max(1, int(h100.nodes * 0.02))


def test_addon_identities_are_scoped_to_the_resource_group(prod_run: ProgramRun) -> None:
    """Custom roles (tests/test_azure_names.py checks their actions against what the add-ons call): everything on
    the resource group. prod runs no Cilium Azure IPAM (/28 blocks, `ipam: crd`), so not even the subscription-wide
    VNet read its VirtualNetworks.ListAll needs (dev has it: tests/test_azure_names.py)."""
    roles = [r for r in prod_run.registrations if r.type == "azure-native:authorization:RoleAssignment"
             and "-addons-" in r.name]
    definitions = {r.inputs["roleDefinitionId"]: r for r in prod_run.registrations
                   if r.type == "azure-native:authorization:RoleDefinition" and "-addons-" in r.name}
    assert {r.inputs["roleDefinitionId"].rsplit("/", 1)[1] for r in roles} == set(definitions)
    # The resource group or narrower (the gallery the scale sets boot from, for the linked read a scale-set write needs)
    group = "/resourceGroups/gpucluster-prod"
    wide = [r for r in roles if not (r.inputs["scope"].endswith(group) or f"{group}/providers/" in r.inputs["scope"])]
    assert wide == []
    system = next(r for r in prod_run.registrations if r.name == "system-z1-00")
    assert system.inputs["identity"]["type"] == "SystemAssigned, UserAssigned"
    # Add-on identities only where the add-ons run; every machine has the registry pull identity alone besides.
    gpu = next(r for r in prod_run.registrations if r.name == "h100-z1-00")
    assert gpu.inputs["identity"]["type"] == "SystemAssigned, UserAssigned"
    assert len(gpu.inputs["identity"]["userAssignedIdentities"]) == 1
    assert len(system.inputs["identity"]["userAssignedIdentities"]) > 1
