"""Prefix mode: /28 blocks on the NICs, how the scale sets declare them, and prod's figures as invariants.

Sources: Azure/azure-rest-api-specs PR #27661 ("the block, rather than a single IP, counts against the Azure
Vnet Private IP limit of 65K"); MicrosoftDocs/azure-docs includes/azure-virtual-network-limits.md (65,536
private addresses per VNet, fixed); azure-native 3.29 compute/virtual_machine_scale_set.py ("Other available
API versions: ... 2026-03-01": no version carrying privateIPAddressPrefixLength on scale sets), so node scale
sets are declared through a dynamic resource at Microsoft.Compute 2026-07-02 (components/azure/scale_set/routes.py).
"""

from __future__ import annotations

import math
from ipaddress import IPv4Network

from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.ip_plan import members_fitting, plan_ip, slots_needed
from gpucluster.planning.limits import effective_limits
from gpucluster.planning.pod_addresses import node_addressing
from gpucluster.preflight.compute import VMSS, check_machines
from gpucluster.preflight.model import Resource, azure_resources
from tests.support.scale_sets import is_scale_set
from tests.support.stacks import small_spec


def test_a_node_takes_its_primary_and_ceil_pods_over_16_blocks() -> None:
    spec = small_spec()
    for pods, blocks in ((1, 1), (16, 1), (17, 2), (32, 2), (60, 4), (255, 16)):
        pool = spec.pools[1].model_copy(update={"pods_per_node": pods, "pod_addresses": "prefixes"})
        addressing = node_addressing(pool)
        assert addressing.blocks == blocks == math.ceil(pods / 16)
        assert addressing.entries == 1 + blocks and addressing.pod_addresses == 16 * blocks >= pods
    secondary = node_addressing(spec.pools[1])
    assert secondary.entries == 1 + spec.pools[1].pods_per_node and secondary.blocks == 0


def test_slots_and_fit_count_whole_aligned_28s() -> None:
    """A /24 has 16 slots; the last holds the broadcast. 5 nodes x 2 blocks + the slot their primaries and
    Azure's 4 leading reserved addresses share = 11 slots; 7 nodes = 15 slots, the most that fits."""
    net = IPv4Network("10.0.0.0/24")
    assert slots_needed(5, 2) == 11 and slots_needed(7, 2) == 15 and slots_needed(8, 2) == 17
    assert members_fitting(net, 2) == 7
    assert members_fitting(IPv4Network("10.0.0.0/28"), 1) == 0


def test_prefix_pool_blocks_are_aligned_and_a_small_pin_fails() -> None:
    raw_pools = [{"name": "system", "kind": "system", "vmSize": "Standard_D4s_v5", "count": 3,
                  "podAddresses": "prefixes"},
                 {"name": "gpu", "kind": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "count": 150,
                  "podsPerNode": 32, "podAddresses": "prefixes"}]
    spec = small_spec(pools=raw_pools)
    block = plan_ip(spec, effective_limits(spec)).pool_block("gpu")
    assert block.blocks_per_member == 2 and block.cidr.prefixlen <= 27
    assert block.ips_needed == slots_needed(150, 2) * 16 <= 0.8 * block.usable
    pinned = small_spec(pools=raw_pools, network={"addressSpace": ["10.10.0.0/16"],
                                                  "pinnedBlocks": {"pool-gpu": "10.10.0.0/21"}})
    try:
        plan_ip(pinned, effective_limits(pinned))
    except SpecError as error:
        [problem] = error.problems
        assert problem.path == "cluster.pools[1].count" and "(61 VMs)" in problem.message  # 61 x 2 + 5 primary slots = 127
    else:
        raise AssertionError("150 nodes x 2 /28s do not fit a /21 (127 slots)")


