"""Balloons: per pool, placeholder pods sized to one whole node, at the balloon priority.

A balloon pod asks for all of a node's GPUs and 85% of its CPU and memory, so exactly one fits on a
node and any real pod that needs the node preempts it; the evicted balloon goes pending and the
autoscaler adds a node for it (balloons sit at the expendable cutoff, not below it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucluster.errors import Problem, SpecError
from gpucluster.planning.node_template import node_taints
from gpucluster.planning.placement import PoolPlan
from gpucluster.planning.scheduling import BALLOON_CLASS
from gpucluster.planning.taints import NodeTaint
from gpucluster.spec import ClusterSpec

NODE_SHARE = 0.85
"""Of a node's vCPUs and memory: above half (one balloon per node), below allocatable after reservations."""


@dataclass(frozen=True)
class BalloonPlan:
    pool: PoolPlan
    replicas: int
    gpus: int
    cpu_millis: int
    memory_mib: int
    tolerations: tuple[NodeTaint, ...]
    priority_class: str

    @property
    def name(self) -> str:
        return f"balloon-{self.pool.name}"


def plan_balloons(spec: ClusterSpec, pools: tuple[PoolPlan, ...]) -> tuple[BalloonPlan, ...]:
    by_name = {p.name: p for p in pools}
    problems: list[Problem] = []
    plans: list[BalloonPlan] = []
    seen: set[str] = set()
    for index, balloon in enumerate(spec.balloons):
        path = f"cluster.balloons[{index}]"
        pool = by_name.get(balloon.pool)
        if pool is None:
            problems.append(Problem(f"{path}.pool", f"{balloon.pool!r} is not a pool of this cluster "
                                    f"({', '.join(by_name)})"))
            continue
        if balloon.pool in seen:
            problems.append(Problem(f"{path}.pool", f"pool {balloon.pool!r} already has balloons; merge the entries"))
        seen.add(balloon.pool)
        if pool.infiniband and not balloon.on_topology_pool:
            problems.append(Problem(f"{path}.pool", f"{balloon.pool} is an InfiniBand pool: Kueue's topology-aware "
                                    "scheduling counts balloons as used and never preempts them; set "
                                    "onTopologyPool: true to accept that, or choose another pool"))
        replicas = balloon.nodes if balloon.nodes is not None else math.ceil((balloon.fraction or 0) * pool.nodes)
        if replicas > pool.nodes:
            problems.append(Problem(f"{path}.nodes", f"{replicas} balloons for {pool.nodes} nodes in {pool.name}; "
                                    "at most one balloon fits a node"))
        size = pool.size
        plans.append(BalloonPlan(pool=pool, replicas=replicas, gpus=size.gpus,
                                 cpu_millis=int(size.vcpus * 1000 * NODE_SHARE),
                                 memory_mib=int(size.memory_gib * 1024 * NODE_SHARE),
                                 tolerations=node_taints(pool), priority_class=BALLOON_CLASS.name))
    if problems:
        raise SpecError(problems)
    return tuple(plans)
