"""`cluster.limits`: Azure limits this stack has had raised, each with the note that proves it."""

from __future__ import annotations

from pydantic import Field

from gpucluster.spec.base import SpecModel, WholeNumber


class AzureException(SpecModel):
    """An exception Azure granted past a limit it documents as fixed, in writing."""

    reference: str = Field(min_length=3, max_length=500)
    """Where the grant is recorded: the support case or the written approval's reference."""


class LimitOverride(SpecModel):
    """A raised Azure limit. `note` records the support request that raised it."""

    value: WholeNumber = Field(gt=0, le=10_000_000)
    note: str = Field(min_length=3, max_length=2000, description="support ticket or approval that raised the limit")
    azure_exception: AzureException | None = None
    """Required to raise a limit Azure documents as fixed (components/catalog/limits.py): a note is not enough."""


class RegionZones(SpecModel):
    """Zones of a region the catalogue does not list."""

    zones: list[str] = Field(min_length=1, max_length=3)
    note: str = Field(min_length=3, max_length=2000)


class LimitsSpec(SpecModel):
    private_ips_per_nic: LimitOverride | None = None
    private_ips_per_vnet: LimitOverride | None = None
    private_ips_per_peered_group: LimitOverride | None = None
    subnets_per_vnet: LimitOverride | None = None
    vms_per_infiniband_domain: LimitOverride | None = None
    vms_per_large_scale_set: LimitOverride | None = None
    nat_gateway_public_ips: LimitOverride | None = None
    region_zones: RegionZones | None = None
