"""The offline engine names resources as azure-native does, so preview.json carries the names Azure sees.

pulumi-azure-native provider/pkg/provider/provider.go `getDefaultName`: strategy `random` is the URN name + 8 hex
(`autonaming_test.go` expects `test614742c2` for `test`), `uuid` a GUID; the seed here is the URN, so the same
program gives the same names.
"""

from __future__ import annotations

import re

from gpucluster.catalog.autonaming import NAME_PROPERTIES, autoname, default_name
from gpucluster.offline.engine import ProgramRun
from gpucluster.policies.rules.props import resource_kind
from gpucluster.preflight.naming import NAMING

URN = "urn:pulumi:stack::project::azure-native:storage:StorageAccount::test"


def test_random_strategy_is_the_logical_name_and_8_hex() -> None:
    name = default_name("azure-native:storage:StorageAccount", URN, "test")
    assert name is not None and re.fullmatch(r"test[0-9a-f]{8}", name)
    assert name == default_name("azure-native:storage:StorageAccount", URN, "test")
    assert name != default_name("azure-native:storage:StorageAccount", URN + "2", "test")


def test_uuid_strategy_and_names_the_program_set() -> None:
    guid = default_name("azure-native:authorization:RoleAssignment", URN, "test")
    assert guid is not None and re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", guid)
    assert autoname("azure-native:storage:StorageAccount", URN, "test", {"accountName": "mine"}) is None
    assert autoname("azure-native:storage:StorageAccount", URN, "test", {}) == ("accountName", default_name(
        "azure-native:storage:StorageAccount", URN, "test"))
    assert autoname("random:index/randomString:RandomString", URN, "test", {}) is None


def test_every_type_has_a_naming_rule_and_an_autoname_property() -> None:
    assert set(NAME_PROPERTIES) == set(NAMING)


def test_preview_carries_effective_names(prod_run: ProgramRun) -> None:
    # Node scale sets are dynamic resources judged as the typed scale set (policies/rules/props.py resource_kind).
    azure = [r for r in prod_run.registrations if r.custom and resource_kind(r.type, r.inputs).startswith("azure-native:")]
    for registration in azure:
        prop, _ = NAME_PROPERTIES[resource_kind(registration.type, registration.inputs)]
        assert isinstance(registration.inputs.get(prop), str), (registration.name, prop)
    every = {r.inputs["resourceName"] for r in azure if r.type.endswith("UserAssignedIdentity")}
    assert {re.sub(r"[0-9a-f]{8}$", "", n) for n in every} == {"prod-addons-autoscaler", "prod-addons-prefix-ipam",
                                                               "prod-addons-node-lifecycle", "prod-images-builder",
                                                               "prod-registry-pull", "prod-metrics-writer",
                                                               "prod-addons-rollout", "prod-deploy-runner-identity"}
    # the system pool's
    identities = {n for n in every if n.startswith(("prod-addons-", "prod-registry-pull", "prod-metrics-writer"))}
    # What depends on an autonamed resource sees the effective name, as it would after `pulumi up`.
    system = next(r for r in azure if r.name == "system-z1-00")
    attached = system.inputs["identity"]["userAssignedIdentities"]
    assert sorted(i.rsplit("/", 1)[-1] for i in attached) == sorted(identities)
