"""Input errors that once passed or ended in a traceback, each now one line naming the key (or the file) and the fix,
exit 2: an sshPublicKeys entry holding a second line, a folder where a file is expected, a preview whose scale set's
networkInterfaceConfigurations is not a list (`check --stack`), readyTimeoutMinutes that is not a whole number, an
adminUsername the Linux VM FAQ disallows, a Service range in 0.0.0.0/8.

`2.0` is the integer 2 for every whole-number key, as Pulumi hands it to the program (components/spec/yaml_go.py:
the config object reaches the program through Go's encoding/json), so it is accepted like the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.dev_edits import run, stack_with
from tests.support.stacks import ROOT

DEV_PREVIEW = ROOT / "tests" / "data" / "previews" / "dev.json"
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example"


CASES: dict[str, tuple[dict[str, Any], str]] = {
    "a second key on a second line": ({"access.sshPublicKeys": [f"{ED25519}\nssh-rsa AAAAB3NzaC1yc2E attacker"]},
                                      "access.sshPublicKeys: [0] holds a line break"),
    "any second line": ({"access.sshPublicKeys": [f"{ED25519}\ncommand=\"sh\" x"]}, "one key per entry"),
    "a carriage return": ({"access.sshPublicKeys": [f"{ED25519}\rssh-rsa AAAAB3NzaC1yc2E x"]}, "holds a line break"),
    "readyTimeoutMinutes true": ({"inCluster.apiAccess.readyTimeoutMinutes": True},
                                 "inCluster.apiAccess.readyTimeoutMinutes"),
    "readyTimeoutMinutes 2.5": ({"inCluster.apiAccess.readyTimeoutMinutes": 2.5},
                                "inCluster.apiAccess.readyTimeoutMinutes"),
    "adminUsername video": ({"access.adminUsername": "video"}, "access.adminUsername: 'video' is one of the names"),
    "serviceCidr 0.0.0.0/16": ({"network.serviceCidr": "0.0.0.0/16"}, "network.serviceCidr: 0.0.0.0/16 overlaps "
                                                                      "0.0.0.0/8"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_value_is_one_line_naming_its_key(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    change, expected = CASES[case]
    code, errors = run(["plan", str(stack_with(tmp_path, change)), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and len(errors) == 1, errors
    assert expected in errors[0], errors
    assert "AAAAC3" not in errors[0]  # a key is never echoed


def test_a_whole_float_is_the_integer_pulumi_hands_over(tmp_path: Path) -> None:
    from gpucluster.spec import load_stack_file

    spec = load_stack_file(stack_with(tmp_path, {"inCluster.apiAccess.readyTimeoutMinutes": 2.0}), "dev").spec
    assert spec.in_cluster.api_access.ready_timeout_minutes == 2


def test_one_key_per_line_is_accepted(tmp_path: Path) -> None:
    from gpucluster.spec import load_stack_file

    spec = load_stack_file(stack_with(tmp_path, {"access.sshPublicKeys": [ED25519 + "\n"]}), "dev").spec
    assert spec.access.ssh_public_keys == [ED25519 + "\n"]  # a trailing newline is the .pub file's own


@pytest.mark.parametrize("command", ["plan", "check", "check-stack"])
def test_a_folder_where_a_file_is_expected_is_one_line(command: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "Pulumi.dev.yaml"
    folder.mkdir()
    args = {"plan": ["plan", str(folder), "--out", str(tmp_path / "out")], "check": ["check", str(tmp_path)],
            "check-stack": ["check", str(folder), "--stack", "dev"]}[command]
    code, errors = run(args, capsys)
    assert code == 2 and len(errors) == 1 and "is a folder; give the" in errors[0], errors


@pytest.mark.parametrize("value", [5, "nic0", {"name": "nic0"}, True])
def test_nic_configurations_that_are_not_a_list_are_a_finding(value: Any, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    preview = json.loads(DEV_PREVIEW.read_text())
    target = next(s for s in preview["steps"] if s["newState"]["type"] == "azure-native:compute:VirtualMachineScaleSet")
    target["newState"]["inputs"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"] = value
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(preview))
    code, errors = run(["check", str(path), "--stack", "dev"], capsys)
    assert code == 2, errors
    assert any("networkInterfaceConfigurations" in e and "ARM takes a list" in e for e in errors), errors
