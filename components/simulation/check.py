"""The plan checked against the in-cluster layer it renders: the first boot simulated (a workload that cannot start
is a plan error) and the node agents' API load held against their flow-control seats. `pulumi up` and the CLI plan
through `plan_checked`; `GpuCluster` checks a plan it is given that was not checked yet, so both refuse the same
stacks with the same messages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import date
from typing import Any

from components.errors import SpecError
from components.kubernetes.objects.flowcontrol import NODE_AGENTS, NODE_AGENTS_SHARES
from components.kubernetes.objects.layer import layer_objects
from components.kubernetes.objects.node_agents import node_agent_loads
from components.planning.agent_load import plan_agent_load
from components.planning.cluster_plan import ClusterPlan, plan_cluster
from components.simulation.boot_layer import first_boot
from components.simulation.image_arch import architecture_problems
from components.simulation.pulumi_order import ApplyOrder, from_states, prerequisite_problems
from components.spec import ClusterSpec


def check_plan(plan: ClusterPlan) -> ClusterPlan:
    """The plan with the first boot and the agents' load set (raises SpecError where either refuses it); a plan
    without the in-cluster layer, or already checked, comes back as it is."""
    if not plan.spec.in_cluster.enabled or plan.first_boot is not None:
        return plan
    api = plan.control_plane.api
    boot = first_boot(plan)
    # Every image of every pod against the architecture of each pool the first boot places it on.
    if wrong := architecture_problems(plan, boot, layer_objects(plan)):
        raise SpecError(wrong)
    agents = plan_agent_load(NODE_AGENTS, NODE_AGENTS_SHARES,
                             api.flags.max_requests_inflight + api.flags.max_mutating_requests_inflight,
                             max(1, api.count - max(api.in_zone(z) for z in api.zones)),
                             node_agent_loads(plan, boot.placements()))
    return replace(plan, first_boot=boot, agent_load=agents)


def plan_checked(spec: ClusterSpec, today: date | None = None) -> ClusterPlan:
    """Every planner (`plan_cluster`), then the checks above: what a stack deploys with."""
    return check_plan(plan_cluster(spec, today))


def check_order(plan: ClusterPlan, states: Iterable[dict[str, Any]]) -> None:
    """The first boot again, in the order `pulumi up` applies the layer as the program registered it (preview steps'
    `newState`s): every admission prerequisite applied before what uses it, no gate waiting on what waits for it.
    Raises SpecError naming each problem."""
    if not plan.spec.in_cluster.enabled:
        return
    order = ApplyOrder(from_states(states))
    problems = prerequisite_problems(order)
    try:
        first_boot(plan, order=order)
    except SpecError as error:
        problems += error.problems
    if problems:
        raise SpecError(problems)
