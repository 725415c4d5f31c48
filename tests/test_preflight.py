"""ARM preflight: the shipped prod plan passes, and breaking each rule on purpose makes that rule fail, naming
the resource and the field. Each rule's source is in components/preflight/rules.py and docs/azure-preflight.md."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gpucluster.catalog.autonaming import default_name
from gpucluster.catalog.availability import AVAILABILITY, availability_rows, priced_availability
from gpucluster.catalog.prices import price_catalogue
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.preview import preview_document
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.preflight import Context, context_for, preflight, problems
from gpucluster.preflight.rules import RULES, WARNINGS
from gpucluster.spec import ClusterSpec
from tests.support.scale_sets import as_typed_class, is_scale_set
from tests.support.stacks import spec_of

Steps = list[dict[str, Any]]
State = dict[str, Any]


@pytest.fixture(scope="module")
def prod_steps(prod_run: ProgramRun) -> Steps:
    return preview_document(prod_run)["steps"]


@pytest.fixture(scope="module")
def prod_context(prod_spec: ClusterSpec) -> Context:
    return context_for(plan_cluster(prod_spec))


def _state(steps: Steps, name: str) -> State:
    return next(s["newState"] for s in steps if s["newState"]["urn"].endswith("::" + name))


def _of(steps: Steps, suffix: str) -> State:
    return next(s["newState"] for s in steps if s["newState"]["type"].endswith(suffix))


def _nic0(state: State) -> dict[str, Any]:
    return state["inputs"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]


def _add(steps: Steps, typ: str, name: str, inputs: dict[str, Any]) -> None:
    urn = f"urn:pulumi:prod::gpucluster::{typ}::{name}"
    steps.append({"op": "create", "urn": urn, "newState": {"urn": urn, "type": typ, "custom": True, "inputs": inputs}})


def test_prod_passes_preflight(prod_steps: Steps, prod_context: Context) -> None:
    result = preflight(prod_steps, prod_context)
    assert result.errors == []
    assert {w.source for w in result.warnings} <= set(WARNINGS)


def _storage_autonamed(steps: Steps) -> str:
    state = _of(steps, "storage:StorageAccount")
    state["inputs"]["accountName"] = default_name(state["type"], state["urn"], state["urn"].rsplit("::", 1)[-1])
    return "prod-cp-snapshots"


def _vault(steps: Steps, name: str = "prod-confidential-cmk-kv1a2b3c4d", sku: str = "premium") -> str:
    _add(steps, "azure-native:keyvault:Vault", "prod-confidential-cmk-kv",
         {"vaultName": name, "resourceGroupName": "gpucluster-prod", "properties": {"sku": {"family": "A", "name": sku}}})
    return "prod-confidential-cmk-kv"


def _hsm_key_in_standard_vault(steps: Steps) -> str:
    _vault(steps, "prod-cgpu-cmk-1a2b3c4d", "standard")
    _add(steps, "azure-native:keyvault:Key", "prod-confidential-cmk-key",
         {"keyName": "k1", "vaultName": "prod-cgpu-cmk-1a2b3c4d", "resourceGroupName": "gpucluster-prod",
          "properties": {"kty": "RSA-HSM"}})
    return "prod-confidential-cmk-key"


def _duplicate_nsg_name(steps: Steps) -> str:
    _state(steps, "prod-nsg-etcd")["inputs"]["networkSecurityGroupName"] = "prod-nodes"
    return "prod-nsg-"


def _unknown_type(steps: Steps) -> str:
    _of(steps, "network:NatGateway")["type"] = "azure-native:network:RouteTable"
    return "prod-nat"


def _tag_in_plural(steps: Steps) -> str:
    rule = _state(steps, "prod-nsg-nodes")["inputs"]["securityRules"][0]
    rule["sourceAddressPrefixes"] = ["VirtualNetwork"]
    return "prod-nsg-nodes"


def _ib_without_spg(steps: Steps) -> str:
    _state(steps, "h100-z1-00")["inputs"]["singlePlacementGroup"] = False
    return "h100-z1-00"


def _max_spreading_single_group(steps: Steps) -> str:
    _state(steps, "h100-z1-00")["inputs"]["platformFaultDomainCount"] = 1
    return "h100-z1-00"


def _default_spreading_single_group(steps: Steps) -> str:
    """A zonal set that leaves the fault-domain count out gets Azure's default: 1 (max spreading)."""
    del _state(steps, "h100-z2-00")["inputs"]["platformFaultDomainCount"]
    return "h100-z2-00"


