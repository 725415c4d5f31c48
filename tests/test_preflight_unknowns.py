"""The ARM preflight judges what a preview knows, and leaves computed (unknown) values to apply.

`pulumi preview --json` writes an input that is computed at apply as the sentinel
04da6b54-80e4-46f7-96ec-b56ff0331ba9 (the offline engine as "[unknown]"); a zones list that is unknown is not a
string of zone names to iterate character by character.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.catalog.preview_values import UNKNOWN, UNKNOWN_MARK
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.preflight import context_for, preflight
from tests.support.stacks import stack_spec

VMSS = "azure-native:compute:VirtualMachineScaleSet"
LB = "azure-native:network:LoadBalancer"


def _step(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    urn = f"urn:pulumi:dev::gpucluster::{typ}::{name}"
    return {"op": "create", "urn": urn, "newState": {"urn": urn, "type": typ, "custom": True, "inputs": inputs}}


def _zone_findings(zones: Any, frontend_zones: Any) -> list[str]:
    steps = [_step(VMSS, "t4-z1-00", {"location": "eastus2", "zones": zones,
                                      "sku": {"name": "Standard_NC4as_T4_v3", "capacity": 1}}),
             _step(LB, "dev-lb", {"location": "eastus2",
                                  "frontendIPConfigurations": [{"name": "fe", "zones": frontend_zones}]})]
    result = preflight(steps, context_for(plan_cluster(stack_spec("dev"))))
    return [str(f) for f in result.errors if f.source == "zones"]


@pytest.mark.parametrize("unknown", [UNKNOWN, UNKNOWN_MARK])
def test_an_unknown_zones_value_is_not_split_into_characters(unknown: str) -> None:
    assert _zone_findings(unknown, unknown) == []
    assert _zone_findings(["1", unknown], [unknown]) == []  # an unknown entry in a known list


def test_a_known_zone_the_region_lacks_is_still_refused() -> None:
    found = _zone_findings(["1", "4"], ["5"])
    assert len(found) == 2 and "zone '4' does not exist in eastus2" in found[0] and "zone '5'" in found[1]
