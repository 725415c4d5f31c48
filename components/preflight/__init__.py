"""ARM preflight: what Azure would refuse in the recorded resources, before anything is sent to it.

A pure pass over preview steps (no pulumi import). Errors are plan errors (exit 2: Azure refuses them whatever
the organisation wants); warnings are rows in the report (what no public source settles). Rules and their
sources: components/preflight/rules.py, docs/azure-preflight.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpucluster.catalog.availability import Availability, availability_rows
from gpucluster.catalog.prices import price_catalogue
from gpucluster.errors import Problem
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.placement import region_zones
from gpucluster.planning.sizes import size_table
from gpucluster.preflight.compute import check_machines, check_nics
from gpucluster.preflight.interconnect import check_interconnect
from gpucluster.preflight.model import Context, Finding, Preflight, azure_resources
from gpucluster.preflight.naming import check_computer_names, check_names
from gpucluster.preflight.resources import check_keys, check_placement, check_security_rules, check_tags

__all__ = ["Context", "Finding", "Preflight", "context_for", "preflight", "problems", "run_preflight"]


def context_for(plan: ClusterPlan) -> Context:
    spec = plan.spec
    availability = availability_rows(price_catalogue().rates)
    for size, confirmed in spec.size_regions.items():
        zones = {region: tuple(z) for region, z in confirmed.zones.items()} if confirmed.zones else None
        availability[size] = Availability(size, tuple(confirmed.regions), f"stack: {confirmed.source}",
                                          "as the stack states", primary=True, zones=zones)
    return Context(
        location=spec.location, sizes=size_table(spec), region_zones=region_zones(spec), availability=availability,
        max_single_placement_group=plan.limits["vmsPerInfinibandDomain"].value,
        max_large_scale_set=plan.limits["vmsPerLargeScaleSet"].value,
        max_ip_configurations_per_nic=plan.limits["privateIpsPerNic"].value)


def preflight(steps: Iterable[dict[str, Any]], ctx: Context) -> Preflight:
    resources = azure_resources(steps)
    result = Preflight()
    result.errors += check_names(resources)
    result.errors += check_computer_names(resources)
    result.errors += check_security_rules(resources)
    result.errors += check_machines(resources, ctx, result.warnings)
    result.errors += check_nics(resources, ctx)
    result.errors += check_interconnect(resources, result.warnings)
    result.errors += check_keys(resources)
    result.errors += check_tags(resources)
    result.errors += check_placement(resources, ctx, result.warnings)
    return result


def run_preflight(steps: Iterable[dict[str, Any]], plan: ClusterPlan) -> Preflight:
    return preflight(steps, context_for(plan))


def problems(findings: list[Finding]) -> list[Problem]:
    """Findings as the CLI's one-line problems: `<resource> <field>: <what and the fix> [preflight rule <id>]`."""
    return [Problem(f"{f.path} {f.field}", f"{f.message} [preflight rule {f.source}]", source=f.source) for f in findings]