def _placement_group_too_big(steps: Steps) -> str:
    _state(steps, "h100-z1-00")["inputs"]["sku"]["capacity"] = 101
    return "h100-z1-00"


def _ephemeral_too_big(steps: Steps) -> str:
    _state(steps, "cpu-z1-00")["inputs"]["virtualMachineProfile"]["storageProfile"]["osDisk"]["diskSizeGB"] = 5000
    return "cpu-z1-00"


def _ephemeral_read_write(steps: Steps) -> str:
    _state(steps, "cpu-z1-00")["inputs"]["virtualMachineProfile"]["storageProfile"]["osDisk"]["caching"] = "ReadWrite"
    return "cpu-z1-00"


def _accelerated_on_ncc(steps: Steps) -> str:
    _nic0(_state(steps, "confidential-z1-00"))["enableAcceleratedNetworking"] = True
    return "confidential-z1-00"


def _too_many_ip_configs(steps: Steps) -> str:
    nic = _nic0(_state(steps, "h100-z1-00"))
    nic["ipConfigurations"] = nic["ipConfigurations"] * 86  # prod's NICs carry 3 (primary + two /28 blocks)
    return "h100-z1-00"


def _too_many_nics(steps: Steps) -> str:
    profile = _state(steps, "system-z1-00")["inputs"]["virtualMachineProfile"]["networkProfile"]
    profile["networkInterfaceConfigurations"] = profile["networkInterfaceConfigurations"] * 9
    return "system-z1-00"


def _cvm_on_nd(steps: Steps) -> str:
    _state(steps, "h100-z1-00")["inputs"]["virtualMachineProfile"]["securityProfile"] = {"securityType": "ConfidentialVM"}
    return "h100-z1-00"


def _encryption_without_vtpm(steps: Steps) -> str:
    profile = _state(steps, "confidential-z1-00")["inputs"]["virtualMachineProfile"]
    profile["securityProfile"]["uefiSettings"]["vTpmEnabled"] = False
    return "confidential-z1-00"


def _customer_key_guest_state_only(steps: Steps) -> str:
    disk = _state(steps, "confidential-z1-00")["inputs"]["virtualMachineProfile"]["storageProfile"]["osDisk"]
    disk["managedDisk"]["securityProfile"] = {
        "securityEncryptionType": "VMGuestStateOnly",
        "diskEncryptionSet": {"id": "/subscriptions/0/resourceGroups/g/providers/Microsoft.Compute/diskEncryptionSets/d"}}
    return "confidential-z1-00"


def _too_many_tags(steps: Steps) -> str:
    tags = _state(steps, "cpu-z1-00")["inputs"]["tags"]
    tags.update({f"extra{i}": "x" for i in range(50)})
    return "cpu-z1-00"


def _long_tag_on_storage(steps: Steps) -> str:
    """Storage accounts take tag names of at most 128 characters, other resources 512 (tag-resources, Limitations)."""
    account = next(s["newState"] for s in steps if s["newState"]["type"] == "azure-native:storage:StorageAccount")
    account["inputs"].setdefault("tags", {})["t" * 200] = "x"
    _state(steps, "cpu-z1-00")["inputs"]["tags"]["t" * 200] = "x"  # fine on a scale set
    return account["urn"].rsplit("::", 1)[-1]


def _slash_in_tag(steps: Steps) -> str:
    _state(steps, "cpu-z1-00")["inputs"]["tags"]["k8s.io/role"] = "x"
    return "cpu-z1-00"


def _zone_four(steps: Steps) -> str:
    _state(steps, "cpu-z1-00")["inputs"]["zones"] = ["4"]
    return "cpu-z1-00"


def _ncc_in_eastus(steps: Steps) -> str:
    _state(steps, "confidential-z1-00")["inputs"]["location"] = "eastus"
    return "confidential-z1-00"


def _long_prefix(steps: Steps) -> str:
    profile = _state(steps, "cpu-z1-00")["inputs"]["virtualMachineProfile"]
    profile["osProfile"]["computerNamePrefix"] = "c" * 59
    return "cpu-z1-00"


