"""The bring-up simulation: both stacks come up with no stuck workload, and a broken toleration stops the
plan naming the workload and the taint."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucluster.errors import SpecError
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.simulation.bring_up_layer import bring_up, chart_workloads, own_workloads, pool_states
from gpucluster.simulation.check import CheckedPlan, check_plan, plan_checked
from gpucluster.simulation.engine import simulate
from tests.support.stacks import stack_spec


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_boot_with_nothing_stuck(stack: str) -> None:
    plan = plan_checked(stack_spec(stack))
    assert plan.bring_up is not None and not plan.bring_up.stuck
    order = {s.workload: s.step for s in plan.bring_up.steps}
    # CNI first, then DNS and controllers, then the GPU stack, then the health checks that lift the taint.
    assert order["cilium-agent"] < order["coredns"] < order["nvidia-container-toolkit"]
    assert order["nfd-worker"] < order["nvidia-container-toolkit"] < order["nvidia-device-plugin"]
    health = [name for name in order if name.startswith("gpu-health-")]
    assert health and all(order["nvidia-dcgm"] < order[h] and order["coredns"] < order[h] for h in health)
    balloons = [name for name in order if name.startswith("balloon-") and name != "balloon-cpu"]
    assert all(order[b] > max(order[h] for h in health) for b in balloons)  # GPU balloons after the taint goes


def test_a_broken_toleration_fails_naming_the_workload_and_the_taint() -> None:
    """gpu-operator v26.3.3's NFD worker tolerates only control-plane and nvidia.com/gpu by default (values.yaml
    `node-feature-discovery.worker.tolerations`): on GPU nodes still carrying the preflight taint it never runs,
    so the operator never labels them for its operands, the DCGM host engine never starts, the health checks
    never run and the taint is never removed. The plan fails naming the workloads, the taint and the cycle."""
    plan = plan_checked(stack_spec("dev"))
    charts = [replace(w, tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},))
              if w.name == "nfd-worker" else w for w in chart_workloads(plan)]
    with pytest.raises(SpecError) as error:
        bring_up(plan, charts=charts)
    line = next(p.message for p in error.value.problems if p.message.startswith("nfd-worker cannot start on pool t4"))
    assert "nfd-worker waits: taint gpucluster.io/preflight=pending:NoSchedule not tolerated" in line
    assert "a cycle (nfd-worker -> gpu-health-t4 -> nvidia-dcgm -> gpu-operator -> nfd-worker)" in line
    assert all(p.path == "cluster.inCluster" for p in error.value.problems)


def test_stuck_workloads_are_a_plan_error() -> None:
    plan = plan_checked(stack_spec("dev"))
    from gpucluster.simulation.engine import Workload
    needy = Workload("needs-a-label", "Deployment", {"example.com/never": "true"}, ())
    with pytest.raises(SpecError, match=r"cluster\.inCluster: needs-a-label cannot start"):
        bring_up(plan, [needy])


def test_a_pod_larger_than_a_node_lands_nowhere() -> None:
    """Requests against allocatable: with the DaemonSets' requests on the node, a pod needing more than the
    rest of a node is stuck, named with its requests."""
    plan = plan_checked(stack_spec("dev"))
    from gpucluster.simulation.engine import Workload
    system = next(p for p in pool_states(plan) if p.name == "system")
    huge = Workload("huge", "Deployment", {"gpucluster.io/role": "system"}, (), cpu_millis=system.cpu_millis + 1)
    boot = simulate(pool_states(plan), [*chart_workloads(plan), *own_workloads(plan), huge])
    stuck = [s for s in boot.stuck if s.workload == "huge"]
    assert stuck and "exceed a node's allocatable" in stuck[0].reason


def test_effective_requests_follow_the_init_container_rule() -> None:
    from gpucluster.simulation.bring_up_layer import requests
    pod = {"initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
           "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
                          {"resources": {"requests": {"cpu": "250m", "memory": "2Gi"}}}]}
    assert requests(pod) == (2000, 2304)


def test_report_shows_boot_order_and_versions() -> None:
    from collections import Counter

    from gpucluster.report.html_report import render_report
    from gpucluster.report.report_data import report_data
    html = render_report(report_data(plan_checked(stack_spec("dev")), "dev", Counter(), []))
    assert "First boot: when each workload can start" in html and "gpu-health-t4" in html
    assert "Versions: Kubernetes 1.36.4, end of life 2027-06-28" in html


def test_simulated_nodes_register_what_the_boot_documents_and_autoscaler_templates_say() -> None:
    """The simulation's taints and labels are the kubelet's registerWithTaints and node-labels as rendered
    (components/bootstrap/node.py), and the autoscaler's scale-from-zero template taints, pool by pool."""
    from gpucluster.bootstrap.node import NodeBootstrap, kubelet_patch
    from gpucluster.planning.node_template import autoscaler_tags, node_labels, registered_taints
    from gpucluster.vocabulary import AUTOSCALER_TAINT_TAG_PREFIX
    plan = plan_checked(stack_spec("prod"))
    states = {s.name: s for s in pool_states(plan)}
    for pool in plan.pools:
        scale_set = pool.scale_sets[0]
        rendered = kubelet_patch(NodeBootstrap(
            plan.spec.kubernetes_version, plan.ip.api_server_endpoint, "abcdef.0123456789abcdef", "sha256:" + "0" * 64,
            pool.spec.pods_per_node, str(plan.ip.dns_service_ip), node_labels(pool, scale_set, plan.spec.location),
            registered_taints(pool)))
        simulated = states[pool.name]
        assert [{"key": t.key, "value": t.value, "effect": t.effect} for t in simulated.taints] == \
            rendered["registerWithTaints"]
        tags = autoscaler_tags(plan.spec.name, pool, scale_set, 0, plan.spec.location)
        template = {k for k in tags if k.startswith(AUTOSCALER_TAINT_TAG_PREFIX)}
        assert len(template) == len([t for t in simulated.taints if t.key != "gpucluster.io/preflight"])


