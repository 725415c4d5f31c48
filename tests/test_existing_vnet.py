"""`network.existingVnet` and `network.existingSubnets`: a cluster whose subnets go in a VNet it does not own.

The spec refuses what cannot hold (subnets without their VNet, a subnet of another VNet, a hub peering on a VNet the
stack does not manage, a VNet of another subscription); the IP plan pins each existing subnet's block to its prefix
with the pinned-block rules; the program under Pulumi's mocks (components/offline/engine.py) creates no VNet, puts
its own subnets in the VNet's resource group under the cluster's name, leaves the existing subnets alone and grants the
add-ons' subnet reads and joins on that VNet; `gpucluster verify` reads the VNet and the subnets back through the
Azure SDK's pipeline from a fake ARM (tests/support/verify_fakes.py) and fails each thing the plan assumed that the
VNet does not hold; and `gpucluster plan`, run as a user runs it (policy pack included), takes such a stack and
refuses an existing etcd subnet in one line, exit 2.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi_azure_native
import pytest
import yaml

from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.resource_ids import parse_vnet_id
from gpucluster.planning.subnets import plan_vnet
from gpucluster.spec.loader import named_cluster
from gpucluster.verify.check_network import DNS_API, VNET_API
from gpucluster.verify.connect import AzureAccess
from tests.support.stacks import ROOT, plan_stack, small_cluster, small_spec
from tests.support.verify_fakes import SUBSCRIPTION
from tests.support.verify_world import FakeCredential, World, served_world

OWN_SUB = "00000000-0000-0000-0000-000000000000"
"""The subscription tests/conftest.py exports as AZURE_SUBSCRIPTION_ID."""
VNET = f"/subscriptions/{OWN_SUB}/resourceGroups/corp-net/providers/Microsoft.Network/virtualNetworks/corp"
SYSTEM_SUBNET = f"{VNET}/subnets/shared-system"
ZONE = f"/subscriptions/{OWN_SUB}/resourceGroups/hub-dns/providers/Microsoft.Network/privateDnsZones/privatelink.azurecr.io"


def _network(**extra: Any) -> dict[str, Any]:
    return {"addressSpace": ["10.10.0.0/16"], "existingVnet": {"id": VNET}, **extra}


def _existing_system(cidr: str = "10.10.200.0/24") -> dict[str, Any]:
    return {"pool-system": {"id": SYSTEM_SUBNET, "cidr": cidr}}


def _refused(raw: dict[str, Any], subscription: str = "") -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as refused:
        spec = named_cluster(raw, {}, subscription)
        plan_cluster(spec)
    return [(p.path, p.message) for p in refused.value.problems]


@pytest.mark.parametrize(("network", "path", "said"), [
    ({"addressSpace": ["10.10.0.0/16"], "existingSubnets": _existing_system()}, "cluster.network",
     "existingSubnets needs existingVnet"),
    (_network(hubVnetId=VNET.replace("corp-net", "hub")), "cluster.network", "remove hubVnetId"),
    (_network(existingSubnets={"pool-system": {"id": SYSTEM_SUBNET.replace("/corp/", "/other/"),
                                               "cidr": "10.10.200.0/24"}}), "cluster.network",
     "not of existingVnet.id"),
    (_network(existingSubnets={"pool-system": {"id": "shared-system", "cidr": "10.10.200.0/24"}}),
     "cluster.network.existingSubnets.pool-system.id", "must be a subnet resource id"),
    ({"addressSpace": ["10.10.0.0/16"], "existingVnet": {"id": "corp"}}, "cluster.network.existingVnet.id",
     "must be a VNet resource id"),
    (_network(existingVnet={"id": VNET, "registryDnsZoneId": ZONE.replace("azurecr", "blob.core.windows")}),
     "cluster.network.existingVnet.registryDnsZoneId", "privatelink.azurecr.io private DNS zone"),
])
def test_what_cannot_hold_is_refused_naming_its_key(network: dict[str, Any], path: str, said: str) -> None:
    [(where, message)] = _refused(small_cluster(network=network))
    assert where == path and said in message


def test_a_vnet_of_another_subscription_is_refused() -> None:
    [(where, message)] = _refused(small_cluster(network=_network()), "11111111-1111-1111-1111-111111111111")
    assert where == "cluster.network.existingVnet.id"
    assert f"is in subscription {OWN_SUB} but the stack deploys to 11111111-" in message


@pytest.mark.parametrize(("subnets", "pins", "path", "said"), [
    ({"pool-sytem": {"id": SYSTEM_SUBNET, "cidr": "10.10.200.0/24"}}, {},
     "cluster.network.existingSubnets.pool-sytem.cidr", "no block named 'pool-sytem'"),
    (_existing_system("10.20.0.0/24"), {}, "cluster.network.existingSubnets.pool-system.cidr",
     "outside cluster.network.addressSpace"),
    (_existing_system("10.10.200.0/28"), {}, "cluster.pools[0].count", "pinned block pool-system 10.10.200.0/28"),
    (_existing_system(), {"pool-system": "10.10.100.0/24"}, "cluster.network.pinnedBlocks.pool-system",
     "existingSubnets.pool-system.cidr is 10.10.200.0/24"),
    ({"etcd": {"id": f"{VNET}/subnets/etcd", "cidr": "10.10.250.0/26"}}, {}, "cluster.network.existingSubnets.etcd",
     "only pool blocks (pool-<name>) may use an existing subnet"),
])
def test_an_existing_subnet_is_held_to_the_pinned_block_rules(subnets: dict[str, Any], pins: dict[str, str],
                                                              path: str, said: str) -> None:
    [(where, message)] = _refused(small_cluster(network=_network(existingSubnets=subnets, pinnedBlocks=pins)))
    assert where == path and said in message


def test_an_existing_subnet_pins_its_block_and_the_rest_are_placed_around_it() -> None:
    plan = plan_cluster(small_spec(network=_network(existingSubnets=_existing_system())))
    system = plan.ip.block("pool-system")
    assert str(system.cidr) == "10.10.200.0/24" and system.pinned
    assert all(not b.cidr.overlaps(system.cidr) for b in plan.ip.blocks if b.name != "pool-system")
    same_pin = plan_cluster(small_spec(network=_network(existingSubnets=_existing_system(),
                                                        pinnedBlocks={"pool-system": "10.10.200.0/24"})))
    assert same_pin.ip.blocks == plan.ip.blocks


def test_the_vnets_other_entries_count_against_its_limit() -> None:
    alone = plan_cluster(small_spec(network=_network())).ip.capacity.entries.vnet
    shared = plan_cluster(small_spec(network=_network(existingVnet={"id": VNET, "addressEntries": 40_000})))
    assert shared.ip.capacity.entries.vnet == alone + 40_000
    [(where, message)] = _refused(small_cluster(network=_network(existingVnet={"id": VNET, "addressEntries": 65_000})))
    assert "privateIpsPerVnet" in where or "65,536" in message


def test_each_block_has_its_place_in_the_vnet() -> None:
    own = plan_cluster(small_spec())
    place = plan_vnet(own.spec, own.ip)
    assert (place.resource_group, place.name, place.own) == ("gpucluster-test", "test", True)
    assert [(s.block, s.name, s.existing_id) for s in place.subnets] == [(b.name, b.name, None) for b in own.ip.blocks]
    shared = plan_cluster(small_spec(network=_network(existingSubnets=_existing_system())))
    place = plan_vnet(shared.spec, shared.ip)
    assert (place.resource_group, place.name, place.own, place.id(OWN_SUB)) == ("corp-net", "corp", False, VNET)
    assert {s.block: (s.name, s.existing_id) for s in place.subnets} == {
        "controlplane": ("test-controlplane", None), "etcd": ("test-etcd", None),
        "pool-system": ("test-pool-system", SYSTEM_SUBNET), "pool-gpu": ("test-pool-gpu", None)}
    assert [s.block for s in place.created] == ["controlplane", "etcd", "pool-gpu"]


@pytest.mark.parametrize(("module", "version"), [
    ("network/virtual_network.py", VNET_API), ("network/subnet.py", VNET_API),
    ("privatedns/virtual_network_link.py", DNS_API)])
def test_verify_reads_at_the_api_version_the_provider_writes_with(module: str, version: str) -> None:
    """The installed azure-native SDK (the runtime lock's) says which REST version each resource is written at."""
    source = (Path(pulumi_azure_native.__file__).parent / module).read_text(encoding="utf-8")
    assert set(re.findall(r"Uses Azure REST API version (\d{4}-\d{2}-\d{2})", source)) == {version}


def test_the_vnet_id_reads_back_into_its_parts() -> None:
    ref = parse_vnet_id(VNET)
    assert (ref.subscription, ref.resource_group, ref.name) == (OWN_SUB, "corp-net", "corp")
    with pytest.raises(ValueError):
        parse_vnet_id(SYSTEM_SUBNET)


@pytest.fixture(scope="module")
def program() -> ProgramRun:
    raw = small_cluster(network=_network(existingSubnets=_existing_system()))
    return run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": raw})


def _subnet_ids(scale_set: Any) -> set[str]:
    return {c["subnet"]["id"] for nic in scale_set.inputs["virtualMachineProfile"]["networkProfile"][
        "networkInterfaceConfigurations"] for c in nic["ipConfigurations"]}


def test_the_program_creates_no_vnet_and_its_subnets_in_the_vnets_group(program: ProgramRun) -> None:
    types = [r.type for r in program.registrations]
    assert "azure-native:network:VirtualNetwork" not in types
    assert "azure-native:network:VirtualNetworkPeering" not in types
    subnets = {r.inputs["subnetName"]: r.inputs for r in program.registrations
               if r.type == "azure-native:network:Subnet"}
    assert set(subnets) == {"test-controlplane", "test-etcd", "test-pool-gpu"}
    assert {(s["resourceGroupName"], s["virtualNetworkName"]) for s in subnets.values()} == {("corp-net", "corp")}
    assert all("networkSecurityGroup" in s and "natGateway" in s for s in subnets.values())
    assert program.outputs["vnetId"] == VNET


def test_scale_sets_join_the_existing_subnet_and_the_created_ones(program: ProgramRun) -> None:
    scale_sets = {r.name: r for r in program.registrations
                  if r.inputs.get("armType") == "Microsoft.Compute/virtualMachineScaleSets"}
    assert {sid for name, r in scale_sets.items() if name.startswith("system-") for sid in _subnet_ids(r)} == {
        SYSTEM_SUBNET}
    gpu = {sid for name, r in scale_sets.items() if name.startswith("gpu-") for sid in _subnet_ids(r)}
    assert len(gpu) == 1 and gpu.pop().endswith("/subnets/test-pool-gpu")


def test_the_addons_subnet_grants_are_on_the_vnet(program: ProgramRun) -> None:
    definitions = {r.name: r.inputs for r in program.registrations
                   if r.type == "azure-native:authorization:RoleDefinition"}
    assignments = {r.name: r.inputs for r in program.registrations
                   if r.type == "azure-native:authorization:RoleAssignment"}
    group = VNET[:VNET.index("/providers/")]
    network_roles = {name: d for name, d in definitions.items() if name.endswith("-network-role")}
    assert set(network_roles) == {"test-addons-autoscaler-network-role", "test-addons-cni-network-role"}
    for name, definition in network_roles.items():
        assert definition["assignableScopes"] == [group] and definition["scope"] == group
        assert all(a.startswith("Microsoft.Network/virtualNetworks/subnets/")
                   for a in definition["permissions"][0]["actions"])
        assert assignments[f"{name}-assignment"]["scope"] == VNET
    in_group = [a for name, d in definitions.items() if name.endswith("-resourceGroup-role")
                for a in d["permissions"][0]["actions"]]
    assert in_group and not any("virtualNetworks/subnets" in a for a in in_group)


def test_a_shared_registry_zone_takes_the_records_and_no_zone_is_made(program: ProgramRun) -> None:
    own = [r.type for r in program.registrations if r.type.startswith("azure-native:privatedns:")]
    assert own == ["azure-native:privatedns:PrivateZone", "azure-native:privatedns:VirtualNetworkLink"]
    shared = run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": small_cluster(
        network=_network(existingVnet={"id": VNET, "registryDnsZoneId": ZONE}))})
    assert not [r for r in shared.registrations if r.type.startswith("azure-native:privatedns:")]
    [group] = [r.inputs for r in shared.registrations if r.type == "azure-native:network:PrivateDnsZoneGroup"]
    assert [c["privateDnsZoneId"] for c in group["privateDnsZoneConfigs"]] == [ZONE]


