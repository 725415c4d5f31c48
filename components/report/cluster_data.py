"""The in-cluster part of the plan summary as plain data: Kueue's cohort, flavors and team queues with their
quotas, and the balloons that keep spare nodes warm (report_data() adds them to summary.json)."""

from __future__ import annotations

from typing import Any

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.spec import Quota


def quota_data(quota: Quota | None) -> dict[str, int] | None:
    if quota is None:
        return None
    return {"gpus": quota.gpus, "cpus": quota.cpus, "memoryGib": quota.memory_gib}


def scheduling_data(plan: ClusterPlan) -> dict[str, Any]:
    """Each team's nominal quota (and borrowing and lending limits) per flavor, and each flavor's capacity."""
    s = plan.scheduling
    return {
        "cohort": s.cohort,
        "flavors": [{"name": f.name, "pool": f.pool.name, "topology": f.topology, "capacity": quota_data(f.capacity)}
                    for f in s.flavors],
        "teams": [{"name": t.name, "namespace": t.namespace, "weight": t.weight,
                   "flavors": [{"flavor": q.flavor, "nominal": quota_data(q.nominal),
                                "borrowingLimit": quota_data(q.borrowing_limit),
                                "lendingLimit": quota_data(q.lending_limit)} for q in t.flavors]}
                  for t in s.teams],
        "oversubscribed": {flavor: list(resources) for flavor, resources in sorted(s.oversubscribed.items())},
    }


def balloons_data(plan: ClusterPlan) -> list[dict[str, Any]]:
    """One entry per pool with balloons: how many placeholder pods, each the size of a node's share."""
    return [{"name": b.name, "pool": b.pool.name, "replicas": b.replicas, "poolNodes": b.pool.nodes, "gpus": b.gpus,
             "cpuMillis": b.cpu_millis, "memoryMib": b.memory_mib, "priorityClass": b.priority_class}
            for b in plan.balloons]
