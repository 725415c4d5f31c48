"""vCPU quota preflight: what the stack needs per quota family in its region."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from components.errors import Problem
from components.planning.placement import PoolPlan

SPOT_FAMILY = "lowPriorityCores"
"""Spot VMs draw on the regional low-priority vCPU quota, not their size family's."""
REGIONAL_FAMILY = "cores"
"""Total Regional vCPUs: every regular VM counts here as well as in its size family (azure-docs
articles/virtual-machines/quotas.md: "two tiers for each subscription, in each region"; `az vm list-usage`
names it `cores`)."""


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
    regional = sum(v for f, v in need.items() if f != SPOT_FAMILY)
    rows = [QuotaNeed(f, v, declared.get(f)) for f, v in sorted(need.items())]
    return (*rows, QuotaNeed(REGIONAL_FAMILY, regional, declared.get(REGIONAL_FAMILY)))


def quota_problems(needs: tuple[QuotaNeed, ...], location: str) -> list[Problem]:
    """A declared quota below the need: Azure refuses the VMs past it, so the plan does too."""
    return [Problem(f"cluster.vcpuQuota.{q.family}",
                    f"the stack needs {q.vcpus:,} {q.family} vCPUs in {location} but the declared quota is "
                    f"{q.declared:,} (short by {q.short_by:,}); request the increase (Azure portal, Quotas) and "
                    "declare the new value, or shrink the pools")
            for q in needs if q.short_by]
