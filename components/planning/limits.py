"""The Azure limits in force for a stack: the catalogue's defaults, raised where the stack says so.

An adjustable limit is raised by a note (the support request). A limit Azure documents as fixed is raised
only by a declared Azure exception (`azureException.reference`); a note alone is a plan error naming the
limit and where Azure says it is fixed. Lowering a limit (a stricter budget) needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.limits import DEFAULT_LIMITS, OVERRIDE_CEILINGS
from gpucluster.errors import Problem, SpecError
from gpucluster.spec import ClusterSpec, LimitOverride
from gpucluster.spec.limits import LimitsSpec


@dataclass(frozen=True)
class Limit:
    key: str
    value: int
    default: int
    description: str
    source: str
    note: str | None = None
    """The support note of a raised limit; None when the default is in force."""
    fixed: bool = False
    """Azure documents this limit as not adjustable."""
    exception: str | None = None
    """The reference of the Azure exception a stack declares to pass a fixed limit."""

    @property
    def past_fixed(self) -> bool:
        """The stack relies on an exception to a limit Azure documents as fixed."""
        return self.fixed and self.value > self.default

    @property
    def raised(self) -> bool:
        return self.value != self.default

    @property
    def override_path(self) -> str:
        return f"cluster.limits.{self.key}"


@dataclass(frozen=True)
class Limits:
    by_key: dict[str, Limit]

    def __getitem__(self, key: str) -> Limit:
        return self.by_key[key]

    def raised(self) -> list[Limit]:
        return [limit for limit in self.by_key.values() if limit.raised]


def effective_limits(spec: ClusterSpec) -> Limits:
    return limits_of(spec.limits)


def limits_of(limits: LimitsSpec) -> Limits:
    """Azure's limits with the overrides `limits` (a stack's `cluster.limits`) declares; `LimitsSpec()`: the defaults."""
    problems: list[Problem] = []
    by_key: dict[str, Limit] = {}
    for key, default in DEFAULT_LIMITS.items():
        override = _override(limits, key)
        value = override.value if override else default.value
        exception = override.azure_exception.reference if override and override.azure_exception else None
        ceiling = OVERRIDE_CEILINGS.get(key)
        if default.fixed and value > default.value and exception is None:
            problems.append(Problem(f"cluster.limits.{key}",
                                    f"Azure documents {default.description} ({default.value:,}) as fixed ({default.source}: "
                                    "no maximum limit column, not adjustable); a note cannot raise it. Stay within "
                                    f"{default.value:,}, or declare the exception Azure granted in writing under "
                                    f"cluster.limits.{key}.azureException.reference"))
        elif not default.fixed and ceiling is not None and value > ceiling:
            problems.append(Problem(f"cluster.limits.{key}.value",
                                    f"Azure does not raise this past {ceiling} (got {value}); lower it"))
        by_key[key] = Limit(key, value, default.value, default.description, default.source,
                            override.note if override else None, default.fixed, exception)
    if problems:
        raise SpecError(problems)
    return Limits(by_key)


def _override(limits: LimitsSpec, key: str) -> LimitOverride | None:
    for name, field in LimitsSpec.model_fields.items():
        if field.alias == key:
            value = getattr(limits, name)
            return value if isinstance(value, LimitOverride) else None
    raise KeyError(f"LimitsSpec has no field for catalogue limit {key}")