def _blocks_through_typed_class(steps: Steps) -> str:
    """prod's /28 blocks on azure-native's typed class: its body builder drops the field (azure-native 3.29)."""
    as_typed_class(_state(steps, "h100-z1-00"))
    return "h100-z1-00"


def _blocks_below_2026_07_02(steps: Steps) -> str:
    """The same route at 2026-04-01, azure-mgmt-compute 39.0.0's default, whose schema lacks the field."""
    _state(steps, "cpu-z1-00")["inputs"]["apiVersion"] = "2026-04-01"
    return "cpu-z1-00"


MUTATIONS: dict[str, tuple[str, Callable[[Steps], str]]] = {
    "storage-name-with-hyphens": ("name-format", lambda s: (
        _of(s, "storage:StorageAccount")["inputs"].update(accountName="prod-cp-snapshots1a2b3c4d"), "prod-cp-snapshots")[1]),
    "storage-autonamed": ("name-global-explicit", _storage_autonamed),
    "vault-name-too-long": ("name-format", _vault),
    "duplicate-nsg-name": ("name-unique", _duplicate_nsg_name),
    "type-without-naming-rule": ("name-type-catalogued", _unknown_type),
    "long-computer-name-prefix": ("computer-name", _long_prefix),
    "tag-in-plural-prefix-field": ("nsg-tag-in-plural-field", _tag_in_plural),
    "infiniband-without-single-placement-group": ("infiniband-single-placement-group", _ib_without_spg),
    "placement-group-over-100": ("placement-group-capacity", _placement_group_too_big),
    "max-spreading-with-single-placement-group": ("fault-domains-placement-group", _max_spreading_single_group),
    "default-spreading-with-single-placement-group": ("fault-domains-placement-group", _default_spreading_single_group),
    "ephemeral-disk-larger-than-resource-disk": ("ephemeral-os-disk", _ephemeral_too_big),
    "ephemeral-disk-read-write": ("ephemeral-os-disk", _ephemeral_read_write),
    "accelerated-networking-on-ncc": ("accelerated-networking", _accelerated_on_ncc),
    "297-ip-configurations": ("ip-configurations-per-nic", _too_many_ip_configs),
    "9-nics-on-d16ds": ("nics-per-size", _too_many_nics),
    "confidential-vm-on-nd": ("confidential-size", _cvm_on_nd),
    "guest-state-without-vtpm": ("confidential-encryption", _encryption_without_vtpm),
    "customer-key-with-guest-state-only": ("confidential-customer-key", _customer_key_guest_state_only),
    "hsm-key-in-standard-vault": ("key-vault-hsm-premium", _hsm_key_in_standard_vault),
    "51-tags": ("tags", _too_many_tags),
    "slash-in-tag-name": ("tags", _slash_in_tag),
    "long-tag-name-on-storage": ("tags", _long_tag_on_storage),
    "zone-4": ("zones", _zone_four),
    "ncc-h100-in-eastus": ("size-region", _ncc_in_eastus),
    "prefix-blocks-through-typed-class": ("prefix-on-nic-api-version", _blocks_through_typed_class),
    "prefix-blocks-at-2026-04-01": ("prefix-on-nic-api-version", _blocks_below_2026_07_02),
}


def test_every_rule_is_broken_by_a_test() -> None:
    from tests.support.preflight_mutations import RACK_MUTATIONS  # rules only a rack stack can break

    assert {rule for rule, _ in MUTATIONS.values()} | {rule for _, rule in RACK_MUTATIONS} == set(RULES)


@pytest.mark.parametrize("case", list(MUTATIONS), ids=list(MUTATIONS))
def test_breaking_a_rule_fails_it(case: str, prod_steps: Steps, prod_context: Context) -> None:
    rule, mutate = MUTATIONS[case]
    steps = copy.deepcopy(prod_steps)
    resource = mutate(steps)
    errors = preflight(steps, prod_context).errors
    assert any(f.source == rule and f.path.startswith(resource) for f in errors), errors
    line = next(str(p) for p in problems(errors) if f"[preflight rule {rule}]" in str(p))
    assert "\n" not in line and line.startswith(resource)