def test_without_an_existing_vnet_the_subnet_grants_stay_in_the_groups_role() -> None:
    run = run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": small_cluster()})
    names = [r.name for r in run.registrations if r.type == "azure-native:authorization:RoleDefinition"]
    assert not [n for n in names if n.endswith("-network-role")]
    cni = next(r.inputs for r in run.registrations if r.name == "test-addons-cni-resourceGroup-role")
    assert "Microsoft.Network/virtualNetworks/subnets/join/action" in cni["permissions"][0]["actions"]


# --- verify, through the Azure SDK against the fake ARM

STACK_VNET = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/corp-net/providers/Microsoft.Network/virtualNetworks/corp"
STACK_ZONE = ZONE.replace(OWN_SUB, SUBSCRIPTION)


def _vnet(prefixes: list[str]) -> dict[str, Any]:
    return {"name": "corp", "id": STACK_VNET, "location": "eastus2",
            "properties": {"addressSpace": {"addressPrefixes": prefixes}}}


def _subnet(name: str, prefix: str, **more: Any) -> dict[str, Any]:
    """An existing subnet as Subnets_Get returns it (the created ones: tests/support/verify_fakes.py subnet_routes)."""
    return {"name": name, "id": f"{STACK_VNET}/subnets/{name}", "properties": {"addressPrefix": prefix, **more}}


