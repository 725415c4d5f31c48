"""Quota preflight: what the stack needs in its region per vCPU family, and of the per-subscription counts beside
vCPUs (public IPs, prefixes, NAT gateways, scale sets, NICs: components/catalog/quotas.py)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gpucluster.catalog.quotas import COUNT_QUOTAS, CountQuota
from gpucluster.errors import Problem
from gpucluster.planning.control_plane import ControlPlanePlan
from gpucluster.planning.egress import EgressPlan
from gpucluster.planning.placement import PoolPlan
from gpucluster.spec.quota import ResourceQuotaSpec

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
    """`extra` adds vCPUs outside the pools (the control plane's VMs, the deployment runner) per family."""
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


@dataclass(frozen=True)
class CountNeed:
    """One per-subscription count the plan consumes (components/catalog/quotas.py) against what bounds it."""

    quota: CountQuota
    needed: int
    declared: int | None
    """The stack's `cluster.resourceQuota.<key>`; None when it does not say (or the row is fixed)."""
    where: str
    """The config path that drives the need, for the fix."""

    @property
    def limit(self) -> int | None:
        """What the need is checked against: Azure's fixed limit, else the declared quota."""
        return self.quota.default if self.quota.fixed else self.declared

    @property
    def short_by(self) -> int:
        return max(0, self.needed - self.limit) if self.limit is not None else 0

    @property
    def exceeds_default(self) -> bool:
        """Past Azure's default with no quota declared: the subscription may not have it."""
        return (not self.quota.fixed and self.declared is None and self.quota.default is not None
                and self.needed > self.quota.default)


def plan_counts(pools: tuple[PoolPlan, ...], control_plane: ControlPlanePlan, egress: EgressPlan,
                declared: ResourceQuotaSpec, extra_nics: int = 0) -> tuple[CountNeed, ...]:
    """What the cluster's resources consume: the egress prefix's addresses, one prefix and one NAT gateway, a scale
    set per InfiniBand domain or zone share plus the API servers' set, and one NIC per VM (nodes, API servers, etcd
    members, and `extra_nics` such as the deployment runner's; a node NIC's IP configurations are one NIC)."""
    scale_sets = sum(len(p.scale_sets) for p in pools) + 1
    members = len(control_plane.etcd.members) + (len(control_plane.events.members) if control_plane.events else 0)
    nics = sum(p.nodes for p in pools) + control_plane.api.count + members + extra_nics
    counts = {"standardPublicIps": (egress.public_ips, "cluster.network.egress.snatPortsPerNode"),
              "publicIpPrefixes": (1, "cluster.network.egress"),
              "natGateways": (1, "cluster.network.egress"),
              "scaleSets": (scale_sets, "cluster.pools"),
              "networkInterfaces": (nics, "cluster.pools")}
    values = declared.model_dump(by_alias=True)
    return tuple(CountNeed(COUNT_QUOTAS[key], needed, values.get(key), where) for key, (needed, where) in counts.items())


def count_problems(needs: tuple[CountNeed, ...], location: str) -> list[Problem]:
    """A need past a fixed limit or a declared quota: Azure refuses the resources past it, so the plan does too."""
    problems = []
    for need in (n for n in needs if n.short_by):
        q = need.quota
        if q.fixed:
            problems.append(Problem(need.where, f"the stack needs {need.needed:,} {q.description} in {location}; Azure "
                                    f"allows {q.default:,} per subscription and region, not adjustable ({q.source}); "
                                    "split the cluster or shrink it"))
        else:
            problems.append(Problem(f"cluster.resourceQuota.{q.key}",
                                    f"the stack needs {need.needed:,} {q.description} in {location} but the declared "
                                    f"quota is {need.declared:,} (short by {need.short_by:,}); request the increase "
                                    "(Azure portal, Quotas, Networking) and declare the new value, or lower "
                                    f"{need.where}"))
    return problems
