"""`cluster.metrics`: the telemetry pipeline's inputs (docs/metrics.md)."""

from __future__ import annotations

from pydantic import Field, model_validator

from gpucluster.spec.alerts import AlertsSpec
from gpucluster.spec.base import SpecModel, WholeNumber


class WorkspaceLimitsSpec(SpecModel):
    """Raised limits of the Azure Monitor workspace, each with the request that raised it. Unset: Azure's default."""

    active_series: WholeNumber | None = Field(default=None, ge=1, le=10_000_000_000)
    events_per_minute: WholeNumber | None = Field(default=None, ge=1, le=10_000_000_000)
    rule_groups: WholeNumber | None = Field(default=None, ge=1, le=1_000_000)
    request: str | None = Field(default=None, max_length=200)
    """The support request or ARM update that raised them; required with any raised value."""

    @model_validator(mode="after")
    def _raised_with_request(self) -> WorkspaceLimitsSpec:
        raised = any(v is not None for v in (self.active_series, self.events_per_minute, self.rule_groups))
        if raised and not self.request:
            raise ValueError("a raised workspace limit needs `request`: the support request or ARM update that "
                             "raised it (docs/metrics.md)")
        return self


class MetricsSpec(SpecModel):
    scrape_interval_seconds: WholeNumber = Field(default=30, ge=10, le=300)
    """How often every target is scraped; the samples the plan sizes follow from it."""
    series_per_shard: WholeNumber = Field(default=2_000_000, ge=100_000, le=50_000_000)
    """Raw series one edge Prometheus holds (its head block keeps every series it scrapes): the design point of one
    shard, sized with its memory; the plan runs ceil(raw in the zone / this) shards per zone."""
    workspace: WorkspaceLimitsSpec = WorkspaceLimitsSpec()
    alerts: AlertsSpec = AlertsSpec()
    """Where the alerts go: e-mails, webhooks, built-in roles' members, existing action groups. Required: a stack
    whose alerts would reach no one does not plan."""