EXISTING_ROUTES = {
    STACK_VNET: _vnet(["10.10.0.0/16", "10.30.0.0/16"]),
    f"{STACK_VNET}/subnets/shared-system": _subnet("shared-system", "10.10.200.0/24", natGateway={
        "id": f"{STACK_VNET.split('/providers/')[0]}/providers/Microsoft.Network/natGateways/out"}),
    f"{STACK_ZONE}/virtualNetworkLinks": {"value": [
        {"name": "to-other", "properties": {"virtualNetwork": {"id": STACK_VNET + "-other"}}},
        {"name": "to-corp", "properties": {"virtualNetwork": {"id": STACK_VNET}}}]},
}
"""What the VNet's owner made: the VNet, the system pool's subnet and the shared registry zone's links."""


@pytest.fixture(scope="module")
def verify_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    raw = small_cluster(name="vfy", location="eastus2", network={
        "addressSpace": ["10.10.0.0/16"], "existingVnet": {"id": STACK_VNET, "registryDnsZoneId": STACK_ZONE},
        "existingSubnets": {"pool-system": {"id": f"{STACK_VNET}/subnets/shared-system", "cidr": "10.10.200.0/24"}}})
    with served_world(tmp_path_factory.mktemp("existing-vnet"), raw) as served:
        yield served


