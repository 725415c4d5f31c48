"""Every rule has a passing and a failing case, called the way the CLI calls it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.offline.policy_runner import run_policies

VMSS = "azure-native:compute:VirtualMachineScaleSet"


def _vmss(**changes: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "overprovision": False, "singlePlacementGroup": True, "orchestrationMode": "Uniform", "zones": ["1"],
        "sku": {"name": "Standard_ND96isr_H100_v5", "capacity": 100},
        "tags": {"gpucluster-cluster": "c", "gpucluster-role": "gpu", "gpucluster-pool": "h100",
                 "gpucluster-infiniband": "true", "cluster-autoscaler-enabled": "true"},
        "virtualMachineProfile": {"networkProfile": {"networkInterfaceConfigurations": [
            {"name": "nic0", "ipConfigurations": [{"name": "node", "primary": True}]}]}},
    }
    inputs.update(changes)
    return {"op": "create", "urn": "urn:pulumi:s::p::" + VMSS + "::h100-z1-00",
            "newState": {"urn": "urn:pulumi:s::p::" + VMSS + "::h100-z1-00", "type": VMSS, "custom": True,
                         "inputs": inputs, "protect": False, "ignoreChanges": ["sku.capacity"], "parent": ""}}


def _names(steps: list[dict[str, Any]], config: dict[str, Any] | None = None) -> set[str]:
    return {v.policy for v in run_policies(steps, config)}


def test_good_scale_set_passes() -> None:
    assert _names([_vmss()]) == set()


def _nic_with_public_ip() -> dict[str, Any]:
    return {"networkProfile": {"networkInterfaceConfigurations": [
        {"name": "nic0", "ipConfigurations": [{"name": "node", "publicIPAddressConfiguration": {"name": "pip"}}]}]}}


@pytest.mark.parametrize(
    ("changes", "policy"),
    [
        ({"tags": {"gpucluster-cluster": "c"}}, "azure-native-compute-machines-require-tags"),
        ({"overprovision": True}, "azure-native-compute-virtualmachinescaleset-no-overprovision"),
        ({"singlePlacementGroup": False}, "azure-native-compute-virtualmachinescaleset-infiniband-domain"),
        ({"sku": {"capacity": 101}}, "azure-native-compute-virtualmachinescaleset-infiniband-domain"),
        ({"zones": ["1", "2"]}, "azure-native-compute-virtualmachinescaleset-infiniband-domain"),
        ({"virtualMachineProfile": _nic_with_public_ip()}, "azure-native-network-machines-no-public-ip"),
    ],
)
def test_each_broken_property_is_caught(changes: dict[str, Any], policy: str) -> None:
    step = _vmss(**changes)
    if "tags" in changes:
        step["newState"]["inputs"]["tags"]["gpucluster-infiniband"] = "true"
    assert policy in _names([step])


def test_capacity_must_be_ignored() -> None:
    step = _vmss()
    step["newState"]["ignoreChanges"] = []
    assert _names([step]) == {"azure-native-compute-virtualmachinescaleset-capacity-ignored"}


def test_domain_limit_comes_from_pack_config() -> None:
    step = _vmss(sku={"capacity": 250})
    assert "azure-native-compute-virtualmachinescaleset-infiniband-domain" in _names([step])
    config = {"azure-native-compute-virtualmachinescaleset-infiniband-domain": {"maxVmsPerInfinibandDomain": 300}}
    assert _names([step], config) == set()


def test_nsg_internet_inbound() -> None:
    nsg_type = "azure-native:network:NetworkSecurityGroup"
    rule = {"name": "open", "access": "Allow", "direction": "Inbound", "sourceAddressPrefixes": ["Internet"]}
    step = {"op": "create", "urn": "u", "newState": {"urn": "u", "type": nsg_type, "custom": True,
                                                     "inputs": {"securityRules": [rule]}}}
    assert _names([step]) == {"azure-native-network-networksecuritygroup-no-internet-inbound"}
    closed = copy.deepcopy(step)
    closed["newState"]["inputs"]["securityRules"][0]["sourceAddressPrefixes"] = ["10.0.0.0/8"]
    assert _names([closed]) == set()


def test_standalone_public_ip_is_refused_and_disabled_policy_is_skipped() -> None:
    step = {"op": "create", "urn": "u", "newState": {"urn": "u", "type": "azure-native:network:PublicIPAddress",
                                                     "custom": True, "inputs": {}}}
    assert _names([step]) == {"azure-native-network-machines-no-public-ip"}
    assert _names([step], {"azure-native-network-machines-no-public-ip": "disabled"}) == set()


def test_unknown_values_skip_the_rule_as_in_preview() -> None:
    step = _vmss(overprovision="[unknown]")
    assert "azure-native-compute-virtualmachinescaleset-no-overprovision" not in _names([step])
