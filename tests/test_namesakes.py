"""A stack file copied to make a new stack keeps `cluster.name`; two stacks then deploy into one resource group
(components/spec/namesakes.py). `gpucluster plan` and the program warn, naming the other file and the key."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from gpucluster.spec.namesakes import cluster_name, namesake_warning, namesakes
from tests.support.cli import gpucluster
from tests.support.stacks import ROOT

DEV = ROOT / "stacks" / "Pulumi.dev.yaml"


def _renamed(source: Path, target: Path, name: str) -> Path:
    document = yaml.safe_load(source.read_text())
    document["config"]["gpucluster:cluster"]["name"] = name
    target.write_text(yaml.safe_dump(document))
    return target


def test_a_copy_that_keeps_the_name_is_found_and_one_renamed_is_not(tmp_path: Path) -> None:
    shutil.copy(DEV, tmp_path / "Pulumi.dev.yaml")
    copy = shutil.copy(DEV, tmp_path / "Pulumi.staging.yaml")
    assert namesakes(Path(copy), "dev") == [tmp_path / "Pulumi.dev.yaml"]
    warning = namesake_warning(Path(copy), "dev")
    assert warning is not None and "gpucluster-dev" in warning and "cluster.name" in warning
    renamed = _renamed(DEV, tmp_path / "Pulumi.staging.yaml", "staging")
    assert namesakes(renamed, "staging") == [] and namesake_warning(renamed, "staging") is None


def test_the_shipped_stacks_have_names_of_their_own() -> None:
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        assert namesakes(path, cluster_name(path) or "") == []


def test_a_file_that_does_not_read_is_no_namesake(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.broken.yaml").write_text("config: [")
    (tmp_path / "Pulumi.other.yaml").write_text("config:\n  gpucluster:cluster:\n    name: 7\n")
    target = _renamed(DEV, tmp_path / "Pulumi.dev.yaml", "dev")
    assert cluster_name(tmp_path / "Pulumi.broken.yaml") is None and namesakes(target, "dev") == []


def test_plan_warns_about_a_copied_stack_and_still_plans(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(DEV, stacks / "Pulumi.dev.yaml")
    shutil.copy(DEV, stacks / "Pulumi.staging.yaml")
    done = gpucluster("plan", str(stacks / "Pulumi.staging.yaml"), "--quiet", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert f"also the cluster name in {stacks / 'Pulumi.dev.yaml'}" in done.stderr
    assert "gpucluster-dev" in done.stderr
