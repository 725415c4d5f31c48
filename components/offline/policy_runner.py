"""Run the policy pack over recorded resources the way the Pulumi CLI would, without the CLI.

Props are wrapped in pulumi_policy's unknown-checking proxy, as the CLI wraps them; a rule that reads an
unknown value is not run for that resource and says so (an advisory note, as `pulumi preview` prints).
Stack rules get every resource with its parent and dependencies linked, as the CLI hands them over.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any

import jsonschema
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
from pulumi_policy.policy import _NotApplicableError  # what args.not_applicable() raises
from pulumi_policy.proxy import UnknownValueError

from gpucluster.catalog.preview_values import UNKNOWN
from gpucluster.errors import Problem, SpecError
from gpucluster.offline.lazy_props import lazy_props
from gpucluster.policies.rules import ALL_POLICIES
from gpucluster.results import Severity

PACK_DEFAULT = EnforcementLevel.MANDATORY
# A preview document masks secrets; rules that can only judge secretness there are told so.
PREVIEW_CONTEXT = {"secretsMasked": True}
SEVERITY_ORDER = ("critical", "high", "medium", "low")


@dataclass(frozen=True)
class Violation:
    """A policy's verdict on a resource or the stack, in the vocabulary of components/results.py."""

    source: str
    """The policy's name."""
    description: str
    policy_severity: str
    """The policy's own severity (pulumi_policy `PolicySeverity`: critical, high, medium, low)."""
    severity: Severity
    """ERROR at the mandatory enforcement level (the stack must not be deployed), WARNING at advisory."""
    path: str
    """The resource's URN; "" for a stack policy's verdict on the whole stack."""
    message: str
    fix: str
    """The policy's remediation steps."""

    @property
    def mandatory(self) -> bool:
        return self.severity is Severity.ERROR

    @property
    def enforcement(self) -> str:
        """The enforcement level as the Pulumi CLI names it."""
        return (EnforcementLevel.MANDATORY if self.mandatory else EnforcementLevel.ADVISORY).value

    def as_dict(self) -> dict[str, Any]:
        """summary.json's row, in the Pulumi CLI's words."""
        return {"policy": self.source, "description": self.description, "severity": self.policy_severity,
                "enforcement": self.enforcement, "urn": self.path or None, "message": self.message,
                "remediation": self.fix or None}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Violation:
        return cls(row["policy"], row["description"], row["severity"], enforcement_severity(row["enforcement"]),
                   row["urn"] or "", row["message"], row["remediation"] or "")


def enforcement_severity(level: str) -> Severity:
    """A violation's severity at an enforcement level (the runner reports `remediate` as mandatory, see `_settings`)."""
    return Severity.ERROR if level == EnforcementLevel.MANDATORY.value else Severity.WARNING


class _NotRecordedError(UnknownValueError):
    def __init__(self, key: str) -> None:
        super().__init__(UNKNOWN, [key])
        self.message = (f"the preview does not record the resource option `{key}` (a `pulumi preview --json` state "
                        "has none); run the pack with `pulumi preview --policy-pack` to judge it")


