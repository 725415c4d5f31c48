"""`cluster.teams[]` and `cluster.balloons[]`: who gets what share of the pools, and warm capacity."""

from __future__ import annotations

from pydantic import Field, model_validator

from components.spec.base import RealNumber, SpecModel, WholeNumber
from components.spec.pools import NAME_PATTERN


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
    pools: list[str] | None = Field(default=None, max_length=100)
    """Pools the team's queue may use; defaults to every gpu and cpu pool (confidential pools only when named)."""


class OversubscriptionSpec(SpecModel):
    note: str = Field(min_length=3, max_length=2000)
    """Why the teams' nominal quotas may add up to more than the pools hold."""


class InClusterSpec(SpecModel):
    """The in-cluster layer (scheduling, capacity, health), applied through the admin kubeconfig."""

    enabled: bool = True
    """Off for the very first `pulumi up`, before the API servers answer (docs/operations.md)."""
    quota_oversubscription: OversubscriptionSpec | None = None
    gang_timeout_seconds: WholeNumber = Field(default=300, ge=10, le=3600)
    """How long Coscheduling holds a gang's pods at Permit waiting for the rest of the gang."""
    pods_ready_timeout_minutes: WholeNumber = Field(default=10, ge=1, le=120)
    """Kueue evicts and requeues an admitted workload whose pods are not all ready by then."""
    autoscaler_max_scale_down_share: RealNumber = Field(default=0.01, gt=0.0, le=0.2)
    """The largest share of the cluster's nodes the autoscaler may remove at once."""


class BalloonSpec(SpecModel):
    """Warm capacity: placeholder pods, each the size of one node of `pool`, preempted by any real pod."""

    pool: str = Field(max_length=20)
    nodes: WholeNumber | None = Field(default=None, ge=0, le=65_536)
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
