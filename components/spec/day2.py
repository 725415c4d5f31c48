"""`cluster.acknowledgeDeletions`: deletions a change makes on purpose, said in the stack.

A team's namespace holds its jobs and an InfiniBand domain the jobs running on it; removing either from
the stack deletes them with everything inside. Against a base plan (`gpucluster plan --base`, `gpucluster
diff`) such a deletion is an error unless it is acknowledged here.
"""

from __future__ import annotations

from pydantic import Field

from components.spec.base import SpecModel


class AcknowledgedDeletions(SpecModel):
    teams: list[str] = Field(default_factory=list)
    """Teams whose namespace (and queues, and every workload in them) this change deletes."""
    infiniband_domains: list[str] = Field(default_factory=list)
    """Scale sets (InfiniBand domains) this change deletes, or replaces (a new VM size or zone: the provider deletes
    the scale set and creates it again): names such as `h100-z3-10`, or shell patterns such as `h100-*`. Without it a
    change may replace at most one domain of a pool (policies/rules/replacements.py; at `pulumi up`, the node scale
    sets' provider refuses the second: components/azure/replacement_guard.py)."""
    note: str | None = None
    """Why, for the reviewer (a ticket, the drain that was done)."""
