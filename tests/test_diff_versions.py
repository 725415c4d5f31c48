"""`gpucluster diff` judges a Kubernetes version change as kubeadm upgrades a cluster.

kubeadm's upgrade page (kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/) documents one path:
the next minor, or a later patch of the same minor ("Skipping MINOR versions when upgrading is unsupported");
kubernetes/kubernetes cmd/kubeadm/app/phases/upgrade/policy.go refuses a skipped minor. A downgrade, patch or
minor, is no supported path. The version is the API-server scale set's `gpucluster-kubernetes-version` tag.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster.diff.compare import diff_sides
from gpucluster.diff.sides import Side
from gpucluster.vocabulary import KUBERNETES_VERSION_TAG, ROLE_TAG
from tests.support.cli import gpucluster

SCALE_SET = "azure-native:compute:VirtualMachineScaleSet"
URN = f"urn:pulumi:dev::gpucluster::gpucluster:azure:ApiServers${SCALE_SET}::dev-cp-apiserver"


def _side(version: str) -> Side:
    state = {"urn": URN, "type": SCALE_SET, "custom": True,
             "inputs": {"tags": {ROLE_TAG: "apiserver", KUBERNETES_VERSION_TAG: version}}}
    return Side(version, {URN: state}, {})


@pytest.mark.parametrize(("base", "head", "words"), [
    ("1.36.4", "1.36.3", "Kubernetes 1.36.4 -> 1.36.3 is a patch downgrade"),
    ("1.36.4", "1.35.9", "Kubernetes 1.36.4 -> 1.35.9 is a minor downgrade"),
    ("1.34.6", "1.36.4", "Kubernetes 1.34.6 -> 1.36.4 skips a minor"),
])
def test_a_downgrade_or_a_skipped_minor_is_an_error(base: str, head: str, words: str) -> None:
    errors = diff_sides(_side(base), _side(head)).errors
    assert [(f.source, f.path) for f in errors] == [("kubernetes-version", "dev-cp-apiserver")]
    assert words in errors[0].message and errors[0].fix


@pytest.mark.parametrize(("base", "head"), [("1.36.3", "1.36.4"), ("1.35.9", "1.36.0"), ("1.36.4", "1.36.4")])
def test_a_later_patch_or_the_next_minor_is_no_error(base: str, head: str) -> None:
    assert diff_sides(_side(base), _side(head)).errors == []


def test_cli_diff_exits_2_on_a_patch_downgrade(dev_out: Path, tmp_path: Path) -> None:
    """End to end on dev's own preview, its version tag moved one patch back in the head."""
    document: dict[str, Any] = json.loads((dev_out / "preview.json").read_text())
    head = copy.deepcopy(document)
    servers = [s["newState"] for s in head["steps"]
               if s["newState"]["type"] == SCALE_SET and s["newState"]["inputs"]["tags"].get(ROLE_TAG) == "apiserver"]
    assert len(servers) == 1
    major, minor, patch = servers[0]["inputs"]["tags"][KUBERNETES_VERSION_TAG].split(".")
    servers[0]["inputs"]["tags"][KUBERNETES_VERSION_TAG] = f"{major}.{minor}.{int(patch) - 1}"
    (tmp_path / "head.json").write_text(json.dumps(head))
    result = gpucluster("diff", str(dev_out / "preview.json"), str(tmp_path / "head.json"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is a patch downgrade, which kubeadm does not support" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
