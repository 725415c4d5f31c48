"""Run the policy pack over recorded resources the way the Pulumi CLI would, without the CLI.

Props are wrapped in pulumi_policy's unknown-checking proxy, as the CLI wraps them; a rule that reads
an unknown value is skipped for that resource, as in `pulumi preview`.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from components.offline.engine import UNKNOWN, UNKNOWN_MARK
from policies.rules import ALL_POLICIES

PACK_DEFAULT = EnforcementLevel.MANDATORY


@dataclass(frozen=True)
class Violation:
    policy: str
    description: str
    severity: str
    enforcement: str
    urn: str | None
    message: str
    remediation: str | None

    @property
    def mandatory(self) -> bool:
        return self.enforcement == EnforcementLevel.MANDATORY.value


def _restore_unknowns(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _restore_unknowns(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_unknowns(v) for v in value]
    return UNKNOWN if value == UNKNOWN_MARK else value


def _options(state: dict[str, Any]) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=bool(state.get("protect")), ignore_changes=list(state.get("ignoreChanges") or []),
        delete_before_replace=None, aliases=[], custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[], parent=state.get("parent") or None)


def _settings(policy: Policy, config: dict[str, Any]) -> tuple[EnforcementLevel, dict[str, Any]]:
    """Enforcement level and config of one policy: schema defaults, then the pack config file."""
    values: dict[str, Any] = {}
    if policy.config_schema is not None:
        values = {k: v["default"] for k, v in policy.config_schema.properties.items() if "default" in v}
    level = policy.enforcement_level or PACK_DEFAULT
    entry = config.get(policy.name, config.get("all"))
    if isinstance(entry, str):
        level = EnforcementLevel(entry)
    elif isinstance(entry, dict):
        level = EnforcementLevel(entry.get("enforcementLevel", level.value))
        values.update({k: v for k, v in entry.items() if k != "enforcementLevel"})
    return level, values


def _call(validate: Any) -> None:
    result = validate()
    if inspect.isawaitable(result):
        asyncio.run(_await(result))


async def _await(result: Any) -> None:
    await result


def run_policies(steps: list[dict[str, Any]], config: dict[str, Any] | None = None,
                 policies: list[Policy] | None = None) -> list[Violation]:
    config = config or {}
    states = [s["newState"] for s in steps if s.get("newState", {}).get("custom")]
    violations: list[Violation] = []
    for policy in policies if policies is not None else ALL_POLICIES:
        level, values = _settings(policy, config)
        if level is EnforcementLevel.DISABLED:
            continue

        def report(message: str, urn: str | None, default_urn: str | None = None, p: Policy = policy,
                   lvl: EnforcementLevel = level) -> None:
            violations.append(Violation(p.name, p.description, p.severity.value if p.severity else "medium",
                                        lvl.value, urn or default_urn, message, p.remediation_steps))

        if isinstance(policy, ResourceValidationPolicy):
            for state in states:
                urn = state["urn"]
                args = ResourceValidationArgs(
                    resource_type=state["type"], props=unknown_checking_proxy(_restore_unknowns(state["inputs"])),
                    urn=urn, name=urn.rsplit("::", 1)[-1], opts=_options(state), provider=None, config=values)
                try:
                    _call(lambda a=args, u=urn, pol=policy: pol.validate(
                        a, lambda m, r=None, uu=u: report(m, r, uu)))
                except UnknownValueError:
                    continue
        elif isinstance(policy, StackValidationPolicy):
            resources = [PolicyResource(s["type"], _restore_unknowns(s["inputs"]), s["urn"],
                                        s["urn"].rsplit("::", 1)[-1], _options(s), None, None, [], {})
                         for s in states]
            stack_args = StackValidationArgs(resources, config=values)
            _call(lambda pol=policy, a=stack_args: pol.validate(a, lambda m, r=None: report(m, r)))
    return violations
