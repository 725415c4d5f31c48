"""The first-boot simulation: both stacks come up with no stuck workload, and a broken toleration stops the
plan naming the workload and the taint."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.errors import SpecError
from components.planning.boot_layer import chart_workloads, first_boot, own_workloads, pool_states
from components.planning.cluster_plan import plan_cluster
from components.planning.first_boot import simulate
from tests.conftest import stack_spec


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_boot_with_nothing_stuck(stack: str) -> None:
    plan = plan_cluster(stack_spec(stack))
    assert plan.first_boot is not None and not plan.first_boot.stuck
    order = {s.workload: s.step for s in plan.first_boot.steps}
    # CNI first, then DNS and controllers, then the GPU stack, then the health checks that lift the taint.
    assert order["cilium-agent"] < order["coredns"] < order["nvidia-container-toolkit"]
    assert order["nfd-worker"] < order["nvidia-container-toolkit"] < order["nvidia-device-plugin"]
    health = [name for name in order if name.startswith("gpu-health-")]
    assert health and all(order["nvidia-container-toolkit"] < order[h] for h in health)


def test_a_broken_toleration_fails_naming_the_workload_and_the_taint() -> None:
    """gpu-operator v26.3.3's NFD worker tolerates only control-plane and nvidia.com/gpu by default: GPU nodes
    still carrying the preflight taint never get NFD labels, so nothing downstream starts."""
    plan = plan_cluster(stack_spec("dev"))
    charts = [replace(w, tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},))
              if w.name == "nfd-worker" else w for w in chart_workloads()]
    boot = simulate(pool_states(plan), [*charts, *own_workloads(plan)])
    messages = [f"{s.workload} {s.pool}: {s.reason}" for s in boot.stuck]
    assert any(m.startswith("nfd-worker t4: taint gpucluster.io/preflight=pending:NoSchedule not tolerated")
               for m in messages), messages


def test_stuck_workloads_are_a_plan_error() -> None:
    plan = plan_cluster(stack_spec("dev"))
    from components.planning.first_boot import Workload
    needy = Workload("needs-a-label", "Deployment", {"example.com/never": "true"}, ())
    with pytest.raises(SpecError, match=r"cluster\.inCluster: needs-a-label cannot start"):
        first_boot(plan, [needy])
