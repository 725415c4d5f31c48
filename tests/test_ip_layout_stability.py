"""The IP plan never moves an existing block: pins are the layout's lock, growth stays in them or fails.

A subnet holding scale sets cannot change its prefix while NICs use it (azure-docs
articles/virtual-network/virtual-network-manage-subnet.md, "Change subnet settings": the address range can
change only when no resources are in the subnet); a moved block replaces every scale set in it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import SpecError
from gpucluster.planning.ip_plan import plan_ip
from gpucluster.planning.limits import effective_limits
from tests.support.stacks import STACKS, small_cluster, spec_of

# The entry limit is not what these tests check; passing a fixed limit needs a declared exception.
BIG_LIMIT = {"privateIpsPerVnet": {"value": 10_000_000, "note": "test", "azureException": {"reference": "layout test"}}}


def _plan(raw: dict[str, Any]):
    spec = spec_of(raw)
    return plan_ip(spec, effective_limits(spec))


def _prod_raw() -> dict[str, Any]:
    document = yaml.safe_load((STACKS / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    raw = copy.deepcopy(document["config"]["gpucluster:cluster"])
    raw["limits"] = {**raw.get("limits", {}), **BIG_LIMIT}  # the VNet limit is not what this tests
    return raw


PROD_POOLS = [p["name"] for p in _prod_raw()["pools"]]


@pytest.mark.parametrize("pool", PROD_POOLS)
def test_growing_any_prod_pool_by_20_percent_moves_no_block(pool: str) -> None:
    """prod pins every block, so growth stays in the pool's block or fails naming it: never a move. (That the
    shipped pools have room for 20% more is in the golden figures, ipPlan.blocks[].headroomMembers.)"""
    raw = _prod_raw()
    before = _plan(raw)
    index = next(i for i, entry in enumerate(raw["pools"]) if entry["name"] == pool)
    entry = raw["pools"][index]
    grown = -(-entry["count"] * 6 // 5)
    room = before.pool_block(pool).headroom_members
    entry["count"] = grown
    if not before.pool_block(pool).pinned:  # a pool added since the last pin: the summary asks to pin it
        pinned = {b.name: b.cidr for b in before.blocks if b.pinned}
        assert {name: _plan(raw).block(name).cidr for name in pinned} == pinned
    elif grown - (grown * 5 // 6) <= room:
        assert _plan(raw).pins == before.pins
    else:
        with pytest.raises(SpecError) as caught:
            _plan(raw)
        assert [p.path for p in caught.value.problems] == [f"cluster.pools[{index}].count"]


def test_adding_a_pool_to_prod_moves_nothing_and_places_the_new_block_in_free_space() -> None:
    raw = _prod_raw()
    before = _plan(raw).pins
    raw["pools"].insert(1, {"name": "a100", "kind": "gpu", "vmSize": "Standard_ND96asr_v4", "count": 400,
                            "podsPerNode": 32, "podAddresses": "prefixes"})
    after = _plan(raw)
    assert {k: v for k, v in after.pins.items() if k in before} == before
    assert not after.pool_block("a100").pinned


def test_reordering_zones_or_pools_moves_nothing_when_pinned() -> None:
    raw = _prod_raw()
    before = _plan(raw).pins
    raw["pools"].reverse()
    raw["zones"] = ["3", "1", "2"]
    assert _plan(raw).pins == before


def test_outgrown_pin_fails_naming_pool_room_and_fix() -> None:
    raw = _prod_raw()
    h100 = next(i for i, p in enumerate(raw["pools"]) if p["name"] == "h100")
    block = _plan(raw).pool_block("h100")
    fits = block.usable // block.ips_per_member
    raw["pools"][h100]["count"] = fits + 1
    with pytest.raises(SpecError) as caught:
        _plan(raw)
    [problem] = caught.value.problems
    assert problem.path == f"cluster.pools[{h100}].count"
    assert f"pinned block pool-h100 {block.cidr} holds {block.usable:,} ({fits:,} VMs)" in problem.message
    assert "new pool" in problem.message


def test_pin_is_honoured_without_the_spare() -> None:
    """The spare is for placing a new block; a pin needs only what the block holds to fit."""
    raw = small_cluster(network={"addressSpace": ["10.10.0.0/16"], "pinnedBlocks": {"pool-gpu": "10.10.128.0/19"}})
    raw["pools"][1]["count"] = 480  # 480 x 17 = 8,160 of 8,187 usable: 0.3% spare
    assert str(_plan(raw).pool_block("gpu").cidr) == "10.10.128.0/19"
    assert _plan(raw).pool_block("gpu").headroom_members == 1


def test_block_spare_is_a_setting() -> None:
    default = _plan(small_cluster()).pool_block("gpu")
    half = _plan(small_cluster(network={"addressSpace": ["10.10.0.0/16"], "blockSpare": 0.5})).pool_block("gpu")
    assert default.ips_needed <= 0.8 * default.usable  # default 20% (SCALE_SET_SUBNET_SPARE)
    assert half.ips_needed <= 0.5 * half.usable
    assert half.cidr.prefixlen < default.cidr.prefixlen


pool_st = st.builds(
    lambda i, count, pods: {"name": f"p{i}", "kind": "cpu", "vmSize": "Standard_D4s_v5", "count": count,
                            "podsPerNode": pods},
    st.integers(0, 10_000), st.integers(1, 600), st.integers(1, 60))


def _unique(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list({p["name"]: p for p in reversed(pools)}.values())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools=st.lists(pool_st, min_size=1, max_size=6), data=st.data())
def test_pinning_any_blocks_where_they_are_moves_nothing(pools, data) -> None:
    net = {"addressSpace": ["10.0.0.0/10"]}
    raw = small_cluster(pools=_unique(pools), network=net, limits=BIG_LIMIT)
    pins = _plan(raw).pins
    chosen = data.draw(st.lists(st.sampled_from(sorted(pins)), unique=True))
    pinned = small_cluster(pools=_unique(pools), limits=BIG_LIMIT,
                           network={**net, "pinnedBlocks": {k: pins[k] for k in chosen}})
    assert _plan(pinned).pins == pins


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools=st.lists(pool_st, min_size=1, max_size=6), data=st.data())
def test_with_pins_growth_never_moves_a_block_it_fits_or_fails_naming_the_pool(pools, data) -> None:
    pools = _unique(pools)
    net = {"addressSpace": ["10.0.0.0/10"]}
    pins = _plan(small_cluster(pools=pools, network=net, limits=BIG_LIMIT)).pins
    grown = copy.deepcopy(pools)
    index = data.draw(st.integers(0, len(grown) - 1))
    grown[index]["count"] = data.draw(st.integers(1, 4 * grown[index]["count"]))
    raw = small_cluster(pools=grown, network={**net, "pinnedBlocks": pins}, limits=BIG_LIMIT)
    try:
        after = _plan(raw)
    except SpecError as error:
        [problem] = error.problems
        assert problem.path == f"cluster.pools[{index}].count"
        assert f"pinned block pool-{grown[index]['name']}" in problem.message
        return
    assert after.pins == pins
