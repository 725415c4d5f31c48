"""Names Azure sees for globally unique resources, NSG source fields, add-on roles: the six rejections fixed.

Sources: Microsoft Learn "Naming rules and restrictions for Azure resources" (azure-docs
articles/azure-resource-manager/management/resource-name-rules.md): storage accounts 3-24 lowercase letters and
digits, key vaults 3-24 alphanumerics and hyphens starting with a letter, ending with a letter or digit, no `--`;
both globally unique. NSG: ARM refuses a service tag in `sourceAddressPrefixes`
(`SecurityRuleParameterContainsUnsupportedValue`, terraform-provider-azurerm#5617); pulumi_azure_native 3.29
documents tags on `source_address_prefix` only.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucluster.catalog.addon_permissions import ADDON_PERMISSIONS, addons_for
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.azure_names import deterministic_guid, key_vault_name, storage_account_name
from gpucluster.planning.security_rules import source_prefix_fields
from gpucluster.spec.pools import NAME_PATTERN

STORAGE = re.compile(r"^[a-z0-9]{3,24}$")
VAULT = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{1,22}[a-zA-Z0-9]$")
SUB_A, SUB_B = "00000000-0000-0000-0000-000000000000", "11111111-2222-3333-4444-555555555555"

names = st.from_regex(NAME_PATTERN, fullmatch=True)


@given(cluster=names, pool=names)
def test_global_names_follow_azure_rules_for_any_cluster_and_pool(cluster: str, pool: str) -> None:
    account = storage_account_name(SUB_A, f"gpucluster-{cluster}", cluster, "etcd")
    vault = key_vault_name(SUB_A, f"gpucluster-{cluster}", cluster, f"{pool}-cmk")
    assert STORAGE.match(account), account
    assert VAULT.match(vault) and "--" not in vault, vault


def test_global_names_are_stable_and_differ_per_subscription_and_group() -> None:
    first = storage_account_name(SUB_A, "gpucluster-prod", "prod", "etcd")
    assert first == storage_account_name(SUB_A, "gpucluster-prod", "prod", "etcd")
    assert first != storage_account_name(SUB_B, "gpucluster-prod", "prod", "etcd")
    assert first != storage_account_name(SUB_A, "gpucluster-prod2", "prod", "etcd")
    vault = key_vault_name(SUB_A, "gpucluster-prod", "prod", "confidential-cmk")
    assert vault == key_vault_name(SUB_A, "gpucluster-prod", "prod", "confidential-cmk")
    assert vault != key_vault_name(SUB_B, "gpucluster-prod", "prod", "confidential-cmk")
    assert deterministic_guid("a", "b") == deterministic_guid("a", "b") != deterministic_guid("a", "c")


def test_service_tags_go_in_the_singular_field() -> None:
    assert source_prefix_fields(("VirtualNetwork",)) == {"source_address_prefix": "VirtualNetwork"}
    assert source_prefix_fields(("*",)) == {"source_address_prefix": "*"}
    assert source_prefix_fields(("10.0.0.0/24", "10.0.1.0/24")) == {"source_address_prefixes": ["10.0.0.0/24",
                                                                                                "10.0.1.0/24"]}
    with pytest.raises(ValueError, match="split the rule"):
        source_prefix_fields(("Internet", "10.0.0.0/8"))


def test_prod_names_and_nsg_rules_azure_accepts(prod_run: ProgramRun) -> None:
    (account,) = [r for r in prod_run.registrations if r.type == "azure-native:storage:StorageAccount"]
    assert STORAGE.match(account.inputs["accountName"])
    for nsg in (r for r in prod_run.registrations if r.type == "azure-native:network:NetworkSecurityGroup"):
        for rule in nsg.inputs["securityRules"]:
            for prefix in rule.get("sourceAddressPrefixes", []):
                assert re.match(r"^\d+\.\d+\.\d+\.\d+(/\d+)?$", prefix), (nsg.name, rule["name"], prefix)


def test_addon_roles_grant_what_the_addons_call(prod_run: ProgramRun) -> None:
    """cluster-autoscaler 1.36.1 writes scale-set capacity and deletes instances. prod puts pods in /28 blocks, so
    Cilium runs `ipam: crd` and calls no Azure API: no CNI identity; the prefix IPAM controller reads the scale
    sets' NICs (one list per scale set) and nothing else. Network Contributor / VM Contributor alone gave 403s; a
    custom role per scope carries exactly the catalogued actions and nothing else."""
    definitions = [r for r in prod_run.registrations if r.type == "azure-native:authorization:RoleDefinition"
                   and "-addons-" in r.name]
    granted: dict[str, set[str]] = {}
    for definition in definitions:
        addon = next(a for a in ADDON_PERMISSIONS if f"-{a}-" in definition.name)
        assert definition.inputs["assignableScopes"] == [definition.inputs["scope"]]
        granted.setdefault(addon, set()).update(definition.inputs["permissions"][0]["actions"])
        assert not any(a.endswith("/*") or a == "*" for a in definition.inputs["permissions"][0]["actions"])
    assert granted == {addon: {p.action for p in ADDON_PERMISSIONS[addon]} for addon in addons_for(True)}
    # the controller lists a whole scale set's NICs: the scale-set action, not the per-VM one (tests/test_addon_roles.py)
    assert granted["prefix-ipam"] == {"Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read"}
    assert [d for d in definitions if "/resourceGroups/" not in d.inputs["scope"]] == []
    assignments = {r.name for r in prod_run.registrations if r.type == "azure-native:authorization:RoleAssignment"}
    assert {"prod-addons-autoscaler-role", "prod-addons-prefix-ipam-role"} <= assignments


def test_cilium_azure_ipam_role_with_secondary_ips(dev_out) -> None:
    """Cilium's Azure IPAM updates scale-set VMs (cilium pkg/azure/api/api.go VirtualMachineScaleSetVMs.BeginUpdate):
    dev runs it (secondary IPs). Since cilium PR #41555 it gets the subnets in use instead of listing every VNet of
    the subscription, so nothing is granted outside the resource group."""
    import json
    steps = json.loads((dev_out / "preview.json").read_text())["steps"]
    definitions = [s["newState"]["inputs"] for s in steps
                   if s["newState"]["type"] == "azure-native:authorization:RoleDefinition" and "-addons-" in s["urn"]]
    actions = {a for d in definitions for a in d["permissions"][0]["actions"]}
    assert actions == {p.action for addon in addons_for(False) for p in ADDON_PERMISSIONS[addon]}
    assert "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write" in actions
    assert [d for d in definitions if "/resourceGroups/" not in str(d["scope"])] == []
