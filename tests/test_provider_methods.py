"""Every method of every dynamic provider runs, against the fake ARM (tests/support/fake_arm.py), through the real
azure-mgmt-compute client: an SDK keyword an operation does not take, a body its models refuse, an api-version
the route does not send, fails here and not at `pulumi up`.

The providers and their methods are enumerated, not listed: every `pulumi.dynamic.ResourceProvider` subclass under
`components/` that implements `create`, every public method of `ResourceProvider` (pulumi 3.272
`pulumi/dynamic/dynamic.py`: check, diff, create, read, update, delete, configure), and every dynamic resource
type's provider. Each provider runs as Pulumi's dynamic-provider host runs it: unpickled from the serialized
`__provider` (`pulumi/dynamic/__main__.py` get_provider: base64, dill.loads, then configure).
"""

from __future__ import annotations

import base64
import copy
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dill
import pytest
from pulumi.dynamic import ConfigureRequest, ResourceProvider
from pulumi.dynamic.config import Config
from pulumi.dynamic.dynamic import serialize_provider

from gpucluster.azure.interconnect_block_provider import InterconnectBlockProvider
from gpucluster.azure.scale_set.arm_client import NotOursError
from gpucluster.azure.scale_set.provider import ScaleSetProvider
from gpucluster.azure.scale_sets_ready_provider import ScaleSetsReadyProvider
from gpucluster.offline.engine import ProgramRun
from tests.support.fake_arm import DEPLOYER, FakeArm, fake_arm
from tests.support.providers import concrete_providers, dynamic_resource_providers

METHODS = sorted(name for name, value in vars(ResourceProvider).items()
                 if inspect.isfunction(value) and not name.startswith("_"))








def _scale_set(run: ProgramRun) -> dict[str, Any]:
    reg = next(r for r in run.registrations if r.name == "h100-z1-00" and r.custom)
    return {k: v for k, v in copy.deepcopy(reg.inputs).items() if k != "__provider"}


def _block(run: ProgramRun) -> dict[str, Any]:
    reg = next(r for r in run.registrations if r.custom and r.inputs.get("armType") == "Microsoft.Compute/interconnectBlocks")
    return {k: v for k, v in copy.deepcopy(reg.inputs).items() if k != "__provider"}


def _grow_scale_set(props: dict[str, Any]) -> dict[str, Any]:
    news = copy.deepcopy(props)
    news["tags"]["gpucluster-note"] = "changed"
    return news


def _grow_block(props: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(props), "sku": {**props["sku"], "capacity": props["sku"]["capacity"] + 18}}


EXERCISED: dict[type, tuple[Callable[[ProgramRun, ProgramRun], dict[str, Any]], Callable[[dict[str, Any]],
                                                                                      dict[str, Any]]]] = {
    ScaleSetProvider: (lambda prod, _gb300: _scale_set(prod), _grow_scale_set),
    InterconnectBlockProvider: (lambda _prod, gb300: _block(gb300), _grow_block),
}
"""Each provider -> (the inputs the program declares for one of its resources, a change it updates in place)."""


def as_the_host_loads_it(provider: ResourceProvider) -> ResourceProvider:
    """pulumi/dynamic/__main__.py get_provider: the serialized provider, base64-decoded, dill.loads, configured."""
    loaded = dill.loads(base64.b64decode(serialize_provider(provider)))
    loaded.configure(ConfigureRequest(Config(raw_config={}, project_name="gpucluster")))
    return loaded


class Recorder:
    """Wraps a provider's methods and records which ran."""

    def __init__(self, provider: ResourceProvider) -> None:
        self.called: set[str] = set()
        for name in METHODS:
            setattr(provider, name, self._wrap(name, getattr(provider, name)))
        self.provider = provider

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            self.called.add(name)
            return method(*args, **kwargs)
        return run


def lifecycle(provider_class: type, props: dict[str, Any], change: Callable[[dict[str, Any]], dict[str, Any]],
              arm: FakeArm) -> set[str]:
    """check, create, diff, update, read, delete of one resource through the SDK; returns the methods that ran."""
    provider = as_the_host_loads_it(provider_class(endpoint=arm.base_url, credential=DEPLOYER,
                                                   connection_verify=arm.ca_file, polling_interval=0))
    recorder = Recorder(provider)
    provider.configure(ConfigureRequest(Config(raw_config={}, project_name="gpucluster")))
    checked = provider.check({}, props)
    assert checked.failures == []
    created = provider.create(checked.inputs)
    assert created.outs is not None and arm.stored(created.id) is not None
    [put] = arm.calls("PUT")
    assert put.headers.get("if-none-match") == "*" and put.api_version == props["apiVersion"]
    news = change(created.outs)
    diff = provider.diff(created.id, created.outs, news)
    assert diff.changes and not diff.replaces
    updated = provider.update(created.id, created.outs, news)
    assert updated.outs is not None and [r.api_version for r in arm.calls("PATCH")] == [props["apiVersion"]]
    read = provider.read(created.id, updated.outs)
    assert read.id == created.id and read.outs is not None
    assert not provider.diff(created.id, read.outs, news).changes
    provider.delete(created.id, read.outs)
    assert arm.stored(created.id) is None and provider.read(created.id, read.outs).id == ""
    assert {r.api_version for r in arm.requests if "/operation" not in r.path} == {props["apiVersion"]}
    return recorder.called


def _connected(provider_class: type, arm: FakeArm) -> Any:
    return as_the_host_loads_it(provider_class(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                                               polling_interval=0))


