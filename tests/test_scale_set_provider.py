"""The node scale sets' dynamic provider against a fake ARM on 127.0.0.1 (tests/support/fake_arm.py), through Microsoft's own
SDK (azure-mgmt-compute 39, azure-core's pipeline, retry policy and ARM pollers).

What it pins, with the consumer's rule:
- create PUTs the full body at Microsoft.Compute 2026-07-02, zones and the /28 field included (the field exists
  from that version: azure-rest-api-specs Compute/stable/2026-07-02/ComputeRP.json), with `If-None-Match: *`, and
  returns on ARM's 201 (provisioningState Creating, the operation's URL in the outputs): nothing polled, so the
  dynamic-provider host's worker is free again (the wait is ScaleSetsReady's, tests/test_scale_sets_ready.py);
- an update after the autoscaler resized the set sends no `sku`, so the live capacity stays (cluster-autoscaler
  owns it: kubernetes/autoscaler cloudprovider/azure/azure_scale_set.go writes {name, sku, location});
- read returns the live capacity and provisioningState, import reads the same shape as the declaration, delete
  waits until it is gone;
- 429 with Retry-After is retried (azure-core RetryPolicy), the delete's Location is polled (azure-mgmt-core
  ARMPolling).
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from gpucluster.azure.scale_set.arm_client import NotOursError
from gpucluster.azure.scale_set.provider import ScaleSetProvider, patch_body
from gpucluster.azure.scale_set.provider import resource_id as scale_set_id
from gpucluster.azure.scale_sets_ready_provider import ScaleSetsReadyProvider
from gpucluster.offline.engine import ProgramRun
from gpucluster.vocabulary import CLUSTER_TAG
from tests.support.fake_arm import DEPLOYER, FakeArm, fake_arm


def _provider(arm: FakeArm) -> ScaleSetProvider:
    return ScaleSetProvider(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                            polling_interval=0)


@pytest.fixture(scope="module")
def h100_inputs(prod_run: ProgramRun) -> dict[str, Any]:
    """prod's first InfiniBand scale set as the program declares it (its /28 blocks included)."""
    reg = next(r for r in prod_run.registrations if r.name == "h100-z1-00" and r.custom)
    return {k: v for k, v in copy.deepcopy(reg.inputs).items() if k != "__provider"}


def _wait(arm: FakeArm, outs: dict[str, Any]) -> None:
    """What ScaleSetsReady does for this one scale set: its operation polled until it ended Succeeded."""
    ScaleSetsReadyProvider(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                           polling_interval=0).create({
        "scaleSets": [{"name": outs["vmScaleSetName"], "id": scale_set_id(outs), "operation": outs["operation"],
                       "vmSize": outs["sku"]["name"], "zone": outs["zones"][0]}],
        "deadlineSeconds": 30, "concurrency": 1})