def test_size_outside_its_regions_names_the_regions(prod_steps: Steps, prod_context: Context) -> None:
    steps = copy.deepcopy(prod_steps)
    for state in (s["newState"] for s in steps if is_scale_set(s["newState"])):
        state["inputs"]["location"] = "eastus"
    messages = [f.message for f in preflight(steps, prod_context).errors if f.source == "size-region"]
    ncc = AVAILABILITY["Standard_NCC40ads_H100_v5"]
    assert any(m.startswith("Standard_NCC40ads_H100_v5 is not offered in eastus; it is in eastus2, centralus, "
                            "westeurope") and ncc.source in m for m in messages)


def test_stack_confirmed_zones_are_enforced_and_silence_the_warnings(prod_spec: ClusterSpec, prod_steps: Steps) -> None:
    raw = prod_spec.model_dump(by_alias=True, mode="json")
    raw["sizeRegions"] = {"Standard_ND96isr_H100_v5": {"regions": ["eastus2"], "zones": {"eastus2": ["1", "2"]},
                                                       "source": "az vm list-skus -l eastus2 --zone, 2026-11-20"}}
    result = preflight(prod_steps, context_for(plan_cluster(spec_of(raw))))
    failing = {f.path for f in result.errors if f.source == "size-region"}
    zone3 = {s["newState"]["urn"].rsplit("::", 1)[-1] for s in prod_steps
             if is_scale_set(s["newState"]) and "::h100-z3-" in s["newState"]["urn"]}
    assert failing == zone3 and zone3
    assert {f.source for f in result.errors} == {"size-region"}
    assert not any("Standard_ND96isr_H100_v5" in w.message for w in result.warnings)


def test_unsettled_availability_is_a_warning_row(prod_steps: Steps, prod_context: Context) -> None:
    warnings = preflight(prod_steps, prod_context).warnings
    rules = {(w.source, w.message.split(" ")[3] if w.source == "size-zones-unknown" else "") for w in warnings}
    assert ("size-zones-unknown", "eastus2") in rules
    # Every prod size has a row now (docs/azure-preflight.md): nothing uncatalogued, nothing resting on a third party.
    assert not [w for w in warnings if w.source in ("size-region-uncatalogued", "size-region-secondary")]
    steps = copy.deepcopy(prod_steps)
    _state(steps, "cpu-z1-00")["inputs"]["sku"]["name"] = "Standard_ND128isr_GB300_v6"
    _state(steps, "system-z1-00")["inputs"]["sku"]["name"] = "Standard_F8s_v2"
    warnings = preflight(steps, prod_context).warnings
    assert any(w.source == "size-region-secondary" and "Standard_ND128isr_GB300_v6" in w.message for w in warnings)
    assert any(w.source == "size-region-uncatalogued" and "Standard_F8s_v2" in w.message for w in warnings)


