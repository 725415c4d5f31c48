"""What the ARM preflight reads (the recorded resources) and what it reports (findings with their rule)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpucluster.catalog.availability import Availability
from gpucluster.catalog.vm_sizes import VmSize
from gpucluster.policies.rules.props import declared_api_version, resource_kind
from gpucluster.results import Severity


@dataclass(frozen=True)
class Resource:
    """One recorded custom resource: its URN, type and camelCase inputs, as in preview.json."""

    urn: str
    type: str
    """The azure-native type the rules judge it as (a node scale set's dynamic resource reads as the typed class)."""
    inputs: dict[str, Any]
    declared_type: str = ""
    """The type the program registered (`pulumi-python:dynamic:Resource` for node scale sets); "" when the same."""
    api_version: str | None = None
    """The api-version the resource declares (dynamic resources); None where the provider picks it."""

    @property
    def name(self) -> str:
        """The logical name (the URN's last part)."""
        return self.urn.rsplit("::", 1)[-1]

    @property
    def short_type(self) -> str:
        """`storage:StorageAccount` for `azure-native:storage:StorageAccount`."""
        return self.type.split(":", 1)[-1]


@dataclass(frozen=True)
class Finding:
    """What the ARM preflight says of one resource, in the vocabulary of components/results.py."""

    source: str
    """The preflight rule's id (components/preflight/rules.py)."""
    path: str
    """The resource's logical name."""
    field: str
    """The input path within the resource."""
    message: str
    """What is wrong and how to fix it, in one line."""
    severity: Severity = Severity.ERROR
    """An error fails the plan; a warning is a report row (what no public source settles)."""
    fix: str = ""

    @classmethod
    def warning(cls, source: str, path: str, field: str, message: str) -> Finding:
        return cls(source, path, field, message, Severity.WARNING)

    def __str__(self) -> str:
        return f"{self.path} {self.field}: {self.message} [preflight rule {self.source}]"


@dataclass(frozen=True)
class Context:
    """What the rules need to know beyond the resources: the stack's sizes, zones, limits and availability."""

    location: str
    sizes: dict[str, VmSize]
    region_zones: tuple[str, ...] | None
    availability: dict[str, Availability]
    max_single_placement_group: int
    max_large_scale_set: int
    max_ip_configurations_per_nic: int


@dataclass
class Preflight:
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)


def azure_resources(steps: Iterable[dict[str, Any]]) -> list[Resource]:
    """The azure-native custom resources of a preview's steps, and the dynamic resources that mirror one."""
    found = []
    for step in steps:
        state = step.get("newState") or {}
        declared = str(state.get("type", ""))
        inputs = dict(state.get("inputs") or {})
        typ = resource_kind(declared, inputs)
        if state.get("custom") and typ.startswith("azure-native:"):
            found.append(Resource(str(state.get("urn") or step.get("urn", "")), typ, inputs,
                                  declared if declared != typ else "", declared_api_version(declared, inputs)))
    return found


def listed(value: Any) -> list[Any]:
    """A field ARM takes as an array, as a list; anything else (a preview is data we did not write) as empty, so a
    rule never iterates a number. The shape itself is judged where ARM would refuse it."""
    return value if isinstance(value, list) else []


def dig(value: Any, *path: str | int) -> Any:
    """`value[path[0]][path[1]]...`, or None where a step is missing."""
    for key in path:
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and -len(value) <= key < len(value) else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return None
    return value
