"""The IP planner: disjoint blocks inside the address space, stable when pools are appended, limits."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import SpecError
from gpucluster.planning.ip_plan import RDMA, plan_ip, prefix_for
from gpucluster.planning.limits import effective_limits
from tests.support.stacks import small_cluster, small_spec, spec_of


def plan(raw: dict[str, Any]):
    spec = spec_of(raw)
    return plan_ip(spec, effective_limits(spec))


def problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        plan(raw)
    return [str(p) for p in caught.value.problems]


pool_st = st.builds(
    lambda i, count, pods, mode: {"name": f"p{i}", "kind": "cpu", "vmSize": "Standard_D4s_v5", "count": count,
                                  "podsPerNode": pods, "podAddresses": mode},
    st.integers(0, 10_000), st.integers(1, 400), st.integers(1, 60), st.sampled_from(["secondaryIps", "prefixes"]))
# Allocation properties are checked past Azure's fixed entry limit: only a declared exception lets a plan do that.
PAST_ENTRY_LIMIT = {"privateIpsPerVnet": {"value": 10_000_000, "note": "test",
                                          "azureException": {"reference": "allocation property test"}}}
spaces_st = st.sampled_from([["10.0.0.0/12"], ["10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16"], ["172.0.0.0/13"],
                             ["192.168.0.0/16"]])


def _unique(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pools with distinct names, all in the first pool's podAddresses mode (Cilium's IPAM mode is per cluster)."""
    seen: dict[str, dict[str, Any]] = {}
    for pool in pools:
        seen.setdefault(pool["name"], {**pool, "podAddresses": pools[0]["podAddresses"]})
    return list(seen.values())


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(pools=st.lists(pool_st, min_size=1, max_size=8), spaces=spaces_st)
def test_blocks_are_disjoint_inside_the_space_and_clear_of_rdma(pools, spaces) -> None:
    raw = small_cluster(pools=_unique(pools), network={"addressSpace": spaces, "serviceCidr": "100.64.0.0/16"},
                        limits=PAST_ENTRY_LIMIT)
    try:
        result = plan(raw)
    except SpecError as error:
        assert all("none is free" in p.message for p in error.problems)
        return
    nets = [b.cidr for b in result.blocks]
    for i, a in enumerate(nets):
        assert any(a.subnet_of(IPv4Network(s)) for s in spaces)
        assert not a.overlaps(RDMA)
        assert all(not a.overlaps(b) for b in nets[i + 1:])
    for block in result.blocks:
        assert block.ips_needed <= 0.8 * block.usable + 1
        if block.blocks_per_member:  # a prefix-mode subnet holds whole /28s: it is a /27 or larger
            assert block.cidr.prefixlen <= 27 and block.headroom_ips >= 0
    assert result.capacity.pod_ip_capacity >= result.capacity.pod_ips_needed


@settings(max_examples=100)
@given(pools=st.lists(pool_st, min_size=2, max_size=8))
def test_appending_a_pool_moves_no_block(pools) -> None:
    pools = _unique(pools)
    net = {"addressSpace": ["10.0.0.0/10"]}
    limits = PAST_ENTRY_LIMIT
    before = plan(small_cluster(pools=pools[:-1], network=net, limits=limits))
    after = plan(small_cluster(pools=pools, network=net, limits=limits))
    for block in before.blocks:
        assert after.block(block.name).cidr == block.cidr


def test_growing_a_pool_within_its_spare_room_moves_nothing() -> None:
    base = small_cluster()
    grown = small_cluster()
    grown["pools"][1]["count"] = 160
    assert [b.cidr for b in plan(base).blocks] == [b.cidr for b in plan(grown).blocks]


def test_prefix_keeps_twenty_percent_spare() -> None:
    assert prefix_for(100) == 24  # 100 / 0.8 + 5 reserved = 130 addresses -> 256
    assert prefix_for(1) == 29


def test_address_space_overlapping_rdma_is_refused() -> None:
    lines = problems(small_cluster(network={"addressSpace": ["172.16.0.0/12"]}))
    assert lines[0].startswith("cluster.network.addressSpace[0]: 172.16.0.0/12 overlaps 172.16.0.0/16")


def test_overlapping_address_spaces_are_refused() -> None:
    lines = problems(small_cluster(network={"addressSpace": ["10.0.0.0/16", "10.0.128.0/17"]}))
    assert lines == ["cluster.network.addressSpace[1]: 10.0.128.0/17 overlaps addressSpace[0] (10.0.0.0/16); "
                     "address spaces must be disjoint"]


def test_service_cidr_inside_vnet_is_refused() -> None:
    lines = problems(small_cluster(network={"addressSpace": ["10.0.0.0/16"], "serviceCidr": "10.0.128.0/20"}))
    assert lines[0].startswith("cluster.network.serviceCidr: 10.0.128.0/20 overlaps addressSpace[0]")


