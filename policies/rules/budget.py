"""A per-stack budget: the stack's machines at list price per hour against `maxHourlyUsd` (off by default).

The pack runs without components/ (policies/__main__.py), so it reads what every rule reads, the resources' props
(each scale set's and VM's size, capacity, location and priority), and prices them with vm_prices.json, the
catalogue's VM list rates (components/catalog/facts/prices.json) copied beside the rules by tools/refresh_prices.py
(tests/test_cost.py keeps the copy equal). Compute only: the plan's summary carries the full cost (docs/cost.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pulumi_policy import ReportViolation, Severity, StackValidationArgs

from .declare import Config, stack_rule
from .props import MACHINE_TYPES, Resource, capacity, get, kind

RATES: dict[str, dict[str, dict[str, float]]] = json.loads(
    (Path(__file__).parent / "vm_prices.json").read_text(encoding="utf-8"))


def _size(resource: Resource) -> str | None:
    return get(resource.props, "sku", "name") or get(resource.props, "hardwareProfile", "vmSize")


def _option(resource: Resource) -> str:
    priority = get(resource.props, "virtualMachineProfile", "priority") or get(resource.props, "priority")
    return "spot" if str(priority).lower() == "spot" else "payg"


def _rate(size: str, location: str, option: str, given: dict[str, Any]) -> float | None:
    if isinstance(given.get(size), int | float) and not isinstance(given.get(size), bool):
        return float(given[size])
    return RATES.get(location, {}).get(size, {}).get(option)


@stack_rule(
    "stack-hourly-budget", severity=Severity.MEDIUM,
    description="The stack's machines (scale sets at their declared capacity, VMs) cost at most maxHourlyUsd per hour "
                "at list price (vm_prices.json) or at the rates usdPerHour gives per size; off unless maxHourlyUsd "
                "is set in the stack's policy config.",
    remediation="Shrink the change, raise maxHourlyUsd in policies/config/<stack>.json with the approval, or give the "
                "negotiated rates under usdPerHour.<size>; a size with no rate must get one there.",
    config={"maxHourlyUsd": {"type": ["number", "null"], "default": None},
            "usdPerHour": {"type": "object", "default": {}, "additionalProperties": {"type": "number"}}})
def hourly_budget(args: StackValidationArgs, report: ReportViolation, config: Config) -> None:
    limit = config["maxHourlyUsd"]
    if limit is None:
        return
    given, total, unpriced = dict(config["usdPerHour"]), 0.0, set()
    for resource in args.resources:
        if kind(resource) not in MACHINE_TYPES or not (size := _size(resource)):
            continue
        rate = _rate(str(size), str(get(resource.props, "location", default="")), _option(resource), given)
        if rate is None:
            unpriced.add(str(size))
            continue
        total += capacity(resource) * rate
    if unpriced:
        report(f"the budget of {limit:,.2f} USD/h cannot be checked: no rate for {', '.join(sorted(unpriced))}; give "
               "usdPerHour.<size> in the stack's policy config", None)
    elif total > limit:
        report(f"the stack's machines cost {total:,.2f} USD/h at list price, over its budget of {limit:,.2f} USD/h "
               f"(by {total - limit:,.2f} USD/h, {(total - limit) * 730:,.0f} USD per 730-hour month)", None)

RULES = [hourly_budget]
