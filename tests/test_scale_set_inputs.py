"""A node scale set's inputs are plain dicts under azure-native's wire names, and the provider receives exactly what
azure-native's typed `*Args` classes gave (components/azure/scale_set/body.py; the state's inputs are what later diffs
compare, so a changed key, case or value would be a diff on every scale set).

The oracle: the same inputs turned back into azure-native's classes by the SDK's own name tables
(`pulumi._types.input_type_py_to_pulumi_names`, the `pulumi.getter` names of pulumi-azure-native's
`VirtualMachineScaleSetArgs` and the classes under it), registered through the same dynamic resource under the
recording engine: the Struct the engine would hand the provider (deterministic bytes), its property dependencies and
its dependencies are compared per scale set, for every pool of the shipped stacks and for a spot pool and a
confidential pool with a customer-managed key.
"""

from __future__ import annotations

import asyncio
import json
import typing
from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any

import pulumi
import pulumi_azure_native as azure
import pytest
from pulumi import _types
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func, wait_for_rpcs

from gpucluster.azure.node_images import ImageIds
from gpucluster.azure.scale_set import body as node_body
from gpucluster.azure.scale_set.join import cluster_join
from gpucluster.azure.scale_set.pool import NodePool, NodePoolArgs
from gpucluster.azure.scale_set.resource import NodeScaleSet
from gpucluster.azure.scope import AzureScope
from gpucluster.offline.engine import ProgramRun, RecordingMonitor
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from tests.support.stacks import small_cluster, small_spec, stack_spec

DYNAMIC = "pulumi-python:dynamic:Resource"
EXTENSIONS = {"armType", "apiVersion", "subscriptionId", "privateIPAddressPrefixLength", "interconnectGroupProfile",
              "interconnectBlockProfile", "highSpeedInterconnectPlacement"}
"""Keys azure-native's classes lack, written as plain dicts before too (NodeScaleSet sends them at its API version)."""
ORCHESTRATOR = "4f3e5a11-2b8c-4d0e-9a55-7c1f0e2d3b4a"

Wire = dict[str, tuple[bytes, dict[str, list[str]], list[str]]]


def _extra_plans() -> dict[str, ClusterPlan]:
    spot = small_cluster()
    spot["pools"] = [spot["pools"][0], {"name": "batch", "kind": "system", "vmSize": "Standard_D4s_v5", "count": 6,
                                        "priority": "spot"}]
    cmk = small_cluster()
    cmk["pools"] = [cmk["pools"][0], {"name": "cgpu", "kind": "confidential", "vmSize": "Standard_NCC40ads_H100_v5",
                                      "count": 4, "zones": ["1", "2"], "podsPerNode": 16,
                                      "confidential": {"customerManagedKey": {"orchestratorObjectId": ORCHESTRATOR}}}]
    return {"spot": plan_cluster(small_spec(**spot)), "cmk": plan_cluster(small_spec(**cmk))}


@pytest.fixture(scope="module")
def plans() -> dict[str, ClusterPlan]:
    return {**{stack: plan_cluster(stack_spec(stack)) for stack in ("dev", "prod", "gb300")}, **_extra_plans()}


def _input_class(annotation: Any) -> type | None:
    """The azure-native input class an annotation names (through Optional, Input, Sequence), if any."""
    if isinstance(annotation, type) and _types.is_input_type(annotation):
        return annotation
    return next((found for arg in typing.get_args(annotation) if (found := _input_class(arg)) is not None), None)


def _enum_class(annotation: Any) -> type[Enum] | None:
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return annotation
    return next((found for arg in typing.get_args(annotation) if (found := _enum_class(arg)) is not None), None)


def typed(value: Any, cls: type, path: str, seen: list[str]) -> Any:
    """`value` (a plain camelCase dict) as an instance of azure-native's `cls`, every key checked against the class's
    wire names (a key outside them and EXTENSIONS fails); a dict holding an extension key stays a dict, as before."""
    names = {wire: py for py, wire in _types.input_type_py_to_pulumi_names(cls).items()}
    hints = typing.get_type_hints(cls.__init__)
    unknown = set(value) - set(names) - EXTENSIONS
    assert not unknown, f"{path}: {sorted(unknown)} are not wire names of azure-native's {cls.__name__}"
    converted: dict[str, Any] = {}
    for key, item in value.items():
        if key in EXTENSIONS:
            converted[key] = item
            continue
        hint = hints[names[key]]
        if (enum := _enum_class(hint)) is not None and isinstance(item, str):
            assert item in {m.value for m in enum}, f"{path}.{key}: {item!r} is not a value of {enum.__name__}"
        inner = _input_class(hint)
        if inner is not None and isinstance(item, dict):
            converted[key] = typed(item, inner, f"{path}.{key}", seen)
        elif inner is not None and isinstance(item, list):
            converted[key] = [typed(i, inner, f"{path}.{key}[{n}]", seen) if isinstance(i, dict) else i
                              for n, i in enumerate(item)]
        else:
            converted[key] = item
    if set(value) & EXTENSIONS:
        return converted
    seen.append(cls.__name__)
    return cls(**{names[k]: v for k, v in converted.items()})


