"""The Cilium agent's update width sized from the plan (components/planning/cni_update.py): the value the Cilium
release renders into the agent DaemonSet's updateStrategy (cilium/cilium templates/cilium-agent/daemonset.yaml reads
`updateStrategy` from values) and the figure the plan prints."""

from __future__ import annotations

from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.cni_update import plan_cni_update
from gpucluster.spec.workloads import CniUpdateSpec
from tests.support.plan_sides import stack_raw
from tests.support.stacks import small_cluster, spec_of, stack_spec


def test_the_width_meets_the_target_at_the_per_agent_time() -> None:
    plan = plan_cni_update(CniUpdateSpec(), 7505)  # prod: 7,500 nodes and 5 API servers
    assert plan.max_unavailable == 42  # ceil(7505 x 40 / 7200)
    assert plan.hours <= 2.0 and plan_cni_update(CniUpdateSpec(), 7505).max_unavailable > 2
    assert plan_cni_update(CniUpdateSpec(target_hours=1.0), 7505).max_unavailable == 84
    assert plan_cni_update(CniUpdateSpec(seconds_per_agent=20), 7505).max_unavailable == 21
    assert plan_cni_update(CniUpdateSpec(), 6).max_unavailable == 1  # never 0


def test_prods_cilium_release_rolls_42_agents_at_a_time(prod_run: ProgramRun) -> None:
    [cilium] = [r.inputs for r in prod_run.registrations
                if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["name"] == "cilium"]
    plan = plan_cluster(stack_spec("prod"))
    assert plan.nodes + plan.control_plane.api.count == 7505
    assert cilium["values"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 42}}


def test_the_stack_sets_its_target_and_the_plan_states_the_model() -> None:
    raw = small_cluster()
    raw.setdefault("inCluster", {})["cniUpdate"] = {"targetHours": 0.5, "secondsPerAgent": 60}
    plan = plan_cluster(spec_of(raw))
    nodes = plan.nodes + plan.control_plane.api.count
    assert plan.cni_update.max_unavailable == -(-nodes * 60 // 1800) > 1
    raw["inCluster"]["cniUpdate"] = {"targetHours": 0.001}  # faster than all at once: every node at once
    assert plan_cluster(spec_of(raw)).cni_update.max_unavailable == nodes
    assert "ceil(nodes x seconds per agent / target)" in plan.cni_update.text


def test_the_earlier_key_cni_rollout_is_still_read() -> None:
    """`inCluster.cniRollout` was the key's name before "rollout" was kept for the re-image rollout."""
    for key in ("cniUpdate", "cniRollout"):
        raw = stack_raw("dev")
        raw.setdefault("inCluster", {})[key] = {"targetHours": 0.25}
        assert spec_of(raw).in_cluster.cni_update.target_hours == 0.25, key