@pytest.fixture
def world(verify_world: World) -> World:
    verify_world.reset()
    verify_world.arm.routes.update(copy.deepcopy(EXISTING_ROUTES))
    return verify_world


def _run(world: World) -> tuple[int, list[dict[str, Any]]]:
    """`verify --azure-only` and its azure.existing-network verdicts."""
    code, doc, _ = world.run_as_given("--azure-only")
    return code, [r for r in doc["results"] if r["check"] == "azure.existing-network"]


def test_verify_before_up_passes_on_the_vnet_the_plan_assumed(world: World) -> None:
    _, results = _run(world)
    assert [r["status"] for r in results] == ["pass", "pass", "pass"]
    assert "egress by its NAT gateway" in results[1]["detail"] and "(to-corp)" in results[2]["detail"]


def _broken(world: World, change: str) -> None:
    system = world.arm.routes[f"{STACK_VNET}/subnets/shared-system"]["properties"]
    if change == "vnet missing":
        del world.arm.routes[STACK_VNET]
    elif change == "another region":
        world.arm.routes[STACK_VNET]["location"] = "westus3"
    elif change == "space missing":
        world.arm.routes[STACK_VNET] = _vnet(["10.30.0.0/16"])
    elif change == "subnet missing":
        del world.arm.routes[f"{STACK_VNET}/subnets/shared-system"]
    elif change == "prefix differs":
        system["addressPrefix"] = "10.10.201.0/24"
    elif change == "no way out":
        del system["natGateway"]
    elif change == "zone not linked":
        world.arm.routes[f"{STACK_ZONE}/virtualNetworkLinks"]["value"].pop()
    elif change == "zone missing":
        del world.arm.routes[f"{STACK_ZONE}/virtualNetworkLinks"]


