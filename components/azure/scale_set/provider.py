"""The node scale sets' Pulumi dynamic provider: Microsoft's Python SDK at the api-version that carries the /28 field.

- create: a PUT of the full body (capacity included: the first size) with `If-None-Match: *`, so it never takes
  over a scale set it cannot prove its own: on a 412 it adopts a Failed one whose tags name this cluster and pool
  (left by an accepted create whose allocation failed) with `If-Match` on its etag, and refuses any other with the
  fix. It returns once ARM accepted the write (the 200/201 answer), not when the long-running operation ends;
- update: a PATCH built from the update model without `sku`: capacity is only ever the autoscaler's; a scale set
  whose live provisioningState is Failed gets its whole model PUT again instead (at its live capacity), which is how
  ARM retries a failed allocation. Returns once ARM accepted it;
- read: a GET; inputs and outputs are the live values of what the program declares (capacity too): a declared value
  Azure no longer has (a deleted tag) reads as absent, so the next `up` restores it; only what Azure never returns
  (customData) keeps its declared value; the live provisioningState too;
- delete: a DELETE, waited for (the name is fixed: a replacement's create needs it gone); a scale set already gone
  counts as deleted;
- diff: sku.capacity and the serialized provider are never changes; CREATE_ONLY_PATHS, the resource id, zones and
  sku replace (delete first: the name is fixed), at most one unacknowledged InfiniBand domain of a pool per
  deployment (components/azure/scale_set/replacement_guard.py); a live provisioningState of Failed is a change (the update
  retries).

Besides the declared values, the outputs hold `provisioningState` (ARM's answer: Creating or Updating after a write,
the live one after a read) and `operation`, the URL of the last write's long-running operation (its
Azure-AsyncOperation header, else Location). The wait for the operations is one resource for all scale sets
(components/azure/scale_sets_ready.py), which polls them concurrently inside one RPC, so no create holds one of the
dynamic-provider host's four workers for the length of an allocation (docs/performance.md).

Throttling is azure-core's retry policy (429 with Retry-After); the delete's long-running operation is azure-core's
ARM poller. Credentials are azure-identity's DefaultAzureCredential at run time (`az login`, a managed identity, or
AZURE_* variables), never stored in the state.

The SDK is imported inside the methods: a plan never loads it. Pulumi pickles this provider into each scale
set's state by reference (pulumi.dynamic serialize_provider), under the path it had before it moved here,
gpucluster.azure.scale_set_provider, an alias of this module (components/azure/__init__.py): keep that path stable.
"""

from __future__ import annotations

import copy
from typing import Any

from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ReadResult, UpdateResult

from gpucluster.azure.scale_set.arm_client import ComputeProvider, check_owned
from gpucluster.azure.scale_set.replacement_guard import LEDGER
from gpucluster.azure.scale_set.routes import (
    PREFIX_ON_NIC_COMPUTE_API,
    PROVIDER_INPUT,
    REPLACEMENT_ACK_INPUT,
    SCALE_SET_API_VERSION,
    SCALE_SET_ARM_TYPE,
    SCALE_SET_WRITE_ONLY,
    api_version_at_least,
    leaves,
    path_pattern,
    scale_set_diff,
)
from gpucluster.azure.scale_set.wire import SCALE_SET_UPDATE_MODEL, UnknownFieldError, from_wire, model, to_wire
from gpucluster.vocabulary import CLUSTER_TAG, POOL_TAG

ROUTE_KEYS = ("armType", "apiVersion", "subscriptionId", "resourceGroupName", "vmScaleSetName", PROVIDER_INPUT,
              REPLACEMENT_ACK_INPUT)
"""Inputs that name the resource or the route, or say what the stack acknowledges; not part of the ARM body."""
PROVISIONING_STATE = "provisioningState"
OPERATION = "operation"
STATUS_KEYS = (PROVISIONING_STATE, OPERATION)
"""Outputs that are not declared values: ARM's provisioningState and the URL of the last write's operation."""
FAILED = "Failed"


