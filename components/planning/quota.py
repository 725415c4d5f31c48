"""vCPU quota preflight: what the stack needs per quota family in its region."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from components.planning.placement import PoolPlan

SPOT_FAMILY = "lowPriorityCores"
"""Spot VMs draw on the regional low-priority vCPU quota, not their size family's."""


@dataclass(frozen=True)
class QuotaNeed:
    family: str
    vcpus: int
    declared: int | None
    """The quota the stack says the subscription has; None when it does not say."""

    @property
    def short_by(self) -> int:
        return max(0, self.vcpus - self.declared) if self.declared is not None else 0


def plan_quota(pools: tuple[PoolPlan, ...], extra: dict[str, int], declared: dict[str, int]) -> tuple[QuotaNeed, ...]:
    """`extra` adds vCPUs outside the pools (the control plane's VMs) per family."""
    need: dict[str, int] = defaultdict(int)
    for pool in pools:
        family = SPOT_FAMILY if pool.spec.priority == "spot" else pool.size.quota_family
        need[family] += pool.vcpus
    for family, vcpus in extra.items():
        need[family] += vcpus
    return tuple(QuotaNeed(f, v, declared.get(f)) for f, v in sorted(need.items()))
