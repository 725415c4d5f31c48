"""`cluster.deployRunner`: the machine inside the VNet that step 2 of the first `pulumi up` and later updates run on
(docs/operations.md, "First bootstrap")."""

from __future__ import annotations

from pydantic import Field

from gpucluster.spec.base import SpecModel, WholeNumber


class DeployRunnerSpec(SpecModel):
    enabled: bool | None = None
    """Create the runner; by default on when `inCluster.apiAccess.path` is `vnet` (nothing else reaches the API
    servers there), off for `peered` and `proxy`, where the user has declared a way in of their own."""
    vm_size: str = Field(default="Standard_D4s_v5", max_length=80)
    """A general-purpose size from the catalogue or `cluster.vmSizes`: it runs `pulumi up`, nothing else."""
    zone: str | None = Field(default=None, max_length=8)
    """One of the cluster's zones; by default the first in order (a reordered `zones` list moves nothing)."""
    run_timeout_minutes: WholeNumber = Field(default=240, ge=10, le=1440)
    """How long the Run Command that drives step 2 may run before Azure stops it (`--timeout-in-seconds`); more than
    the allocations' wait (120 minutes) plus `inCluster.apiAccess.readyTimeoutMinutes`."""
