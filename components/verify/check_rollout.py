"""Each node scale set's model against its instances, and the rollout's progress (docs/operations.md, "Rolling a
node image or boot change").

A scale set's upgradePolicy is Manual: `pulumi up` changes its model, and an instance takes the new model only when
it is re-imaged. ARM reports per instance whether it runs the scale set's latest model (`latestModelApplied`,
Microsoft.Compute VirtualMachineScaleSetVMProperties). The rollout controller's progress is its state ConfigMap
(agents/rollout.py), read as the controller reads it, shown with what it waits for."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gpucluster.agents.rollout import DEFAULT_NAMESPACE, STATE_CONFIGMAP, StateError, read_state
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.verify import expected
from gpucluster.verify.arm import Arm, not_found
from gpucluster.verify.kube import Kube
from gpucluster.verify.results import Check, Result

MODELS = Check("azure.instance-models", "Microsoft.Compute VirtualMachineScaleSetVMProperties.latestModelApplied; "
                                        "components/planning/rollout.py (the wave that re-images the scale set)")
PROGRESS = Check("cluster.rollout", "agents/rollout.py (state ConfigMap "
                                    f"{DEFAULT_NAMESPACE}/{STATE_CONFIGMAP})")


def behind(instances: list[dict[str, Any]]) -> list[str]:
    """Instance ids not on the scale set's latest model."""
    return [str(i.get("instanceId") or i.get("name")) for i in instances
            if (i.get("properties") or {}).get("latestModelApplied") is not True]


def check_instance_models(arm: Arm, plan: ClusterPlan) -> list[Result]:
    results = []
    for pool, scale_set in expected.scale_sets(plan):
        subject = f"{scale_set.name} (pool {pool.name})"
        try:
            instances = [vm.as_dict() for vm in
                         arm.compute.virtual_machine_scale_set_vms.list(arm.resource_group, scale_set.name)]
        except not_found():
            results.append(MODELS.failed(subject, f"no scale set {scale_set.name}", "run pulumi up for this stack"))
            continue
        late = behind(instances)
        wave = plan.rollout.wave_of(scale_set.name)
        if late:
            shown = ", ".join(late[:10]) + (f" and {len(late) - 10} more" if len(late) > 10 else "")
            results.append(MODELS.failed(subject, f"{len(late)} of {len(instances)} instances not on the scale set's "
                                                  f"model: {shown}",
                                         f"the rollout re-images them in wave {wave.index if wave else '?'} "
                                         "(docs/operations.md, 'Rolling a node image or boot change')"))
        else:
            results.append(MODELS.passed(subject, f"all {len(instances)} instances on the scale set's model"))
    return results


def waiting_for(state: dict[str, Any]) -> str:
    """What the controller waits for in its phase, from its state (agents/rollout.py)."""
    phase, behind = state["phase"], state.get("behind") or {}
    instances = sum(len(v) for v in behind.values())
    if phase in ("fence", "drain", "evict"):
        deadline = datetime.fromtimestamp(float(state.get("deadline") or 0), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (f"{instances} instances of {', '.join(behind)} to empty; workloads deactivated after {deadline}"
                if phase != "evict" else f"{instances} instances of {', '.join(behind)}: evicting what is left")
    if phase in ("upgrading", "reimaging"):
        op = "upgrade" if phase == "upgrading" else "reimage"
        asked = sum(len(a.get(op) or []) for a in (state.get("asked") or {}).values())
        return f"ARM's {op} of {asked} instances"
    if phase == "health":
        return f"{len(state.get('ready') or {})} nodes to be Ready again and out of preflight"
    return phase


def check_progress(kube: Kube, plan: ClusterPlan) -> list[Result]:
    total = len(plan.rollout.waves)
    found = kube.get(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/configmaps/{STATE_CONFIGMAP}")
    if found is None:
        return [PROGRESS.skipped("rollout", "the controller has not written its state yet")]
    try:
        state = read_state(found)
    except StateError as error:
        return [PROGRESS.failed("rollout", f"the state is not what the controller writes: {error}",
                                "the controller scans again from it; if it keeps failing, delete the state ConfigMap")]
    wave, phase = state.get("wave"), state["phase"]
    if phase == "stopped":
        return [PROGRESS.failed("rollout", f"stopped at wave {wave} of {total}: {state.get('reason')}",
                                "the nodes that did not come back stay fenced: fix them, then delete the state "
                                "ConfigMap (docs/operations.md, 'The rollout controller')")]
    if phase == "scan":
        return [PROGRESS.passed("rollout", "idle or scanning: no wave in progress (azure.instance-models shows "
                                           "what is behind)")]
    return [PROGRESS.passed("rollout", f"wave {wave} of {total} ({state['current']['pool']}), phase {phase}: "
                                       f"waiting for {waiting_for(state)}")]
