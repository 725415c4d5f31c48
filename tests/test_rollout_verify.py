"""`gpucluster verify` shows each scale set's model against its instances and the rollout's progress
(components/verify/check_rollout.py), against the fake ARM and API server of tests/test_verify.py."""

from __future__ import annotations

import json

from gpucluster.planning.azure_names import resource_group_name
from gpucluster.verify import expected
from tests.support.verify_fakes import SUBSCRIPTION
from tests.support.verify_world import World

STATE = "/api/v1/namespaces/kube-system/configmaps/gpucluster-rollout-state"


def _results(live: World, check: str) -> list[dict]:
    _, doc = live.run("--json")
    return [r for r in doc["results"] if r["check"] == check]


def test_instances_behind_their_model_name_the_wave_that_reimages_them(live: World) -> None:
    _, scale_set = expected.scale_sets(live.plan)[-1]
    rg = resource_group_name(live.plan.spec.name)
    path = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/"
            f"{scale_set.name}/virtualMachines")
    live.arm.routes[path]["value"][0]["properties"]["latestModelApplied"] = False
    [failed] = [r for r in _results(live, "azure.instance-models") if r["status"] == "fail"]
    wave = live.plan.rollout.wave_of(scale_set.name) if live.plan.rollout else None
    assert wave is not None and failed["subject"].startswith(scale_set.name)
    assert failed["detail"].startswith(f"1 of {scale_set.capacity} instances not on the scale set's model: 0")
    assert f"wave {wave.index}" in failed["fix"]


def test_the_rollout_progress_stopped_and_not_started(live: World) -> None:
    total = len(live.plan.rollout.waves) if live.plan.rollout else 0
    [running] = _results(live, "cluster.rollout")
    assert running["status"] == "pass" and running["detail"] == (
        f"wave 5 of {total} (system), phase drain: waiting for 2 instances of system-z1-00 to empty; workloads "
        "deactivated after 2026-11-30T00:53:20Z"), running["detail"]
    live.kube.routes[STATE]["data"]["state.json"] = json.dumps({"wave": 3, "phase": "stopped", "reason": "sick"})
    [stopped] = _results(live, "cluster.rollout")
    assert stopped["status"] == "fail" and stopped["detail"] == f"stopped at wave 3 of {total}: sick"
    live.kube.routes[STATE]["data"]["state.json"] = json.dumps({"phase": "health", "behind": {"x": ["0"]}})
    [corrupt] = _results(live, "cluster.rollout")
    assert corrupt["status"] == "fail" and "not what the controller writes" in corrupt["detail"]
    del live.kube.routes[STATE]
    [none] = _results(live, "cluster.rollout")
    assert none["status"] == "skip"