@pytest.mark.parametrize(("change", "said"), [
    ("vnet missing", "no such VNet"), ("another region", "the VNet is in westus3, the stack in eastus2"),
    ("space missing", "is not in the VNet's address space (10.30.0.0/16)"),
    ("subnet missing", "no subnet"), ("prefix differs", "its prefix is 10.10.201.0/24, the plan pinned 10.10.200.0/24"),
    ("no way out", "no NAT gateway and no route table"), ("zone not linked", "1 link(s), none to the VNet"),
    ("zone missing", "no zone")])
def test_verify_fails_what_the_vnet_does_not_hold(world: World, change: str, said: str) -> None:
    _broken(world, change)
    code, results = _run(world)
    failed = [r for r in results if r["status"] == "fail"]
    assert code != 0 and len(failed) == 1 and said in failed[0]["detail"], results
    assert failed[0]["fix"]


def test_the_created_subnets_are_read_back_after_up(world: World) -> None:
    from gpucluster.verify.arm import Arm
    from gpucluster.verify.check_network import check_created_subnets

    arm = Arm(AzureAccess(FakeCredential(), SUBSCRIPTION, world.arm.url, str(world.ca)), world.plan)
    assert {r.status for r in check_created_subnets(arm, world.plan)} == {"pass"}
    world.arm.routes[f"{STACK_VNET}/subnets/vfy-etcd"]["properties"]["addressPrefix"] = "10.10.250.0/26"
    del world.arm.routes[f"{STACK_VNET}/subnets/vfy-pool-gpu"]
    failed = {r.path: r.message for r in check_created_subnets(arm, world.plan) if r.status == "fail"}
    assert set(failed) == {"subnet for etcd", "subnet for pool-gpu"}
    assert "no subnet" in failed["subnet for pool-gpu"] and "10.10.250.0/26" in failed["subnet for etcd"]


def test_a_first_up_from_a_peered_network_takes_the_existing_vnets_peerings() -> None:
    """The existing VNet's peerings are its owner's: `apiAccess.path: peered` needs no hubVnetId there."""
    assert [p for p, _ in _refused(small_cluster(inCluster={"apiAccess": {"path": "peered"}}))] == [
        "cluster.inCluster.apiAccess.path"]
    plan = plan_cluster(small_spec(network=_network(), inCluster={"apiAccess": {"path": "peered"}}))
    assert plan.first_up.path == "peered"


def _stack_file(tmp_path: Path, network: dict[str, Any]) -> Path:
    stack = tmp_path / "Pulumi.shared.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpucluster:cluster": small_cluster(name="shared", network=network),
                                                "azure-native:subscriptionId": OWN_SUB}}))
    return stack


def test_gpucluster_plan_takes_a_stack_in_an_existing_vnet(tmp_path: Path) -> None:
    """The command a user runs, policy pack included: the preview declares no VNet and the planned subnets only."""
    out = tmp_path / "out"
    result = plan_stack(_stack_file(tmp_path, _network(existingSubnets=_existing_system())), out)
    assert result.returncode == 0, result.stdout + result.stderr
    types = [step["newState"]["type"] for step in json.loads((out / "preview.json").read_text())["steps"]]
    assert "azure-native:network:VirtualNetwork" not in types
    assert types.count("azure-native:network:Subnet") == 3


def test_gpucluster_plan_refuses_an_existing_etcd_subnet_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stack = _stack_file(tmp_path, _network(existingSubnets={"etcd": {"id": f"{VNET}/subnets/etcd",
                                                                     "cidr": "10.10.250.0/26"}}))
    result = plan_stack(stack, out)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    header, *errors = result.stderr.strip().splitlines()
    assert header == f"{stack}:" and len(errors) == 1
    assert errors[0].strip().startswith("error: cluster.network.existingSubnets.etcd:"), result.stderr
    assert not out.exists()


def test_a_vnet_answer_of_another_shape_fails_this_check_alone(world: World) -> None:
    world.arm.routes[STACK_VNET] = {"name": "corp", "location": "eastus2", "properties": {"addressSpace": ["x"]}}
    code, results = _run(world)
    [failed] = [r for r in results if r["status"] == "fail"]
    assert code == 1 and "could not interpret what it read" in failed["detail"]
