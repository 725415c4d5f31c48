"""`gpucluster check` over documents shaped as `pulumi preview --json` writes them.

Shape: pulumi/pulumi `pkg/backend/display/json.go` (ShowPreviewDigest): steps with `op`, `urn`, `oldState` and
`newState` as the step has them (a delete has only `oldState`; a replacement shows one URN as
`create-replacement`, `replace`, `delete-replaced`; `same` steps with --show-sames); secrets masked as
"[secret]"; unknown values as "04da6b54-80e4-46f7-96ec-b56ff0331ba9" (sdk/go/common/resource/plugin/rpc.go);
the root stack resource always shown.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucluster.errors import SpecError
from gpucluster.offline.preview_steps import deleted_states, stack_name, steps_from_preview
from tests.support.scale_sets import as_typed_class, is_scale_set
from tests.support.stacks import ROOT

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


def gpucluster(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gpucluster.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _serialised(state: dict[str, Any]) -> dict[str, Any]:
    """A state as stack.SerializeResource writes it: no ignoreChanges (not part of the state), an id."""
    out = {k: v for k, v in state.items() if k != "ignoreChanges"}
    out["id"] = "" if not state["custom"] else f"/subscriptions/0/{state['urn'].rsplit('::', 1)[-1]}"
    return out


def real_preview(plan_preview: dict[str, Any]) -> dict[str, Any]:
    """gpucluster's dev preview turned into what `pulumi preview --json --show-sames` shows for a change that
    deletes a CronJob, replaces a NIC, updates the VNet and leaves the rest alone."""
    steps = plan_preview["steps"]
    stack_urn = "urn:pulumi:dev::gpucluster::pulumi:pulumi:Stack::gpucluster-dev"
    out: list[dict[str, Any]] = [{"op": "same", "urn": stack_urn,
                                  "oldState": {"urn": stack_urn, "type": "pulumi:pulumi:Stack", "custom": False},
                                  "newState": {"urn": stack_urn, "type": "pulumi:pulumi:Stack", "custom": False}}]
    deleted = next(s for s in steps if s["newState"]["type"] == "kubernetes:batch/v1:CronJob")
    replaced = next(s for s in steps if s["newState"]["type"] == "azure-native:network:NetworkInterface")
    updated = next(s for s in steps if s["newState"]["type"] == "azure-native:network:VirtualNetwork")
    for step in steps:
        state = _serialised(step["newState"])
        urn = step["urn"]
        if step is deleted:
            out.append({"op": "delete", "urn": urn, "oldState": state})
        elif step is replaced:
            old = copy.deepcopy(state)
            new = copy.deepcopy(state)
            new["inputs"]["networkInterfaceName"] += "-2"
            out += [{"op": "create-replacement", "urn": urn, "oldState": old, "newState": new,
                     "replaceReasons": ["networkInterfaceName"]},
                    {"op": "replace", "urn": urn, "oldState": old, "newState": new,
                     "replaceReasons": ["networkInterfaceName"]},
                    {"op": "delete-replaced", "urn": urn, "oldState": old}]
        elif step is updated:
            new = copy.deepcopy(state)
            new["inputs"]["tags"] = {**new["inputs"].get("tags", {}), "owner": UNKNOWN}
            out.append({"op": "update", "urn": urn, "oldState": state, "newState": new, "diffReasons": ["tags"]})
        else:
            out.append({"op": "same", "urn": urn, "oldState": state, "newState": state})
    return {"config": {"azure-native:location": "eastus2"}, "steps": out,
            "changeSummary": {"same": len(out) - 5, "delete": 1, "replace": 1, "update": 1}}


@pytest.fixture(scope="module")
def dev_preview(dev_out: Path) -> dict[str, Any]:
    return json.loads((dev_out / "preview.json").read_text())


def test_check_accepts_a_real_preview_with_deletes_and_judges_it_by_the_named_stack(dev_preview, tmp_path: Path) -> None:
    """dev passes only with policies/config/dev.json (one API server): `--stack dev` names it; without a stack the
    pack's defaults judge (the strictest), whatever stack the document's URNs say it is of."""
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(real_preview(dev_preview)))
    result = gpucluster("check", str(path), "--stack", "dev")
    assert result.returncode == 0, result.stdout + result.stderr
    # A saved preview's states carry no ignoreChanges, and no rule needs them: the capacity rule reads the route
    # a scale set is declared through, which the state does carry. An autoscaled set on the typed class fails it.
    assert "does not record the resource option" not in result.stdout
    document = real_preview(dev_preview)
    step = next(s for s in document["steps"] if s["op"] == "same" and is_scale_set(s["newState"])
                and s["newState"]["inputs"]["tags"].get("cluster-autoscaler-enabled") == "true")
    step["urn"] = as_typed_class(step["newState"])["urn"]
    step["oldState"] = step["newState"]
    path.write_text(json.dumps(document))
    typed = gpucluster("check", str(path), "--stack", "dev")
    assert typed.returncode == 1 and "virtualmachinescaleset-capacity-ignored" in typed.stdout
    assert gpucluster("check", str(path)).returncode == 1  # without --stack: the pack's defaults, the strictest
    strict = tmp_path / "strict.json"
    strict.write_text("{}")
    assert gpucluster("check", str(path), "--policy-config", str(strict)).returncode == 1


def test_states_from_a_real_preview(dev_preview) -> None:
    document = real_preview(dev_preview)
    states = steps_from_preview(document)
    urns = [s["urn"] for s in states]
    assert len(urns) == len(set(urns))
    [gone] = deleted_states(document)
    assert gone["type"] == "kubernetes:batch/v1:CronJob" and gone["urn"] not in urns  # deleted: not judged
    nic = next(s for s in states if s["type"] == "azure-native:network:NetworkInterface")
    assert nic["inputs"]["networkInterfaceName"].endswith("-2")  # the replacement's new state
    assert stack_name(document) == "dev"


def test_escaped_secret_envelope_reads_as_masked() -> None:
    urn = "urn:pulumi:dev::gpucluster::azure-native:compute:VirtualMachine::etcd-0"
    document = {"steps": [{"op": "create", "urn": urn, "newState": {
        "urn": urn, "type": "azure-native:compute:VirtualMachine", "custom": True,
        "inputs": {"osProfile": {"customData": {SIG_KEY: SECRET_SIG, "ciphertext": "AAAA"}}}}}]}
    [state] = steps_from_preview(document)
    assert state["inputs"]["osProfile"]["customData"] == "[secret]"


@pytest.mark.parametrize("document", [{"steps": []}, {"steps": [{"op": "delete", "urn": "urn:pulumi:dev::p::t::n",
                                                                 "oldState": {"urn": "urn:pulumi:dev::p::t::n",
                                                                              "type": "t", "custom": True}}]}])
def test_a_preview_with_nothing_to_judge_is_refused(document, tmp_path: Path) -> None:
    with pytest.raises(SpecError):
        steps_from_preview(document)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    result = gpucluster("check", str(path))
    assert result.returncode == 2
    assert "holds no resources to check" in result.stderr


def test_check_on_a_saved_dev_plan_uses_the_policy_config_of_the_stack_named(dev_out: Path) -> None:
    """`plan dev` passes with dev's policy config; `check --stack dev` on its preview uses the same config, and
    `check` without a stack judges by the pack's defaults instead of the config the document's stack would pick."""
    named = gpucluster("check", str(dev_out / "preview.json"), "--stack", "dev")
    assert named.returncode == 0, named.stdout + named.stderr
    unnamed = gpucluster("check", str(dev_out / "preview.json"))
    assert unnamed.returncode == 1
    assert "1 API servers; at least 3 are required" in unnamed.stdout
    assert "note: no --stack: every rule runs at the pack's defaults" in unnamed.stderr
