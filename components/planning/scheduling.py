"""Who may run what where: priority classes, one Kueue flavor per workload pool, a queue per team.

Pure planning. A team's `quota.gpus` lands on its GPU pools (split in proportion to their GPUs,
each GPU with its share of the node's CPU and memory); `quota.cpus` and `quota.memoryGib` land on
its CPU pools (split in proportion to their vCPUs). Nominal quotas that add up to more than a pool
holds are an error unless the stack declares the oversubscription with a note.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.errors import Problem, SpecError
from gpucluster.planning.fence import FENCE
from gpucluster.planning.node_template import CONFIDENTIAL_TAINT, node_taints
from gpucluster.planning.placement import PoolPlan
from gpucluster.planning.taints import NodeTaint
from gpucluster.spec import ClusterSpec, PoolKind, Quota, TeamSpec
from gpucluster.vocabulary import LABEL_HOSTNAME, LABEL_IB_DOMAIN, LABEL_POOL, LABEL_RACK, LABEL_ZONE

TOPOLOGY_NAME = "infiniband"
TOPOLOGY_LEVELS = (LABEL_ZONE, LABEL_IB_DOMAIN, LABEL_HOSTNAME)
"""Zone -> InfiniBand domain (one scale set) -> node: the labels every node registers with."""
RACK_TOPOLOGY_NAME = "nvlink"
RACK_TOPOLOGY_LEVELS = (LABEL_IB_DOMAIN, LABEL_RACK, LABEL_HOSTNAME)
"""A rack pool's levels: interconnect group (its InfiniBand domain, one zone) -> NVLink rack -> node. A gang that
asks for `kueue.x-k8s.io/podset-required-topology: gpucluster.io/rack` is placed within one rack
(docs/rack-scale.md, "One rack per gang")."""
AUTOSCALER_EXPENDABLE_CUTOFF = -10
"""cluster-autoscaler's default --expendable-pods-priority-cutoff: pods below it never trigger scale-up."""
MAX_FLAVORS = 64
"""ClusterQueue spec.resourceGroups[].flavors maxItems (kueue v0.19.2 CRD kueue.x-k8s.io_clusterqueues.yaml)."""


@dataclass(frozen=True)
class PriorityClassPlan:
    name: str
    value: int
    description: str
    global_default: bool = False
    preempts: bool = True


PRIORITY_CLASSES = (
    PriorityClassPlan("gpucluster-system", 1_000_000, "Cluster add-ons: scheduler, queues, autoscaler, health checks."),
    PriorityClassPlan("production-training", 10_000, "Production training runs; preempt research and preemptible work."),
    PriorityClassPlan("research", 1_000, "Research jobs; the default for pods that name no class.", global_default=True),
    PriorityClassPlan("preemptible", 0, "Opportunistic work that runs on idle capacity and never preempts.",
                      preempts=False),
    PriorityClassPlan("balloon", AUTOSCALER_EXPENDABLE_CUTOFF,
                      "Placeholder pods that keep capacity warm: below every workload, yet still scaled up for.",
                      preempts=False),
)
WORKLOAD_CLASSES = tuple(p for p in PRIORITY_CLASSES if p.name != "balloon")
BALLOON_CLASS = next(p for p in PRIORITY_CLASSES if p.name == "balloon")


@dataclass(frozen=True)
class FlavorPlan:
    name: str
    pool: PoolPlan
    node_labels: dict[str, str]
    node_taints: tuple[NodeTaint, ...]
    tolerations: tuple[NodeTaint, ...]
    """Injected into admitted pods. The confidential taint is never injected: pods must ask for it."""
    topology: str | None

    @property
    def gpu(self) -> bool:
        return self.pool.size.gpus > 0

    @property
    def scales_below_demand(self) -> bool:
        """A topology-aware flavor whose pool the autoscaler may shrink below its size (down to `minCount`, 0 by
        default). Kueue's TAS places gangs only on existing Ready nodes and reaches cluster-autoscaler only through
        the ProvisioningRequest admission check (kueue v0.19.2 site/content/en/docs/concepts/
        topology_aware_scheduling.md, "ClusterAutoscaler support"): without it a gang larger than the nodes left is
        never admitted, no pod is pending, and nothing scales up."""
        return self.topology is not None and self.pool.spec.min_count < self.pool.nodes

    @property
    def capacity(self) -> Quota:
        return Quota(gpus=self.pool.gpus, cpus=self.pool.vcpus, memory_gib=self.pool.nodes * self.pool.size.memory_gib)


