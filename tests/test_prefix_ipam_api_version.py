"""Prefix IPAM reads NICs at a Microsoft.Network api-version whose NIC schema carries the block's length, and never
turns a declared block that comes back without it into a /32.

ARM shapes a response by the api-version asked for; `privateIPAddressPrefixLength` is in the NIC IP configuration
of Microsoft.Network 2024-03-01 (Azure/azure-rest-api-specs commit 0c9da75c, stable/2024-03-01/networkInterface.json,
NetworkInterfaceIPConfigurationPropertiesFormat). The fake ARM (tests/support/fake_kube.py FakeAzure) answers older versions
without it: a /28 comes back as its first address, which the controller used to take as a /32 (1 address per 16).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.agents import prefix_ipam as ipam
from gpucluster.offline.engine import ProgramRun
from tests.support.fake_kube import FakeAzure, FakeKube
from tests.support.ipam_world import controller, pool, populate, servers

__all__ = ["servers"]


def test_the_controller_reads_at_a_version_that_carries_the_length(servers: tuple[FakeKube, FakeAzure],
                                                                    tmp_path: Path) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"h100-z1-00": 3})
    report = controller(kube, tmp_path).round()
    for name, addresses in desired.items():
        assert len(pool(kube, name)) == len(addresses) == 32  # two whole /28s, not two /32s
        assert pool(kube, name) == set(addresses)
    assert report.patched == 3 and report.refused == 0
    [version] = {r.query.get("api-version") for r in azure.requests("GET", "/networkInterfaces$")}
    assert version == ipam.ARM_API_VERSION >= "2024-03-01"


def test_a_declared_block_without_its_length_is_refused_loudly_and_changes_nothing(
        servers: tuple[FakeKube, FakeAzure], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kube, azure = servers
    populate(kube, azure, {"h100-z1-00": 2})
    azure.lengths_lost = True
    report = controller(kube, tmp_path).round()
    assert report.refused == 2 and report.patched == 0
    assert pool(kube, "h100-z1-00000000") == set() and pool(kube, "h100-z1-00000001") == set()
    logged = capsys.readouterr().err
    assert "REFUSED 2 node(s)" in logged and "never taken as a /32" in logged and "podblock00" in logged


def test_single_secondary_addresses_that_are_not_declared_blocks_stay_single() -> None:
    """The API servers' NICs carry a few single secondaries (not named as blocks): those are still /32s."""
    vm = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/api/virtualMachines/0"
    nic = {"id": f"{vm}/networkInterfaces/nic0", "properties": {"virtualMachine": {"id": vm}, "ipConfigurations": [
        {"name": "node", "properties": {"privateIPAddress": "10.0.0.4", "primary": True}},
        {"name": "pod001", "properties": {"privateIPAddress": "10.0.0.20"}},
        {"name": "podblock01", "properties": {"privateIPAddress": "10.0.0.32"}}]}}
    refused: list[str] = []
    assert ipam.blocks_by_instance([nic], refused=refused) == {}
    assert refused == ["instance 0: podblock01 10.0.0.32"]
    del nic["properties"]["ipConfigurations"][2]
    assert [str(b) for b in ipam.blocks_by_instance([nic])[("api", "0")]] == ["10.0.0.20/32"]


def test_the_plan_names_its_block_configurations_as_the_controller_expects(prod_run: ProgramRun) -> None:
    reg = next(r for r in prod_run.registrations if r.name == "h100-z1-00" and r.custom)
    configs = reg.inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0][
        "ipConfigurations"]
    blocks = [c["name"] for c in configs if "privateIPAddressPrefixLength" in c]
    assert blocks and all(name.startswith(ipam.BLOCK_CONFIG_PREFIX) for name in blocks)
    assert not any(c["name"].startswith(ipam.BLOCK_CONFIG_PREFIX) for c in configs
                   if "privateIPAddressPrefixLength" not in c)


def test_a_refused_node_keeps_the_addresses_it_already_has(servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    """A NIC that comes back without a declared block's length is unread, not empty: the pool an earlier round gave
    its node stays (an empty NIC's node loses its unused addresses; this one must not)."""
    kube, azure = servers
    desired = populate(kube, azure, {"h100-z1-00": 2})
    ctl = controller(kube, tmp_path)
    ctl.round()
    assert all(pool(kube, name) == set(addresses) for name, addresses in desired.items())
    azure.lengths_lost = True
    report = ctl.round()
    assert report.refused == 2 and report.patched == 0
    assert all(pool(kube, name) == set(addresses) for name, addresses in desired.items())