def _ip_configurations(wire: dict[str, Any]) -> list[dict[str, Any]]:
    nic = wire["properties"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
    return nic["properties"]["ipConfigurations"]


def test_the_provider_lifecycle_against_arm(tmp_path: Path, h100_inputs: dict[str, Any]) -> None:
    props = copy.deepcopy(h100_inputs)
    with fake_arm(tmp_path) as arm:
        provider = _provider(arm)
        arm.throttle(1)
        created = provider.create(props)

        # create: throttled once, retried after Retry-After; the full body at 2026-07-02 with zones and the blocks
        puts = arm.calls("PUT")
        assert len(puts) == 2 and arm.requests[0].method == "PUT"
        put = puts[-1]
        assert put.api_version == "2026-07-02" and put.headers["if-none-match"] == "*"
        assert put.headers["authorization"] == "Bearer fake-token"
        assert put.body["zones"] == ["1"] and put.body["sku"]["capacity"] == props["sku"]["capacity"]
        configs = _ip_configurations(put.body)
        assert len(configs) > 1 and "privateIPAddressPrefixLength" not in configs[0]["properties"]
        assert all(c["properties"]["privateIPAddressPrefixLength"] == 28 for c in configs[1:])
        # returned on ARM's answer: no poll, no GET; the scale set is in Azure and in the outputs as Creating
        assert not arm.polls() and not arm.calls("GET")
        path = created.id
        assert path == ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/gpucluster-prod/providers/"
                        "Microsoft.Compute/virtualMachineScaleSets/h100-z1-00")
        stored = arm.stored(path)
        assert stored is not None and stored["properties"]["provisioningState"] == "Creating"
        assert created.outs is not None and created.outs["zones"] == ["1"]
        assert created.outs["provisioningState"] == "Creating"
        assert created.outs["operation"].startswith(f"{arm.base_url}/subscriptions/s/providers/Microsoft.Compute/")
        _wait(arm, created.outs)

        # the autoscaler grows the set; then a change of image version, tags and boot text goes out
        arm.set_capacity(path, 77)
        news = copy.deepcopy(props)
        news["tags"]["gpucluster-note"] = "changed"
        news["virtualMachineProfile"]["osProfile"]["customData"] = base64.b64encode(b"#cloud-config\n").decode()
        news["virtualMachineProfile"]["storageProfile"]["imageReference"]["version"] = "22.04.2026110"
        news["sku"] = {**news["sku"], "capacity": 3}  # a plan figure: never sent
        diff = provider.diff(path, created.outs, news)
        assert diff.changes and not diff.replaces
        updated = provider.update(path, created.outs, news)
        assert updated.outs is not None and updated.outs["provisioningState"] == "Updating"
        assert updated.outs["operation"] != created.outs["operation"]
        _wait(arm, updated.outs)
        [patch] = arm.calls("PATCH")
        assert patch.api_version == "2026-07-02" and "sku" not in patch.body
        assert patch.body["tags"]["gpucluster-note"] == "changed"
        assert patch.body["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"]["version"] == \
            "22.04.2026110"
        assert all(c["properties"]["privateIPAddressPrefixLength"] == 28 for c in _ip_configurations(patch.body)[1:])
        after = arm.stored(path)
        assert after is not None and after["sku"]["capacity"] == 77
        assert updated.outs is not None and updated.outs["sku"]["capacity"] == 77

        # refresh reads the live state: capacity is the autoscaler's, customData (never returned) is kept
        read = provider.read(path, updated.outs)
        assert read.id == path and read.outs is not None and read.outs["sku"]["capacity"] == 77
        assert read.outs["provisioningState"] == "Succeeded" and read.outs["operation"] == updated.outs["operation"]
        assert read.outs["virtualMachineProfile"]["osProfile"]["customData"] == \
            news["virtualMachineProfile"]["osProfile"]["customData"]
        assert not provider.diff(path, read.outs, news).changes

        # import: the id and the declaration alone read back as the declaration (so the import shows no diff)
        imported = provider.read(path, copy.deepcopy(news))
        assert imported.inputs is not None and not provider.diff(path, imported.inputs, news).changes

        # delete: 202 + Location polled until the scale set is gone; a second read finds nothing
        provider.delete(path, read.outs)
        [delete] = arm.calls("DELETE")
        assert delete.api_version == "2026-07-02"
        assert [r for r in arm.requests if "/operationResults/" in r.path] and arm.stored(path) is None
        assert provider.read(path, read.outs).id == ""
        provider.delete(path, read.outs)  # already gone: done