def test_pool_that_does_not_fit_names_the_pool() -> None:
    raw = small_cluster(network={"addressSpace": ["10.0.0.0/20"]})
    lines = problems(raw)
    assert lines[0].startswith("cluster.pools[1]: needs a /20 (2550 IPs plus 20% spare) and none is free")


def test_more_pods_than_a_nic_holds() -> None:
    raw = small_cluster(limits={"privateIpsPerNic": {"value": 64, "note": "a region with a lower limit"}})
    raw["pools"][0]["podsPerNode"] = 64
    assert problems(raw)[0].startswith("cluster.pools[0].podsPerNode: 64 pods need 65 IP configurations on one NIC")


def test_vnet_entry_limit_is_fixed_and_names_prefix_mode() -> None:
    """Past 65,536 entries the fix is /28 blocks, never a raise: Azure documents the limit as fixed
    (MicrosoftDocs/azure-docs includes/azure-virtual-network-limits.md)."""
    raw = small_cluster(network={"addressSpace": ["10.0.0.0/12"]})
    raw["pools"][1]["count"] = 3000
    raw["pools"][1]["podsPerNode"] = 30
    [line] = problems(raw)
    assert "93,100 private address entries per virtual network" in line and "the limit is 65,536" in line
    assert "includes/azure-virtual-network-limits.md" in line and "podAddresses: prefixes" in line
    raw["limits"] = {"privateIpsPerVnet": {"value": 100_000, "note": "ticket 1"}}
    [line] = problems(raw)
    assert line.startswith("cluster.limits.privateIpsPerVnet: Azure documents private address entries per virtual "
                           "network (an IP configuration or a /28 block each) (65,536) as fixed (azure-docs "
                           "includes/azure-virtual-network-limits.md")
    for pool in raw["pools"]:
        pool["podAddresses"] = "prefixes"
    del raw["limits"]
    # 3,000 nodes x (1 + 2 blocks) + 3 system nodes x (1 + 2 blocks for 30 pods) + 3 API servers x (1 + 4 pod
    # addresses, docs/ip-plan.md) + the frontend + 3 etcd members
    assert plan(raw).capacity.vnet_entries == 3_000 * 3 + 3 * 3 + 3 * 5 + 1 + 3


def test_pools_share_one_pod_address_mode() -> None:
    """Cilium runs one IPAM mode per cluster (azure for secondary IPs, crd for /28 blocks)."""
    raw = small_cluster()
    raw["pools"][1]["podAddresses"] = "prefixes"
    [line] = problems(raw)
    assert line.startswith("cluster.pools[1].podAddresses: is prefixes but pool system uses secondaryIps")


def test_a_declared_exception_passes_a_fixed_limit() -> None:
    raw = small_cluster(network={"addressSpace": ["10.0.0.0/12"]})
    raw["pools"][1]["count"] = 3000
    raw["limits"] = {"privateIpsPerVnet": {"value": 100_000, "note": "granted",
                                           "azureException": {"reference": "case 2611220010001"}}}
    limit = effective_limits(spec_of(raw))["privateIpsPerVnet"]
    assert limit.past_fixed and limit.exception == "case 2611220010001"
    assert plan(raw).capacity.private_ip_limit == 100_000


def test_pinned_block_stays_and_unknown_pin_is_refused() -> None:
    raw = small_cluster(network={"addressSpace": ["10.10.0.0/16"], "pinnedBlocks": {"pool-gpu": "10.10.128.0/18"}})
    assert str(plan(raw).pool_block("gpu").cidr) == "10.10.128.0/18"
    raw["network"]["pinnedBlocks"] = {"pool-nope": "10.10.128.0/18"}
    assert problems(raw)[0].startswith("cluster.network.pinnedBlocks.pool-nope: no block named")


def test_dns_ip_is_the_tenth_service_address() -> None:
    assert str(plan(small_cluster()).dns_service_ip) == "192.168.0.10"


def test_prod_blocks_sit_at_their_pins(prod_spec) -> None:
    """prod's layout is locked by its pins (the CIDRs themselves are in tests/golden/stacks.json)."""
    result = plan_ip(prod_spec, effective_limits(prod_spec))
    for name, cidr in prod_spec.network.pinned_blocks.items():
        assert result.block(name).cidr == cidr and result.block(name).pinned
    assert result.capacity.pod_ip_capacity >= result.capacity.pod_ips_needed
    assert result.capacity.headroom > 0


def test_small_spec_plans() -> None:
    spec = small_spec()
    assert plan_ip(spec, effective_limits(spec)).capacity.nodes == 153
