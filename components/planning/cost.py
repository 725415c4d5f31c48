"""What the cluster costs per hour and per month at the prices the catalogue (or the stack's price file) holds.

Pure planning: every line is a quantity the plan already decided (VMs per pool at its full count, the autoscaler's
maximum; control-plane members; the NAT gateway and its prefix; the API servers' load balancer; the registry; managed
disks) times a dated, sourced hourly rate. What has no rate is listed as unpriced with the reason, never guessed.
Traffic (egress, NAT and load-balancer data processed), support plans and monitoring are not counted (docs/cost.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from gpucluster.catalog.acr_tasks import AGENT_POOL_COUNT, AGENT_POOL_TIER
from gpucluster.catalog.prices import HOURS_PER_MONTH, PriceCatalogue, Rate
from gpucluster.errors import Problem, SpecError, pool_path
from gpucluster.planning.balloons import BalloonPlan
from gpucluster.planning.control_plane import (
    API_SERVER_OS_DISK_GIB,
    ETCD_DISK_GIB,
    ETCD_OS_DISK_GIB,
    ControlPlanePlan,
)
from gpucluster.planning.deploy_runner import OS_DISK_GIB as RUNNER_OS_DISK_GIB
from gpucluster.planning.deploy_runner import DeployRunnerPlan
from gpucluster.planning.egress import EgressPlan
from gpucluster.planning.metrics import MetricsPlan
from gpucluster.planning.placement import PoolPlan
from gpucluster.planning.scheduling import FlavorPlan, SchedulingPlan
from gpucluster.spec import ClusterSpec, Quota

OS_DISK_TYPE = "Premium_LRS"
ETCD_DATA_DISK_TYPE = "PremiumV2_LRS"
SNAPSHOT_STORAGE_SKU = "Standard_ZRS"
LB_RULES_INCLUDED = 5
"""A Standard load balancer's base charge covers its first five rules (the catalogue row's source)."""


@dataclass(frozen=True)
class CostLine:
    """`quantity` units of one priced thing. `rate` None: unpriced (see CostPlan.unpriced)."""

    group: str
    """pools, controlPlane, deployRunner, registry, natGateway, publicIps, loadBalancers, disks, snapshotStorage,
    metrics."""
    key: str
    what: str
    quantity: int
    kind: str
    sku: str
    option: str
    rate: Rate | None

    @property
    def hourly(self) -> float | None:
        return None if self.rate is None else self.quantity * self.rate.usd_per_hour


@dataclass(frozen=True)
class DomainCost:
    """One InfiniBand domain (scale set) or NVLink rack of a pool."""

    pool: str
    scale_set: str
    zone: str
    rack: str | None
    nodes: int
    hourly: float | None


@dataclass(frozen=True)
class FlavorShare:
    flavor: str
    pool: str
    nominal: float
    """The team's nominal quota as a share of the flavor's capacity (GPUs on GPU pools, vCPUs on CPU pools)."""
    borrowing: float | None
    """The share the team may borrow beyond it; None: no borrowing limit (up to what the cohort lends)."""
    lending: float | None
    """The share of its nominal quota it may lend; None: all of it."""
    pool_hourly: float | None


@dataclass(frozen=True)
class TeamCost:
    team: str
    flavors: tuple[FlavorShare, ...]

    def _sum(self, share: str) -> float | None:
        total = 0.0
        for f in self.flavors:
            value = getattr(f, share)
            if f.pool_hourly is None or value is None:
                return None
            total += value * f.pool_hourly
        return total

    @property
    def nominal_hourly(self) -> float | None:
        return self._sum("nominal")

    @property
    def borrowing_hourly(self) -> float | None:
        return self._sum("borrowing")

    @property
    def lending_hourly(self) -> float | None:
        return self._sum("lending")


@dataclass(frozen=True)
class WarmCost:
    pool: str
    nodes: int
    hourly: float | None


@dataclass(frozen=True)
class Unpriced:
    what: str
    reason: str


@dataclass(frozen=True)
class CostPlan:
    region: str
    lines: tuple[CostLine, ...]
    domains: tuple[DomainCost, ...]
    teams: tuple[TeamCost, ...]
    warm: tuple[WarmCost, ...]
    unpriced: tuple[Unpriced, ...]
    warnings: tuple[str, ...]
    price_file: str | None
    hours_per_month: int = HOURS_PER_MONTH

    @property
    def hourly_total(self) -> float:
        """The priced lines only: `unpriced` says what it leaves out."""
        return sum(line.hourly or 0.0 for line in self.lines)

    def group_hourly(self, group: str) -> float | None:
        """A group's priced lines; None when it has lines and none is priced."""
        lines = [line for line in self.lines if line.group == group]
        priced = [line.hourly for line in lines if line.hourly is not None]
        return None if lines and not priced else sum(priced)

    def pool_hourly(self, pool: str) -> float | None:
        return next((line.hourly for line in self.lines if line.key == f"pool:{pool}"), None)


