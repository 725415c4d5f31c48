"""Every dynamic resource and resource provider class under components/azure/, found by walking the package."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys

import pulumi.dynamic
from pulumi.dynamic import ResourceProvider

import gpucluster


def _component_classes() -> list[type]:
    for module in pkgutil.walk_packages(gpucluster.__path__, "gpucluster."):
        if ".scripts" not in module.name and module.name.startswith("gpucluster.azure"):
            importlib.import_module(module.name)
    found: list[type] = []
    todo: list[type] = [ResourceProvider, pulumi.dynamic.Resource]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("gpucluster."):
                found.append(sub)
    return found


def concrete_providers() -> set[type]:
    return {c for c in _component_classes() if issubclass(c, ResourceProvider)
            and c.create is not ResourceProvider.create}


def dynamic_resource_providers() -> dict[type, type]:
    """Each dynamic resource type under components/ -> the provider class its `provider` parameter takes."""
    found = {}
    for cls in _component_classes():
        if issubclass(cls, pulumi.dynamic.Resource):
            # `provider: XProvider | None = None`, a string under `from __future__ import annotations`
            hint = str(inspect.signature(cls.__init__).parameters["provider"].annotation)
            namespace = vars(sys.modules[cls.__module__])
            [provider] = [namespace[name.strip()] for name in hint.split("|") if name.strip() != "None"]
            found[cls] = provider
    return found
