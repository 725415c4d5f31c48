"""Control-plane sizing and quorum placement."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.errors import SpecError
from components.planning.control_plane import GIB, api_heap_gb, place_members, plan_control_plane, quota_backend_bytes
from components.spec import parse_cluster
from tests.conftest import small_cluster


def test_prod_sizes_and_zone_loss(prod_spec) -> None:
    plan = plan_control_plane(prod_spec, 7_500)
    assert plan.api.count == 5 and plan.api.size.memory_gib >= 70 * 1.5 / 1.074
    assert [plan.api.in_zone(z) for z in prod_spec.zones] == [2, 2, 1]
    assert plan.etcd.quota_backend_bytes == 8 * GIB and plan.etcd.data_on_nvme
    assert plan.events is not None and len(plan.events.members) == 3
    assert all(plan.etcd.survives_loss_of(z) and plan.events.survives_loss_of(z) for z in prod_spec.zones)


def test_heap_grows_linearly_and_quota_steps() -> None:
    assert api_heap_gb(7_500) == pytest.approx(70)
    assert api_heap_gb(3_750) == pytest.approx(35)
    assert api_heap_gb(10) == 4
    assert [quota_backend_bytes(n) // GIB for n in (50, 500, 5000)] == [2, 4, 8]


@given(members=st.sampled_from([3, 5, 7, 9]), zones=st.integers(3, 5))
def test_round_robin_never_gives_a_zone_a_quorum_with_three_or_more_zones(members: int, zones: int) -> None:
    placed = place_members("etcd", members, tuple(str(z) for z in range(1, zones + 1)))
    quorum = members // 2 + 1
    assert all(sum(1 for m in placed if m.zone == str(z)) < quorum for z in range(1, zones + 1))


def _problems(cp: dict[str, Any], zones: list[str] | None = None) -> list[str]:
    spec = parse_cluster(small_cluster(controlPlane=cp, **({"zones": zones} if zones else {})))
    with pytest.raises(SpecError) as caught:
        plan_control_plane(spec, 153)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("members", [1, 2, 4])
def test_even_or_small_etcd_is_refused(members: int) -> None:
    [line] = _problems({"etcd": {"members": members}, "eventsEtcd": None})
    assert line.startswith(f"cluster.controlPlane.etcd.members: {members} members: etcd needs an odd number")


def test_two_zones_put_a_quorum_in_one_unless_overridden() -> None:
    [line] = _problems({"etcd": {"members": 3}, "eventsEtcd": None}, zones=["1", "2"])
    assert "put 2 in zone 1, a quorum of 2" in line and "quorumOverrideReason" in line
    spec = parse_cluster(small_cluster(zones=["1", "2"], controlPlane={
        "etcd": {"members": 3, "quorumOverrideReason": "region has two zones"}, "eventsEtcd": None}))
    plan = plan_control_plane(spec, 153)
    assert not plan.etcd.survives_loss_of("1")


def test_api_server_override_too_small_shows_the_need() -> None:
    spec = parse_cluster(small_cluster(controlPlane={"apiServers": {"vmSize": "Standard_D4s_v5"}, "eventsEtcd": None}))
    with pytest.raises(SpecError) as caught:
        plan_control_plane(spec, 7_500)
    [line] = [str(p) for p in caught.value.problems]
    assert line.startswith("cluster.controlPlane.apiServers.vmSize: Standard_D4s_v5 (16 GiB, 4 vCPUs) is too small: "
                           "API servers of 7,500 nodes need 98 GiB")


def test_etcd_without_nvme_uses_a_guaranteed_iops_disk() -> None:
    spec = parse_cluster(small_cluster(controlPlane={"etcd": {"vmSize": "Standard_D16ds_v5"}, "eventsEtcd": None}))
    plan = plan_control_plane(spec, 153)
    assert not plan.etcd.data_on_nvme and "Premium SSD v2" in plan.etcd.reasoning


def test_etcd_override_too_small_shows_the_need() -> None:
    spec = parse_cluster(small_cluster(controlPlane={"etcd": {"vmSize": "Standard_D4s_v5"}, "eventsEtcd": None}))
    with pytest.raises(SpecError, match=r"etcd.vmSize: Standard_D4s_v5 \(16 GiB, 4 vCPUs\) is too small: etcd with a 8 GiB"):
        plan_control_plane(spec, 2_000)


def test_scale_flags_are_part_of_the_plan(prod_spec) -> None:
    flags = plan_control_plane(prod_spec, 7_500).api.flags
    assert (flags.max_requests_inflight, flags.max_mutating_requests_inflight) == (1_500, 750)
