"""ARM resource ids the stack is given (an existing VNet), read into the parts a resource declaration takes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VnetRef:
    subscription: str
    resource_group: str
    name: str


def parse_vnet_id(vnet_id: str) -> VnetRef:
    """`/subscriptions/<s>/resourceGroups/<g>/providers/Microsoft.Network/virtualNetworks/<n>`, as
    components/spec/consumer_rules.py `check_vnet_id` admits it (ARM's segment names are case-insensitive)."""
    parts = vnet_id.strip("/").split("/")
    keys = [part.lower() for part in parts[0::2]]
    if keys != ["subscriptions", "resourcegroups", "providers", "virtualnetworks"] or parts[5].lower() != \
            "microsoft.network":
        raise ValueError(f"not a VNet resource id: {vnet_id}")
    return VnetRef(parts[1], parts[3], parts[7])
