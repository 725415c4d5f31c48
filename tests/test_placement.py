"""Placement: pools -> scale sets. Property tests over sizes, spread and stability when a pool grows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.catalog.vm_sizes import CATALOG, SUPPORTED_GPU_VENDORS
from gpucluster.errors import SpecError
from gpucluster.offline.policy_runner import run_policies
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.limits import effective_limits
from gpucluster.planning.placement import GPU_ZONE_SHARE, PoolPlan, infiniband_domains, plan_pools, split_pool
from gpucluster.policies.rules import ALL_POLICIES
from gpucluster.vocabulary import AUTOSCALER_GPUS_TAG, INFINIBAND_TAG, POOL_TAG, ROLE_TAG
from tests.support.stacks import plan_stack, small_cluster, spec_of

PLACEMENT_RULES = [p for p in ALL_POLICIES if p.name.endswith(("-gpu-zone-share", "-infiniband-zone-loss"))]

ZONES = st.sampled_from([("1",), ("1", "2"), ("1", "2", "3")])


@given(count=st.integers(1, 5000), zones=ZONES, max_per_set=st.sampled_from([100, 300, 1000]), ib=st.booleans())
def test_split_sizes_and_spread(count: int, zones: tuple[str, ...], max_per_set: int, ib: bool) -> None:
    sets = split_pool("p", count, zones, max_per_set, ib)
    assert sum(s.capacity for s in sets) == count
    assert all(1 <= s.capacity <= max_per_set for s in sets)
    assert all(s.single_placement_group is ib for s in sets)
    assert len({s.name for s in sets}) == len(sets)
    per_zone = [sum(1 for s in sets if s.zone == z) for z in zones]
    assert max(per_zone) - min(per_zone) <= 1  # a zone holds at most its share plus one scale set
    assert max(s.capacity for s in sets) - min(s.capacity for s in sets) <= 1


@given(count=st.integers(1, 3000), extra=st.integers(1, 3000), zones=ZONES)
def test_growing_an_infiniband_pool_only_appends(count: int, extra: int, zones: tuple[str, ...]) -> None:
    before = [s.name for s in split_pool("p", count, zones, 100, True)]
    after = [s.name for s in split_pool("p", count + extra, zones, 100, True)]
    assert after[: len(before)] == before


def test_prod_gpu_pool_uses_the_fewest_domains_of_at_most_100(prod_spec) -> None:
    pools = {p.name: p for p in plan_pools(prod_spec, effective_limits(prod_spec))}
    h100 = pools["h100"]
    assert len(h100.scale_sets) == -(-h100.spec.count // 100) and h100.gpus == h100.spec.count * 8
    assert all(s.capacity <= 100 and s.single_placement_group for s in h100.scale_sets)
    assert sum(p.nodes for p in pools.values()) == sum(p.count for p in prod_spec.pools)
    gpus_by_zone = [h100.nodes_in_zone(z) * 8 for z in prod_spec.zones]
    assert max(gpus_by_zone) - min(gpus_by_zone) <= 100 * 8
    assert h100.scale_sets[0].name == "h100-z1-00" and h100.scale_sets[1].name == "h100-z2-00"


def test_raised_domain_limit_gives_bigger_domains() -> None:
    # a new stack: the domains the default limit would give do not exist, and the stack says so
    raw = small_cluster(limits={"vmsPerInfinibandDomain": {"value": 300, "note": "ticket"}},
                        acknowledgeDeletions={"infinibandDomains": ["gpu-*"]})
    raw["pools"][1]["count"] = 900
    spec = spec_of(raw)
    gpu = plan_pools(spec, effective_limits(spec))[1]
    assert [s.capacity for s in gpu.scale_sets] == [300, 300, 300] and gpu.max_per_scale_set == 300


def _gpu_steps(pools: tuple[PoolPlan, ...]) -> list[dict[str, Any]]:
    """Each scale set as the pack sees it: its zone, capacity, role, pool, InfiniBand and GPU tags."""
    steps = []
    for pool in pools:
        for s in pool.scale_sets:
            urn = f"urn:pulumi:test::gpucluster::azure-native:compute:VirtualMachineScaleSet::{s.name}"
            tags = {ROLE_TAG: pool.spec.kind.value, POOL_TAG: pool.name, INFINIBAND_TAG: str(s.infiniband).lower(),
                    AUTOSCALER_GPUS_TAG: str(pool.size.gpus)}
            inputs = {"zones": [s.zone], "sku": {"name": pool.size.name, "capacity": s.capacity}, "tags": tags}
            steps.append({"op": "create", "urn": urn, "newState": {
                "urn": urn, "type": "azure-native:compute:VirtualMachineScaleSet", "custom": True, "inputs": inputs}})
    return steps


@settings(max_examples=300, deadline=None)
@given(count=st.integers(1, 4000), zones=ZONES, max_per_set=st.sampled_from([100, 200, 300]))
def test_every_infiniband_pool_the_planner_accepts_passes_the_zone_rules(count: int, zones: tuple[str, ...],
                                                                         max_per_set: int) -> None:
    """The planner's own placement passes the pack's failure-domain rules (gpu-zone-share, infiniband-zone-loss)
    at their defaults, with zoneCount the zones the pool spans, as their remediation says. 200 H100 VMs over 3
    zones were 2 domains in zones 1 and 2, each holding 50% of the GPUs."""
    raw = small_cluster(zones=list(zones), limits={"vmsPerInfinibandDomain": {"value": max_per_set, "note": "ticket"}})
    raw["pools"][1]["count"] = count
    spec = spec_of(raw)
    try:
        pools = plan_pools(spec, effective_limits(spec))
    except SpecError:
        return  # not a pool the planner accepts
    config = {"all": "mandatory"} | {rule.name: {"zoneCount": len(zones)} for rule in PLACEMENT_RULES}
    assert [v.message for v in run_policies(_gpu_steps(pools), config, PLACEMENT_RULES)] == []


@pytest.mark.parametrize(("count", "domains"), [(200, [67, 67, 66]), (650, [82, 82, 81, 81, 81, 81, 81, 81]),
                                                (3125, [98] * 21 + [97] * 11)])
def test_the_fewest_domains_that_keep_each_zone_within_its_share(count: int, domains: list[int]) -> None:
    sets = split_pool("h100", count, ("1", "2", "3"), 100, True)
    assert [s.capacity for s in sets] == domains  # prod's 3,125 keep their 32 domains
    assert infiniband_domains(count, 3, 100) == len(domains)


def problems(raw: dict[str, Any]) -> list[str]:
    spec = spec_of(raw)
    with pytest.raises(SpecError) as caught:
        plan_pools(spec, effective_limits(spec))
    return [str(p) for p in caught.value.problems]


def _with_pool(**changes: Any) -> dict[str, Any]:
    raw = small_cluster()
    raw["pools"][1].update(changes)
    return raw


def test_unknown_size() -> None:
    [line] = problems(_with_pool(vmSize="Standard_ND96isr_H100_v9"))
    assert line.startswith("cluster.pools[1].vmSize: unknown VM size 'Standard_ND96isr_H100_v9'")
    assert "cluster.vmSizes" in line


MI300X = {"vcpus": 96, "memoryGib": 1850, "gpus": 8, "gpuModel": "AMD Instinct MI300X", "infiniband": True,
          "maxNics": 8, "quotaFamily": "standardNDISv5MI300XFamily", "source": "size page"}
"""ND MI300X v5: 8 AMD GPUs (azure-compute-docs sizes/gpu-accelerated/ndmi300xv5-series.md)."""


def _with_custom_size(**fields: Any) -> dict[str, Any]:
    raw = _with_pool(vmSize="Standard_ND96isr_MI300X_v5")
    raw["vmSizes"] = {"Standard_ND96isr_MI300X_v5": MI300X | fields}
    return raw


def test_custom_size_is_accepted() -> None:
    spec = spec_of(_with_custom_size(gpuModel="H100-80GB-HBM3", gpuVendor="nvidia"))
    assert plan_pools(spec, effective_limits(spec))[1].gpus == 1200


@pytest.mark.parametrize(("fields", "line"), [
    ({"gpuVendor": "amd"}, "cluster.vmSizes.Standard_ND96isr_MI300X_v5.gpuVendor: amd GPUs are not supported yet: "
                           "the nodes run NVIDIA's driver, device plugin and DCGM (docs/images.md); supported: nvidia"),
    ({}, "cluster.vmSizes.Standard_ND96isr_MI300X_v5.gpuVendor: a size with GPUs names their vendor: add gpuVendor "
         "(nvidia)"),
    ({"gpus": 0, "gpuVendor": "nvidia"}, "cluster.vmSizes.Standard_ND96isr_MI300X_v5.gpuVendor: a size without GPUs "
                                         "has no GPU vendor: remove gpuVendor or set gpus"),
])
def test_a_gpu_size_of_a_vendor_the_library_does_not_run_is_refused(fields: dict[str, Any], line: str) -> None:
    """An AMD size planned clean and was simulated running NVIDIA's device plugin, DCGM and driver."""
    assert line in problems(_with_custom_size(**fields))


