"""The policy pack's rack-level failure-domain rules (policies/rules/racks.py) over the real gb300 preview: it
passes as shipped, and breaking a rule's property on purpose makes that rule fire on the broken resource. prod has
no racks, so these mutations are gb300's (tests/support/policy_mutations.py; tests/test_policy_mutations.py counts them)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.policy_runner import run_policies
from gpucluster.offline.preview import preview_document
from tests.support.policy_mutations import (
    GANG,
    RACK_POLICY_MUTATIONS,
    SPARE,
    State,
    Steps,
    flavor_on_the_zone_topology,
    flavor_without_topology,
    quota_into_the_spare_racks,
)


@pytest.fixture(scope="module")
def gb300_steps(gb300_run: ProgramRun) -> Steps:
    return preview_document(gb300_run)["steps"]














def test_gb300_passes_the_rack_rules(gb300_steps: Steps) -> None:
    assert [v for v in run_policies(gb300_steps) if v.source in (GANG, SPARE)] == []


@pytest.mark.parametrize(("mutate", "policy"), RACK_POLICY_MUTATIONS, ids=[m.__name__ for m, _ in RACK_POLICY_MUTATIONS])
def test_one_broken_rack_property_is_caught(gb300_steps: Steps, mutate: Callable[[Steps], State], policy: str) -> None:
    steps = copy.deepcopy(gb300_steps)
    broken = mutate(steps)
    caught = [v for v in run_policies(steps) if v.source == policy and v.mandatory]
    assert caught and broken["urn"] in {v.path for v in caught}, caught


def test_the_spare_rule_names_the_figures(gb300_steps: Steps) -> None:
    steps = copy.deepcopy(gb300_steps)
    quota_into_the_spare_racks(steps)
    [violation] = [v for v in run_policies(steps) if v.source == SPARE]
    assert ("nominal nvidia.com/gpu quota on gb300 adds up to 288 (frontier 288) of the 432 GPUs in zone(s) 1, 2, 3; "
            "1 spare rack(s) of 72 GPUs per zone leave 216 for quota") in violation.message


def test_a_flavor_per_rack_needs_no_rack_level_and_adds_spares_up_per_zone(gb300_steps: Steps) -> None:
    """One flavor pinned to one rack cannot split a gang; its quota counts against its zone's spare racks."""
    steps = copy.deepcopy(gb300_steps)
    flavor = flavor_without_topology(steps)
    flavor["inputs"]["spec"]["nodeLabels"]["gpucluster.io/rack"] = "gb300-z1-g00r00"
    assert [v for v in run_policies(steps) if v.source == GANG] == []
    # 216 GPUs of quota on one 72-GPU rack of zone 1, whose spare is one of its two racks
    caught = [v for v in run_policies(steps) if v.source == SPARE]
    assert caught and "of the 72 GPUs in zone(s) 1" in caught[0].message


def test_a_reason_in_the_pack_config_lets_gangs_span_racks(gb300_steps: Steps) -> None:
    steps = copy.deepcopy(gb300_steps)
    flavor_on_the_zone_topology(steps)
    config = {GANG: {"rackSpanReasons": {"gb300": "gangs of 144 GPUs span two racks of one group by design"}}}
    assert [v for v in run_policies(steps, config) if v.source == GANG] == []
    assert [v for v in run_policies(steps, {GANG: {"rackSpanReasons": {"gb300": " "}}}) if v.source == GANG]
