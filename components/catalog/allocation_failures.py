"""What to do when a scale set's long-running create or update ends Failed, by the ARM error code its operation
reports (`error.code` of the Azure-AsyncOperation status; components/azure/scale_sets_ready_provider.py).

Sources:
- AllocationFailed, ZonalAllocationFailed: MicrosoftDocs/SupportArticles-docs 3429b8b6 `support/azure/
  virtual-machine-scale-sets/deploy/allocationfailed-or-zonalallocationfailed.md`: "The region or zone doesn't have
  enough core capacity for the requested SKU"; "If you use availability zones, try another zone within the region";
  "Reduce the number of instances of the requested VM size, and then retry"; "you can always retry later";
  a single placement group scopes the allocation to one cluster (error message 3).
- OverconstrainedAllocationRequest: MicrosoftDocs/azure-docs `articles/cloud-services/
  cloud-services-troubleshoot-overconstrained-allocation-request.md`: "cannot be provisioned due to deployment
  request constraints. If possible, try relaxing constraints".

Every fix ends the same way: the scale set stays in Azure and in the state with provisioningState Failed, and
`pulumi up --refresh` PUTs its model again (the refresh reads Failed, the diff asks for an update).
"""

from __future__ import annotations

RETRY = "then `pulumi up --refresh` PUTs it again"

FIXES: dict[str, str] = {
    "AllocationFailed": "Azure has no capacity for {size} in zone {zone} now: retry later, or move the pool to another "
                        "zone or size, or lower its node count",
    "ZonalAllocationFailed": "zone {zone} has no capacity for {size} now: retry later, or move the pool to another zone",
    "OverconstrainedAllocationRequest": "Azure cannot meet all of the set's constraints at once ({size}, zone {zone}, "
                                        "its placement group or interconnect block): relax one (another zone, a "
                                        "smaller InfiniBand domain, fewer nodes)",
}
"""ARM error code -> the fix, with the scale set's `size` and `zone` filled in."""

UNKNOWN = "read its error (`az vmss show`, the activity log) and fix what it names"


def fix(code: str | None, size: str, zone: str) -> str:
    """The one-clause fix for a scale set whose operation ended with `code`."""
    return f"{FIXES.get(code or '', UNKNOWN).format(size=size, zone=zone)}; {RETRY}"