def test_prod_plans_200k_pod_ips_within_the_fixed_entry_limit(prod_spec) -> None:
    limits = effective_limits(prod_spec)
    capacity = plan_ip(prod_spec, limits).capacity
    assert not limits.raised()  # nothing raised, no exception to a fixed limit
    assert capacity.pod_ips_on_nodes >= 200_000 and capacity.pod_ips_on_nodes >= capacity.pod_ips_needed
    assert capacity.vnet_entries <= 0.5 * 65_536  # with headroom: half the fixed limit at most
    assert all(p.pod_addresses == "prefixes" for p in prod_spec.pools)


def test_prod_scale_sets_declare_one_configuration_per_block(prod_run: ProgramRun, prod_spec) -> None:
    pods = {p.name: node_addressing(p) for p in prod_spec.pools}
    sets = [r for r in prod_run.registrations
            if is_scale_set({"type": r.type, "inputs": r.inputs}) and r.name.split("-z")[0] in pods]
    assert sets
    for scale_set in sets:
        addressing = pods[scale_set.name.split("-z")[0]]
        [nic] = scale_set.inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"]
        configs = nic["ipConfigurations"]
        assert len(configs) == addressing.ip_configurations
        assert configs[0]["primary"] and "privateIPAddressPrefixLength" not in configs[0]
        assert all(c["privateIPAddressPrefixLength"] == 28 and c["subnet"] == configs[0]["subnet"] for c in configs[1:])
    # Declared at the api-version that carries the field, the blocks reach ARM; through the typed class they would not.
    [declared] = azure_resources([{"newState": {"urn": sets[0].urn, "type": sets[0].type, "custom": True,
                                                "inputs": sets[0].inputs}}])
    assert declared.type == VMSS and declared.api_version == "2026-07-02"
    assert not [f for f in check_machines([declared], _ctx(prod_spec), []) if f.source == "prefix-on-nic-api-version"]
    typed = Resource(sets[0].urn, VMSS, sets[0].inputs)
    errors = check_machines([typed], _ctx(prod_spec), [])
    assert any(f.source == "prefix-on-nic-api-version" and "2026-07-02" in f.message for f in errors)


def _ctx(spec):
    from gpucluster.planning.cluster_plan import plan_cluster
    from gpucluster.preflight import context_for
    return context_for(plan_cluster(spec))


def test_the_prerequisite_is_said_plainly(prod_spec) -> None:
    from collections import Counter

    from gpucluster.planning.cluster_plan import plan_cluster
    from gpucluster.report.html_report import render_report
    from gpucluster.report.report_data import report_data
    data = report_data(plan_cluster(prod_spec), "prod", Counter(), [])
    assert data["ipPlan"]["prefixOnNic"] == {"pools": [p.name for p in prod_spec.pools], "onboarding": None}
    html = render_report(data)
    assert "a preview Microsoft enables per subscription" in html and "onboarding not recorded" in html
    onboarded = prod_spec.model_copy(update={"network": prod_spec.network.model_copy(
        update={"prefix_on_nic_onboarding": "support case 2611"})})
    data = report_data(plan_cluster(onboarded), "prod", Counter(), [])
    assert "onboarding recorded: support case 2611" in render_report(data)


def test_peered_group_counts_this_vnet_and_the_hub() -> None:
    """With a hub, this VNet's entries plus the hub side's count against the fixed 128,000."""
    hub = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/hub/providers/Microsoft.Network/virtualNetworks/hub"
    network = {"addressSpace": ["10.10.0.0/16"], "hubVnetId": hub, "hubAddressEntries": 1_000}
    spec = small_spec(network=network)
    entries = plan_ip(spec, effective_limits(spec)).capacity.entries
    assert entries.peered_group == entries.vnet + 1_000
    crowded = small_spec(network={**network, "hubAddressEntries": 128_000})
    try:
        plan_ip(crowded, effective_limits(crowded))
    except SpecError as error:
        [problem] = error.problems
        assert "private address entries per group of peered virtual networks" in problem.message
        assert "the limit is 128,000" in problem.message and "fixed" in problem.message
    else:
        raise AssertionError("the peered group is over 128,000 entries")
    assert small_spec().network.hub_vnet_id is None
    no_hub = small_spec()
    assert plan_ip(no_hub, effective_limits(no_hub)).capacity.entries.peered_group is None