def test_every_catalogue_gpu_size_names_a_supported_vendor() -> None:
    assert {s.name for s in CATALOG.values() if s.gpus} == {s.name for s in CATALOG.values() if s.gpu_vendor}
    assert {s.gpu_vendor for s in CATALOG.values() if s.gpus} == set(SUPPORTED_GPU_VENDORS)


def test_plan_refuses_an_amd_size_with_exit_2_and_one_line(tmp_path: Path) -> None:
    raw = _with_custom_size(gpuVendor="amd")
    stack = tmp_path / "Pulumi.mi300x.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpucluster:cluster": raw}}))
    result = plan_stack(stack, tmp_path / "out")
    assert result.returncode == 2 and "Traceback" not in result.stderr and not (tmp_path / "out").exists()
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        "error: cluster.vmSizes.Standard_ND96isr_MI300X_v5.gpuVendor: amd GPUs are not supported yet: the nodes run "
        "NVIDIA's driver, device plugin and DCGM (docs/images.md); supported: nvidia"]


def test_infiniband_on_a_size_without_it() -> None:
    assert problems(_with_pool(vmSize="Standard_NC4as_T4_v3", infiniband=True)) == [
        "cluster.pools[1].infiniband: Standard_NC4as_T4_v3 has no InfiniBand; set infiniband: false or pick an ND size"]