class _UnrecordedList(list[str]):
    """An option a saved real preview does not carry: reading it is like reading an unknown value."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def _unknown(self, *_: Any) -> Any:
        raise _NotRecordedError(self.key)

    __contains__ = __iter__ = __len__ = __bool__ = __getitem__ = _unknown  # type: ignore[assignment]


def _options(state: dict[str, Any]) -> PolicyResourceOptions:
    ignore_changes = (list(state.get("ignoreChanges") or []) if "ignoreChanges" in state
                      else _UnrecordedList("ignoreChanges"))
    return PolicyResourceOptions(
        protect=bool(state.get("protect")), ignore_changes=ignore_changes,
        delete_before_replace=None, aliases=[], custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[], parent=state.get("parent") or None)


UNREADABLE = (TypeError, ValueError, LookupError, AttributeError, ArithmeticError)
"""What a rule raises on a value of a shape it does not expect (a list where it reads an object, text where it
counts, an index past the end, a number too large for a float): the resource fails that rule."""

FORMAT_CHECKER = jsonschema.Draft7Validator.FORMAT_CHECKER
"""Checks `"format": "date"` and the like, which jsonschema only asserts when given a format checker."""


def _short(text: str, limit: int = 200) -> str:
    """A message part cut to one readable line: values and names in a config can be long."""
    return text if len(text) <= limit else text[:limit] + "..."


def check_config(config: dict[str, Any], where: str, policies: list[Policy] | None = None) -> None:
    """Reject what the CLI's --policy-pack-config would reject: unknown policies, keys and bad values."""
    known = {p.name: p for p in (policies if policies is not None else ALL_POLICIES)}
    levels = [level.value for level in EnforcementLevel]
    problems: list[Problem] = []
    for full_name, entry in config.items():
        policy, name = known.get(full_name), _short(full_name, 100)
        if full_name != "all" and policy is None:
            problems.append(Problem(f"{where}: {name}", "unknown policy; the pack's policies are listed in docs/policies.md"))
            continue
        level = entry if isinstance(entry, str) else entry.get("enforcementLevel") if isinstance(entry, dict) else None
        if level is not None and level not in levels:
            problems.append(Problem(f"{where}: {name}",
                                    f"enforcement level {_short(repr(level))} is not one of {', '.join(levels)}"))
        if not isinstance(entry, dict | str):
            problems.append(Problem(f"{where}: {name}", "expected an enforcement level or an object of settings"))
        if not isinstance(entry, dict) or policy is None:
            continue
        schema = policy.config_schema.properties if policy.config_schema else {}
        for key, value in entry.items():
            if key == "enforcementLevel":
                continue
            if key not in schema:
                problems.append(Problem(f"{where}: {name}.{_short(key, 100)}",
                                        f"unknown setting (settings: {', '.join(schema) or 'none'})"))
                continue
            try:
                jsonschema.validate(value, schema[key], format_checker=FORMAT_CHECKER)
            except jsonschema.ValidationError as error:
                shown = error.message.replace(repr(error.instance), _short(repr(error.instance), 60))
                problems.append(Problem(f"{where}: {name}.{key}", _short(shown)))
    if problems:
        raise SpecError(problems)


def _settings(policy: Policy, config: dict[str, Any]) -> tuple[EnforcementLevel, dict[str, Any]]:
    """Enforcement level and config of one policy: the pack config file over the schema defaults."""
    schema = policy.config_schema.properties if policy.config_schema else {}
    values: dict[str, Any] = {k: v["default"] for k, v in schema.items() if "default" in v}
    values.update({k: v for k, v in PREVIEW_CONTEXT.items() if k in schema})
    level = policy.enforcement_level or PACK_DEFAULT
    all_entry = config.get("all")
    if isinstance(all_entry, str):
        level = EnforcementLevel(all_entry)
    entry = config.get(policy.name)
    if isinstance(entry, str):
        level = EnforcementLevel(entry)
    elif isinstance(entry, dict):
        level = EnforcementLevel(entry.get("enforcementLevel", level.value))
        values.update({k: v for k, v in entry.items() if k != "enforcementLevel"})
    if level is EnforcementLevel.REMEDIATE:
        # The analyzer reports a violation of a validating policy at "remediate" as mandatory (pulumi_policy
        # policy.py, Analyze and AnalyzeStack: "downgrade the level we report from remediate to mandatory").
        level = EnforcementLevel.MANDATORY
    return level, values


def _call(validate: Any) -> None:
    result = validate()
    if inspect.isawaitable(result):
        asyncio.run(_await(result))


async def _await(result: Any) -> None:
    await result