def _why_unpriced(catalogue: PriceCatalogue, kind: str, sku: str, region: str, option: str) -> str:
    if reason := catalogue.unpriced_reason(kind, sku):
        return reason
    elsewhere = [r or "no region" for r in catalogue.regions(kind, sku, option) if r != region]
    where = f" (it has {', '.join(elsewhere)})" if elsewhere else ""
    return (f"the catalogue has no {option} price for {kind} {sku} in {region}{where}: add it with "
            "tools/refresh_prices.py from a Retail Prices API answer, or in the stack's cost.priceFile")


def spot_problems(pools: tuple[PoolPlan, ...]) -> list[Problem]:
    """Spot VMs are evicted one by one: never on an InfiniBand gang pool or a rack (one VM lost stops the gang)."""
    return [Problem(pool_path(i, "priority"), f"{p.name} is an InfiniBand gang pool: a Spot eviction of one VM stops "
                    "every gang on it; set priority: regular and price it with pricing: reservation1y, reservation3y, "
                    "savingsPlan1y or savingsPlan3y") for i, p in enumerate(pools)
            if p.spec.pricing_option == "spot" and (p.infiniband or p.racks is not None)]


class _Lines:
    def __init__(self, catalogue: PriceCatalogue, region: str, today: date) -> None:
        self.catalogue, self.region, self.today = catalogue, region, today
        self.lines: list[CostLine] = []
        self.unpriced: list[Unpriced] = []

    def add(self, group: str, key: str, what: str, quantity: int, kind: str, sku: str, option: str = "payg",
            reason: str | None = None) -> CostLine:
        rate = None if reason else self.catalogue.find(kind, sku, self.region, option, self.today)
        line = CostLine(group, key, what, quantity, kind, sku, option, rate)
        if quantity > 0:
            self.lines.append(line)
            if rate is None and not reason and (gone := self.catalogue.ended(kind, sku, self.region, option,
                                                                           self.today)):
                reason = (f"the catalogue's {option} price for {kind} {sku} in {self.region} ended on "
                          f"{gone.until} (its row's effectiveEndDate; Spot prices are dated month by month): "
                          "refresh it with tools/refresh_prices.py, or give one in the stack's cost.priceFile")
            if rate is None:
                self.unpriced.append(Unpriced(what, reason or _why_unpriced(self.catalogue, kind, sku, self.region,
                                                                            option)))
        return line


def _disks(add: _Lines, pools: tuple[PoolPlan, ...], cp: ControlPlanePlan, runner: DeployRunnerPlan | None) -> None:
    counts: dict[str, int] = {}
    if runner is not None:
        counts[f"{OS_DISK_TYPE} {RUNNER_OS_DISK_GIB} GiB"] = 1
    for pool in pools:
        if not pool.ephemeral_os_disk:
            sku = f"{OS_DISK_TYPE} {pool.spec.os_disk_gib} GiB"
            counts[sku] = counts.get(sku, 0) + pool.nodes
    api = f"{OS_DISK_TYPE} {API_SERVER_OS_DISK_GIB} GiB"
    counts[api] = counts.get(api, 0) + cp.api.count
    for etcd in (cp.etcd, cp.events):
        if etcd is None:
            continue
        os_disk = f"{OS_DISK_TYPE} {ETCD_OS_DISK_GIB} GiB"
        counts[os_disk] = counts.get(os_disk, 0) + len(etcd.members)
        if not etcd.data_on_nvme:
            data = f"{ETCD_DATA_DISK_TYPE} {ETCD_DISK_GIB} GiB"
            counts[data] = counts.get(data, 0) + len(etcd.members)
    for sku, count in sorted(counts.items()):
        add.add("disks", f"disk:{sku}", f"{count:,} managed disks {sku}", count, "disk", sku)


def _teams(scheduling: SchedulingPlan, pool_hourly: dict[str, float | None]) -> tuple[TeamCost, ...]:
    """Each team's ClusterQueue quota per flavor as a share of the flavor's capacity (GPUs on a GPU flavor, vCPUs
    on a CPU one), times the flavor pool's hourly cost. Quota is not spend: this is what the team's share holds."""
    flavors = {f.name: f for f in scheduling.flavors}
    out = []
    for team in scheduling.teams:
        shares = []
        for fq in team.flavors:
            flavor = flavors[fq.flavor]
            capacity = flavor.capacity.gpus if flavor.gpu else flavor.capacity.cpus

            def share(quota: Quota | None, flavor: FlavorPlan = flavor, capacity: int = capacity) -> float | None:
                if quota is None:
                    return None
                amount = quota.gpus if flavor.gpu else quota.cpus
                return amount / capacity if capacity else 0.0

            shares.append(FlavorShare(fq.flavor, flavor.pool.name, share(fq.nominal) or 0.0,
                                      share(fq.borrowing_limit), share(fq.lending_limit),
                                      pool_hourly.get(flavor.pool.name)))
        out.append(TeamCost(team.name, tuple(shares)))
    return tuple(out)


