"""How fast a Cilium agent patch rolls over the cluster: the agent DaemonSet's `updateStrategy.rollingUpdate.
maxUnavailable`, sized from the plan.

Model: a RollingUpdate DaemonSet replaces at most maxUnavailable agents at a time (apps/v1 DaemonSetSpec), each taking
`secondsPerAgent` from deletion to Ready. A patch over N nodes (every pool's and the API servers', where the agent
also runs) then takes about ceil(N / maxUnavailable) x secondsPerAgent. The planner takes the smallest
maxUnavailable that meets `targetHours`. While an agent restarts, its node's running pods keep their datapath (the
BPF programs stay loaded) but new pods there wait for the CNI: the width is that many nodes briefly unable to start
pods. `secondsPerAgent` (default 40) is an estimate, not a measurement: time one agent's restart on the cluster and
set it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucluster.spec.workloads import CniUpdateSpec


@dataclass(frozen=True)
class CniUpdatePlan:
    nodes: int
    seconds_per_agent: int
    target_hours: float
    max_unavailable: int

    @property
    def hours(self) -> float:
        """The patch's expected duration at this width."""
        return math.ceil(self.nodes / self.max_unavailable) * self.seconds_per_agent / 3600

    @property
    def text(self) -> str:
        return (f"Cilium agent update: maxUnavailable {self.max_unavailable} over {self.nodes:,} nodes at "
                f"{self.seconds_per_agent} s per agent: ~{self.hours:.1f} h a patch (target {self.target_hours:g} h; "
                f"ceil(nodes x seconds per agent / target))")


def plan_cni_update(spec: CniUpdateSpec, nodes: int) -> CniUpdatePlan:
    width = max(1, math.ceil(nodes * spec.seconds_per_agent / (spec.target_hours * 3600)))
    return CniUpdatePlan(nodes, spec.seconds_per_agent, spec.target_hours, min(width, max(1, nodes)))
