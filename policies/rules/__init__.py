"""Every rule of the pack, as importable policy objects (tested by calling `validate` directly)."""

from pulumi_policy import Policy

from . import budget, failure_domains, kubernetes, machines, network, racks, registry, versions

ALL_POLICIES: list[Policy] = [*failure_domains.RULES, *racks.RULES, *machines.RULES, *network.RULES, *kubernetes.RULES,
                               *registry.RULES, *versions.RULES, *budget.RULES]

__all__ = ["ALL_POLICIES"]
