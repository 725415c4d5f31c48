"""Node scale-set bodies from azure-mgmt-compute's models (PyPI, the pinned 39.x): the facts the route rests on.

- azure-mgmt-compute 39.0.0 models carry `private_ip_address_prefix_length` (wire name privateIPAddressPrefixLength)
  on both scale-set IP configuration models, and send api-version 2026-04-01 unless told otherwise
  (azure/mgmt/compute/operations/_operations.py): the provider must pass 2026-07-02;
- what the update model lacks is what Azure cannot change in place: components/azure/scale_set/routes.py's table is
  derived from the models and must match them;
- prod's declared inputs convert to a wire body with no field the models do not carry, the blocks in place.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from gpucluster.azure.scale_set.routes import CREATE_ONLY_PATHS, SCALE_SET_API_VERSION, scale_set_replacement
from gpucluster.azure.scale_set.update_schema import ROOT, UPDATE_DEFINITIONS, UPDATE_SCHEMA_API_VERSION
from gpucluster.azure.scale_set.wire import (
    UnknownFieldError,
    create_only_paths_at,
    fields,
    from_wire,
    model,
    to_wire,
)
from gpucluster.offline.engine import ProgramRun
from tests.support.scale_sets import is_scale_set


def test_the_sdk_models_carry_the_prefix_field() -> None:
    for name in ("VirtualMachineScaleSetIPConfiguration", "VirtualMachineScaleSetUpdateIPConfiguration"):
        field = fields(model(name))["privateIPAddressPrefixLength"]
        assert field.envelope == "properties" and field.kind.shape == "leaf"


def test_the_sdk_defaults_to_an_api_version_without_the_field() -> None:
    """Why the provider passes api_version on every call: the SDK's own default predates the field."""
    from azure.mgmt.compute.operations import _operations

    source = inspect.getsource(_operations.build_virtual_machine_scale_sets_update_request)
    assert '"api-version", "2026-04-01"' in source and SCALE_SET_API_VERSION == "2026-07-02"


def test_the_create_only_table_follows_the_update_model_of_the_version_we_send() -> None:
    """Derived from the 2026-07-02 REST update definitions (the version every body is sent at), not from the SDK's
    update model: the two differ (azure-mgmt-compute 39.0.0's update model carries storageProfile.diskApiVersion)."""
    assert UPDATE_SCHEMA_API_VERSION == SCALE_SET_API_VERSION
    assert create_only_paths_at(UPDATE_DEFINITIONS, ROOT) == list(CREATE_ONLY_PATHS)
    sdk_update = fields(model("VirtualMachineScaleSetUpdateStorageProfile"))
    assert "diskApiVersion" in sdk_update and "diskApiVersion" not in UPDATE_DEFINITIONS[
        "VirtualMachineScaleSetUpdateStorageProfile"]
    assert "virtualMachineProfile.storageProfile.diskApiVersion" in CREATE_ONLY_PATHS
    assert scale_set_replacement("virtualMachineProfile.storageProfile.diskApiVersion") is not None


def test_prod_scale_sets_convert_with_their_blocks(prod_run: ProgramRun) -> None:
    sets = [r for r in prod_run.registrations if r.custom and r.type.startswith("pulumi-python:dynamic")
            and is_scale_set({"type": r.type, "inputs": r.inputs})]
    assert len(sets) == 43
    for reg in sets:
        declared = {k: v for k, v in reg.inputs.items()
                    if k not in ("armType", "apiVersion", "subscriptionId", "resourceGroupName", "vmScaleSetName",
                                 "__provider")}
        wire = to_wire(declared)
        nic = wire["properties"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
        blocks = [c for c in nic["properties"]["ipConfigurations"] if "privateIPAddressPrefixLength" in c["properties"]]
        assert blocks and all(c["properties"]["privateIPAddressPrefixLength"] == 28 for c in blocks)
        back = from_wire(wire)
        assert back["virtualMachineProfile"] == declared["virtualMachineProfile"]


def test_a_field_the_models_lack_is_refused_not_dropped() -> None:
    body: dict[str, Any] = {"virtualMachineProfile": {"networkProfile": {"networkInterfaceConfigurations": [
        {"name": "nic0", "ipConfigurations": [{"name": "p", "privateIPAddressPrefixLenght": 28}]}]}}}
    with pytest.raises(UnknownFieldError, match=r"ipConfigurations\[0\]\.privateIPAddressPrefixLenght"):
        to_wire(body)