def test_the_preflight_taint_on_every_pool_would_stop_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The former design: every node registered the preflight taint, only GPU health checks removed it, and no
    system add-on tolerated it. The simulation names CoreDNS and the taint, with nothing to remove it there."""
    import gpucluster.planning.node_template as node_template
    monkeypatch.setattr(node_template, "registers_preflight", lambda pool: True)
    with pytest.raises(SpecError) as error:
        bring_up(plan_cluster(stack_spec("dev")))
    coredns = next(p.message for p in error.value.problems if p.message.startswith("coredns cannot start"))
    assert "coredns waits: taint gpucluster.io/preflight=pending:NoSchedule not tolerated" in coredns
    assert "nothing in the layer provides it" in coredns


def test_pulumi_up_and_the_cli_refuse_a_stuck_first_boot_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planners do not reach the in-cluster layer: `plan_cluster` leaves the simulation to the entry point above
    it. The CLI and `__main__.py` plan through `plan_checked`, whose CheckedPlan is the only plan `GpuCluster` takes:
    a plain ClusterPlan is refused before anything is declared, so no stuck stack reaches `pulumi up` unchecked."""
    import gpucluster.planning.node_template as node_template
    from gpucluster.cluster import GpuClusterArgs
    monkeypatch.setattr(node_template, "registers_preflight", lambda pool: True)
    plan = plan_cluster(stack_spec("dev"))
    assert plan.bring_up is None and plan.agent_load is None
    with pytest.raises(SpecError) as planned:
        plan_checked(stack_spec("dev"))
    with pytest.raises(SpecError) as checked:
        check_plan(plan)
    assert planned.value.problems == checked.value.problems
    assert any(p.message.startswith("coredns cannot start") for p in planned.value.problems)
    with pytest.raises(TypeError, match=r"GpuCluster takes a CheckedPlan, not a ClusterPlan: .*plan_checked\(spec\)"):
        GpuClusterArgs(plan=plan)  # pyright: ignore[reportArgumentType]  (the refusal under test)
    off = check_plan(replace(plan, spec=plan.spec.model_copy(update={"in_cluster": plan.spec.in_cluster.model_copy(
        update={"enabled": False})})))
    assert isinstance(off, CheckedPlan) and off.bring_up is None and check_plan(off) is off