def accepted(poller: Any) -> tuple[dict[str, Any], str | None]:
    """ARM's answer to an accepted write, from a poller made with `polling=False` and `cls=_answer`: the resource as
    the answer carries it, and the URL of its long-running operation (None when the write completed at once)."""
    response, resource = poller.result()
    headers = response.http_response.headers
    return resource.as_dict(), headers.get("Azure-AsyncOperation") or headers.get("Location")


def _answer(response: Any, resource: Any, _headers: Any) -> tuple[Any, Any]:
    """The SDK's `cls` hook: keep the raw response (its headers name the operation) beside the model."""
    return response, resource


def body(inputs: dict[str, Any]) -> dict[str, Any]:
    """The declared ARM part of the inputs or outputs (route keys and status outputs removed)."""
    return {k: v for k, v in inputs.items() if k not in ROUTE_KEYS and k not in STATUS_KEYS}


def patch_body(inputs: dict[str, Any]) -> dict[str, Any]:
    """The PATCH body: the update model's fields only, and never `sku`."""
    return to_wire({k: v for k, v in body(inputs).items() if k != "sku"}, SCALE_SET_UPDATE_MODEL, strict=False)


def _same_id(live: Any, declared: Any) -> bool:
    return isinstance(live, str) and isinstance(declared, str) and live.startswith("/subscriptions/") \
        and live.lower() == declared.lower()


def project(live: Any, declared: Any, keep: tuple[str, ...] = (), path: str = "") -> Any:
    """The live value in the declared value's shape: keys the program does not declare are left out, and so are
    declared keys Azure no longer has (a deleted tag reads as deleted), except the write-only paths in `keep`
    (dotted, `[]` for list items), which Azure never returns; ARM ids compare without case."""
    if isinstance(declared, dict) and isinstance(live, dict):
        out = {}
        for key, value in declared.items():
            where = f"{path}.{key}" if path else key
            if key in live:
                out[key] = project(live[key], value, keep, where)
            elif path_pattern(where) in keep:
                out[key] = value
        return out
    if isinstance(declared, list) and isinstance(live, dict):  # user-assigned identities: ids -> map
        return declared if {str(d).lower() for d in declared} == {k.lower() for k in live} else sorted(live)
    if isinstance(declared, list) and isinstance(live, list) and len(declared) == len(live):
        return [project(lv, dv, keep, f"{path}[]") for lv, dv in zip(live, declared, strict=True)]
    if _same_id(live, declared):
        return declared
    return copy.deepcopy(live)


def resource_id(inputs: dict[str, Any]) -> str:
    return (f"/subscriptions/{inputs['subscriptionId']}/resourceGroups/{inputs['resourceGroupName']}"
            f"/providers/{SCALE_SET_ARM_TYPE}/{inputs['vmScaleSetName']}")


def parse_id(id_: str) -> dict[str, str]:
    parts = id_.strip("/").split("/")
    lowered = [p.lower() for p in parts]
    try:
        return {"subscriptionId": parts[lowered.index("subscriptions") + 1],
                "resourceGroupName": parts[lowered.index("resourcegroups") + 1],
                "vmScaleSetName": parts[lowered.index("virtualmachinescalesets") + 1]}
    except (ValueError, IndexError):
        raise ValueError(f"{id_!r} is not a scale-set id (/subscriptions/S/resourceGroups/G/providers/"
                         f"{SCALE_SET_ARM_TYPE}/NAME)") from None


def _where(id_: str, props: dict[str, Any]) -> dict[str, str]:
    """Subscription, resource group and name: from the state when it has them (a state another provider wrote,
    before an `aliases` move, may not), else from the id."""
    return {**parse_id(id_), **{k: props[k] for k in ("subscriptionId", "resourceGroupName", "vmScaleSetName")
                                 if isinstance(props.get(k), str)}}


