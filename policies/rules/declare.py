"""Rules as plain functions: a decorator adds the metadata and turns them into pulumi_policy objects.

Every rule is mandatory (the pack's purpose is to stop an unsafe `pulumi up`); a stack can lower a rule
to advisory or change its thresholds in its policy config (`policies/config/<stack>.json`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from .props import resource_kind

Config = Mapping[str, Any]
ResourceCheck = Callable[[ResourceValidationArgs, ReportViolation, Config], None]
StackCheck = Callable[[StackValidationArgs, ReportViolation, Config], None]


def _schema(config: dict[str, dict[str, Any]] | None) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties=config) if config else None


def _settings(config: dict[str, dict[str, Any]] | None, given: Mapping[str, Any]) -> dict[str, Any]:
    """Schema defaults overlaid with the pack config (the CLI may or may not have filled the defaults)."""
    values = {key: spec["default"] for key, spec in (config or {}).items() if "default" in spec}
    values.update(given)
    return values


def resource_rule(name: str, *, description: str, severity: Severity, remediation: str,
                  types: tuple[str, ...] = (), config: dict[str, dict[str, Any]] | None = None,
                  ) -> Callable[[ResourceCheck], ResourceValidationPolicy]:
    def wrap(check: ResourceCheck) -> ResourceValidationPolicy:
        def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
            if not types or resource_kind(args.resource_type, args.props) in types:
                check(args, report, _settings(config, args.get_config()))

        return ResourceValidationPolicy(
            name=name, description=description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY,
            config_schema=_schema(config), severity=severity, remediation_steps=remediation)
    return wrap


def stack_rule(name: str, *, description: str, severity: Severity, remediation: str,
               config: dict[str, dict[str, Any]] | None = None) -> Callable[[StackCheck], StackValidationPolicy]:
    def wrap(check: StackCheck) -> StackValidationPolicy:
        def validate(args: StackValidationArgs, report: ReportViolation) -> None:
            check(args, report, _settings(config, args.get_config()))

        return StackValidationPolicy(
            name=name, description=description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY,
            config_schema=_schema(config), severity=severity, remediation_steps=remediation)
    return wrap