def test_a_checked_plan_changed_after_its_check_is_not_checked() -> None:
    """`dataclasses.replace` on a CheckedPlan would carry a change past the check: refused, the ClusterPlan is changed
    and checked again."""
    plan = plan_checked(stack_spec("dev"))
    assert isinstance(plan, CheckedPlan) and plan.bring_up is not None and plan.agent_load is not None
    with pytest.raises(TypeError, match="made only by check_plan"):
        replace(plan, boot=plan.boot)


def test_replicas_one_per_node_and_required_node_affinity_are_judged() -> None:
    """kube-scheduler's InterPodAffinity (required anti-affinity on kubernetes.io/hostname: one replica per node)
    and NodeAffinity (required nodeSelectorTerms ORed, matchExpressions ANDed; core/v1 NodeSelectorRequirement)."""
    from gpucluster.simulation.engine import Workload
    plan = plan_checked(stack_spec("dev"))
    system = {"gpucluster.io/role": "system"}
    too_many = Workload("too-many", "Deployment", system, (), replicas=3, one_per_node=True)  # dev: 2 system nodes
    elsewhere = Workload("elsewhere", "Deployment", {}, (), node_affinity=(
        ({"key": "gpucluster.io/pool", "operator": "In", "values": ["nope"]},),))
    fits = Workload("fits", "Deployment", {}, (), node_affinity=(
        ({"key": "gpucluster.io/pool", "operator": "In", "values": ["nope"]},),
        ({"key": "gpucluster.io/role", "operator": "In", "values": ["system"]},
         {"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"})))
    boot = simulate(pool_states(plan), [*chart_workloads(plan), *own_workloads(plan), too_many, elsewhere, fits])
    reasons = {s.workload: s.reason for s in boot.stuck}
    assert "3 replicas, one per node" in reasons["too-many"] and "on 2 node(s)" in reasons["too-many"]
    assert "required node affinity matches no label" in reasons["elsewhere"]
    assert "fits" not in reasons and boot.placements()["fits"] == ("system",)


def test_toleration_semantics_follow_core_v1() -> None:
    """k8s.io/api core/v1 toleration.go ToleratesTaint: empty key with Exists matches every taint; an effect
    given must match; Equal compares the value (empty operator means Equal)."""
    from gpucluster.planning.taints import NodeTaint
    from gpucluster.simulation.engine import tolerates
    taint = NodeTaint("gpucluster.io/preflight", "pending", "NoSchedule")
    assert tolerates(({"operator": "Exists"},), taint)
    assert not tolerates(({"operator": "Exists", "effect": "NoExecute"},), taint)
    assert tolerates(({"key": "gpucluster.io/preflight", "operator": "Exists"},), taint)
    assert tolerates(({"key": "gpucluster.io/preflight", "value": "pending"},), taint)
    assert not tolerates(({"key": "gpucluster.io/preflight", "operator": "Equal", "value": "done"},), taint)
    assert not tolerates(({"key": "nvidia.com/gpu", "operator": "Exists"},), taint)


def test_each_chart_row_names_the_template_and_tag_it_was_read_from() -> None:
    """The charts' pods are a table, not `helm template` output (no reachable registry ships the pinned archives):
    every row says where, and at which release, its fields were read."""
    from gpucluster.catalog.versions import CILIUM, GPU_OPERATOR, KUEUE
    from gpucluster.simulation.bring_up_layer import chart_objects
    releases = (CILIUM.version, GPU_OPERATOR.version, KUEUE.version, "v0.18.3")
    for row in chart_objects():
        assert any(r in row.source for r in releases), row.source
        assert "/" in row.source and (".yaml" in row.source or ".yml" in row.source), row.source
