"""`cluster.teams[]` and `cluster.balloons[]`: who gets what share of the pools, and warm capacity."""

from __future__ import annotations

from pydantic import Field, model_validator

from components.spec.base import SpecModel
from components.spec.pools import NAME_PATTERN


class Quota(SpecModel):
    gpus: int = Field(default=0, ge=0)
    cpus: int = Field(default=0, ge=0)
    memory_gib: int = Field(default=0, ge=0)


class TeamSpec(SpecModel):
    name: str = Field(pattern=NAME_PATTERN)
    quota: Quota = Quota()
    borrowing_limit: Quota | None = None
    lending_limit: Quota | None = None
    fair_share_weight: int = Field(default=1, ge=0)


class BalloonSpec(SpecModel):
    pool: str
    nodes: int | None = Field(default=None, ge=0)
    fraction: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _one_reserve(self) -> BalloonSpec:
        if (self.nodes is None) == (self.fraction is None):
            raise ValueError("set exactly one of `nodes` or `fraction`")
        return self
