"""Mutations of the gb300 preview that break one ARM preflight rule each, the rules only a rack stack can break."""

from __future__ import annotations

from typing import Any

Steps = list[dict[str, Any]]


def inputs_of(steps: Steps, name: str) -> dict[str, Any]:
    return next(s["newState"]["inputs"] for s in steps if s["newState"]["urn"].endswith("::" + name))


def _spg(steps: Steps) -> None:
    inputs_of(steps, "gb300-z1-g00r00")["singlePlacementGroup"] = True


def _rack_too_big(steps: Steps) -> None:
    inputs_of(steps, "gb300-z1-g00r00")["sku"]["capacity"] = 19


def _block_not_whole_racks(steps: Steps) -> None:
    inputs_of(steps, "gb300-ig1-icb")["sku"]["capacity"] = 40


def _block_too_small(steps: Steps) -> None:
    inputs_of(steps, "gb300-ig1-icb")["sku"]["capacity"] = 18


def _other_size(steps: Steps) -> None:
    inputs_of(steps, "gb300-ig1-icb")["sku"]["name"] = "Standard_ND128isr_NDR_GB200_v6"


def _other_zone(steps: Steps) -> None:
    inputs_of(steps, "gb300-ig1-icb")["zones"] = ["2"]


RACK_MUTATIONS: list[tuple[Any, str]] = [
    (_spg, "interconnect-single-placement-group"),
    (_rack_too_big, "interconnect-subgroup-capacity"),
    (_block_not_whole_racks, "interconnect-block-racks"),
    (_block_too_small, "interconnect-block-capacity"),
    (_other_size, "interconnect-block-size"),
    (_other_zone, "interconnect-block-zone"),
]
"""Rules only a rack stack can break (prod has no racks): tests/test_racks.py runs them, tests/test_preflight.py
counts them as broken."""