def as_typed(inputs: dict[str, Any], seen: list[str]) -> dict[str, Any]:
    """The top-level inputs keep their camelCase keys (NodeScaleSet's props); their values become typed."""
    names = {wire: py for py, wire in _types.input_type_py_to_pulumi_names(azure.compute.VirtualMachineScaleSetArgs)
             .items()}
    hints = typing.get_type_hints(azure.compute.VirtualMachineScaleSetArgs.__init__)
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        assert key in names or key in EXTENSIONS, f"{key} is not an input of azure-native's VirtualMachineScaleSet"
        inner = _input_class(hints[names[key]]) if key in names else None
        out[key] = typed(value, inner, key, seen) if inner is not None and isinstance(value, dict) else value
    return out


def _register(plan: ClusterPlan, wrap: Callable[[dict[str, Any]], dict[str, Any]] | None,
              monkeypatch: pytest.MonkeyPatch) -> tuple[Wire, list[dict[str, Any]]]:
    """Every pool's NodePool registered under the recording engine; (per dynamic resource: the Struct's deterministic
    bytes, property dependencies, dependencies) and the inputs NodeScaleSet was given."""
    wire: Wire = {}
    given: list[dict[str, Any]] = []

    def recording(name: str, subscription_id: Any, inputs: dict[str, Any], **kwargs: Any) -> Any:
        given.append(inputs)
        return NodeScaleSet(name, subscription_id, wrap(inputs) if wrap else inputs, **kwargs)

    monkeypatch.setattr(node_body, "NodeScaleSet", recording)

    class Capturing(RecordingMonitor):
        def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
            if request.type == DYNAMIC:
                wire[request.name] = (request.object.SerializeToString(deterministic=True),
                                      {k: sorted(v.urns) for k, v in request.propertyDependencies.items()},
                                      sorted(request.dependencies))
            return super().RegisterResource(request)

    def program() -> None:
        location = plan.spec.location
        rg = azure.resources.ResourceGroup("rg", resource_group_name=f"gpucluster-{plan.spec.name}", location=location)
        pull = azure.managedidentity.UserAssignedIdentity("pull", resource_group_name=rg.name, location=location)
        scope = AzureScope.of(plan.spec.name, rg.name, location, {})
        join = cluster_join(plan, pulumi.Output.secret("abcdef.0123456789abcdef"),
                            pulumi.Output.from_input("sha256:" + "0" * 64), pull.client_id, pull.tenant_id)
        access = node_body.NodeAccess("azureuser", [pulumi.Output.from_input("ssh-ed25519 AAAAC3 test")])
        images = ImageIds({image: pulumi.Output.concat(rg.id, "/images/", image.definition, "/", image.version)
                           for image in set(plan.images.machines.values())})
        for pool in plan.pools:
            NodePool(pool.name, NodePoolArgs(scope=scope, plan=pool,
                                             subnet_id=pulumi.Output.concat(rg.id, "/subnets/", pool.name), join=join,
                                             access=access, images=images, identity_ids=(pull.id,)))

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        monitor = Capturing(ProgramRun("gpucluster", plan.spec.name))
        pulumi.runtime.set_mocks(monitor.mocks, project="gpucluster", stack=plan.spec.name, preview=False,
                                 monitor=monitor)
        loop.run_until_complete(run_pulumi_func(program))
        loop.run_until_complete(wait_for_rpcs())
    finally:
        pulumi_settings.reset_options()
        loop.close()
        asyncio.set_event_loop(None)
    return wire, given


def _walk(value: Any) -> Iterator[Any]:
    yield value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        yield from _walk(item)


@pytest.mark.parametrize("stack", ["dev", "prod", "gb300", "spot", "cmk"])
def test_the_provider_receives_what_the_typed_classes_gave(plans: dict[str, ClusterPlan], stack: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plans[stack]
    seen: list[str] = []
    plain, given = _register(plan, None, monkeypatch)
    oracle, _ = _register(plan, lambda inputs: as_typed(inputs, seen), monkeypatch)
    assert sorted(plain) == sorted(oracle) and len(plain) >= sum(len(p.scale_sets) for p in plan.pools)
    for name in plain:
        assert plain[name] == oracle[name], name
    # the oracle is not vacuous: the classes it built cover the whole profile
    assert {"VirtualMachineScaleSetOSProfileArgs", "VirtualMachineScaleSetStorageProfileArgs", "UpgradePolicyArgs",
            "VirtualMachineScaleSetIdentityArgs", "VirtualMachineScaleSetOSDiskArgs"} <= set(seen)
    # and what NodeScaleSet is given holds no typed class for pulumi's serializer to walk
    assert given and not [v for inputs in given for v in _walk(inputs) if _types.is_input_type(type(v))]
    # the extra stacks reach the spot and customer-key shapes
    shapes = {"spot": '"evictionPolicy": "Delete"', "cmk": '"diskEncryptionSet"'}
    assert stack not in shapes or any(shapes[stack] in json.dumps(inputs, default=str) for inputs in given)

