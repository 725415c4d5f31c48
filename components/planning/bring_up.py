"""The bring-up's result as the plan carries it: in what order the in-cluster layer's workloads start and on which
pools, the first time `pulumi up` applies them (not a machine's boot: components/bootstrap/). The simulation that
computes it reads the in-cluster objects (components/simulation/); the plan only holds its outcome for the outputs
(summary, report)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BringUpStep:
    step: int
    workload: str
    pools: tuple[str, ...]


@dataclass(frozen=True)
class Stuck:
    workload: str
    pool: str | None
    reason: str


@dataclass(frozen=True)
class NodePods:
    """One pool's node as the bring-up fills it: the per-node pods of every DaemonSet placed there."""
    pool: str
    system_pods: int
    """Every DaemonSet pod on one node (kubelet's maxPods counts them all)."""
    pod_network_pods: int
    """Those not on the host network: each takes one of the NIC's pod addresses."""
    max_pods: int
    pod_addresses: int
    work_pods: int
    """What the stack asks a node to take besides them (`workPodsPerNode`)."""
    daemonsets: tuple[str, ...]

    @property
    def free_pods(self) -> int:
        return min(self.max_pods - self.system_pods, self.pod_addresses - self.pod_network_pods)


@dataclass(frozen=True)
class BringUp:
    steps: tuple[BringUpStep, ...]
    stuck: tuple[Stuck, ...]
    node_pods: tuple[NodePods, ...] = ()

    def placements(self) -> dict[str, tuple[str, ...]]:
        found: dict[str, list[str]] = {}
        for s in self.steps:
            found.setdefault(s.workload, []).extend(s.pools)
        return {k: tuple(sorted(set(v))) for k, v in found.items()}