def plan_cost(spec: ClusterSpec, pools: tuple[PoolPlan, ...], cp: ControlPlanePlan, egress: EgressPlan,
              balloons: tuple[BalloonPlan, ...], scheduling: SchedulingPlan, catalogue: PriceCatalogue, today: date,
              price_file: str | None = None, runner: DeployRunnerPlan | None = None,
              metrics: MetricsPlan | None = None) -> CostPlan:
    """The cost at `catalogue`'s prices (already overlaid with the stack's price file, named `price_file`); `today`
    dates the staleness warning; `runner` is the deployment runner and `metrics` the metrics pipeline where the stack
    has them. Every billed resource the stack declares has a line, priced or listed as unpriced with why."""
    if problems := spot_problems(pools):
        raise SpecError(problems)
    region = spec.location
    add = _Lines(catalogue, region, today)
    for pool in pools:
        option = pool.spec.pricing_option
        add.add("pools", f"pool:{pool.name}", f"pool {pool.name}: {pool.nodes:,} x {pool.size.name} ({option})",
                pool.nodes, "vm", pool.size.name, option)
    add.add("controlPlane", "controlPlane:apiServers", f"API servers: {cp.api.count} x {cp.api.size.name}",
            cp.api.count, "vm", cp.api.size.name)
    for etcd in (cp.etcd, cp.events):
        if etcd is not None:
            add.add("controlPlane", f"controlPlane:{etcd.role}",
                    f"{etcd.role}: {len(etcd.members)} x {etcd.size.name}", len(etcd.members), "vm", etcd.size.name)
    if runner is not None:
        add.add("deployRunner", "deployRunner", f"deployment runner: 1 x {runner.size.name}", 1, "vm", runner.size.name)
    add.add("registry", "registry", "container registry (Premium, zone-redundant)", 1, "registry", "Premium")
    add.add("registry", "registry:privateEndpoint", "container registry's private endpoint (per hour; data processed "
            "not counted)", 1, "privateEndpoint", "Standard")
    add.add("registry", "registry:agentPool", f"ACR Tasks agent pool ({AGENT_POOL_COUNT} x {AGENT_POOL_TIER})",
            AGENT_POOL_COUNT, "acrAgentPool", AGENT_POOL_TIER)
    if metrics is not None:
        add.add("metrics", "metrics:ingestion", f"Azure Monitor workspace: managed Prometheus ingestion "
                f"({metrics.ingested_samples_per_minute:,} samples/min) and queries", 1, "monitorIngestion",
                "Prometheus", reason="billed per samples ingested and processed; no sourced row in the catalogue")
    add.add("natGateway", "natGateway", "NAT gateway (Standard)", 1, "natGateway", "Standard")
    add.add("publicIps", "publicIpPrefix", f"NAT gateway's public IP prefix: /{egress.prefix_length}, "
            f"{egress.public_ips} addresses", egress.public_ips, "publicIpPrefixAddress", "Standard")
    rules = 1 + (1 if spec.access.break_glass else 0)
    add.add("loadBalancers", "loadBalancer:apiserver",
            f"API servers' load balancer (Standard, {rules} of the {LB_RULES_INCLUDED} rules its base charge covers)",
            1, "loadBalancer", "Standard")
    _disks(add, pools, cp, runner)
    add.add("snapshotStorage", "snapshotStorage", f"etcd snapshots' storage account ({SNAPSHOT_STORAGE_SKU})", 1,
            "snapshotStorage", SNAPSHOT_STORAGE_SKU,
            reason="billed per GB stored; the snapshots' size (etcd's data times the copies kept) is not planned")
    rates = {line.key: line.rate for line in add.lines}
    per_vm = {p.name: rates[f"pool:{p.name}"] for p in pools}

    def cost_of(pool: str, vms: int) -> float | None:
        rate = per_vm[pool]
        return None if rate is None else vms * rate.usd_per_hour

    domains = tuple(DomainCost(p.name, s.name, s.zone, s.rack.group if s.rack else None, s.capacity,
                               cost_of(p.name, s.capacity))
                    for p in pools if p.infiniband or p.racks is not None for s in p.scale_sets)
    warm = tuple(WarmCost(b.pool.name, b.replicas, cost_of(b.pool.name, b.replicas)) for b in balloons)
    pool_hourly = {p.name: cost_of(p.name, p.nodes) for p in pools}
    used = [line.rate for line in add.lines if line.rate is not None]
    limit = spec.cost.max_price_age_days
    stale = sorted({(r.as_of, r.sku) for r in used if (today - r.as_of).days > limit})
    warnings = (f"{len(stale)} prices the cost uses were read more than {limit} days before {today.isoformat()} "
                f"(oldest: {stale[0][1]}, {stale[0][0].isoformat()}); refresh components/catalog/facts/prices.json "
                "(tools/refresh_prices.py) or the price file",) if stale else ()
    return CostPlan(region, tuple(add.lines), domains, _teams(scheduling, pool_hourly), warm,
                    tuple(add.unpriced), warnings, price_file)
