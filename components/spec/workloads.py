"""`cluster.teams[]` and `cluster.balloons[]`: who gets what share of the pools, and warm capacity."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, model_validator

from gpucluster.spec.base import RealNumber, SpecModel, WholeNumber
from gpucluster.spec.pools import NAME_PATTERN


class Quota(SpecModel):
    gpus: WholeNumber = Field(default=0, ge=0, le=10_000_000)
    cpus: WholeNumber = Field(default=0, ge=0, le=100_000_000)
    memory_gib: WholeNumber = Field(default=0, ge=0, le=1_000_000_000)


class TeamSpec(SpecModel):
    """A team's ClusterQueue. `quota.gpus` is GPUs on the team's GPU pools (each GPU with its share of
    the node's CPU and memory); `quota.cpus` and `quota.memoryGib` are on its CPU pools."""

    name: str = Field(pattern=NAME_PATTERN)
    quota: Quota = Quota()
    borrowing_limit: Quota | None = None
    lending_limit: Quota | None = None
    fair_share_weight: WholeNumber = Field(default=1, ge=0, le=10_000)
    """The team's ClusterQueue `fairSharing.weight` (Kueue's fair sharing)."""
    pools: list[str] | None = Field(default=None, max_length=100)
    """Pools the team's queue may use; defaults to every gpu and cpu pool (confidential pools only when named)."""

    @model_validator(mode="after")
    def _kueue_accepts_lending(self) -> TeamSpec:
        """Kueue's ClusterQueue webhook (kubernetes-sigs/kueue v0.19.2 pkg/webhooks/clusterqueue_webhook.go,
        validateLendingLimit) refuses a lendingLimit above the nominalQuota: "must be less than or equal to the
        nominalQuota". The planner splits both over the same flavors in step, so the team's totals decide it."""
        if self.lending_limit is None:
            return self
        for field, key in (("gpus", "gpus"), ("cpus", "cpus"), ("memory_gib", "memoryGib")):
            lend, nominal = getattr(self.lending_limit, field), getattr(self.quota, field)
            if lend > nominal:
                raise ValueError(f"lendingLimit.{key} is {lend:,}, above quota.{key} ({nominal:,}); Kueue refuses a "
                                 "lending limit above the nominal quota: lower it to at most the quota")
        return self


class OversubscriptionSpec(SpecModel):
    note: str = Field(min_length=3, max_length=2000)
    """Why the teams' nominal quotas may add up to more than the pools hold."""


class ApiAccessSpec(SpecModel):
    """Where `pulumi up` reaches the API server from: its endpoint is the internal load balancer."""

    path: Literal["vnet", "peered", "proxy"] = "vnet"
    """vnet: pulumi runs on a machine in the cluster's VNet; peered: in a network peered with it
    (network.hubVnetId); proxy: through a jump host, e.g. `ssh -D 1080 <jump host>` and proxyUrl."""
    proxy_url: str | None = Field(default=None, pattern=r"^(socks5|http|https)://[^\s]+$")
    ready_timeout_minutes: WholeNumber = Field(default=30, ge=1, le=180)
    """How long the first `pulumi up` waits for the API servers' /readyz before applying the layer."""


class CniUpdateSpec(SpecModel):
    """How long a Cilium agent patch may take over the whole cluster (components/planning/cni_update.py)."""

    target_hours: RealNumber = Field(default=2.0, gt=0.0, le=168.0)
    seconds_per_agent: WholeNumber = Field(default=40, ge=1, le=3600)
    """One agent's restart, deletion to Ready: an estimate until measured on the cluster."""


class InClusterSpec(SpecModel):
    """The in-cluster layer (scheduling, capacity, health), applied through the admin kubeconfig."""

    enabled: bool = True
    """Off to apply the Azure part alone (from a machine that cannot reach the VNet); on, `pulumi up` waits for
    the API servers before applying the layer (docs/operations.md, first bootstrap)."""
    quota_oversubscription: OversubscriptionSpec | None = None
    pods_ready_timeout_minutes: WholeNumber = Field(default=10, ge=1, le=120)
    """Kueue evicts and requeues an admitted workload whose pods are not all ready by then: the
    all-or-nothing half of gang placement (docs/scheduling.md)."""
    api_access: ApiAccessSpec = ApiAccessSpec()
    autoscaler_max_scale_down_share: RealNumber = Field(default=0.01, gt=0.0, le=0.2)
    """The largest share of the cluster's nodes the autoscaler may remove at once."""
    cni_update: CniUpdateSpec = Field(default=CniUpdateSpec(),
                                      validation_alias=AliasChoices("cniUpdate", "cni_update", "cniRollout"))
    """How long a Cilium agent patch may take over the whole cluster (components/planning/cni_update.py).
    `cniRollout` is its earlier name, still read ("rollout" names the re-image rollout alone)."""


class BalloonSpec(SpecModel):
    """Warm capacity: placeholder pods, each the size of one node of `pool`, preempted by any real pod."""

    pool: str = Field(max_length=20)
    nodes: WholeNumber | None = Field(default=None, ge=0, le=65_536)
    """Nodes of the pool to keep warm (or `fraction`)."""
    fraction: RealNumber | None = Field(default=None, ge=0.0, le=1.0)
    """Share of the pool's nodes to keep warm, rounded up."""
    on_topology_pool: bool = False
    """Allow balloons on an InfiniBand pool. Kueue's topology-aware scheduling counts them as used and
    never preempts them, so a warm node there is a node TAS jobs cannot get (docs/capacity.md)."""

    @model_validator(mode="after")
    def _one_reserve(self) -> BalloonSpec:
        if (self.nodes is None) == (self.fraction is None):
            raise ValueError("set exactly one of `nodes` or `fraction`")
        return self