def _stack_resources(states: list[dict[str, Any]], props: dict[str, Any]) -> list[PolicyResource]:
    resources = {s["urn"]: PolicyResource(s["type"], props[s["urn"]], s["urn"], s["urn"].rsplit("::", 1)[-1],
                                          _options(s), None, None, [], {})
                 for s in states}
    for state in states:
        resource = resources[state["urn"]]
        resource.parent = resources.get(state.get("parent") or "")
        resource.dependencies = [resources[d] for d in state.get("dependencies") or [] if d in resources]
    return list(resources.values())


def run_policies(steps: list[dict[str, Any]], config: dict[str, Any] | None = None,
                 policies: list[Policy] | None = None) -> list[Violation]:
    """The pack over the `newState` of each step (gpucluster's own preview: every step creates)."""
    return run_policies_on_states([s["newState"] for s in steps if isinstance(s.get("newState"), dict)], config,
                                  policies)


def run_policies_on_states(all_states: list[dict[str, Any]], config: dict[str, Any] | None = None,
                           policies: list[Policy] | None = None) -> list[Violation]:
    """The pack over resource states (from preview_steps.steps_from_preview for a real preview)."""
    config = config or {}
    # By URN: stack rules see resources in the same order whatever order the steps came in.
    states = sorted((s for s in all_states if s.get("custom")), key=lambda s: s["urn"])
    # Props and options are read-only to the rules: build them once, not once per rule. The props proxy is
    # pulumi_policy's, built as it is read (components/offline/lazy_props.py): no copy of the document.
    props = {s["urn"]: lazy_props(s["inputs"]) for s in states}
    options = {s["urn"]: _options(s) for s in states}
    stack_resources: list[PolicyResource] | None = None
    violations: list[Violation] = []
    for policy in policies if policies is not None else ALL_POLICIES:
        level, values = _settings(policy, config)
        if level is EnforcementLevel.DISABLED:
            continue
        severity = policy.severity.value if policy.severity else "medium"

        def report(message: str, urn: str | None, lvl: str = level.value, p: Policy = policy, sev: str = severity) -> None:
            violations.append(Violation(p.name, p.description, sev, enforcement_severity(lvl), urn or "", message,
                                        p.remediation_steps or ""))

        def cannot_run(error: UnknownValueError, urn: str | None, p: Policy = policy) -> None:
            report(f"can't run policy {p.name!r} during preview: {error.message}", urn, EnforcementLevel.ADVISORY.value)

        def unreadable(error: Exception, urn: str | None, p: Policy = policy) -> None:
            # A value of an unexpected shape (hand-edited or from another tool): judged as a failure at the
            # policy's own level, so a mandatory rule that cannot read its input does not pass silently.
            detail = str(error)
            detail = detail if len(detail) <= 200 else detail[:200] + "..."  # errors can quote whole values
            report(f"policy {p.name!r} cannot read this resource's inputs ({type(error).__name__}: {detail})", urn)

        if isinstance(policy, ResourceValidationPolicy):
            for state in states:
                urn = state["urn"]
                args = ResourceValidationArgs(
                    resource_type=state["type"], props=props[urn], urn=urn, name=urn.rsplit("::", 1)[-1],
                    opts=options[urn], provider=None, config=values)
                try:
                    _call(lambda a=args, u=urn, pol=policy: pol.validate(a, lambda m, r=None, uu=u: report(m, r or uu)))
                except UnknownValueError as error:
                    cannot_run(error, urn)
                except _NotApplicableError:
                    continue
                except UNREADABLE as error:
                    unreadable(error, urn)
        elif isinstance(policy, StackValidationPolicy):
            stack_resources = stack_resources or _stack_resources(states, props)
            stack_args = StackValidationArgs(stack_resources, config=values)
            try:
                _call(lambda pol=policy, a=stack_args: pol.validate(a, lambda m, r=None: report(m, r)))
            except UnknownValueError as error:
                cannot_run(error, None)
            except _NotApplicableError:
                continue
            except UNREADABLE as error:
                unreadable(error, None)
    order = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    return sorted(violations, key=lambda v: (not v.mandatory, order.get(v.policy_severity, 9), v.source, v.path,
                                             v.message))
