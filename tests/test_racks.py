"""NVLink rack pools (ND GB300 v6 / GB200 v6): the spec, the planner, the interconnect group and block, the rack
scale sets' ARM bodies, and the preflight rules that read them. docs/rack-scale.md has every source."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster.azure.interconnect_block_provider import InterconnectBlockProvider, patch_body
from gpucluster.azure.interconnect_block_routes import INTERCONNECT_BLOCK_API_VERSION, INTERCONNECT_COMPUTE_API
from gpucluster.azure.scale_set.provider import ScaleSetProvider, body
from gpucluster.azure.scale_set.wire import to_wire
from gpucluster.catalog.vm_sizes import CATALOG
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.policy_runner import run_policies
from gpucluster.offline.preview import preview_document
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.limits import effective_limits
from gpucluster.planning.node_template import node_labels
from gpucluster.planning.placement import plan_pools
from gpucluster.policies.rules import ALL_POLICIES
from gpucluster.preflight import context_for, preflight
from gpucluster.spec import CONFIG_KEY, ClusterSpec, load_stack_file
from tests.support.preflight_mutations import (
    RACK_MUTATIONS,
    inputs_of,
)
from tests.support.stacks import STACKS, plan_stack, spec_of

Steps = list[dict[str, Any]]
GB300 = "Standard_ND128isr_GB300_v6"
GROUP_TYPE = "azure-native:network:InterconnectGroup"
DYNAMIC = "pulumi-python:dynamic:Resource"


def _raw() -> dict[str, Any]:
    return copy.deepcopy(load_stack_file(STACKS / "Pulumi.gb300.yaml", "gb300").config[CONFIG_KEY])


@pytest.fixture(scope="module")
def gb300_spec() -> ClusterSpec:
    return load_stack_file(STACKS / "Pulumi.gb300.yaml", "gb300").spec


@pytest.fixture()
def steps(gb300_run: ProgramRun) -> Steps:
    return copy.deepcopy(preview_document(gb300_run)["steps"])




# --- catalogue --------------------------------------------------------------------------------------------------


def test_the_gb_sizes_are_catalogued_as_their_pages_give_them() -> None:
    # azure-compute-docs sizes/gpu-accelerated/nd-gb300-v6-series.md: 128 vCPUs, 864 GiB, 4 GPUs, 1 front-end NIC;
    # nd-gb200-v6-series.md: 900 GiB. Quota families: microsoft/aspire AksNodeVmSizes.cs.
    gb300, gb200 = CATALOG[GB300], CATALOG["Standard_ND128isr_NDR_GB200_v6"]
    assert (gb300.vcpus, gb300.memory_gib, gb300.gpus, gb300.max_nics) == (128, 864, 4, 1)
    assert (gb200.vcpus, gb200.memory_gib, gb200.gpus, gb200.max_nics) == (128, 900, 4, 1)
    assert gb300.quota_family == "standardNDISRGB300V6Family"
    assert gb200.quota_family == "standardNDISRGB200V6NDRFamily"


def test_the_g5_gb300_size_is_catalogued_and_takes_racks() -> None:
    # nd-gb300-v6-series.md (commit 0c72655c) lists Standard_ND128isrG5_GB300_v6 beside the isr size, same figures
    g5 = CATALOG["Standard_ND128isrG5_GB300_v6"]
    gb300 = CATALOG[GB300]
    assert (g5.vcpus, g5.memory_gib, g5.gpus, g5.max_nics, g5.nvme_gb) == (128, 864, 4, 1, 16000)
    assert (g5.gpu_model, g5.quota_family) == (gb300.gpu_model, gb300.quota_family)
    raw = _raw()
    raw["pools"][1]["vmSize"] = g5.name
    spec = spec_of(raw)
    rack = next(p for p in plan_pools(spec, effective_limits(spec)) if p.name == "gb300")
    assert rack.racks is not None and rack.gpus == 432 and rack.arm64


# --- subgroups and placement: inputs, checked ------------------------------------------------------------------


def wire_placement(rack: dict[str, Any]) -> str:
    return to_wire(body(rack))["properties"]["highSpeedInterconnectPlacement"]


@pytest.mark.parametrize(("change", "expected"), [
    (lambda g: g.pop("subgroups"), "subgroups"),
    (lambda g: g.update(subgroups=["subgroup0"]), "subgroups names 1 subgroups for 2 racks"),
    (lambda g: g.update(subgroups=["subgroup0", "a/b"]), "'a/b' is not a subgroup name"),
    (lambda g: g.update(subgroups=["subgroup0", "subgroup0"]), "subgroup0"),
])
def test_subgroup_names_are_a_checked_input(change: Any, expected: str) -> None:
    raw = _raw()
    change(raw["pools"][1]["racks"]["groups"][1])
    with pytest.raises(SpecError) as refused:
        spec_of(raw)
    [problem] = refused.value.problems
    assert problem.path.startswith("cluster.pools[1].racks.groups[1]") and expected in f"{problem.path}: {problem.message}"


def test_declared_subgroup_names_reach_the_rack_scale_sets() -> None:
    raw = _raw()
    raw["pools"][1]["racks"]["groups"][2]["subgroups"] = ["sg-7f3a", "sg-91c2"]
    spec = spec_of(raw)
    rack = next(p for p in plan_pools(spec, effective_limits(spec)) if p.name == "gb300")
    assert [s.rack.subgroup_name for s in rack.scale_sets if s.rack and s.rack.group == "ig3"] == ["sg-7f3a", "sg-91c2"]


def test_high_speed_interconnect_placement_is_configurable_and_create_only() -> None:
    from gpucluster.azure.scale_set.routes import CREATE_ONLY_PATHS
    raw = _raw()
    raw["pools"][1]["racks"]["highSpeedInterconnectPlacement"] = "None"
    assert spec_of(raw).pools[1].racks.high_speed_interconnect_placement == "None"  # type: ignore[union-attr]
    raw["pools"][1]["racks"]["highSpeedInterconnectPlacement"] = "Ring"
    with pytest.raises(SpecError):
        spec_of(raw)
    # absent from azure-mgmt-compute 39.0.0's update model: a change replaces the scale set
    assert "highSpeedInterconnectPlacement" in CREATE_ONLY_PATHS


# --- planner ----------------------------------------------------------------------------------------------------


def test_one_scale_set_per_rack_in_its_groups_zone(gb300_spec: ClusterSpec) -> None:
    pool = next(p for p in plan_pools(gb300_spec, effective_limits(gb300_spec)) if p.name == "gb300")
    assert pool.racks is not None and pool.racks.racks == 6 and pool.gpus == 6 * 18 * 4
    assert [s.name for s in pool.scale_sets] == ["gb300-z1-g00r00", "gb300-z1-g00r01", "gb300-z2-g01r00",
                                                 "gb300-z2-g01r01", "gb300-z3-g02r00", "gb300-z3-g02r01"]
    assert all(s.capacity == 18 and not s.single_placement_group and s.platform_fault_domain_count == 1
               for s in pool.scale_sets)
    assert [(g.name, g.zone, g.block_capacity) for g in pool.racks.groups] == [
        ("ig1", "1", 36), ("ig2", "2", 36), ("ig3", "3", 36)]
    labels = node_labels(pool, pool.scale_sets[3], gb300_spec.location)
    assert labels["gpucluster.io/rack"] == "gb300-z2-g01r01"
    assert labels["gpucluster.io/interconnect-group"] == labels["gpucluster.io/infiniband-domain"] == "ig2"


def test_growing_a_group_appends_racks_and_renames_none(gb300_spec: ClusterSpec) -> None:
    raw = _raw()
    pool = raw["pools"][1]
    pool["racks"]["groups"][0]["racks"] = 3
    pool["racks"]["groups"][0]["subgroups"].append("subgroup2")
    pool["count"] = pool["minCount"] = 7 * 18
    spec = spec_of(raw)
    before = {s.name for p in plan_pools(gb300_spec, effective_limits(gb300_spec)) for s in p.scale_sets}
    after = {s.name for p in plan_pools(spec, effective_limits(spec)) for s in p.scale_sets}
    assert before < after and after - before == {"gb300-z1-g00r02"}


def test_the_subgroup_size_is_a_parameter() -> None:
    raw = _raw()
    pool = raw["pools"][1]
    pool["racks"]["subgroupSize"] = 4  # Microsoft's interconnect-group examples use 4 as well as 18
    pool["count"] = pool["minCount"] = 6 * 4
    raw["teams"][0]["quota"]["gpus"] = 48
    spec = spec_of(raw)
    rack = next(p for p in plan_pools(spec, effective_limits(spec)) if p.name == "gb300")
    assert {s.capacity for s in rack.scale_sets} == {4}
    assert rack.racks is not None and {g.block_capacity for g in rack.racks.groups} == {8}


def _problems(raw: dict[str, Any]) -> list[str]:
    spec = spec_of(raw)
    with pytest.raises(SpecError) as caught:
        plan_pools(spec, effective_limits(spec))
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


@pytest.mark.parametrize(("change", "expected"), [
    (lambda p: p.update(count=100), "cluster.pools[1].count: a rack pool holds racks x subgroupSize = 6 x 18 = 108"),
    (lambda p: p.update(kind="gpu"), "cluster.pools[1].racks: racks are declared only on a pool of kind: rack"),
    (lambda p: (p.update(kind="gpu"), p.pop("racks")), "cluster.pools[1].kind: Standard_ND128isr_GB300_v6 comes in "
                                                       "NVLink racks; use kind: rack"),
    (lambda p: p.pop("racks"), "cluster.pools[1].racks: a rack pool declares its interconnect groups"),
    (lambda p: p.update(vmSize="Standard_ND96isr_H100_v5"), "cluster.pools[1].vmSize: Standard_ND96isr_H100_v5 is "
                                                            "not an NVLink rack size"),
    (lambda p: p["racks"].update(spareRacksPerZone=2), "cluster.pools[1].racks.spareRacksPerZone: 2 spare racks "
                                                       "leave none of zone 1's 2 for work"),
    (lambda p: p["racks"]["groups"][0].update(zone="4"), "cluster.pools[1].racks.groups[0].zone: zone '4' is not "
                                                         "one of the cluster's zones"),
])
def test_bad_rack_input_names_the_key(change: Any, expected: str) -> None:
    raw = _raw()
    change(raw["pools"][1])
    assert any(p.startswith(expected) for p in _problems(raw)), _problems(raw)


def test_the_quota_family_of_the_rack_size_is_checked() -> None:
    raw = _raw()
    raw["vcpuQuota"] = {"standardNDISRGB300V6Family": 128 * 107}
    with pytest.raises(SpecError) as caught:
        plan_cluster(spec_of(raw))
    assert [p.path for p in caught.value.problems] == ["cluster.vcpuQuota.standardNDISRGB300V6Family"]
    assert "needs 13,824 standardNDISRGB300V6Family vCPUs" in caught.value.problems[0].message


# --- what is declared -------------------------------------------------------------------------------------------


def test_each_group_is_azure_natives_interconnect_group_and_its_block_goes_the_explicit_route(steps: Steps) -> None:
    groups = [s["newState"] for s in steps if s["newState"]["type"] == GROUP_TYPE]
    assert [g["inputs"]["interconnectGroupName"] for g in groups] == ["gb300-ig1", "gb300-ig2", "gb300-ig3"]
    assert groups[0]["inputs"]["subgroupProfile"] == {"vmSize": GB300, "scope": "VerticalConnect", "size": 18}
    block = inputs_of(steps, "gb300-ig1-icb")
    assert block["armType"] == "Microsoft.Compute/interconnectBlocks" and block["apiVersion"] == "2026-07-02"
    assert block["sku"] == {"name": GB300, "capacity": 36} and block["zones"] == ["1"]
    assert block["properties"]["interconnectGroup"]["id"].endswith("/interconnectGroups/gb300-ig1")


def test_racks_boot_the_arm64_image_built_on_an_arm64_vm(gb300_run: ProgramRun) -> None:
    # Grace is arm64 (nd-gb300-v6-series-specs.md: "Nvidia Grace CPU"); Image Builder builds on its vmProfile.vmSize.
    [image] = [r for r in gb300_run.registrations if r.type == "azure-native:compute:GalleryImage"
               and r.inputs["galleryImageName"] == "rack"]
    assert image.inputs["architecture"] == "Arm64"
    [template] = [r for r in gb300_run.registrations if r.type.endswith("VirtualMachineImageTemplate")
                  and r.inputs["imageTemplateName"] == "gb300-rack-1-0-0"]
    assert template.inputs["vmProfile"]["vmSize"] == "Standard_D8pds_v5"
    assert template.inputs["source"]["sku"] == "2404-gb"


def test_a_rack_scale_set_names_its_group_subgroup_and_block_in_fields_the_sdk_carries(steps: Steps) -> None:
    rack = inputs_of(steps, "gb300-z2-g01r01")
    profile = rack["virtualMachineProfile"]
    group = profile["networkProfile"]["interconnectGroupProfile"]
    assert group["interconnectGroup"]["id"].endswith("/interconnectGroups/gb300-ig2")
    assert [s["id"] for s in group["subgroups"]] == [group["interconnectGroup"]["id"] + "/subgroups/subgroup1"]
    assert rack["highSpeedInterconnectPlacement"] == "Trunk"  # the interconnect-block example's value
    assert wire_placement(rack) == "Trunk"
    assert profile["interconnectBlockProfile"]["interconnectBlock"]["id"].endswith("/interconnectBlocks/gb300-ig2")
    assert rack["singlePlacementGroup"] is False and rack["platformFaultDomainCount"] == 1
    assert len(profile["networkProfile"]["networkInterfaceConfigurations"]) == 1  # one front-end NIC
    # azure-mgmt-compute 39.0.0's models carry both profiles: the provider's body builder refuses unknown fields.
    wire = to_wire(body(rack))
    assert "interconnectBlockProfile" in wire["properties"]["virtualMachineProfile"]
    assert ScaleSetProvider().check({}, rack).failures == []


def test_the_block_provider_checks_and_diffs_as_azure_updates_a_block(steps: Steps) -> None:
    block = inputs_of(steps, "gb300-ig1-icb")
    provider = InterconnectBlockProvider()
    assert provider.check({}, block).failures == []
    assert [f.property for f in provider.check({}, {**block, "apiVersion": "2025-11-01"}).failures] == ["apiVersion"]
    assert [f.property for f in provider.check({}, {**block, "placementPolicy": "x"}).failures] == ["placementPolicy"]
    grown = {**block, "sku": {**block["sku"], "capacity": 54}}
    diff = provider.diff("id", block, grown)
    assert diff.changes and not diff.replaces  # InterconnectBlock.tsp: only tags and sku.capacity update in place
    assert patch_body(grown) == {"sku": {"capacity": 54}, "tags": block["tags"]}
    moved = provider.diff("id", block, {**block, "zones": ["2"]})
    assert moved.replaces == ["zones"] and moved.delete_before_replace
    assert provider.diff("id", block, {**block, "sku": {"name": "Standard_ND128isr_NDR_GB200_v6",
                                                          "capacity": 36}}).replaces == ["sku"]
    assert INTERCONNECT_BLOCK_API_VERSION >= INTERCONNECT_COMPUTE_API


# --- preflight --------------------------------------------------------------------------------------------------


def _preflight(steps: Steps, spec: ClusterSpec) -> tuple[set[str], set[str]]:
    result = preflight(steps, context_for(plan_cluster(spec)))
    return {f.source for f in result.errors}, {f.source for f in result.warnings}


def test_gb300_passes_the_preflight(steps: Steps, gb300_spec: ClusterSpec) -> None:
    errors, warnings = _preflight(steps, gb300_spec)
    assert errors == set() and not {w for w in warnings if w.startswith("interconnect")}
















@pytest.mark.parametrize(("breaks", "rule"), RACK_MUTATIONS)
def test_breaking_an_interconnect_rule_fails_the_preflight(steps: Steps, gb300_spec: ClusterSpec, breaks: Any,
                                                           rule: str) -> None:
    breaks(steps)
    errors, _ = _preflight(steps, gb300_spec)
    assert rule in errors


def test_spread_over_fault_domains_is_a_warning(steps: Steps, gb300_spec: ClusterSpec) -> None:
    inputs_of(steps, "gb300-z1-g00r00")["platformFaultDomainCount"] = 5
    errors, warnings = _preflight(steps, gb300_spec)
    assert "interconnect-fault-domains" in warnings and not {e for e in errors if e.startswith("interconnect")}


# --- policy pack ------------------------------------------------------------------------------------------------

IB_DOMAIN = [p for p in ALL_POLICIES if p.name.endswith("infiniband-domain")]


def test_the_infiniband_domain_rule_reads_an_interconnect_set_by_its_group(steps: Steps) -> None:
    racks = [s for s in steps if s["newState"]["urn"].endswith("::gb300-z1-g00r00")]
    assert run_policies(racks, None, IB_DOMAIN) == []
    racks[0]["newState"]["inputs"]["singlePlacementGroup"] = True
    assert [v.source for v in run_policies(racks, None, IB_DOMAIN)] == [IB_DOMAIN[0].name]
    assert racks[0]["newState"]["type"] == DYNAMIC


# --- the plan folder ----------------------------------------------------------------------------------------------


def test_gb300_plans_and_its_summary_and_report_show_racks_per_zone(tmp_path: Path) -> None:
    out = tmp_path / "gb300"
    result = plan_stack("gb300", out)
    assert result.returncode == 0, result.stderr
    [pool] = [p for p in json.loads((out / "summary.json").read_text())["pools"] if p.get("racks")]
    assert pool["racks"]["gpusPerRack"] == 72
    assert pool["racks"]["zones"] == {z: {"racks": 2, "gpus": 144} for z in ("1", "2", "3")}
    report = (out / "report.html").read_text()
    assert "<h2>NVLink racks</h2>" in report and "GPUs per rack (NVLink domain)" in report
