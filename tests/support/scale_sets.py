"""Recognising scale sets in recorded states whichever way they are declared: node scale sets are dynamic
resources naming their ARM type (components/azure/scale_set/routes.py), the API-server set is azure-native's typed class."""

from __future__ import annotations

from typing import Any

from gpucluster.policies.rules.props import SCALE_SET, resource_kind


def is_scale_set(state: dict[str, Any]) -> bool:
    """A recorded state (preview newState, or a Registration as `type` and `inputs`) that is a scale set."""
    return resource_kind(str(state["type"]), state.get("inputs") or {}) == SCALE_SET


def as_typed_class(state: dict[str, Any]) -> dict[str, Any]:
    """The same scale set declared through azure-native's typed class (what the program declared before)."""
    state["type"] = SCALE_SET
    for key in ("armType", "apiVersion", "subscriptionId", "__provider"):
        state["inputs"].pop(key, None)
    state["urn"] = state["urn"].replace("pulumi-python:dynamic:Resource", SCALE_SET)
    return state
