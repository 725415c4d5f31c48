"""What our dynamic providers leave in the Pulumi state, and how the real dynamic-provider host reads it back.

Pulumi pickles the provider object into every dynamic resource's `__provider` (pulumi 3.272 `pulumi/dynamic/
dynamic.py` serialize_provider: dill, protocol pickle.DEFAULT_PROTOCOL, base64), and its host unpickles it from the
state for every RPC (`pulumi/dynamic/__main__.py` get_provider). Pickled by value (code and all), a state would run the
code of the day the resource was created and a changed library would never reach it (pulumi/pulumi#16826, #6490);
pickled with a credential, the secret would sit in plaintext in all 43 scale sets' state. Ours is pickled by reference
(module path and class name, then four plain attributes), so:
- the state names `gpucluster.azure.<module>.<Class>`: that import path must stay stable (docs/architecture.md);
  state written while the import name was `components` loads in the project's folder (components/ is there);
- a code change reaches existing resources (the host imports today's class);
- a Python or Pulumi upgrade changes the bytes (pickle protocol, dill), never the diff: `__provider` is not a change.
"""

from __future__ import annotations

import base64
import json
import pickle
import pickletools
import shutil
from pathlib import Path
from typing import Any

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto

from gpucluster.azure.scale_set.arm_client import CredentialInStateError
from gpucluster.azure.scale_set.provider import ScaleSetProvider
from gpucluster.offline.engine import ProgramRun
from tests.support.dynamic_host import ROOT, dynamic_host, props, unprops
from tests.support.fake_arm import DEPLOYER, FakeCredential, fake_arm
from tests.support.providers import concrete_providers

PROVIDERS: list[type] = sorted(concrete_providers(), key=lambda c: c.__name__)
URN = "urn:pulumi:prod::gpucluster::pulumi-python:dynamic:Resource::h100-z1-00"


def _globals(serialized: str) -> list[tuple[str, str]]:
    """Every (module, name) the pickle imports when loaded."""
    found, strings = [], []
    for op, arg, _ in pickletools.genops(base64.b64decode(serialized)):
        if isinstance(arg, str):
            strings.append(arg)
        if op.name == "STACK_GLOBAL":
            found.append((strings[-2], strings[-1]))
        elif op.name == "GLOBAL" and isinstance(arg, str):
            module, _, name = arg.partition(" ")
            found.append((module, name))
    return found


@pytest.mark.parametrize("provider_class", PROVIDERS, ids=[c.__name__ for c in PROVIDERS])
def test_the_state_names_the_provider_class_and_holds_no_code_and_no_secret(provider_class: type) -> None:
    serialized = serialize_provider(provider_class())
    assert _globals(serialized) == [(provider_class.__module__, provider_class.__name__)]
    assert provider_class.__module__.startswith("gpucluster.azure.") and len(serialized) < 400
    loaded = dill.loads(base64.b64decode(serialized))
    assert type(loaded) is provider_class and vars(loaded) == {
        "endpoint": None, "credential": None, "connection_verify": True, "polling_interval": None}


@pytest.mark.parametrize("provider_class", PROVIDERS, ids=[c.__name__ for c in PROVIDERS])
def test_a_credential_object_is_refused_before_it_reaches_the_state(provider_class: type) -> None:
    with pytest.raises(CredentialInStateError, match="would be pickled into every resource's Pulumi state"):
        provider_class(credential=FakeCredential())
    named = provider_class(credential="tests.support.fake_arm:FakeCredential")  # a reference: the state holds the path only
    assert b"fake-token" not in base64.b64decode(serialize_provider(named))


SAVED_STATE = json.loads((ROOT / "tests" / "data" / "provider_state" / "scale_set_provider.json").read_text())
"""`__provider` values serialized by the code before the provider moved into components/azure/scale_set/."""


def test_a_state_written_before_the_provider_moved_loads_and_new_state_names_the_import_name() -> None:
    """The provider lives in components/azure/scale_set/provider.py, imported as `gpucluster`; state deployed
    before names components.azure.scale_set_provider.ScaleSetProvider (the import name was `components` then). The
    host runs in the project's folder, where components/ still is: that path loads the saved state into today's
    class. A new state names gpucluster.azure.scale_set_provider, byte for byte the old pickle with the new name."""
    old, new = ("components.azure.scale_set_provider", "ScaleSetProvider"), ("gpucluster.azure.scale_set_provider",
                                                                          "ScaleSetProvider")
    for state in SAVED_STATE["states"].values():
        loaded = dill.loads(base64.b64decode(state["serialized"]))
        assert type(loaded) is ScaleSetProvider and vars(loaded) == state["attributes"]
        assert _globals(state["serialized"]) == [old]
        today = ScaleSetProvider(**state["attributes"])
        assert _globals(serialize_provider(today)) == [new]
        again = dill.dumps(today, protocol=SAVED_STATE["protocol"])
        renamed = base64.b64decode(state["serialized"]).replace(
            bytes([len(old[0])]) + old[0].encode(), bytes([len(new[0])]) + new[0].encode())
        assert again == renamed


