"""Pods per node: every DaemonSet the bring-up places on a pool (the layer's own and the charts', DRA drivers
included) takes a pod slot on each of its nodes (kubelet `maxPods` counts every pod, host network or not) and, off
the host network, one of the NIC's pod addresses. A pool whose nodes keep fewer than the stack's
`workPodsPerNode` (default 1) for work is refused: its nodes would join and run nothing."""

from __future__ import annotations

from gpucluster.errors import Problem
from gpucluster.planning.bring_up import NodePods
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.pod_addresses import node_addressing
from gpucluster.simulation.engine import Workload


def node_pods(plan: ClusterPlan, placements: dict[str, tuple[str, ...]], workloads: list[Workload]) -> list[NodePods]:
    found = []
    daemonsets = [w for w in workloads if w.kind == "DaemonSet"]
    for pool in plan.pools:
        here = [w for w in daemonsets if pool.name in placements.get(w.name, ())]
        work = pool.spec.work_pods_per_node or 1
        found.append(NodePods(pool.name, len(here), sum(not w.host_network for w in here), pool.spec.pods_per_node,
                              node_addressing(pool.spec).pod_addresses, work, tuple(sorted(w.name for w in here))))
    return found


def pod_slot_problems(plan: ClusterPlan, pods: list[NodePods]) -> list[Problem]:
    index = {p.name: i for i, p in enumerate(plan.spec.pools)}
    problems = []
    for n in pods:
        if n.free_pods >= n.work_pods:
            continue
        need = max(n.system_pods + n.work_pods, n.pod_network_pods + n.work_pods)
        problems.append(Problem(
            f"cluster.pools[{index[n.pool]}].podsPerNode",
            f"pool {n.pool}: {n.system_pods} per-node system pods ({', '.join(n.daemonsets)}; "
            f"{n.pod_network_pods} of them on the pod network) leave {n.free_pods} of {n.max_pods} pods for work, fewer than the "
            f"{n.work_pods} workPodsPerNode asks; set podsPerNode to at least {need}"))
    return problems