def test_create_never_takes_over_a_scale_set_it_cannot_prove_its_own(tmp_path: Path,
                                                                      h100_inputs: dict[str, Any]) -> None:
    """Another stack's (or a hand-made) scale set of the same name: one PUT (412), one GET, then one line naming the
    tags and the fix. Nothing is written to it."""
    with fake_arm(tmp_path) as arm:
        provider = _provider(arm)
        theirs = copy.deepcopy(h100_inputs)
        theirs["tags"] = {**theirs["tags"], CLUSTER_TAG: "someone-else"}
        path = provider.create(theirs).id
        with pytest.raises(NotOursError) as refused:
            provider.create(copy.deepcopy(h100_inputs))
        message = str(refused.value)
        assert "\n" not in message and f"{CLUSTER_TAG}='someone-else' (this stack: 'prod')" in message
        assert "az vmss delete -g gpucluster-prod -n h100-z1-00" in message
        assert len(arm.calls("PUT")) == 2 and [r.headers.get("if-none-match") for r in arm.calls("PUT")] == ["*", "*"]
        stored = arm.stored(path)
        assert stored is not None and stored["tags"][CLUSTER_TAG] == "someone-else"

        # our own tags, but live (Succeeded): never adopted, since a create-before-delete replacement (an `aliases`
        # move, `--target-replace`) would adopt its predecessor just before the engine deleted it
        arm.edit(path, lambda stored: stored["tags"].update({CLUSTER_TAG: "prod"}))
        with pytest.raises(NotOursError) as live:
            provider.create(copy.deepcopy(h100_inputs))
        assert "provisioningState Succeeded" in str(live.value) and "`import_` resource option" in str(live.value)
        assert len(arm.calls("PUT")) == 3 and len(arm.calls("PATCH")) == 0


def test_a_failed_scale_set_the_state_never_recorded_is_adopted_by_the_next_up(tmp_path: Path,
                                                                               h100_inputs: dict[str, Any]) -> None:
    """ARM accepted the PUT, but its answer never reached the engine (the host stopped, the connection dropped), and
    the allocation then failed: the scale set is in Azure (Failed), not in the state. The next `up`'s create gets
    412, finds the stack's own tags, and PUTs the same body again with If-Match on the etag it read: one adoption,
    no 412 loop."""
    with fake_arm(tmp_path) as arm:
        provider = _provider(arm)
        arm.fail_next_create("AllocationFailed")
        path = provider.create(copy.deepcopy(h100_inputs)).id  # an answer the engine never got
        left = arm.stored(path)
        assert left is not None

        created = provider.create(copy.deepcopy(h100_inputs))
        assert created.id == path and created.outs is not None
        first, refused, adopted = arm.calls("PUT")
        assert first.headers.get("if-none-match") == refused.headers.get("if-none-match") == "*"
        assert adopted.headers.get("if-match") == left["etag"] and "if-none-match" not in adopted.headers
        assert adopted.body == refused.body  # the same declared body, the plan's capacity included
        [get] = arm.calls("GET")  # the look that found it Failed and ours
        assert get.path == path
        _wait(arm, created.outs)
        stored = arm.stored(path)
        assert stored is not None and stored["properties"]["provisioningState"] == "Succeeded"


def test_diff_leaves_capacity_to_the_autoscaler_and_replaces_what_azure_cannot_change(
        h100_inputs: dict[str, Any]) -> None:
    provider = ScaleSetProvider()
    resized = {**h100_inputs, "sku": {**h100_inputs["sku"], "capacity": 1}}
    assert not provider.diff("id", h100_inputs, resized).changes
    moved = provider.diff("id", h100_inputs, {**h100_inputs, "zones": ["2"]})
    assert moved.replaces == ["zones"] and moved.delete_before_replace
    resized_vm = provider.diff("id", h100_inputs, {**h100_inputs, "sku": {**h100_inputs["sku"], "name": "Standard_X"}})
    assert resized_vm.replaces == ["sku"]
    relabelled = provider.diff("id", h100_inputs, {**h100_inputs, "tags": {**h100_inputs["tags"], "x": "y"}})
    assert relabelled.changes and not relabelled.replaces


def test_the_update_body_never_carries_capacity(h100_inputs: dict[str, Any]) -> None:
    """What docs/capacity.md promises: `pulumi up` sends no sku to an existing node scale set."""
    body = patch_body(h100_inputs)
    assert "sku" not in body and "location" not in body
    assert "orchestrationMode" not in body["properties"]  # create-only: not in VirtualMachineScaleSetUpdate
    assert body["zones"] == ["1"]


