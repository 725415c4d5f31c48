"""Small readers over policy props (engine camelCase names, possibly wrapped in proxies)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MACHINE_TYPES = (
    "azure-native:compute:VirtualMachineScaleSet",
    "azure-native:compute:VirtualMachine",
)


def get(props: Any, *path: str | int, default: Any = None) -> Any:
    """props["a"]["b"][0]... or `default` when any step is missing."""
    current = props
    for step in path:
        if isinstance(step, int):
            if not isinstance(current, Sequence) or isinstance(current, str) or step >= len(current):
                return default
            current = current[step]
        else:
            if not isinstance(current, Mapping) or step not in current:
                return default
            current = current[step]
    return current


def items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def nic_configs(props: Any) -> list[Any]:
    """The NIC configurations of a scale set's VM profile."""
    return items(get(props, "virtualMachineProfile", "networkProfile", "networkInterfaceConfigurations"))
