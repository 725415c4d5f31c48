"""Rules one at a time, called the way the CLI calls them; the pack over whole previews is in
test_policy_mutations.py."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
from pulumi_policy.policy import _NotApplicableError

from gpucluster.errors import SpecError
from gpucluster.offline.policy_runner import check_config, run_policies
from gpucluster.policies.rules import ALL_POLICIES
from gpucluster.policies.rules.machines import bootstrap_data_secret
from gpucluster.policies.rules.props import machines_per_zone
from tests.support.scale_sets import as_typed_class, is_scale_set

VMSS = "azure-native:compute:VirtualMachineScaleSet"
DYNAMIC = "pulumi-python:dynamic:Resource"
RESOURCE_RULES = [p for p in ALL_POLICIES if p.name.startswith(("azure-native-compute-machines",
                                                                   "azure-native-network-machines"))
                  or p.name.endswith(("overprovision", "capacity-ignored", "infiniband-domain",
                                      "accelerated-networking", "no-internet-inbound"))]


def _vmss(**changes: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "overprovision": False, "singlePlacementGroup": True, "orchestrationMode": "Uniform", "zones": ["1"],
        "sku": {"name": "Standard_ND96isr_H100_v5", "capacity": 100},
        "tags": {"gpucluster-cluster": "c", "gpucluster-role": "gpu", "gpucluster-pool": "h100",
                 "gpucluster-infiniband": "true", "cluster-autoscaler-enabled": "true"},
        "virtualMachineProfile": {
            "osProfile": {"customData": "[secret]"},
            "networkProfile": {"networkInterfaceConfigurations": [
                {"name": "nic0", "enableAcceleratedNetworking": True, "ipConfigurations": [{"name": "node"}]}]}},
    }
    inputs.update(changes)
    # Declared as node scale sets are: a dynamic resource naming its ARM type and api-version.
    inputs.update(armType="Microsoft.Compute/virtualMachineScaleSets", apiVersion="2026-07-02")
    urn = "urn:pulumi:s::p::" + DYNAMIC + "::h100-z1-00"
    return {"op": "create", "urn": urn, "newState": {"urn": urn, "type": DYNAMIC, "custom": True, "inputs": inputs,
                                                     "protect": False, "ignoreChanges": ["sku.capacity"], "parent": ""}}


def _names(steps: list[dict[str, Any]], config: dict[str, Any] | None = None) -> set[str]:
    return {v.source for v in run_policies(steps, config, RESOURCE_RULES)}


def test_good_scale_set_passes() -> None:
    assert _names([_vmss()]) == set()


def _nic_with_public_ip() -> dict[str, Any]:
    return {"networkProfile": {"networkInterfaceConfigurations": [
        {"name": "nic0", "enableAcceleratedNetworking": True,
         "ipConfigurations": [{"name": "node", "publicIPAddressConfiguration": {"name": "pip"}}]}]}}


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
    """The typed class resends capacity with every update, ignore_changes or not (pulumi/pulumi#2657)."""
    step = _vmss()
    as_typed_class(step["newState"])
    assert step["newState"]["ignoreChanges"] == ["sku.capacity"]
    assert _names([step]) == {"azure-native-compute-virtualmachinescaleset-capacity-ignored"}


def test_domain_limit_comes_from_pack_config() -> None:
    step = _vmss(sku={"capacity": 250})
    assert "azure-native-compute-virtualmachinescaleset-infiniband-domain" in _names([step])
    config = {"azure-native-compute-virtualmachinescaleset-infiniband-domain": {"maxVmsPerInfinibandDomain": 300}}
    assert _names([step], config) == set()


def test_accelerated_networking_spares_confidential_pools() -> None:
    off = _vmss()
    off["newState"]["inputs"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0][
        "enableAcceleratedNetworking"] = False
    assert _names([off]) == {"azure-native-compute-virtualmachinescaleset-accelerated-networking"}
    off["newState"]["inputs"]["tags"].update({"gpucluster-role": "confidential", "gpucluster-infiniband": "false"})
    assert _names([off]) == set()


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
    assert _names([step], {"all": "disabled"}) == set()


def test_advisory_level_reports_without_failing() -> None:
    step = _vmss(overprovision=True)
    [violation] = run_policies([step], {"azure-native-compute-virtualmachinescaleset-no-overprovision": "advisory"},
                               RESOURCE_RULES)
    assert violation.enforcement == "advisory" and not violation.mandatory


def test_unknown_values_are_reported_as_not_run_as_in_preview() -> None:
    step = _vmss(overprovision="[unknown]")
    [note] = [v for v in run_policies([step], None, RESOURCE_RULES) if "no-overprovision" in v.source]
    assert note.enforcement == "advisory" and "can't run policy" in note.message


def _cli_args(custom_data: str) -> ResourceValidationArgs:
    props = {"osProfile": {"customData": custom_data}}
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    return ResourceValidationArgs("azure-native:compute:VirtualMachine", props, "urn", "etcd-0", opts, None, {})


def test_bootstrap_secret_is_judged_only_where_secrets_are_masked() -> None:
    reports: list[str] = []
    # Under the CLI the engine hands over plain text with no secret marker: the rule says it cannot judge.
    with pytest.raises(_NotApplicableError):
        bootstrap_data_secret.validate(_cli_args("I2Nsb3VkLWNvbmZpZw=="), lambda m, r=None: reports.append(m))
    assert reports == []
    plain = _vmss()
    plain["newState"]["inputs"]["virtualMachineProfile"]["osProfile"]["customData"] = "I2Nsb3VkLWNvbmZpZw=="
    assert _names([plain]) == {"azure-native-compute-machines-bootstrap-data-secret"}


def test_zone_share_of_a_zone_spanning_scale_set() -> None:
    class Res:
        resource_type = VMSS
        urn = "u"

        def __init__(self, props: dict[str, Any]) -> None:
            self.props = props

    spread = {"sku": {"capacity": 5}, "zones": ["1", "2", "3"], "zoneBalance": True}
    assert machines_per_zone(Res(spread)) == {"1": 2, "2": 2, "3": 1}
    assert machines_per_zone(Res({**spread, "zoneBalance": False})) == {"(no zone)": 5}
    assert machines_per_zone(Res({"sku": {"capacity": 4}})) == {"(no zone)": 4}


def test_pack_config_is_checked_against_the_rules_schemas() -> None:
    good = {"all": "mandatory", "azure-native-compute-virtualmachinescaleset-gpu-zone-share": {"maxGpuShare": 0.5}}
    check_config(good, "cfg.json")
    bad = {
        "no-such-rule": "advisory",
        "azure-native-compute-virtualmachinescaleset-gpu-zone-share": {"maxGpuShare": 2, "maxShare": 0.5},
        "azure-native-compute-virtualmachine-etcd-protected": "sometimes",
    }
    with pytest.raises(SpecError) as error:
        check_config(bad, "cfg.json")
    text = "\n".join(str(p) for p in error.value.problems)
    assert "cfg.json: no-such-rule: unknown policy" in text
    assert "gpu-zone-share.maxGpuShare: 2 is greater than the maximum of 1" in text
    assert "gpu-zone-share.maxShare: unknown setting (settings: maxGpuShare, zoneCount)" in text
    assert "'sometimes' is not one of" in text


def test_shipped_policy_configs_are_valid() -> None:
    from tests.support.stacks import ROOT

    for path in (ROOT / "policies" / "config").glob("*.json"):
        check_config(json.loads(path.read_text()), str(path))


def test_docs_name_every_rule_and_setting() -> None:
    from tests.support.stacks import ROOT

    text = (ROOT / "docs" / "policies.md").read_text()
    for policy in ALL_POLICIES:
        assert f"`{policy.name}`" in text, policy.name
        for key in (policy.config_schema.properties if policy.config_schema else {}):
            assert key == "secretsMasked" or f"`{key}`" in text, (policy.name, key)


def test_etcd_port_coverage_reads_ranges_and_judges_unreadable_ones() -> None:
    from gpucluster.policies.rules.network import _covers_port

    assert _covers_port({"destinationPortRange": "2379-2380"}, 2380)
    assert not _covers_port({"destinationPortRanges": ["22", "6443"]}, 2379)
    assert _covers_port({"destinationPortRange": "*"}, 2379)
    assert _covers_port({"destinationPortRange": "etcd"}, 2379)  # no traceback; the rule still looks at it


def test_zone_balance_is_judged_per_scale_set() -> None:
    from pulumi_policy import PolicyResource, StackValidationArgs

    from gpucluster.policies.rules.failure_domains import apiserver_zone_spread

    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)

    def api(urn: str, **props: Any) -> PolicyResource:
        inputs = {"tags": {"gpucluster-role": "apiserver"}, "sku": {"capacity": 3}, **props}
        return PolicyResource(VMSS, inputs, urn, urn, opts, None, None, [], {})

    balanced = api("balanced", zones=["1", "2", "3"], zoneBalance=True)
    regional = api("regional")  # no zones: counted as regional, but it is not a zone-spanning set
    messages: list[tuple[str, str | None]] = []
    apiserver_zone_spread.validate(StackValidationArgs([regional, balanced], {}), lambda m, r=None: messages.append((m, r)))
    assert not any("zoneBalance" in m for m, _ in messages)
    unbalanced = api("unbalanced", zones=["1", "2", "3"])
    apiserver_zone_spread.validate(StackValidationArgs([unbalanced], {}), lambda m, r=None: messages.append((m, r)))
    assert ("the API-server scale set spans zones without zoneBalance: Azure may stack them in one zone",
            "unbalanced") in messages


def test_a_bad_as_of_date_is_a_config_error_and_an_unreadable_input_a_violation(dev_out) -> None:
    """jsonschema asserts `"format": "date"` only with a format checker; a rule that cannot read an input of an
    unexpected shape (a hand-edited preview) reports it at its own level instead of a traceback."""
    with pytest.raises(SpecError, match="asOf"):
        check_config({"kubernetes-version-end-of-life": {"asOf": "2026-13-45"}}, "cfg.json")
    steps = json.loads((dev_out / "preview.json").read_text())["steps"]
    vmss = next(s for s in steps if is_scale_set(s["newState"])
                and s["newState"]["inputs"]["tags"].get("gpucluster-role") == "gpu")
    vmss["newState"]["inputs"]["sku"]["capacity"] = [1]
    violations = run_policies(steps)
    unreadable = [v for v in violations if "cannot read this resource's inputs" in v.message]
    assert unreadable and all(v.mandatory for v in unreadable)