def _api_version(props: dict[str, Any]) -> str:
    version = props.get("apiVersion")
    return version if isinstance(version, str) else SCALE_SET_API_VERSION


def _admit_replacement(id_: str, olds: dict[str, Any], news: dict[str, Any], replacing: dict[str, str]) -> None:
    """Record this replacement in the host's ledger, which refuses a second unacknowledged InfiniBand domain of the
    same pool in one deployment (components/azure/scale_set/replacement_guard.py)."""
    before, after = leaves(olds), leaves(news)
    why = "; ".join(f"{p} {before.get(p)} -> {after.get(p)}" for p in sorted(replacing)[:3])
    name = str(news.get("vmScaleSetName") or olds.get("vmScaleSetName") or id_)
    tags = next((t for t in (news.get("tags"), olds.get("tags")) if isinstance(t, dict)), {})
    LEDGER.admit(id_ or name, name, tags, news.get(REPLACEMENT_ACK_INPUT) is True, why)


class ScaleSetProvider(ComputeProvider):
    """CRUD for a Microsoft.Compute/virtualMachineScaleSets resource through azure-mgmt-compute."""

    # The reference Pulumi pickles into the state: the path deployed stacks already name (see the module docstring).
    __module__ = "gpucluster.azure.scale_set_provider"

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        if news.get("armType") != SCALE_SET_ARM_TYPE:
            failures.append(CheckFailure("armType", f"this provider manages {SCALE_SET_ARM_TYPE} only"))
        prefix_asked = any(p.endswith("privateIPAddressPrefixLength") for p in leaves(news))
        if prefix_asked and not api_version_at_least(news.get("apiVersion"), PREFIX_ON_NIC_COMPUTE_API):
            failures.append(CheckFailure("apiVersion", f"privateIPAddressPrefixLength needs Microsoft.Compute "
                                                       f"{PREFIX_ON_NIC_COMPUTE_API} or later"))
        try:
            to_wire(body(news))
        except UnknownFieldError as error:
            failures.append(CheckFailure(error.path.split(".")[0].split("[")[0], str(error)))
        return CheckResult(news, failures)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        failed = olds.get(PROVISIONING_STATE) == FAILED  # the update PUTs the model again: ARM's retry
        changed, replacing = scale_set_diff(*({k: v for k, v in side.items() if k not in STATUS_KEYS}
                                              for side in (olds, news)))
        replaces = sorted({p.split(".")[0].split("[")[0] for p in replacing})
        if replaces:
            _admit_replacement(id_, olds, news, replacing)
        # The name is fixed, so a replacement must delete first (the create also refuses an existing name).
        return DiffResult(changes=bool(changed) or failed, replaces=replaces, stables=[],
                          delete_before_replace=bool(replaces))

    def create(self, props: dict[str, Any]) -> CreateResult:
        """PUT with `If-None-Match: *`. A 412 means the name is taken: a scale set in provisioningState Failed whose
        tags name this cluster and pool is this stack's own, left by a create that ARM accepted and that then failed
        (pulumi.dynamic's create is "transactional", but ARM keeps a scale set whose allocation failed), and is
        adopted: the same PUT again, with `If-Match` on the etag just read. Anything else is refused with the one-line
        fix (components/azure/scale_set/arm_client.py check_owned); never a retry loop.

        Returns once ARM accepted the PUT (200/201 with the resource, provisioningState Creating): the scale set is
        in the state exactly when it is in Azure. Whether its allocation then succeeds is the wait's to say
        (components/azure/scale_sets_ready.py), and a scale set that ended Failed is PUT again by the update."""
        from azure.core import MatchConditions
        from azure.core.exceptions import HttpResponseError

        client = self._client(props["subscriptionId"])
        operations = client.virtual_machine_scale_sets
        group, name, version = props["resourceGroupName"], props["vmScaleSetName"], props["apiVersion"]
        parameters = model("VirtualMachineScaleSet")(to_wire(body(props)))
        where, delete = resource_id(props), f"az vmss delete -g {group} -n {name}"
        try:
            poller = operations.begin_create_or_update(group, name, parameters, match_condition=MatchConditions.IfMissing,
                                                       api_version=version, polling=False, cls=_answer)
        except HttpResponseError as error:
            if error.status_code != 412:
                raise
            found = operations.get(group, name, api_version=version)
            check_owned("scale set", where, found.as_dict(), props.get("tags") or {}, (CLUSTER_TAG, POOL_TAG), delete)
            poller = operations.begin_create_or_update(group, name, parameters, etag=found.etag,
                                                       match_condition=MatchConditions.IfNotModified,
                                                       api_version=version, polling=False, cls=_answer)
        return CreateResult(where, self._outputs(*accepted(poller), props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """A PATCH without `sku`; for a scale set whose live provisioningState is Failed (an allocation that failed
        after ARM accepted it, read by a refresh), the whole model PUT again at its live capacity, `If-Match: *` (it
        must still exist): ARM retries the allocation. Returns once ARM accepted the write."""
        from azure.core import MatchConditions

        operations = self._client(news["subscriptionId"]).virtual_machine_scale_sets
        group, name, version = news["resourceGroupName"], news["vmScaleSetName"], news["apiVersion"]
        if olds.get(PROVISIONING_STATE) == FAILED:
            declared = body(news)
            live_capacity = (olds.get("sku") or {}).get("capacity")  # a float once it has crossed gRPC
            if isinstance(live_capacity, (int, float)) and not isinstance(live_capacity, bool) \
                    and isinstance(declared.get("sku"), dict):
                declared["sku"] = {**declared["sku"], "capacity": int(live_capacity)}
            poller = operations.begin_create_or_update(group, name, model("VirtualMachineScaleSet")(to_wire(declared)),
                                                       match_condition=MatchConditions.IfPresent, api_version=version,
                                                       polling=False, cls=_answer)
        else:
            poller = operations.begin_update(group, name, model(SCALE_SET_UPDATE_MODEL)(patch_body(news)),
                                             api_version=version, polling=False, cls=_answer)
        return UpdateResult(self._outputs(*accepted(poller), news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from azure.core.exceptions import ResourceNotFoundError

        where = _where(id_, props)
        declared = {**props, **where}
        client = self._client(where["subscriptionId"])
        try:
            found = client.virtual_machine_scale_sets.get(
                where["resourceGroupName"], where["vmScaleSetName"], api_version=_api_version(props))
        except ResourceNotFoundError:
            return ReadResult("", {})
        outputs = self._outputs(found.as_dict(), props.get(OPERATION), declared)
        return ReadResult(id_, outputs, outputs)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        where = _where(id_, props)
        client = self._client(where["subscriptionId"])
        try:
            client.virtual_machine_scale_sets.begin_delete(
                where["resourceGroupName"], where["vmScaleSetName"], api_version=_api_version(props)).result()
        except ResourceNotFoundError:
            return

    @staticmethod
    def _outputs(wire: dict[str, Any], operation: str | None, declared: dict[str, Any]) -> dict[str, Any]:
        """The route keys, and the live value of everything else the program declares: what Azure no longer has is
        left out (only write-only customData keeps its declared value); capacity is the live one; the live
        provisioningState, and the URL of the last write's operation."""
        live = from_wire(wire)
        outputs = {k: v for k, v in declared.items() if k in ROUTE_KEYS and k != PROVIDER_INPUT}
        state = (wire.get("properties") or {}).get(PROVISIONING_STATE)
        if isinstance(state, str):
            outputs[PROVISIONING_STATE] = state
        if isinstance(operation, str):
            outputs[OPERATION] = operation
        outputs.update(project(live, body(declared), SCALE_SET_WRITE_ONLY))
        capacity = (live.get("sku") or {}).get("capacity")
        if isinstance(capacity, int) and isinstance(outputs.get("sku"), dict):
            outputs["sku"] = {**outputs["sku"], "capacity": capacity}
        return outputs
