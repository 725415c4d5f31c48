"""No InfiniBand domain disappears unless the stack says so. Raising `vmsPerInfinibandDomain` would pack prod's h100
pool into fewer, bigger domains and delete the rest on a deployed stack: the plan refuses in one line unless each
of those domains is acknowledged. Under the engine, every InfiniBand and rack scale set carries Pulumi's `protect`,
lifted only for the domains the stack acknowledges, so a `pulumi up` that would delete one is refused by the engine
itself (a resource the program no longer declares keeps the protection of its last `up`)."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.plan_sides import stack_raw
from tests.support.stacks import ROOT, small_cluster, spec_of

RAISED = {"vmsPerInfinibandDomain": {"value": 300, "note": "support request 1234, approved 2026-10-02"}}
SCALE_SET = "pulumi-python:dynamic:Resource"


def _prod(**changes: Any) -> dict[str, Any]:
    raw = stack_raw("prod")
    raw.update(changes)
    return raw


def test_prod_with_the_raised_limit_is_refused_in_one_line_naming_what_it_would_delete() -> None:
    with pytest.raises(SpecError) as refused:
        plan_cluster(spec_of(_prod(limits=RAISED)))
    [problem] = refused.value.problems
    assert problem.path == "cluster.limits.vmsPerInfinibandDomain"
    assert "packs h100 into 11 InfiniBand domains instead of the 32 the default 100 gives" in problem.message
    assert "deletes 21 domains" in problem.message and "acknowledgeDeletions.infinibandDomains" in problem.message


def test_acknowledged_domains_let_the_raised_limit_plan_and_the_default_keeps_32() -> None:
    assert sum(1 for s in plan_cluster(spec_of(_prod())).pools[1].scale_sets) == 32
    acknowledged = plan_cluster(spec_of(_prod(limits=RAISED, acknowledgeDeletions={"infinibandDomains": ["h100-*"]})))
    assert len(acknowledged.pools[1].scale_sets) == 11


def test_growing_a_pool_under_the_default_limit_never_asks() -> None:
    raw = _prod()
    raw["pools"][1]["count"] += 100
    plan_cluster(spec_of(raw))


def _scale_sets(run: ProgramRun) -> dict[str, Any]:
    """The node scale sets (the capacity-free route's dynamic resources with a scale set's ARM type), by name."""
    return {r.name: r for r in run.registrations
            if r.type == SCALE_SET and str(r.inputs.get("armType", "")).endswith("virtualMachineScaleSets")}


def _run(acknowledged: list[str]) -> ProgramRun:
    return run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": small_cluster(
        acknowledgeDeletions={"infinibandDomains": acknowledged})})


def test_every_infiniband_scale_set_is_protected_and_an_acknowledged_one_is_not() -> None:
    protected = {name: r.protect for name, r in _scale_sets(_run([])).items()}
    infiniband = {n for n in protected if n.startswith("gpu-")}
    assert infiniband and all(protected[n] for n in infiniband)
    assert not any(p for n, p in protected.items() if n not in infiniband)  # the system pool's sets
    lifted = {name: r.protect for name, r in _scale_sets(_run(["gpu-z1-*"])).items()}
    assert {n for n, p in lifted.items() if n in infiniband and not p} == {n for n in infiniband if n.startswith("gpu-z1-")}


def test_prods_h100_domains_and_gb300s_racks_are_protected(prod_run: ProgramRun, gb300_run: ProgramRun) -> None:
    h100 = [r for r in _scale_sets(prod_run).values() if r.name.startswith("h100-")]
    assert len(h100) == 32 and all(r.protect for r in h100)
    cpu = [r for r in _scale_sets(prod_run).values() if r.name.startswith(("cpu-", "system-"))]
    assert cpu and not any(r.protect for r in cpu)
    racks = [r for r in _scale_sets(gb300_run).values() if "-g" in r.name and "r" in r.name.rsplit("-", 1)[-1]]
    assert racks and all(r.protect for r in racks)
