"""`cluster.resourceQuota`: per-subscription counts the subscription has in the stack's region, beside vCPUs."""

from __future__ import annotations

from pydantic import Field

from gpucluster.spec.base import SpecModel, WholeNumber


class ResourceQuotaSpec(SpecModel):
    """What `az network list-usages -l <region>` shows as the limit, for the adjustable rows of
    components/catalog/quotas.py. Undeclared, the plan shows Azure's default beside the need."""

    standard_public_ips: WholeNumber | None = Field(default=None, ge=0, le=1_000_000)
    """Standard public IP addresses; a public IP prefix counts in full (a /28 is 16)."""