def test_domain_limit_above_300() -> None:
    spec = spec_of(small_cluster(limits={"vmsPerInfinibandDomain": {"value": 400, "note": "ticket"}}))
    with pytest.raises(SpecError, match=r"cluster.limits.vmsPerInfinibandDomain.value: Azure does not raise this past 300"):
        effective_limits(spec)


def test_duplicate_pool_names_and_zones() -> None:
    raw = small_cluster()
    raw["pools"].append(dict(raw["pools"][0]))
    raw["zones"] = ["1", "4"]
    lines = problems(raw)
    assert "cluster.zones[1]: zone '4' does not exist in eastus (zones: 1, 2, 3)" in lines
    assert "cluster.pools[2].name: duplicate pool name 'system' (also cluster.pools[0])" in lines


def test_unknown_region_needs_declared_zones() -> None:
    assert problems(small_cluster(location="marsnorth"))[0].startswith("cluster.location: 'marsnorth' is not in")
    raw = small_cluster(location="marsnorth", limits={"regionZones": {"zones": ["1", "2", "3"], "note": "new region"}})
    spec = spec_of(raw)
    assert len(plan_pools(spec, effective_limits(spec))) == 2


def test_gpu_pool_needs_gpus_and_confidential_sizes_stay_in_confidential_pools() -> None:
    assert problems(_with_pool(vmSize="Standard_D4s_v5"))[0].startswith("cluster.pools[1].vmSize: Standard_D4s_v5 has no GPUs")
    line = problems(_with_pool(vmSize="Standard_NCC40ads_H100_v5"))[0]
    assert "is a confidential size; use it only in a pool of kind: confidential" in line


def test_ephemeral_os_disk_only_where_the_resource_disk_holds_it() -> None:
    raw = small_cluster()
    raw["pools"].append({"name": "h200", "kind": "gpu", "vmSize": "Standard_ND96isr_H200_v5", "count": 2})
    raw["pools"][0]["osDiskGib"] = 64
    spec = spec_of(raw)
    system, h100, h200 = plan_pools(spec, effective_limits(spec))
    assert h100.ephemeral_os_disk  # 128 GiB OS disk on a 1,000 GiB resource disk
    assert not h200.ephemeral_os_disk  # resource disk unconfirmed (0 in the catalogue)
    assert not system.ephemeral_os_disk  # D4s_v5 has no resource disk


def test_the_planners_share_is_the_policys_default() -> None:
    [rule] = [p for p in PLACEMENT_RULES if p.name.endswith("-gpu-zone-share")]
    assert rule.config_schema is not None and rule.config_schema.properties is not None
    assert rule.config_schema.properties["maxGpuShare"]["default"] == GPU_ZONE_SHARE


def test_a_zone_of_any_text_is_quoted_in_every_line_that_lists_the_zones() -> None:
    """A zone list holding a multi-line value is refused line by line: the messages that list the cluster's zones
    quote it rather than print it (a stack's problems are one line each)."""
    raw = small_cluster(zones=["1", "2", "x\ny"])
    raw["pools"][1]["zones"] = ["3"]
    raw["deployRunner"] = {"zone": "3"}
    with pytest.raises(SpecError) as refused:
        plan_cluster(spec_of(raw))
    listed = [p for p in refused.value.problems if "is not one of the cluster's zones" in p.message]
    assert {p.path for p in listed} == {"cluster.pools[1].zones[0]", "cluster.deployRunner.zone"}
    assert all("\n" not in p.message and "'x\\ny'" in p.message for p in listed)
