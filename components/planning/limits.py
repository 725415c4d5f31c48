"""The Azure limits in force for a stack: the catalogue's defaults, raised where the stack says so."""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.limits import DEFAULT_LIMITS, OVERRIDE_CEILINGS
from components.errors import Problem, SpecError
from components.spec import ClusterSpec, LimitOverride
from components.spec.limits import LimitsSpec


@dataclass(frozen=True)
class Limit:
    key: str
    value: int
    default: int
    description: str
    source: str
    note: str | None = None
    """The support note of a raised limit; None when the default is in force."""

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
    problems: list[Problem] = []
    by_key: dict[str, Limit] = {}
    for key, default in DEFAULT_LIMITS.items():
        override = _override(spec.limits, key)
        value = override.value if override else default.value
        ceiling = OVERRIDE_CEILINGS.get(key)
        if ceiling is not None and value > ceiling:
            problems.append(Problem(f"cluster.limits.{key}.value",
                                    f"Azure does not raise this past {ceiling} (got {value}); lower it"))
        by_key[key] = Limit(key, value, default.value, default.description, default.source,
                            override.note if override else None)
    if problems:
        raise SpecError(problems)
    return Limits(by_key)


def _override(limits: LimitsSpec, key: str) -> LimitOverride | None:
    for name, field in LimitsSpec.model_fields.items():
        if field.alias == key:
            value = getattr(limits, name)
            return value if isinstance(value, LimitOverride) else None
    raise KeyError(f"LimitsSpec has no field for catalogue limit {key}")