def test_docs_list_every_rule_with_its_source() -> None:
    """docs/azure-preflight.md names every rule and warning with its source, as the code states them."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "azure-preflight.md").read_text()
    for rule in RULES.values():
        assert f"| `{rule.id}` | {rule.azure} | {rule.what} | {rule.source} |" in text, rule.id
    for rule in WARNINGS.values():
        assert f"| `{rule.id}` | {rule.what} | {rule.source} |" in text, rule.id
    for row in AVAILABILITY.values():
        assert f"| `{row.size}` | {', '.join(row.regions)} | {row.source} | {row.as_of} |" in text, row.size
    for row in priced_availability(price_catalogue().rates).values():
        assert f"| `{row.size}` | {', '.join(row.regions)} | {row.source} | {row.as_of} |\n" in text, row.size


def test_an_unconfirmed_availability_row_refuses_no_region(prod_steps: Steps, prod_context: Context) -> None:
    """The ND H100 v5 hand row rests on no Microsoft source and the price answer covers eastus2 only: a region
    neither confirms is a warning, not a plan error."""
    assert not AVAILABILITY["Standard_ND96isr_H100_v5"].primary
    steps = copy.deepcopy(prod_steps)
    _state(steps, "h100-z1-00")["inputs"]["location"] = "southcentralus"
    result = preflight(steps, prod_context)
    assert not [f for f in result.errors if f.source == "size-region" and f.path == "h100-z1-00"]
    assert any(w.source == "size-region-uncatalogued" and "in southcentralus (its row confirms eastus2" in w.message
               for w in result.warnings)

def test_rules_azure_accepts_are_labelled_so() -> None:
    """Azure builds a scale set with singlePlacementGroup false (without InfiniBand: placement-groups.md), and a second
    PUT to the same resource id updates the first resource: neither is refused."""
    assert RULES["infiniband-single-placement-group"].azure == "accepts, deploys wrong"
    assert RULES["name-unique"].azure == "accepts, deploys wrong"
    assert RULES["fault-domains-placement-group"].azure == "refuses"


def test_long_tag_names_are_refused_only_where_azure_refuses_them(prod_steps: Steps, prod_context: Context) -> None:
    steps = copy.deepcopy(prod_steps)
    account = _long_tag_on_storage(steps)
    flagged = {f.path for f in preflight(steps, prod_context).errors if f.source == "tags"}
    assert any(r.startswith(account) for r in flagged) and not any(r.startswith("cpu-z1-00") for r in flagged)


def test_infiniband_sets_keep_one_placement_group_over_five_fault_domains(prod_steps: Steps) -> None:
    """InfiniBand needs a single placement group (setup-infiniband.md); max spreading (1) needs several
    (virtual-machine-scale-sets-use-availability-zones.md); a zonal Uniform set takes 1 or 5: so 5."""
    sets = [s["newState"]["inputs"] for s in prod_steps if is_scale_set(s["newState"])]
    infiniband = [i for i in sets if i["tags"].get("gpucluster-infiniband") == "true"]
    assert len(infiniband) == 32
    assert {(i["singlePlacementGroup"], i["platformFaultDomainCount"]) for i in infiniband} == {(True, 5)}
    assert {(i["singlePlacementGroup"], i["platformFaultDomainCount"]) for i in sets if i not in infiniband} == {(False, 1)}


def test_a_priced_linux_meter_confirms_its_region_and_refuses_no_other(prod_steps: Steps,
                                                                        prod_context: Context) -> None:
    """The price catalogue's saved eastus2 answer has a Linux pay-as-you-go D8s_v5 meter: eastus2 is confirmed (no
    uncatalogued warning); another region is a warning naming what the row confirms, never a plan error. A
    third-party price row (ND H100 v5 in eastus) confirms nothing."""
    row = availability_rows(price_catalogue().rates)["Standard_D8s_v5"]
    assert row.primary and not row.exhaustive and row.regions == ("eastus2",)
    assert "price_answers/eastus2-vm-2026-09-01.json" in row.source
    assert [r.region for r in price_catalogue().rates if r.sku == "Standard_ND96isr_H100_v5" and r.option == "payg"
            and r.answer is None] == ["eastus"]
    assert availability_rows(price_catalogue().rates)["Standard_ND96isr_H100_v5"].regions == ("eastus2",)
    steps = copy.deepcopy(prod_steps)
    _state(steps, "system-z1-00")["inputs"]["sku"]["name"] = "Standard_D8s_v5"
    result = preflight(steps, prod_context)
    # The region is settled; which of its zones offer the size is not (logical zones differ per subscription).
    assert [w.source for w in result.warnings if "Standard_D8s_v5" in w.message] == ["size-zones-unknown"]
    _state(steps, "system-z1-00")["inputs"]["location"] = "westus2"
    result = preflight(steps, prod_context)
    assert not [f for f in result.errors if f.path == "system-z1-00" and f.source == "size-region"]
    (warning,) = [w for w in result.warnings if w.source == "size-region-uncatalogued" and "Standard_D8s_v5" in w.message]
    assert "in westus2 (its row confirms eastus2" in warning.message


def test_a_warning_row_points_to_its_source_instead_of_quoting_it(prod_steps: Steps, prod_context: Context) -> None:
    """An unconfirmed row's whole citation in the message was a ten-line cell in prod's terminal table (the ND H100
    v5 row's, before its price answer confirmed eastus2): the message names where the source is
    (docs/azure-preflight.md) and stays short."""
    steps = copy.deepcopy(prod_steps)
    _state(steps, "h100-z1-00")["inputs"]["location"] = "southcentralus"
    _state(steps, "cpu-z1-00")["inputs"]["sku"]["name"] = "Standard_ND128isr_GB300_v6"
    warnings = preflight(steps, prod_context).warnings
    (secondary,) = {w.message for w in warnings if w.source == "size-region-secondary"}
    assert "docs/azure-preflight.md" in secondary and "theneuralbase" not in secondary
    assert max(len(w.message) for w in warnings) <= 400  # the quoted citation made it 700
