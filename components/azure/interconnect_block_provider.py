"""Interconnect blocks' Pulumi dynamic provider: Microsoft's Python SDK at the node scale sets' api-version.

An interconnect block (`Microsoft.Compute/interconnectBlocks`) pre-allocates VMs of one size in one zone for an
interconnect group; the rack scale sets name it in `interconnectBlockProfile`. azure-native 3.29 has no typed
class for it (its compute module has no InterconnectBlock), so it takes the route the node scale sets take
(components/azure/scale_set/provider.py):

- create: a PUT of the full body with `If-None-Match: *`; a name clash adopts a Failed block tagged for this cluster
  (left by a create that failed after ARM accepted it) and refuses any other with the fix;
- update: a PATCH of what Azure updates in place, `sku.capacity` and tags (InterconnectBlockUpdate);
- read: a GET; delete: a DELETE, waited for (Azure refuses it while VMs are in the block); a block already gone
  counts as deleted;
- diff: anything else replaces (components/azure/interconnect_block_routes.py INTERCONNECT_BLOCK_REPLACES), delete first.

The declared inputs are the ARM body with its `properties` envelope (the SDK's model keeps it: no field of it is
flattened), plus `armType`, `apiVersion`, `subscriptionId`, `resourceGroupName` and `interconnectBlockName`.
The SDK is imported inside the methods: a plan never loads it. Keep the module path stable (Pulumi pickles the
provider by reference into the state).
"""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ReadResult, UpdateResult

from gpucluster.azure.interconnect_block_routes import (
    INTERCONNECT_BLOCK_API_VERSION,
    INTERCONNECT_BLOCK_ARM_TYPE,
    INTERCONNECT_COMPUTE_API,
    interconnect_block_diff,
)
from gpucluster.azure.scale_set.arm_client import ComputeProvider, check_owned, create_failed
from gpucluster.azure.scale_set.provider import project
from gpucluster.azure.scale_set.routes import PROVIDER_INPUT, api_version_at_least
from gpucluster.azure.scale_set.wire import UnknownFieldError, from_wire, model, to_wire
from gpucluster.vocabulary import CLUSTER_TAG

BLOCK_MODEL = "InterconnectBlock"
BLOCK_UPDATE_MODEL = "InterconnectBlockUpdate"
ROUTE_KEYS = ("armType", "apiVersion", "subscriptionId", "resourceGroupName", "interconnectBlockName", PROVIDER_INPUT)


def body(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if k not in ROUTE_KEYS}


def patch_body(inputs: dict[str, Any]) -> dict[str, Any]:
    """Only what an update may change: sku.capacity and tags."""
    patch: dict[str, Any] = {"sku": {"capacity": (inputs.get("sku") or {}).get("capacity")}}
    if "tags" in inputs:
        patch["tags"] = inputs["tags"]
    return to_wire(patch, BLOCK_UPDATE_MODEL)


def resource_id(inputs: dict[str, Any]) -> str:
    return (f"/subscriptions/{inputs['subscriptionId']}/resourceGroups/{inputs['resourceGroupName']}"
            f"/providers/{INTERCONNECT_BLOCK_ARM_TYPE}/{inputs['interconnectBlockName']}")


class InterconnectBlockProvider(ComputeProvider):
    """CRUD for a Microsoft.Compute/interconnectBlocks resource through azure-mgmt-compute."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        if news.get("armType") != INTERCONNECT_BLOCK_ARM_TYPE:
            failures.append(CheckFailure("armType", f"this provider manages {INTERCONNECT_BLOCK_ARM_TYPE} only"))
        if not api_version_at_least(news.get("apiVersion"), INTERCONNECT_COMPUTE_API):
            failures.append(CheckFailure("apiVersion", f"interconnect blocks need Microsoft.Compute "
                                                       f"{INTERCONNECT_COMPUTE_API} or later"))
        try:
            to_wire(body(news), BLOCK_MODEL)
        except UnknownFieldError as error:
            failures.append(CheckFailure(error.path.split(".")[0].split("[")[0], str(error)))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed, replacing = interconnect_block_diff(olds, news)
        replaces = sorted({p.split(".")[0].split("[")[0] for p in replacing})
        return DiffResult(changes=bool(changed), replaces=replaces, stables=[], delete_before_replace=bool(replaces))

    def create(self, props: dict[str, Any]) -> CreateResult:
        """PUT with `If-None-Match: *`; on a 412 a Failed block whose cluster tag names this stack's cluster (left by
        an accepted create that then failed) is adopted with the same PUT, any other refused with the fix (the block
        model has no etag to send If-Match on)."""
        from azure.core.exceptions import HttpResponseError

        client = self._client(props["subscriptionId"])
        group, name, version = props["resourceGroupName"], props["interconnectBlockName"], props["apiVersion"]
        where, delete = resource_id(props), f"az resource delete --ids {resource_id(props)}"
        parameters = model(BLOCK_MODEL)(to_wire(body(props), BLOCK_MODEL))
        # azure-mgmt-compute 39.0.0's interconnect_blocks.begin_create_or_update takes no etag/match_condition
        # (operations/_operations.py build_interconnect_blocks_create_or_update_request): such a keyword would travel
        # down to requests.Session.request() and fail. The precondition goes as the header itself, which the
        # request builder passes through (`headers`).
        try:
            poller = client.interconnect_blocks.begin_create_or_update(group, name, parameters,
                                                                       headers={"If-None-Match": "*"},
                                                                       api_version=version)
        except HttpResponseError as error:
            if error.status_code != 412:
                raise
            found = client.interconnect_blocks.get(group, name, api_version=version)
            check_owned("interconnect block", where, found.as_dict(), props.get("tags") or {}, (CLUSTER_TAG,), delete)
            poller = client.interconnect_blocks.begin_create_or_update(group, name, parameters, api_version=version)
        try:
            live = from_wire(poller.result().as_dict(), BLOCK_MODEL)
        except HttpResponseError as error:
            raise create_failed("interconnect block", where, error, delete) from error
        return CreateResult(where, self._outputs(live, props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        client = self._client(news["subscriptionId"])
        poller = client.interconnect_blocks.begin_update(
            news["resourceGroupName"], news["interconnectBlockName"], model(BLOCK_UPDATE_MODEL)(patch_body(news)),
            api_version=news["apiVersion"])
        return UpdateResult(self._outputs(from_wire(poller.result().as_dict(), BLOCK_MODEL), news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from azure.core.exceptions import ResourceNotFoundError

        client = self._client(props["subscriptionId"])
        try:
            found = client.interconnect_blocks.get(props["resourceGroupName"], props["interconnectBlockName"],
                                                   api_version=props.get("apiVersion") or INTERCONNECT_BLOCK_API_VERSION)
        except ResourceNotFoundError:
            return ReadResult("", {})
        outputs = self._outputs(from_wire(found.as_dict(), BLOCK_MODEL), props)
        return ReadResult(id_, outputs, outputs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        client = self._client(props["subscriptionId"])
        try:
            client.interconnect_blocks.begin_delete(
                props["resourceGroupName"], props["interconnectBlockName"],
                api_version=props.get("apiVersion") or INTERCONNECT_BLOCK_API_VERSION).result()
        except ResourceNotFoundError:
            return

    @staticmethod
    def _outputs(live: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
        """The route keys, and the live value of everything else declared (what Azure no longer has is absent)."""
        outputs = {k: v for k, v in declared.items() if k in ROUTE_KEYS and k != PROVIDER_INPUT}
        outputs.update(project(live, body(declared)))
        return outputs