def _diff(host: Any, olds: dict[str, Any], news: dict[str, Any]) -> Any:
    return host.Diff(proto.DiffRequest(id="/subscriptions/s/x", urn=URN, olds=props(olds), news=props(news)))


def test_a_python_or_pulumi_upgrade_changes_the_bytes_not_the_diff(prod_run: ProgramRun) -> None:
    """State written by another Python (pickle protocol 2 to 5: 3.14 pickles at 5, 3.11 at 4) and read through the
    real host: the program's new `__provider` differs byte for byte and the Diff RPC says DIFF_NONE."""
    reg = next(r for r in prod_run.registrations if r.name == "h100-z1-00" and r.custom)
    inputs = {k: v for k, v in reg.inputs.items() if k != "__provider"}
    today = serialize_provider(ScaleSetProvider())
    with dynamic_host() as host:
        for protocol in (2, 3, 4, 5):
            then = base64.b64encode(dill.dumps(ScaleSetProvider(), protocol=protocol)).decode()
            assert (then == today) == (protocol == pickle.DEFAULT_PROTOCOL)
            assert _diff(host, {**inputs, "__provider": then}, {**inputs, "__provider": today}).changes == \
                proto.DiffResponse.DIFF_NONE
        saved = SAVED_STATE["states"]["default"]["serialized"]  # written before the provider moved
        assert _diff(host, {**inputs, "__provider": saved}, {**inputs, "__provider": today}).changes == \
            proto.DiffResponse.DIFF_NONE
        changed = {**inputs, "tags": {**inputs["tags"], "gpucluster-note": "x"}, "__provider": today}
        assert _diff(host, {**inputs, "__provider": today}, changed).changes == proto.DiffResponse.DIFF_SOME


def test_a_code_change_reaches_resources_created_before_it(tmp_path: Path) -> None:
    """The state's `__provider` was written by today's code; the host then runs a changed library (a copy of the
    project whose provider reports every diff as a replacement) and the old state runs the new code."""
    state = serialize_provider(ScaleSetProvider())
    changed = tmp_path / "project"
    shutil.copytree(ROOT / "components", changed / "components", ignore=shutil.ignore_patterns("__pycache__"))
    (changed / "gpucluster").symlink_to("components")  # the import name, as in the project
    module = changed / "components" / "azure" / "scale_set" / "provider.py"
    module.write_text(module.read_text() + (
        "\n\ndef _changed_diff(self, _id, olds, news):\n"
        "    return DiffResult(changes=True, replaces=['changed-code'], stables=[], delete_before_replace=True)\n\n\n"
        "ScaleSetProvider.diff = _changed_diff\n"))
    olds = {"tags": {"a": "1"}, "__provider": state}
    with dynamic_host(changed) as host:
        assert list(_diff(host, olds, olds).replaces) == ["changed-code"]
    with dynamic_host() as host:
        assert list(_diff(host, olds, olds).replaces) == []


def test_import_through_the_real_host_reads_the_scale_set_and_shows_no_diff(tmp_path: Path,
                                                                            prod_run: ProgramRun) -> None:
    """`pulumi import` cannot name a dynamic resource (pulumi/pulumi#16175); the `import_` resource option can: the
    engine sends Read with the id and, instead of prior outputs, the program's inputs, which carry `__provider`
    (pulumi 3.272 `__main__.py` Read falls back to `request.inputs`). The host reads the live scale set and returns
    inputs that diff as no change against the declaration."""
    reg = next(r for r in prod_run.registrations if r.name == "h100-z1-00" and r.custom)
    declared = {k: v for k, v in reg.inputs.items() if k != "__provider"}
    with fake_arm(tmp_path) as arm, dynamic_host() as host:
        provider = ScaleSetProvider(endpoint=arm.base_url, credential=DEPLOYER, connection_verify=arm.ca_file,
                                    polling_interval=0)
        path = provider.create(dict(declared)).id  # made outside this stack's state
        state = serialize_provider(provider)
        read = host.Read(proto.ReadRequest(id=path, urn=URN, properties=props({}),
                                           inputs=props({**declared, "__provider": state})))
        assert read.id == path
        imported = unprops(read.inputs)
        assert imported["__provider"] == state and imported["vmScaleSetName"] == "h100-z1-00"
        assert _diff(host, imported, {**declared, "__provider": state}).changes == proto.DiffResponse.DIFF_NONE

