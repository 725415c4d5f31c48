"""The offline engine's resource ids are shaped as Azure's: the plan's preview.json and every id a resource
references (identities on scale sets, subnets on NICs, a role's scope) use the resource provider's own plural and
casing (`publicIPPrefixes`, `Microsoft.ManagedIdentity/userAssignedIdentities`), children under their parents (a blob
container under `blobServices/default`), extension resources under their scope. The templates and their sources are
components/catalog/arm_types.py (azure-native's resource docs, Import section, generated from the REST specs)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpucluster.catalog.arm_types import ARM_TYPES, SUB_RESOURCES, id_pattern
from gpucluster.catalog.autonaming import NAME_PROPERTIES
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.mock_values import SUBSCRIPTION, computed_state
from gpucluster.offline.preview import preview_document

PATTERNS = [id_pattern(t.path) for t in (*ARM_TYPES.values(), *SUB_RESOURCES.values())]
ID = re.compile(rf"/subscriptions/{SUBSCRIPTION}[^\"\s\\]*")


def test_every_declared_type_has_an_arm_id_template_with_its_source() -> None:
    assert set(ARM_TYPES) == set(NAME_PROPERTIES)
    for token, row in ARM_TYPES.items():
        assert row.source.endswith(f"({token})")
        name_input = NAME_PROPERTIES[token][0]
        assert row.path.endswith("{" + name_input + "}"), token  # the name input is the id's last segment


@pytest.mark.parametrize(("token", "inputs", "expected"), [
    ("azure-native:network:PublicIPPrefix", {"resourceGroupName": "rg", "publicIpPrefixName": "egress"},
     "resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/egress"),
    ("azure-native:managedidentity:UserAssignedIdentity", {"resourceGroupName": "rg", "resourceName": "ca"},
     "resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/ca"),
    ("azure-native:storage:BlobContainer", {"resourceGroupName": "rg", "accountName": "sa", "containerName": "c"},
     "resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/sa/blobServices/default/containers/c"),
    ("azure-native:keyvault:Key", {"resourceGroupName": "rg", "vaultName": "kv", "keyName": "k"},
     "resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv/keys/k"),
    ("azure-native:network:Subnet", {"resourceGroupName": "rg", "virtualNetworkName": "v", "subnetName": "s"},
     "resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s"),
    ("azure-native:resources:ResourceGroup", {"resourceGroupName": "rg"}, "resourceGroups/rg"),
])
def test_mock_ids_are_azures(token: str, inputs: dict[str, Any], expected: str) -> None:
    resource_id, _ = computed_state(token, "logical", inputs)
    assert resource_id == f"/subscriptions/{SUBSCRIPTION}/{expected}"


def test_extension_resources_sit_under_their_scope() -> None:
    scope = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg"
    resource_id, _ = computed_state("azure-native:authorization:RoleAssignment", "a",
                                    {"scope": scope, "roleAssignmentName": "0000-guid"})
    assert resource_id == f"{scope}/providers/Microsoft.Authorization/roleAssignments/0000-guid"


def _ids(document: dict[str, Any]) -> set[str]:
    return set(ID.findall(json.dumps(document)))


def _unshaped(ids: set[str]) -> list[str]:
    return sorted(i for i in ids if not any(p.match(i) for p in PATTERNS))


def test_every_id_in_the_prod_preview_is_shaped_as_azures(prod_run: ProgramRun) -> None:
    ids = _ids(preview_document(prod_run)) | {computed_state(r.type, r.name, r.inputs)[0] for r in prod_run.registrations
                                              if r.custom and r.type.startswith("azure-native:")}
    assert len(ids) > 40 and _unshaped(ids) == []
    assert any("/publicIPPrefixes/" in i for i in ids) and any("/blobServices/default/containers/" in i for i in ids)


def test_every_id_in_the_dev_preview_is_shaped_as_azures(dev_out: Path) -> None:
    ids = _ids(json.loads((dev_out / "preview.json").read_text()))
    assert ids and _unshaped(ids) == []


def test_a_wrong_plural_is_caught() -> None:
    """The shapes the engine gave before: a plain `s` plural and a capitalised module name."""
    wrong = {f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixs/e",
             f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Managedidentity/userAssignedIdentitys/i",
             f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Storage/blobContainers/c"}
    assert _unshaped(wrong) == sorted(wrong)
