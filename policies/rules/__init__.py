"""Every rule of the pack, as importable policy objects (tested by calling `validate` directly)."""

from pulumi_policy import Policy

from .safety import POLICIES as SAFETY_POLICIES

ALL_POLICIES: list[Policy] = [*SAFETY_POLICIES]

__all__ = ["ALL_POLICIES"]
