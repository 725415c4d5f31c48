"""`cluster.acknowledgeDeletions`: deletions a change makes on purpose, said in the stack.

A team's namespace holds its jobs and an InfiniBand domain the jobs running on it; removing either from
the stack deletes them with everything inside. Against a base plan (`gpucluster plan --base`, `gpucluster
diff`) such a deletion is an error unless it is acknowledged here.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from pydantic import Field

from gpucluster.spec.base import SpecModel


class AcknowledgedDeletions(SpecModel):
    teams: list[str] = Field(default_factory=list)
    """Teams whose namespace (and queues, and every workload in them) this change deletes."""
    infiniband_domains: list[str] = Field(default_factory=list)
    """Scale sets (InfiniBand domains) this change deletes, or replaces (a new VM size or zone: the provider deletes
    the scale set and creates it again): names such as `h100-z3-10`, or shell patterns such as `h100-*`. Every
    InfiniBand and rack scale set it does not name is declared with Pulumi's `protect`, so the engine deletes or
    replaces none of them (components/azure/scale_set/body.py); the plan and the policy pack judge the same
    (policies/rules/replacements.py, components/planning/placement.py)."""
    note: str | None = None
    """Why, for the reviewer (a ticket, the drain that was done)."""

    def covers_domain(self, name: str) -> bool:
        """Whether `infinibandDomains` (names or shell patterns) names the scale set `name`."""
        return any(fnmatchcase(name, pattern) for pattern in self.infiniband_domains)
