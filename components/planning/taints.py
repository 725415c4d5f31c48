"""A taint as nodes register with it (kubelet `registerWithTaints`): a plan type the boot text renders."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeTaint:
    key: str
    value: str
    effect: str