@dataclass(frozen=True)
class FlavorQuota:
    flavor: str
    nominal: Quota
    borrowing_limit: Quota | None
    lending_limit: Quota | None


@dataclass(frozen=True)
class TeamQueuePlan:
    name: str
    namespace: str
    weight: int
    flavors: tuple[FlavorQuota, ...]


@dataclass(frozen=True)
class SchedulingPlan:
    cohort: str
    flavors: tuple[FlavorPlan, ...]
    teams: tuple[TeamQueuePlan, ...]
    oversubscribed: dict[str, list[str]]
    """Flavor -> resources whose nominal quotas exceed the pool, when the stack allows it."""


def split_proportionally(total: int, weights: list[int]) -> list[int]:
    """`total` split by `weights`, rounding by largest remainder: parts sum to `total` exactly."""
    if total == 0 or not weights:
        return [0] * len(weights)
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    parts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _flavor(pool: PoolPlan) -> FlavorPlan:
    taints = node_taints(pool)
    return FlavorPlan(name=pool.name, pool=pool, node_labels={LABEL_POOL: pool.name, FENCE.label: FENCE.open},
                      node_taints=taints,
                      tolerations=tuple(t for t in taints if t.key != CONFIDENTIAL_TAINT.key),
                      topology=RACK_TOPOLOGY_NAME if pool.racks is not None
                      else TOPOLOGY_NAME if pool.infiniband else None)


def split_within(total: int, weights: list[int], caps: list[int] | None) -> list[int]:
    """`total` split by `weights`, no part above its cap (the caps add up to `total` or more). Largest remainder
    is not monotone (the Alabama paradox: weights 1, 3, 3 split 3 as 1, 1, 1 but 4 as 0, 2, 2), so a limit split
    beside the quota it limits can land above it on one flavor; the excess goes to parts with room, in order."""
    parts = split_proportionally(total, weights)
    if caps is None:
        return parts
    parts = [min(part, cap) for part, cap in zip(parts, caps, strict=True)]
    left = total - sum(parts)
    for i, cap in enumerate(caps):
        step = min(left, cap - parts[i])
        parts[i] += step
        left -= step
    return parts


