"""Same input, same bytes: two plans of the dev stack run at the same time (different hash seeds, competing
for the CPUs) write identical preview.json, manifests/, charts/, boot/ (when written), summary.json and
report.html. Reviewers diff these files; a reordering must never look like a change."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.manifests import kubernetes_objects, write_manifests
from gpucluster.offline.policy_runner import run_policies
from gpucluster.offline.preview import preview_document, stable_order
from tests.support.stacks import ROOT


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def two_dev_plans(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    outs = [tmp_path_factory.mktemp("det") / "out" for _ in range(2)]
    procs = [subprocess.Popen([sys.executable, "-m", "gpucluster.cli", "plan", "dev", "--quiet", "--out", str(out)],
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": str(seed)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed, out in zip((1, 2), outs, strict=True)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    return outs[0], outs[1]


def test_two_concurrent_plans_are_byte_identical(two_dev_plans: tuple[Path, Path]) -> None:
    first, second = (_files(out) for out in two_dev_plans)
    assert sorted(first) == sorted(second)
    assert {"preview.json", "summary.json", "report.html"} <= set(first)
    assert [name for name in first if first[name] != second[name]] == []


def test_manifest_names_come_from_kind_namespace_and_name(two_dev_plans: tuple[Path, Path]) -> None:
    """No registration counter: `<install rank>-<kind>-<namespace>-<name>.yaml`, priority classes first (kubectl
    apply -f reads a folder in name order; components/offline/manifests.py INSTALL_ORDER ranks the kinds, and
    tests/test_manifest_order.py checks the order applies)."""
    names = sorted(p.name for p in (two_dev_plans[0] / "manifests").iterdir())
    assert names[0].startswith("00-priorityclass-")
    assert all(name[:2].isdigit() and name[2] == "-" and not name[3].isdigit() for name in names)
    assert "10-configmap-kube-system-coredns.yaml" in names


def _shuffled(run: ProgramRun, seed: int) -> ProgramRun:
    registrations = list(run.registrations)
    random.Random(seed).shuffle(registrations)
    return ProgramRun(run.project, run.stack, registrations, run.outputs)


def test_preview_steps_do_not_depend_on_registration_order(dev_run: ProgramRun) -> None:
    documents = [preview_document(_shuffled(dev_run, seed)) for seed in range(3)]
    assert documents[0] == documents[1] == documents[2]
    position = {s["urn"]: i for i, s in enumerate(documents[0]["steps"])}
    for step in documents[0]["steps"]:  # parents and dependencies come first, as the engine creates them
        state = step["newState"]
        assert all(position[d] < position[step["urn"]] for d in state["dependencies"] if d in position)
        assert state["dependencies"] == sorted(state["dependencies"])


def test_manifest_files_do_not_depend_on_registration_order(dev_run: ProgramRun, tmp_path: Path) -> None:
    for seed in range(2):
        write_manifests(kubernetes_objects(_shuffled(dev_run, seed).registrations), tmp_path / str(seed))
    assert _files(tmp_path / "0") == _files(tmp_path / "1")


def test_violations_name_the_same_resources_whatever_the_order(dev_run: ProgramRun) -> None:
    """Stack rules used to name members[0]: which resource that was depended on thread scheduling."""
    strict = {"azure-native-compute-virtualmachinescaleset-gpu-zone-share": {"maxGpuShare": 0.2},
              "azure-native-compute-virtualmachine-etcd-quorum-spread": {"minMembers": 5}}
    results = []
    for seed in range(3):
        steps = preview_document(_shuffled(dev_run, seed))["steps"]
        random.Random(seed).shuffle(steps)
        results.append([(v.source, v.path, v.message) for v in run_policies(steps, strict)])
    assert results[0] and results[0] == results[1] == results[2]


def test_stable_order_keeps_every_registration(dev_run: ProgramRun) -> None:
    assert sorted(r.urn for r in stable_order(dev_run.registrations)) == sorted(r.urn for r in dev_run.registrations)
