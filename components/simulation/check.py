"""The plan checked against the in-cluster layer it renders: the bring-up simulated (a workload that cannot start
is a plan error) and the node agents' API load held against their flow-control seats. `pulumi up` and the CLI plan
through `plan_checked`, which returns a `CheckedPlan`: the only plan `GpuCluster` takes, so both refuse the same stacks
with the same messages and nothing re-checks a plan."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from datetime import date
from typing import Any

from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.flowcontrol import NODE_AGENTS, NODE_AGENTS_SHARES
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.kubernetes.objects.node_agents import node_agent_loads
from gpucluster.planning.agent_load import plan_agent_load
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.simulation.bring_up_layer import bring_up
from gpucluster.simulation.image_arch import architecture_problems
from gpucluster.simulation.pulumi_order import ApplyOrder, from_states, prerequisite_problems
from gpucluster.spec import ClusterSpec

_MINTING: ContextVar[bool] = ContextVar("gpucluster_minting_checked_plan", default=False)


@dataclass(frozen=True)
class CheckedPlan(ClusterPlan):
    """A ClusterPlan that passed `check_plan`: read it as any ClusterPlan. Only `check_plan` makes one, so a plan
    changed after its check (`dataclasses.replace`) cannot pass for checked: replace on the ClusterPlan and check
    again."""

    def __post_init__(self) -> None:
        if not _MINTING.get():
            raise TypeError("a CheckedPlan is made only by check_plan/plan_checked (components/simulation/check.py); "
                            "change the ClusterPlan and check it again")


@contextmanager
def _minting() -> Iterator[None]:
    token = _MINTING.set(True)
    try:
        yield
    finally:
        _MINTING.reset(token)


def _mint(plan: ClusterPlan, **checked: Any) -> CheckedPlan:
    values = {f.name: getattr(plan, f.name) for f in fields(ClusterPlan) if f.init} | checked
    with _minting():
        return CheckedPlan(**values)


def check_plan(plan: ClusterPlan) -> CheckedPlan:
    """The plan with the bring-up and the agents' load set (raises SpecError where either refuses it), as a
    CheckedPlan; a plan without the in-cluster layer has neither to set. A CheckedPlan comes back as it is."""
    if isinstance(plan, CheckedPlan):
        return plan
    if not plan.spec.in_cluster.enabled:
        return _mint(plan)
    api = plan.control_plane.api
    boot = bring_up(plan)
    # Every image of every pod against the architecture of each pool the bring-up places it on.
    if wrong := architecture_problems(plan, boot, layer_objects(plan)):
        raise SpecError(wrong)
    agents = plan_agent_load(NODE_AGENTS, NODE_AGENTS_SHARES,
                             api.flags.max_requests_inflight + api.flags.max_mutating_requests_inflight,
                             max(1, api.count - max(api.in_zone(z) for z in api.zones)),
                             node_agent_loads(plan, boot.placements()))
    return _mint(plan, bring_up=boot, agent_load=agents)


def plan_checked(spec: ClusterSpec, today: date | None = None) -> CheckedPlan:
    """Every planner (`plan_cluster`), then the checks above: what a stack deploys with."""
    return check_plan(plan_cluster(spec, today))


def check_order(plan: ClusterPlan, states: Iterable[dict[str, Any]]) -> None:
    """The bring-up again, in the order `pulumi up` applies the layer as the program registered it (preview steps'
    `newState`s): every admission prerequisite applied before what uses it, no gate waiting on what waits for it.
    Raises SpecError naming each problem."""
    if not plan.spec.in_cluster.enabled:
        return
    order = ApplyOrder(from_states(states))
    problems = prerequisite_problems(order)
    try:
        bring_up(plan, order=order)
    except SpecError as error:
        problems += error.problems
    if problems:
        raise SpecError(problems)
