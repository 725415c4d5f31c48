"""The add-ons that write to scale sets hold read on the gallery image their scale sets boot.

Every node scale set boots a Compute Gallery image version, and ARM's linked access check asks for
`Microsoft.Compute/galleries/images/versions/read` on it for any write to the scale set or one of its VMs (error
LinkedAuthorizationFailed naming that action on a scale-set CreateOrUpdate, Azure/aad-pod-identity#752, and on a
scale-set VM update, Azure/azure-cli#15594). The fake ARM (tests/support/fake_arm.py) makes that check; the identities here
hold exactly the roles the plan renders (RoleDefinition actions at each RoleAssignment's scope), and make the writes
the add-ons make: cluster-autoscaler's sparse capacity PUT ({name, location, sku}, kubernetes/autoscaler
cluster-autoscaler-1.36.1 azure_scale_set.go) and Cilium's Azure IPAM whole-VM update (cilium pkg/azure/api/api.go
AssignPrivateIpAddressesVMSS, on stacks with secondary addresses: gb300 here, dev too).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import ComputeManagementClient, models

from gpucluster.azure.scale_set.provider import ScaleSetProvider
from gpucluster.catalog.arm_operations import GALLERY_IMAGE_READ
from gpucluster.offline.engine import ProgramRun
from tests.support.fake_arm import DEPLOYER, FakeArm, Grant, IdentityCredential, fake_arm


def rendered_grants(run: ProgramRun, cluster: str, addon: str) -> list[Grant]:
    """What the plan grants an add-on's identity: each of its role assignments' definition actions, at the
    assignment's scope."""
    definitions = {r.inputs["roleDefinitionId"]: r.inputs for r in run.registrations
                   if r.type == "azure-native:authorization:RoleDefinition"}
    grants = []
    for assignment in (r for r in run.registrations if r.type == "azure-native:authorization:RoleAssignment"
                       and r.name.startswith(f"{cluster}-addons-{addon}-")):
        definition = definitions[assignment.inputs["roleDefinitionId"].rsplit("/", 1)[-1]]
        grants += [Grant(action, assignment.inputs["scope"]) for p in definition["permissions"] for action in p["actions"]]
    return grants


def _scale_set(run: ProgramRun, name: str | None = None) -> dict[str, Any]:
    reg = next(r for r in run.registrations if r.custom and r.inputs.get("armType") ==
               "Microsoft.Compute/virtualMachineScaleSets" and (name is None or r.name == name))
    return {k: v for k, v in copy.deepcopy(reg.inputs).items() if k != "__provider"}


def _deploy(arm: FakeArm, inputs: dict[str, Any]) -> str:
    provider = ScaleSetProvider(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                                polling_interval=0)
    return provider.create(inputs).id


def _client(arm: FakeArm, token: str, subscription: str) -> ComputeManagementClient:
    return ComputeManagementClient(IdentityCredential(token), subscription, base_url=arm.base_url,
                                   connection_verify=arm.ca_file, polling_interval=0)


def _autoscaler_resize(arm: FakeArm, inputs: dict[str, Any], capacity: int) -> None:
    client = _client(arm, "autoscaler", inputs["subscriptionId"])
    body = {"location": inputs["location"], "sku": {**inputs["sku"], "capacity": capacity}}
    client.virtual_machine_scale_sets.begin_create_or_update(
        inputs["resourceGroupName"], inputs["vmScaleSetName"], models.VirtualMachineScaleSet(body),
        api_version=inputs["apiVersion"]).result()


def test_the_autoscalers_capacity_write_passes_the_linked_check(tmp_path: Path, prod_run: ProgramRun) -> None:
    inputs = _scale_set(prod_run, "h100-z1-00")
    grants = rendered_grants(prod_run, "prod", "autoscaler")
    with fake_arm(tmp_path) as arm:
        path = _deploy(arm, inputs)
        arm.identities["autoscaler"] = grants
        _autoscaler_resize(arm, inputs, 5)
        stored = arm.stored(path)
        assert stored is not None and stored["sku"]["capacity"] == 5

        # without the gallery grant (the role as it was), ARM refuses the same write
        arm.identities["autoscaler"] = [g for g in grants if g.action != GALLERY_IMAGE_READ]
        with pytest.raises(HttpResponseError) as refused:
            _autoscaler_resize(arm, inputs, 6)
        assert refused.value.status_code == 403 and refused.value.error is not None
        assert refused.value.error.code == "LinkedAuthorizationFailed" and GALLERY_IMAGE_READ in str(refused.value)


def test_ciliums_vm_update_passes_the_linked_check(tmp_path: Path, gb300_program: ProgramRun) -> None:
    inputs = _scale_set(gb300_program)
    grants = rendered_grants(gb300_program, "gb300", "cni")
    assert grants, "gb300 runs Cilium's Azure IPAM (secondary addresses): it has a cni identity"
    with fake_arm(tmp_path) as arm:
        [vm_path] = arm.add_instances(_deploy(arm, inputs), 1)
        client = _client(arm, "cni", inputs["subscriptionId"])

        def add_address() -> None:
            vm = client.virtual_machine_scale_set_vms.get(inputs["resourceGroupName"], inputs["vmScaleSetName"], "0",
                                                          api_version=inputs["apiVersion"])
            client.virtual_machine_scale_set_vms.begin_update(
                inputs["resourceGroupName"], inputs["vmScaleSetName"], "0", vm,
                api_version=inputs["apiVersion"]).result()

        arm.identities["cni"] = grants
        add_address()
        assert [r.method for r in arm.requests if r.path == vm_path] == ["GET", "PUT", "GET"]  # the poller reads back

        arm.identities["cni"] = [g for g in grants if g.action != GALLERY_IMAGE_READ]
        with pytest.raises(HttpResponseError) as refused:
            add_address()
        assert refused.value.status_code == 403 and GALLERY_IMAGE_READ in str(refused.value)


def test_the_gallery_grant_is_scoped_to_the_gallery(prod_run: ProgramRun) -> None:
    [gallery] = [g for g in rendered_grants(prod_run, "prod", "autoscaler") if g.action == GALLERY_IMAGE_READ]
    assert gallery.scope.lower().endswith("/providers/microsoft.compute/galleries/prod.node.images")