def test_check_refuses_fields_the_route_cannot_send(h100_inputs: dict[str, Any]) -> None:
    provider = ScaleSetProvider()
    assert provider.check({}, h100_inputs).failures == []
    old = provider.check({}, {**h100_inputs, "apiVersion": "2026-04-01"}).failures
    assert [f.property for f in old] == ["apiVersion"]
    bogus = copy.deepcopy(h100_inputs)
    bogus["virtualMachineProfile"]["networkProfile"]["bogusField"] = 1
    [unknown] = provider.check({}, bogus).failures
    assert unknown.property == "virtualMachineProfile" and "networkProfile.bogusField" in unknown.reason


def test_the_state_holds_a_reference_to_the_provider_not_its_code() -> None:
    """pulumi.dynamic pickles the provider into every scale set's state; by reference it stays small and holds
    nothing secret (the credential is found at run time)."""
    serialized = serialize_provider(ScaleSetProvider())
    assert len(serialized) < 400
    provider = dill.loads(base64.b64decode(serialized))
    assert isinstance(provider, ScaleSetProvider) and provider.credential is None


def test_a_state_another_provider_wrote_is_read_and_deleted_by_its_id(tmp_path: Path,
                                                                      h100_inputs: dict[str, Any]) -> None:
    """After an `aliases` move off the typed class the old state has no route keys (azure-native's outputs):
    the provider finds the scale set from its id and talks at its own api-version."""
    with fake_arm(tmp_path) as arm:
        provider = _provider(arm)
        path = provider.create(copy.deepcopy(h100_inputs)).id
        typed_state = {k: v for k, v in h100_inputs.items()
                       if k not in ("armType", "apiVersion", "subscriptionId", "resourceGroupName", "vmScaleSetName")}
        read = provider.read(path, typed_state)
        assert read.id == path and read.outs is not None and read.outs["vmScaleSetName"] == "h100-z1-00"
        provider.delete(path, typed_state)
        assert arm.stored(path) is None
        assert {r.api_version for r in arm.requests if "/operation" not in r.path} == {"2026-07-02"}


def test_refresh_reads_what_azure_deleted_as_deleted_and_the_next_up_restores_it(
        tmp_path: Path, h100_inputs: dict[str, Any]) -> None:
    """Someone deletes the autoscaler's tags on the scale set (portal, CLI): refresh shows them gone, the next `up`
    diffs them as changes and puts them back. customData, which Azure never returns, keeps its declared value."""
    autoscaler = ("cluster-autoscaler-enabled", "min", "max")
    assert all(tag in h100_inputs["tags"] for tag in autoscaler)
    with fake_arm(tmp_path) as arm:
        provider = _provider(arm)
        created = provider.create(copy.deepcopy(h100_inputs))

        def untag(stored: dict[str, Any]) -> None:
            for tag in autoscaler:
                del stored["tags"][tag]

        arm.edit(created.id, untag)
        read = provider.read(created.id, created.outs or {})
        assert read.outs is not None and read.inputs == read.outs
        assert not any(tag in read.outs["tags"] for tag in autoscaler)
        assert read.outs["virtualMachineProfile"]["osProfile"]["customData"] == \
            h100_inputs["virtualMachineProfile"]["osProfile"]["customData"]
        diff = provider.diff(created.id, read.outs, h100_inputs)
        assert diff.changes and not diff.replaces
        provider.update(created.id, read.outs, h100_inputs)
        stored = arm.stored(created.id)
        assert stored is not None and all(stored["tags"][tag] == h100_inputs["tags"][tag] for tag in autoscaler)

        # everything deleted from the tags: the key itself is gone, not kept from the declaration
        arm.edit(created.id, lambda stored: stored.pop("tags"))
        assert "tags" not in (provider.read(created.id, created.outs or {}).outs or {})
