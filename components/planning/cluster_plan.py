"""Every plan of a stack, computed once from the spec. Components and the report read only this."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from components.errors import Problem, SpecError
from components.planning.balloons import BalloonPlan, plan_balloons
from components.planning.control_plane import ControlPlanePlan, plan_control_plane
from components.planning.egress import EgressPlan, plan_egress
from components.planning.ip_plan import IpPlan, plan_ip
from components.planning.limits import Limits, effective_limits
from components.planning.placement import PoolPlan, plan_pools
from components.planning.quota import QuotaNeed, plan_quota, quota_problems
from components.planning.scheduling import SchedulingPlan, plan_scheduling
from components.spec import ClusterSpec

T = TypeVar("T")


@dataclass(frozen=True)
class ClusterPlan:
    spec: ClusterSpec
    limits: Limits
    ip: IpPlan
    egress: EgressPlan
    pools: tuple[PoolPlan, ...]
    control_plane: ControlPlanePlan
    quota: tuple[QuotaNeed, ...]
    scheduling: SchedulingPlan
    balloons: tuple[BalloonPlan, ...]

    @property
    def nodes(self) -> int:
        return sum(p.nodes for p in self.pools)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    @property
    def system_nodes(self) -> int:
        """Nodes that run cluster add-ons (one replica per node for those with hostname anti-affinity)."""
        return sum(p.nodes for p in self.pools if p.role == "system")


def _attempt(planner: Callable[[], T], problems: list[Problem]) -> T | None:
    try:
        return planner()
    except SpecError as error:
        problems.extend(error.problems)
        return None


def plan_cluster(spec: ClusterSpec) -> ClusterPlan:
    """Run every planner; problems from independent planners are reported together."""
    limits = effective_limits(spec)
    problems: list[Problem] = []
    ip = _attempt(lambda: plan_ip(spec, limits), problems)
    egress = _attempt(lambda: plan_egress(spec, limits), problems)
    pools = _attempt(lambda: plan_pools(spec, limits), problems)
    nodes = sum(p.count for p in spec.pools)
    control_plane = _attempt(lambda: plan_control_plane(spec, nodes), problems)
    scheduling = _attempt(lambda: plan_scheduling(spec, pools), problems) if pools is not None else None
    balloons = _attempt(lambda: plan_balloons(spec, pools), problems) if pools is not None else None
    if (ip is None or egress is None or pools is None or control_plane is None or scheduling is None
            or balloons is None):
        raise SpecError(problems)
    quota = plan_quota(pools, control_plane.vcpus_by_family(), spec.vcpu_quota)
    if shortfall := quota_problems(quota, spec.location):
        raise SpecError(shortfall)
    return ClusterPlan(spec, limits, ip, egress, pools, control_plane, quota, scheduling, balloons)
