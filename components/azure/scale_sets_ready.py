"""ScaleSetsReady: the one resource that waits for every node scale set's allocation
(components/azure/scale_sets_ready_provider.py). What needs the nodes to exist depends on it, not on the scale sets,
whose create returns once ARM accepted it."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi.dynamic

from gpucluster.azure.scale_set.resource import NodeScaleSet
from gpucluster.azure.scale_sets_ready_provider import CONCURRENCY, DEADLINE, SCALE_SETS, ScaleSetsReadyProvider
from gpucluster.planning.deploy_runner import ALLOCATION_WAIT_SECONDS
from gpucluster.planning.placement import PoolPlan, ScaleSetPlan

CONCURRENCY_LIMIT = 16
"""Scale sets polled at once inside the one RPC: prod's 43 take three turns of GETs, far below ARM's read limits."""


def ready_entry(scale_set: NodeScaleSet, pool: PoolPlan, plan: ScaleSetPlan) -> dict[str, Any]:
    """What the wait needs of one scale set: its id and last write's operation (outputs), its size and zone (for
    the fix it names)."""
    return {"name": plan.name, "id": scale_set.id, "operation": scale_set.operation, "vmSize": pool.size.name,
            "zone": plan.zone}


class ScaleSetsReady(pulumi.dynamic.Resource):
    """Ready once every scale set's last write ended Succeeded; fails with one line naming each that did not."""

    def __init__(self, name: str, entries: list[dict[str, Any]], opts: pulumi.ResourceOptions | None = None,
                 provider: ScaleSetsReadyProvider | None = None) -> None:
        props: dict[str, Any] = {SCALE_SETS: entries, DEADLINE: ALLOCATION_WAIT_SECONDS, CONCURRENCY: CONCURRENCY_LIMIT}
        super().__init__(provider or ScaleSetsReadyProvider(), name, props, opts)