def wait_lifecycle(prod: ProgramRun, arm: FakeArm) -> set[str]:
    """ScaleSetsReady over prod's first scale set as the program declares the wait: check, create (the scale set's
    accepted create waited for), diff and update after the scale set is written again (only that write polled),
    read, delete (nothing in Azure to delete: the scale set stays)."""
    scale_sets = _connected(ScaleSetProvider, arm)
    created = scale_sets.create(_scale_set(prod))
    declared = next(r for r in prod.registrations if r.custom and r.name == "prod-nodes-ready").inputs
    first = next(e for e in declared["scaleSets"] if e["name"] == "h100-z1-00")
    props = {k: v for k, v in declared.items() if k != "__provider"}

    def waiting_on(outs: dict[str, Any]) -> dict[str, Any]:
        return {**props, "scaleSets": [{**first, "id": created.id, "operation": outs["operation"]}]}

    provider = _connected(ScaleSetsReadyProvider, arm)
    recorder = Recorder(provider)
    provider.configure(ConfigureRequest(Config(raw_config={}, project_name="gpucluster")))
    checked = provider.check({}, waiting_on(created.outs))
    assert checked.failures == []
    ready = provider.create(checked.inputs)
    assert ready.outs is not None and [r.path for r in arm.polls()] == [created.outs["operation"].split("?")[0]
                                                                         .removeprefix(arm.base_url)] * 2
    rewritten = scale_sets.update(created.id, created.outs, _grow_scale_set(created.outs))
    news = waiting_on(rewritten.outs)
    assert provider.diff(ready.id, ready.outs, news).changes
    before = len(arm.polls())
    updated = provider.update(ready.id, ready.outs, news)
    assert updated.outs is not None and {r.path for r in arm.polls()[before:]} == {
        rewritten.outs["operation"].split("?")[0].removeprefix(arm.base_url)}
    read = provider.read(ready.id, updated.outs)
    assert read.outs == updated.outs and not provider.diff(ready.id, read.outs, news).changes
    provider.delete(ready.id, read.outs)
    assert arm.stored(created.id) is not None
    return recorder.called


def test_every_provider_and_dynamic_resource_type_has_an_exercise() -> None:
    providers = concrete_providers()
    assert {ScaleSetProvider, InterconnectBlockProvider, ScaleSetsReadyProvider} <= providers
    exercised = set(EXERCISED) | {ScaleSetsReadyProvider}
    assert providers == exercised, f"providers without an exercise: {providers - exercised}"
    resources = dynamic_resource_providers()
    assert len(resources) >= 3 and set(resources.values()) <= exercised
    assert METHODS == ["check", "configure", "create", "delete", "diff", "read", "update"]


PROVIDERS = sorted(EXERCISED, key=lambda c: c.__name__)


@pytest.mark.parametrize("provider_class", PROVIDERS, ids=[c.__name__ for c in PROVIDERS])
def test_every_method_runs_against_the_fake_arm(provider_class: type, tmp_path: Path, prod_run: ProgramRun,
                                                 gb300_program: ProgramRun) -> None:
    inputs, change = EXERCISED[provider_class]
    with fake_arm(tmp_path) as arm:
        called = lifecycle(provider_class, inputs(prod_run, gb300_program), change, arm)
    assert called == set(METHODS), f"{provider_class.__name__}: not run: {set(METHODS) - called}"


def test_every_method_of_the_wait_runs_against_the_fake_arm(tmp_path: Path, prod_run: ProgramRun) -> None:
    with fake_arm(tmp_path) as arm:
        called = wait_lifecycle(prod_run, arm)
    assert called == set(METHODS), f"ScaleSetsReadyProvider: not run: {set(METHODS) - called}"


def test_an_sdk_keyword_the_operation_does_not_take_fails_the_exercise(tmp_path: Path,
                                                                        gb300_program: ProgramRun) -> None:
    """The class of defect this catches: `match_condition` reached requests.Session.request() for interconnect blocks
    (azure-mgmt-compute 39.0.0 build_interconnect_blocks_create_or_update_request has no etag/match_condition)."""
    from azure.core import MatchConditions

    class WithMatchCondition(InterconnectBlockProvider):
        def create(self, props: dict[str, Any]) -> Any:
            client = self._client(props["subscriptionId"])
            return client.interconnect_blocks.begin_create_or_update(
                props["resourceGroupName"], props["interconnectBlockName"], {}, api_version=props["apiVersion"],
                match_condition=MatchConditions.IfMissing)

    with fake_arm(tmp_path) as arm, pytest.raises(TypeError, match="match_condition"):
        WithMatchCondition(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                           polling_interval=0).create(_block(gb300_program))


def test_a_block_left_by_a_failed_create_is_adopted_and_a_foreign_one_refused(tmp_path: Path,
                                                                             gb300_program: ProgramRun) -> None:
    block = _block(gb300_program)
    with fake_arm(tmp_path) as arm:
        provider = InterconnectBlockProvider(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                                             polling_interval=0)
        arm.fail_next_create("OverconstrainedAllocationRequest")
        with pytest.raises(RuntimeError, match="the next `pulumi up` adopts it"):
            provider.create(copy.deepcopy(block))
        created = provider.create(copy.deepcopy(block))
        stored = arm.stored(created.id)
        assert stored is not None and stored["properties"]["provisioningState"] == "Succeeded"
        assert len(arm.calls("PUT")) == 3  # failed create, 412, adoption: no loop

        arm.edit(created.id, lambda stored: stored["tags"].update({"gpucluster-cluster": "other"}))
        with pytest.raises(NotOursError, match="already exists and its tags do not name this cluster"):
            provider.create(copy.deepcopy(block))