def _scaled(quota: Quota, flavors: list[FlavorPlan], within: list[Quota] | None = None) -> list[Quota]:
    """A team-wide quota as one Quota per flavor (GPU flavors first, then CPU flavors, in the given order);
    with `within`, no flavor's share above that flavor's Quota (a lending limit within the nominal quota)."""
    gpu = [f for f in flavors if f.gpu]
    cpu = [f for f in flavors if not f.gpu]
    caps = dict(zip((f.name for f in flavors), within, strict=True)) if within is not None else None
    gpus = split_within(quota.gpus, [f.pool.gpus for f in gpu], [caps[f.name].gpus for f in gpu] if caps else None)
    cpus = split_within(quota.cpus, [f.pool.vcpus for f in cpu], [caps[f.name].cpus for f in cpu] if caps else None)
    memory = split_within(quota.memory_gib, [f.pool.vcpus for f in cpu],
                          [caps[f.name].memory_gib for f in cpu] if caps else None)
    by_name: dict[str, Quota] = {}
    for f, g in zip(gpu, gpus, strict=True):
        size = f.pool.size
        by_name[f.name] = Quota(gpus=g, cpus=g * size.vcpus // size.gpus, memory_gib=g * size.memory_gib // size.gpus)
    for f, c, m in zip(cpu, cpus, memory, strict=True):
        by_name[f.name] = Quota(gpus=0, cpus=c, memory_gib=m)
    return [by_name[f.name] for f in flavors]


def _team_flavors(index: int, team: TeamSpec, flavors: dict[str, FlavorPlan],
                  pools: dict[str, PoolPlan]) -> tuple[list[FlavorPlan], list[Problem]]:
    problems: list[Problem] = []
    if team.pools is None:
        chosen = [f for f in flavors.values() if f.pool.spec.kind in (PoolKind.GPU, PoolKind.RACK, PoolKind.CPU)]
    else:
        chosen = []
        for j, name in enumerate(team.pools):
            if name not in flavors:
                why = "is a system pool" if name in pools else "is not a pool of this cluster"
                problems.append(Problem(f"cluster.teams[{index}].pools[{j}]",
                                        f"{name!r} {why}; name gpu, cpu or confidential pools ({', '.join(flavors)})"))
            else:
                chosen.append(flavors[name])
    path = f"cluster.teams[{index}].quota"
    if team.quota.gpus and not any(f.gpu for f in chosen):
        problems.append(Problem(f"{path}.gpus", "the team's pools hold no GPUs; add a GPU pool to its pools or set 0"))
    if (team.quota.cpus or team.quota.memory_gib) and not any(not f.gpu for f in chosen):
        problems.append(Problem(f"{path}.cpus", "cpus and memoryGib are quota on CPU pools and the team has none; "
                                "add a cpu pool to its pools or set them to 0 (GPU quota carries its CPU and memory)"))
    if len(chosen) > MAX_FLAVORS:
        where = f"cluster.teams[{index}]" + (".pools" if team.pools is not None else "")
        problems.append(Problem(where, f"the team's queue would take {len(chosen)} pools; a ClusterQueue resource "
                                f"group holds at most {MAX_FLAVORS} flavors (Kueue's CRD); name at most "
                                f"{MAX_FLAVORS} pools under pools"))
    # CPU flavors first: a CPU-only pod fits there; a GPU pod finds no GPU quota there and moves on.
    chosen.sort(key=lambda f: (f.gpu, f.pool.spec.kind is PoolKind.CONFIDENTIAL))
    return chosen, problems


def _check_capacity(spec: ClusterSpec, flavors: dict[str, FlavorPlan],
                    teams: list[TeamQueuePlan]) -> tuple[dict[str, list[str]], list[Problem]]:
    over: dict[str, list[str]] = {}
    problems: list[Problem] = []
    for name, flavor in flavors.items():
        capacity = flavor.capacity
        for field, label, unit in (("gpus", "GPUs", ""), ("cpus", "vCPUs", ""), ("memory_gib", "memory", " GiB")):
            shares = [(t.name, getattr(q.nominal, field)) for t in teams for q in t.flavors if q.flavor == name]
            total, held = sum(v for _, v in shares), getattr(capacity, field)
            if total <= held:
                continue
            over.setdefault(name, []).append(label)
            parts = ", ".join(f"{team} {value:,}" for team, value in shares if value)
            problems.append(Problem("cluster.teams", f"nominal {label} quota on pool {name} adds up to {total:,}{unit} "
                                    f"({parts}), more than its {held:,}{unit}; lower the teams' quotas, or declare "
                                    "cluster.inCluster.quotaOversubscription with a note"))
    if spec.in_cluster.quota_oversubscription is not None:
        return over, []
    return over, problems


def plan_scheduling(spec: ClusterSpec, pools: tuple[PoolPlan, ...]) -> SchedulingPlan:
    flavors = {p.name: _flavor(p) for p in pools if p.spec.kind is not PoolKind.SYSTEM}
    by_name = {p.name: p for p in pools}
    problems: list[Problem] = []
    teams: list[TeamQueuePlan] = []
    seen: set[str] = set()
    for index, team in enumerate(spec.teams):
        if team.name in seen:
            problems.append(Problem(f"cluster.teams[{index}].name", f"duplicate team name {team.name!r}"))
        seen.add(team.name)
        chosen, found = _team_flavors(index, team, flavors, by_name)
        problems.extend(found)
        nominal = _scaled(team.quota, chosen)
        borrowing = _scaled(team.borrowing_limit, chosen) if team.borrowing_limit else [None] * len(chosen)
        # Kueue refuses a flavor's lendingLimit above its nominalQuota (kueue v0.19.2 clusterqueue_webhook.go)
        lending = _scaled(team.lending_limit, chosen, nominal) if team.lending_limit else [None] * len(chosen)
        teams.append(TeamQueuePlan(team.name, f"team-{team.name}", team.fair_share_weight, tuple(
            FlavorQuota(f.name, n, b, le) for f, n, b, le in zip(chosen, nominal, borrowing, lending, strict=True))))
    over, capacity_problems = _check_capacity(spec, flavors, teams)
    problems.extend(capacity_problems)
    if problems:
        raise SpecError(problems)
    return SchedulingPlan(cohort=spec.name, flavors=tuple(flavors.values()), teams=tuple(teams), oversubscribed=over)
